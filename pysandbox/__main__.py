# SPDX-License-Identifier: MIT
"""``python -m pysandbox``: the ``pysandbox`` command line (``pysandbox._frontends.cli``).

Without arguments it runs the reference implementation's demo program in the sandbox;
``python -m pysandbox --selftest`` is ``pysandbox selftest``.
"""

from __future__ import annotations

from ._frontends.cli import console_main, main

__all__ = ["main"]

if __name__ == "__main__":
    console_main()
