# SPDX-License-Identifier: MIT
"""Whether this test process runs under scripts/sanitize.sh's sanitizer runtimes.

ASan changes what some tests can observe: it aborts where malloc would fail, its
realloc always copies, and its quarantine keeps freed blocks (up to 256 MiB by
default) resident, so a process's RSS grows with every free until the quarantine
fills and says nothing about leaks.
"""

from __future__ import annotations

import os

UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
