# SPDX-License-Identifier: MIT
"""How a warm sandbox's program ends: what the code can see of an interpreter's end
happens (``test_warm.ENDINGS`` compares every ending with a fresh sandbox's), and the
interpreter's own teardown of the modules loaded before the hand-over is skipped."""

from __future__ import annotations

import contextlib
import os
import sys

import pytest
from support.processes import children_of
from support.warm import wait_ready

from pysandbox import Runner
from pysandbox._cgroups.ahead import drain as cgroup_drain
from pysandbox._host import owners

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


def _open_fds() -> set[str]:
    """What this process's fds are open on."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def _code_files() -> list[str]:
    """The code files in this process's private directories (``_launch.codefile``)."""
    me = owners.identity(os.getpid())
    found = []
    for name in os.listdir("/dev/shm"):
        place = os.path.join("/dev/shm", name)
        with contextlib.suppress(OSError), open(os.path.join(place, "owner")) as owner:
            if name.startswith("pysandbox-") and owner.read() == me:
                found += [entry for entry in os.listdir(place) if entry != "owner"]
    return found


def test_what_a_warm_call_leaves_is_closed_by_the_runners_close() -> None:
    """A warm call returns once it has its facts (an ``eval_in_sandbox`` call as soon
    as the init has reported, bwrap still exiting) and leaves its clean-up (reaping
    bwrap, the cgroup, the lifeline, the code file, the waiter's fds) to the closer's
    thread; ``close()`` waits for it: nothing of the calls is left."""
    fds_before, files_before = _open_fds(), _code_files()
    runner = Runner(warm=1)
    for _ in range(3):
        wait_ready(runner)
        result = runner.run_python("print(1)", files={"in.txt": b"x"})
        assert result.stdout == b"1\n", result
    runner.eval_in_sandbox("pass")  # the pool warms its kind from now on
    for _ in range(3):
        wait_ready(runner)
        assert runner.eval_in_sandbox("print(2)").stdout == "2"
    assert runner._pool is not None and runner._pool.taken == 6
    runner.close()
    # A cgroup's directories are removed by the cgroup reaper's thread, as for a fresh
    # call; its descriptors are open until then.
    assert cgroup_drain(30.0)
    assert children_of(os.getpid()) == []
    assert _code_files() == files_before == []
    assert _open_fds() <= fds_before | {"/dev/null"}


def test_a_warm_eval_has_all_its_output_when_it_returns_at_the_report() -> None:
    """The init reports once the program has exited and every other process of the
    sandbox is gone: all the output, more than a pipe holds, is in by then."""
    code = "import sys\nsys.stdout.write('x' * 1000000)\nsys.stderr.write('e' * 200000)"
    with Runner(warm=1) as runner:
        runner.eval_in_sandbox("pass", io_max_kb=4096)  # the pool warms its kind
        wait_ready(runner)
        result = runner.eval_in_sandbox(code, io_max_kb=4096)
        assert runner._pool is not None and runner._pool.taken == 1
    assert result.returncode == 0
    assert result.stdout == "x" * 1000000
    assert result.stderr == "e" * 200000


def test_a_warm_run_has_all_its_files_when_it_returns_at_the_report() -> None:
    """A ``run_python`` call ends once the init has reported and streamed the files the
    code wrote: every one of them, more than a pipe holds, as from a fresh sandbox."""
    code = (
        "import os\nos.mkdir('out')\n"
        "for i in range(200):\n"
        "    with open(f'out/{i}.bin', 'wb') as f:\n"
        "        f.write(bytes([i]) * (i * 200))\n"
        "print('wrote')"
    )
    fresh = Runner().run_python(code)
    with Runner(warm=1) as runner:
        wait_ready(runner)
        warm = runner.run_python(code)
        assert runner._pool is not None and runner._pool.taken == 1
    assert warm.stdout == fresh.stdout == b"wrote\n"
    assert len(warm.files) == 200
    assert warm.files == fresh.files
    assert not warm.files_truncated
