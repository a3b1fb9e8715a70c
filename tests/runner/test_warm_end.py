# SPDX-License-Identifier: MIT
"""How a warm sandbox's program ends: what the code can see of an interpreter's end
happens (``test_warm.ENDINGS`` compares every ending with a fresh sandbox's), and the
interpreter's own teardown of the modules loaded before the hand-over is skipped."""

from __future__ import annotations

import sys

import pytest
from support.warm import wait_ready

from pysandbox import Runner

#: An object with a ``__del__``, held by a module both interpreters load at start-up.
HELD_BY_A_LOADED_MODULE = """
import os
class Noisy:
    def __del__(self):
        print("del", flush=True)
os.kept = Noisy()
print("end", flush=True)
"""


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="Python 3.9's atexit cannot be imported unseen"
)
def test_the_interpreters_own_teardown_is_skipped() -> None:
    """A fresh interpreter clears every module at its end, so an object the code left
    in ``os`` meets its ``__del__``; a warm one leaves without freeing what the modules
    loaded before the hand-over hold (docs/services.rst, "What differs, exactly")."""
    fresh = Runner().run_python(HELD_BY_A_LOADED_MODULE)
    with Runner(warm=1) as runner:
        wait_ready(runner)
        warm = runner.run_python(HELD_BY_A_LOADED_MODULE)
        assert runner._pool is not None and runner._pool.taken == 1
    assert fresh.stdout == b"end\ndel\n", fresh
    assert warm.stdout == b"end\n", warm
    assert warm.returncode == fresh.returncode == 0


@pytest.mark.parametrize("ending", ["pass", "raise SystemExit(7)", "raise SystemExit(300)"])
def test_the_status_is_the_programs(ending: str) -> None:
    """The quick end keeps the status: 0, a ``sys.exit`` status, and one out of range
    (which the interpreter's own end reduces modulo 256)."""
    code = f"import os\nos.kept = open('kept.txt', 'w')\nos.kept.write('x')\n{ending}"
    fresh = Runner().run_python(code)
    with Runner(warm=1) as runner:
        wait_ready(runner)
        warm = runner.run_python(code)
    assert (warm.returncode, warm.files) == (fresh.returncode, fresh.files)
