# SPDX-License-Identifier: MIT
"""Warm sandboxes (``Runner(warm=K)``): started ahead of need, single-use, and exactly
what a fresh sandbox shows to the code; their limits and clocks count from the moment
the code is handed over; they die with ``close()`` and with their caller.

The contract tests of ``eval_in_sandbox`` and ``run_python`` also run through a warm
Runner (``WARM_THROUGH`` in ``test_contract.py`` and ``test_run.py``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.processes import children_of
from support.timing import KILL_LATENCY, PROMPTLY, cpu_overshoot, eval_cpu, slow
from support.warm import wait_ready

from pysandbox import File, Limits, Result, Runner, SandboxError, Status
from pysandbox._launch import codefile as _codefile
from pysandbox._model.record import replace
from pysandbox._runner import warm as _warm

#: Everything of the interpreter, the process and the sandbox the code can look at,
#: printed as JSON; the parts that differ between any two sandboxes (pipe and mount
#: numbers, the code file's random name) are normalised.
PROBE = r"""
import json, os, re, resource, signal, sys, traceback, __main__

def normal(text):
    text = re.sub(r"(pipe|socket|anon_inode):\[?\d+\]?", r"\1:N", text)
    return re.sub(r"/pysandbox-[^/ ]+/[0-9a-f]{16}", "/CODEFILE", text)

def mounts():
    lines = []
    for line in open("/proc/self/mountinfo").read().splitlines():
        fields = line.split()
        lines.append(normal(" ".join(fields[3:])))
    return lines

def fds():
    found = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            found[fd] = normal(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError as error:
            found[fd] = type(error).__name__
    return found

def status():
    keep = ("Uid", "Gid", "Groups", "Cap", "NoNewPrivs", "Seccomp", "Threads", "SigIgn",
            "SigBlk", "SigCgt", "Cpus_allowed_list")
    return [line for line in open("/proc/self/status").read().splitlines()
            if line.startswith(keep)]

def stat_of(path):
    info = os.stat(path)
    return [info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_nlink]

mask = os.umask(0)
os.umask(mask)
probe = {
    "argv": sys.argv,
    "orig_argv": getattr(sys, "orig_argv", None),
    "flags": repr(sys.flags),
    "executable": sys.executable,
    "path": sys.path,
    "modules": sorted(sys.modules),
    "importer_cache": sorted(sys.path_importer_cache),
    "main": {name: repr(getattr(__main__, name)) for name in
             ("__name__", "__file__", "__cached__", "__package__", "__spec__", "__doc__")},
    "main_names": sorted(name for name in vars(__main__) if name.startswith("__")),
    "loader": [type(__main__.__loader__).__name__, __main__.__loader__.name,
               __main__.__loader__.path],
    "stack": traceback.format_stack(),
    "outer_frame": repr(sys._getframe().f_back),
    "source": open(__file__).read(),
    "cwd": os.getcwd(),
    "environ": dict(os.environ),
    "umask": mask,
    "rlimits": {name: resource.getrlimit(getattr(resource, name))
                for name in dir(resource) if name.startswith("RLIMIT_")},
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "process": [os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0), os.nice(0)],
    "pids": sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit()),
    "status": status(),
    "signals": {int(sig): repr(signal.getsignal(sig)) for sig in signal.valid_signals()
                if sig < signal.SIGRTMIN},
    "fds": fds(),
    "mounts": mounts(),
    "code_file": stat_of(__file__) + [os.stat(__file__).st_dev],
    "code_dir": stat_of(os.path.dirname(__file__)),
    "stdio": [repr(stream) for stream in (sys.stdin, sys.stdout, sys.stderr)],
}
print(json.dumps(probe))
"""

#: Fields that differ between two fresh sandboxes of a root caller: each sandbox runs as
#: its own uid (docs/security.rst, What is isolated).
_PER_SANDBOX = {"ids", "status"}
#: Fields that show the waiter, as documented (docs/services.rst, *What the code can
#: tell*): the code's module frame is called by two frames of the waiter's ``-c``.
_WAITER_SHOWN = {"stack", "outer_frame"}


def _check_waiter_frames(warm: dict[str, Any], fresh: dict[str, Any]) -> None:
    """The stack is the fresh one below the waiter's two frames, nothing else."""
    assert warm["stack"][2:] == fresh["stack"]
    assert all(entry.startswith('  File "<string>"') for entry in warm["stack"][:2])
    assert fresh["outer_frame"] == "None"
    assert "file '<string>'" in warm["outer_frame"]


def _fresh_and_warm(call: Callable[[Runner], str], prime: Callable[[Runner], object]) -> None:
    """``call`` twice fresh and twice warm: every field that two fresh sandboxes agree on
    is the same in both warm ones."""
    with Runner(limits=PROBE_LIMITS) as fresh_runner:
        fresh = [json.loads(call(fresh_runner)) for _ in range(2)]
    warm = []
    with Runner(warm=1, limits=PROBE_LIMITS) as runner:
        prime(runner)
        for _ in range(2):
            wait_ready(runner)
            taken = runner._pool.taken  # type: ignore[union-attr]
            warm.append(json.loads(call(runner)))
            assert runner._pool.taken == taken + 1  # type: ignore[union-attr]
    varying = {key for key in fresh[0] if fresh[0][key] != fresh[1][key]}
    assert varying <= _PER_SANDBOX, {key: fresh[0][key] for key in varying}
    for key in fresh[0]:
        if key not in varying | _WAITER_SHOWN:
            assert warm[0][key] == fresh[0][key], key
            assert warm[1][key] == fresh[0][key], key
    for other in warm:
        assert other.keys() == fresh[0].keys()
        _check_waiter_frames(other, fresh[0])


#: The probe reads all of /proc/self and imports a few modules: room for a slow machine
#: (an emulated guest), the same for the fresh and the warm sandboxes.
PROBE_LIMITS = Limits(cpu_time=20.0, wall_time=120.0)


def _probe_output(result: Result) -> str:
    """The probe's JSON lines, merged into one."""
    assert result.status is Status.OK, result
    merged: dict[str, Any] = {}
    for line in result.stdout.decode().splitlines():
        merged.update(json.loads(line))
    return json.dumps(merged)


def test_run_python_code_cannot_tell_a_warm_sandbox() -> None:
    """The call's args, input files and environment are handed over: the sandbox it
    takes was started for a call without any of them."""
    _fresh_and_warm(
        lambda runner: _probe_output(
            runner.run_python(
                PROBE + PROBE_FILES,
                args=["an", "arg"],
                files={"in/data.txt": b"data", "run.sh": File(b"#!/bin/sh\n", executable=True)},
                env={"GREETING": "hello", "EMPTY": ""},
            )
        ),
        lambda runner: runner.run_python("pass", files={"other": b"x"}, env={"OTHER": "1"}),
    )


#: Added to the probe for run_python: what the input files look like.
PROBE_FILES = r"""
paths = ("in", "in/data.txt", "run.sh")
owned = [None, os.getuid(), os.getgid(), None, None]
print(json.dumps({"input_files": {
    path: [value == mine if index in (1, 2) else value
           for index, (value, mine) in enumerate(zip(stat_of(path), owned))]
    for path in paths}}))
"""


def test_eval_code_cannot_tell_a_warm_sandbox() -> None:
    _fresh_and_warm(
        lambda runner: runner.eval_in_sandbox(PROBE, mem_max_mb=300).stdout,
        lambda runner: runner.eval_in_sandbox("pass", mem_max_mb=300),
    )


TRACEBACK = textwrap.dedent(
    """\
    # -*- coding: latin-1 -*-
    import sys
    print("ran", sys.argv[1:])
    def inner():
        raise KeyError("from line 5")
    inner()
    """
)


def test_an_uncaught_exception_reads_the_same() -> None:
    """The traceback's file name, line numbers and source lines (read back from the code
    file), and a coding declaration the tokenizer honours, as fresh."""
    fresh = Runner().run_python(TRACEBACK, args=["x"])
    with Runner(warm=1) as runner:
        runner.run_python("pass", args=["x"])
        wait_ready(runner)
        # Counted from here: on a slow machine the first call itself may already have
        # found a warm sandbox (the last CI runs saw 2).
        taken = runner._pool.taken  # type: ignore[union-attr]
        warm = runner.run_python(TRACEBACK, args=["x"])
        assert runner._pool.taken == taken + 1  # type: ignore[union-attr]
    assert fresh.returncode == warm.returncode == 1
    assert warm.stdout == fresh.stdout == b"ran ['x']\n"
    assert warm.stderr == fresh.stderr
    assert b'File "/sandbox/main.py", line 6, in <module>' in warm.stderr
    assert b'raise KeyError("from line 5")' in warm.stderr


#: Programs that end in every way a program can, each run fresh and warm: the result
#: (status, exit code, signal, output, files) is the same, byte for byte.
ENDINGS = {
    "exit with a message": "import sys\nsys.exit('bye')",
    "exit with a code": "import sys\nprint('out')\nsys.exit(3)",
    "syntax error": "print('never')\nx x\n",
    "an exception with the builtins shadowed": (
        "type = 'kind'\nisinstance = hasattr = getattr = None\n"
        "SystemExit = BaseException = ValueError\nraise KeyError('k')"
    ),
    "a hook that raises": (
        "import sys\ndef hook(*args):\n    raise RuntimeError('in the hook')\n"
        "sys.excepthook = hook\nraise ValueError('v')"
    ),
    "a keyboard interrupt with a file left open": (
        "out = open('out.txt', 'w')\nout.write('data')\nraise KeyboardInterrupt"
    ),
    "a missing hook": "import sys\ndel sys.excepthook\nraise ValueError(1)",
    "a block cut short": "import os\nif True:\n",
    "an unknown coding": "# coding: foo\nx = 1\n",
    "pyc magic": "a\rb = 1\n",
    "the module after its end": (
        "import atexit, linecache\nprint(sorted(linecache.cache))\n"
        "atexit.register(lambda: print(globals().get('__file__', 'gone')))"
    ),
    "output still buffered when the process is killed": (
        "import io, os, sys, threading, time\n"
        "sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding='utf-8')\n"
        "print('result')\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), os.kill(os.getpid(), 9))).start()"
    ),
    "teardown after an exception": (
        "import atexit, sys, threading, time, traceback\n"
        "def bye():\n"
        "    print('atexit sees', traceback.format_tb(sys.last_traceback))\n"
        "    print(sys.excepthook is sys.__excepthook__)\n"
        "atexit.register(bye)\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "def inner():\n    1 / 0\ninner()"
    ),
    "teardown after a normal end": (
        "import atexit, threading, time, weakref\n"
        "class Noisy:\n"
        "    def __del__(self):\n"
        "        print('del', self.name, helper(), sorted(globals()))\n"
        "def helper():\n    return 'helper'\n"
        "first, second = Noisy(), Noisy()\n"
        "first.name, second.name = 'first', 'second'\n"
        "_private = Noisy()\n_private.name = 'private'\n"
        "loop = Noisy()\nloop.name, loop.me = 'loop', loop\ndel loop\n"
        "weakref.finalize(first, print, 'finalized')\n"
        "atexit.register(lambda: print('atexit', first.name))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "out = open('out.txt', 'w')\nout.write('left open')"
    ),
    "a module of the code that leaves a file open": (
        # No .pyc: marshal's reference flags follow the interpreter's strings' counts.
        "import sys\nsys.dont_write_bytecode = True\n"
        "with open('helper.py', 'w') as source:\n"
        '    source.write(\'log = open("log.txt", "w")\\nlog.write("kept")\\n\')\n'
        "import helper\nprint('imported')"
    ),
    "exit 0 with handlers": (
        "import atexit, sys\natexit.register(print, 'bye')\n"
        "class Noisy:\n    def __del__(self):\n        print('del')\n"
        "keep = Noisy()\nsys.exit(0)"
    ),
    "exit with a code out of range": "import sys\nprint('out')\nsys.exit(300)",
    "exit with True": "import sys\nsys.exit(True)",
    "a stream that cannot be flushed at the end": (
        "import sys\nsys.stdout = open('/dev/full', 'w')\nprint('lost')"
    ),
    "an atexit handler that raises": (
        "import atexit\natexit.register(int, 'not a number')\nprint('end')"
    ),
    # The review of the quick end (each differed, or hung, before its fix):
    "a daemon thread blocked holding a file": (
        "import os, threading, time\nr, w = os.pipe()\nw = os.fdopen(w, 'wb')\n"
        "threading.Thread(target=lambda: w.write(b'x' * (1 << 20)), daemon=True).start()\n"
        "time.sleep(0.2)\nprint('end')"
    ),
    "a daemon thread a __del__ wakes": (
        "import threading, time\nev = threading.Event()\nns = {}\n"
        "exec('def w(ev):\\n    ev.wait()\\n    print(\"woke\")\\n', ns)\n"
        "threading.Thread(target=ns['w'], args=(ev,), daemon=True).start()\n"
        "class D:\n    def __del__(self):\n        ev.set()\n        time.sleep(0.05)\n"
        "        print('del done')\nd = D()"
    ),
    "stdout replaced, then a __del__ prints": (
        "import sys\nclass D:\n    def __del__(self):\n        print('del')\n"
        "d = D()\nsys.stdout = open('log.txt', 'w')\nprint('x')"
    ),
    "stdout rewrapped, then a __del__ prints": (
        "import io, sys\n"
        "sys.stdout = io.TextIOWrapper(sys.stdout.detach(), encoding='latin-1')\n"
        "print('caf\\xe9')\nclass D:\n    def __del__(self):\n        print('del')\nd = D()"
    ),
    "an import in a __del__": (
        "class D:\n    def __del__(self):\n        import os\n        print('imported', os.sep)\n"
        "d = D()"
    ),
    "a signal a __del__ sends to a handler": (
        "import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: print('handled'))\n"
        "class D:\n    def __del__(self):\n        os.kill(os.getpid(), signal.SIGUSR1)\n"
        "        print('after kill')\nd = D()"
    ),
    "a signal handler of the code's": (
        "import signal\nclass D:\n    def __del__(self):\n        print('del')\n"
        "def on_term(*args):\n    pass\nsignal.signal(signal.SIGTERM, on_term)\n"
        "d = D()\nout = open('out.txt', 'w')\nout.write('x')"
    ),
    "a loaded class holds the code's function, then exit with a message": (
        "import os\nclass D:\n    def __del__(self):\n        print('del')\n"
        "def helper():\n    pass\nos.PathLike.helper = helper\nd = D()\n"
        "f = open('out.txt', 'w')\nf.write('x')\nraise SystemExit('a message')"
    ),
    "a gc callback": (
        "import gc, sys\nns = {'w': sys.stdout.write}\n"
        'exec(\'def cb(phase, info):\\n    w("gc " + phase + "\\\\n")\\n\', ns)\n'
        "gc.callbacks.append(ns['cb'])\ndel ns\nprint('end')"
    ),
    "__del__ that raises, resurrects, and a weakref callback": (
        "import sys, weakref\nkeep = []\n"
        "class R:\n    def __del__(self):\n        print('R del')\n        keep.append(self)\n"
        "class X:\n    def __del__(self):\n        raise ValueError('boom')\n"
        "r, x = R(), X()\nclass T:\n    pass\nt = T()\n"
        "w = weakref.ref(t, lambda _: print('weakref callback', helper()))\n"
        "def helper():\n    return 'h'"
    ),
}


@pytest.mark.parametrize("name", sorted(ENDINGS))
def test_every_ending_reads_the_same(name: str) -> None:
    code = ENDINGS[name]
    fresh = Runner(limits=PROBE_LIMITS).run_python(code, files={"in.txt": b"x"})
    with Runner(warm=1, limits=PROBE_LIMITS) as runner:
        wait_ready(runner)
        warm = runner.run_python(code, files={"in.txt": b"x"})
        assert runner._pool is not None and runner._pool.taken == 1
    for field in ("status", "returncode", "signal", "stdout", "files"):
        assert getattr(warm, field) == getattr(fresh, field), field
    # An object's address differs from run to run, fresh or warm.
    assert _no_addresses(warm.stderr) == _no_addresses(fresh.stderr)


def _no_addresses(text: bytes) -> bytes:
    return re.sub(rb" at 0x[0-9a-f]+>", b" at 0x...>", text)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_a_safe_path_stays_safe() -> None:
    """With ``PYTHONSAFEPATH`` (part of the kind), neither ``python FILE`` nor the
    waiter puts the code's directory first on ``sys.path``."""
    code = "import sys\nprint(sys.path)"
    env = {"PYTHONSAFEPATH": "1"}
    fresh = Runner().run_python(code, env=env)
    with Runner(warm=1, env=env) as runner:
        wait_ready(runner)
        warm = runner.run_python(code)
        assert runner._pool is not None and runner._pool.taken == 1
    assert warm.stdout == fresh.stdout
    assert b"'/sandbox'" not in warm.stdout


def test_big_input_files_cost_the_interpreter_no_memory() -> None:
    """Input files are copied from the payload by the kernel: 96 MiB of them fit a
    sandbox whose memory limit is 64 MiB, as in a fresh one (tmpfs pages are the
    disk's)."""
    limits = replace(PROBE_LIMITS, memory=64 * 2**20, disk=256 * 2**20, file_size=256 * 2**20)
    files = {"big.bin": b"\xab" * (96 * 2**20)}
    code = "import os\nprint(os.path.getsize('big.bin'))"
    fresh = Runner(limits=limits).run_python(code, files=files)
    with Runner(warm=1, limits=limits) as runner:
        wait_ready(runner)
        warm = runner.run_python(code, files=files)
        assert runner._pool is not None and runner._pool.taken == 1
    assert fresh.status is Status.OK, fresh
    assert warm.status is Status.OK, warm
    assert warm.stdout == fresh.stdout == b"100663296\n"


AGE = """
import os, time
ticks = os.sysconf("SC_CLK_TCK")
started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
uptime = float(open("/proc/uptime").read().split()[0])
print(round(uptime - started, 3))
"""


def test_clocks_count_from_the_hand_over() -> None:
    """A sandbox that waited 2 s: its interpreter is older than that (it was started
    ahead), yet the run's wall time, and its CPU time, leave the wait out."""
    with Runner(warm=1) as runner:
        runner.run_python("pass")
        wait_ready(runner)
        time.sleep(2.0)
        result = runner.run_python(AGE)
    fresh = Runner().run_python(AGE)  # no pool: a fresh sandbox, its start-up counted
    assert result.status is Status.OK, result
    age = float(result.stdout)
    assert age >= 2.0, "the interpreter did not start before the call"
    assert result.wall_time < age - 1.0
    assert fresh.status is Status.OK
    assert result.cpu_time < fresh.cpu_time, "the start-up's CPU time was counted"


def test_the_cpu_limit_counts_from_the_hand_over() -> None:
    limits = Limits(cpu_time=0.5)
    with Runner(warm=1, limits=limits) as runner:
        wait_ready(runner)
        result = runner.run_python("while True: pass")
        assert runner._pool.taken == 1  # type: ignore[union-attr]
    assert result.status is Status.CPU_TIME_EXCEEDED, result
    assert 0.5 <= result.cpu_time < 0.5 + cpu_overshoot(1)


def test_the_wall_limit_counts_from_the_hand_over() -> None:
    with Runner(warm=1, limits=Limits(wall_time=1.0)) as runner:
        wait_ready(runner)
        time.sleep(1.5)
        result = runner.run_python("import time; time.sleep(60)")
        assert runner._pool.taken == 1  # type: ignore[union-attr]
    assert result.status is Status.WALL_TIME_EXCEEDED, result
    assert 1.0 <= result.wall_time < 1.0 + KILL_LATENCY


#: Whether this sandbox ran a job before (a mark left in its writable working directory).
USED_BEFORE = """
import os
print(os.path.exists("/sandbox/.used"))
open("/sandbox/.used", "w").close()
"""


def test_no_sandbox_runs_two_jobs() -> None:
    """Every call gets a sandbox no call ran in before, warm or not."""
    with Runner(warm=2) as runner:
        for _ in range(6):
            wait_ready(runner, 1)
            result = runner.run_python(USED_BEFORE)
            assert result.status is Status.OK, result
            assert result.stdout == b"False\n"
        assert runner._pool.taken == 6  # type: ignore[union-attr]


def test_each_call_asks_for_one_sandbox_of_its_kind() -> None:
    """A Runner warms run_python with its defaults first; each call then asks for one
    sandbox of its kind, and a full pool makes room by retiring one of the kind called
    the longest ago."""
    with Runner(warm=2) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner, 2)
        assert runner.warm == 2
        runner.eval_in_sandbox("pass", mem_max_mb=200)  # another kind: fresh
        assert pool.taken == 0
        wait_ready(runner, 1)
        assert runner.eval_in_sandbox("print(1)", mem_max_mb=200).stdout == "1"
        assert pool.taken == 1
        assert runner.run(["/bin/true"]).status is Status.OK  # never warmed
        wait_ready(runner, 1)
        runner.eval_in_sandbox("print(2)", mem_max_mb=200)
        assert pool.taken == 2
        assert runner.run_python("print(3)").stdout == b"3\n"  # the first kind's is left
        assert pool.taken == 3


def _wait_waiting(runner: Runner, count: int) -> None:
    """Wait until ``runner``'s pool has started what the calls asked for and
    ``count`` sandboxes of any kind wait in it."""
    pool = runner._pool
    assert pool is not None
    deadline = time.monotonic() + slow(20.0)
    while True:
        with pool._lock:
            waiting = sum(launched.waiting() for _, launched in pool._ready)
            asked = len(pool._requests)
        if waiting >= count and not asked:
            return
        assert time.monotonic() < deadline, "the warm pool did not refill"
        time.sleep(0.01)


def test_calls_that_alternate_between_two_kinds_find_theirs_waiting() -> None:
    """Two kinds of call in turn, with time between them: after the first call of the
    second kind, every call takes a warm sandbox, and the pool starts no more sandboxes
    than its size plus the calls it served."""
    calls = 12
    with Runner(warm=2) as runner:
        pool = runner._pool
        assert pool is not None
        for number in range(calls):
            _wait_waiting(runner, 2)
            if number % 2:
                assert runner.run_python("print(1)").stdout == b"1\n"
            else:
                assert runner.eval_in_sandbox("print(1)", mem_max_mb=200).stdout == "1"
        assert pool.taken == calls - 1
        _wait_waiting(runner, 2)
        assert pool.started <= calls + 2


def test_a_kind_nobody_calls_gives_way_when_calls_of_another_miss() -> None:
    """The Runner's default kind waits, but calls of another kind come two at once: both
    miss, and the pool, full, replaces the default's sandboxes with theirs."""
    with Runner(warm=2) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner, 2)
        with concurrent.futures.ThreadPoolExecutor(2) as executor:
            outputs = executor.map(
                lambda number: runner.eval_in_sandbox(f"print({number})", mem_max_mb=200),
                [1, 2],
            )
            assert [output.stdout for output in outputs] == ["1", "2"]
        assert pool.taken == 0
        wait_ready(runner, 2)  # two of eval's kind
        assert runner.eval_in_sandbox("print(3)", mem_max_mb=200).stdout == "3"
        assert runner.eval_in_sandbox("print(4)", mem_max_mb=200).stdout == "4"
        assert pool.taken == 2


def test_what_the_pool_knows_of_kinds_stays_bounded() -> None:
    """A call of a kind never seen before each time (an agent's limits vary): the pool
    retires the kinds called the longest ago and forgets them."""
    with Runner(warm=1) as runner:
        pool = runner._pool
        assert pool is not None
        for megabytes in range(100, 130):
            output = runner.eval_in_sandbox(
                "print(1)", mem_max_mb=megabytes, cpu_max_time_sec=eval_cpu()
            )
            assert output.stdout == "1", output
        with pool._lock:
            assert len(pool._last_call) <= 4 * pool.size + 4
            assert len(pool._ready) <= pool.size


def _sandbox_pids() -> set[int]:
    """This process's bwrap children and all below them."""
    seen: set[int] = set()
    todo = children_of(os.getpid())
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo += children_of(pid)
    return seen


def _code_files() -> list[str]:
    return [
        name
        for directory in _codefile._directories.values()
        for name in os.listdir(directory)
        if name != "owner"
    ]


def test_close_kills_and_reaps_the_waiting_sandboxes() -> None:
    before = _sandbox_pids()
    files_before = _code_files()
    runner = Runner(warm=3)
    wait_ready(runner, 3)
    waiting = _sandbox_pids() - before
    assert len(waiting) >= 3 * 3  # bwrap, its child (the init) and the interpreter each
    assert len(_code_files()) == len(files_before) + 3
    runner.close()
    assert _sandbox_pids() - before == set()
    for pid in waiting:
        assert not os.path.exists(f"/proc/{pid}"), pid  # not even a zombie
    assert _code_files() == files_before
    assert runner.warm_ready == 0
    with pytest.raises(RuntimeError):
        runner.run_python("pass")


def test_a_collected_runner_leaves_no_sandbox() -> None:
    before = _sandbox_pids()
    runner = Runner(warm=2)
    wait_ready(runner, 2)
    del runner
    deadline = time.monotonic() + PROMPTLY
    while _sandbox_pids() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _sandbox_pids() - before == set()


CALLER = """
import json, os, sys, time
from pysandbox import Runner
runner = Runner(warm=2)
while runner.warm_ready < 2:
    time.sleep(0.01)
print(json.dumps(sorted(launched._sandbox.pid for _, launched in runner._pool._ready)),
      flush=True)
time.sleep(600)
"""


def _tree_of(pids: list[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo += children_of(pid)
    return seen


def _code_directories() -> list[tuple[str, str]]:
    """The private code directories in /dev/shm, with the pid their owner file names."""
    found = []
    for entry in os.listdir("/dev/shm"):
        if entry.startswith("pysandbox-"):
            with contextlib.suppress(OSError, IndexError):
                owner = Path("/dev/shm", entry, "owner").read_text().split()
                found.append((entry, owner[1]))
    return found


def test_warm_sandboxes_die_with_their_caller() -> None:
    """A caller killed with SIGKILL: its warm sandboxes end (the lifeline), and the next
    process to make a code file removes the dead caller's directory."""
    with subprocess.Popen(
        [sys.executable, "-c", CALLER], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as caller:
        try:
            assert caller.stdout is not None
            line = caller.stdout.readline()
            assert line, caller.stderr.read() if caller.stderr else ""
            tree = _tree_of(json.loads(line))
            assert len(tree) >= 6
            owned = [place for place, pid in _code_directories() if pid == str(caller.pid)]
            assert len(owned) == 1, _code_directories()
        finally:
            caller.kill()
            caller.wait()
    deadline = time.monotonic() + slow(5.0)
    while any(os.path.exists(f"/proc/{pid}") for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [pid for pid in tree if os.path.exists(f"/proc/{pid}")] == []
    subprocess.run(
        [sys.executable, "-c", "from pysandbox import run_python; run_python('pass')"],
        check=True,
    )
    assert not os.path.exists(f"/dev/shm/{owned[0]}")


def test_an_idle_pool_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm sandbox waits as long as it takes: the keeper, looking every 20 ms, starts
    no sandbox while no call comes, and the one that waited is then taken."""
    monkeypatch.setattr(_warm, "_CHECK_SECONDS", 0.02)
    with Runner(warm=1) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner)
        started = pool.started
        time.sleep(2.0)
        assert pool.started == started
        assert runner.run_python("print('fine')").stdout == b"fine\n"
        assert pool.taken == 1


def test_a_waiter_waits_longer_than_a_lease_could() -> None:
    """The kernel would break a lease after ``fs.lease-break-time``: the waiter's pipe has
    no such bound.  A sandbox that waited that long (capped at 6 s here) runs its call."""
    with open("/proc/sys/fs/lease-break-time", encoding="ascii") as file:
        wait = min(6.0, int(file.read()) + 1.0)
    with Runner(warm=1) as runner:
        pool = runner._pool
        assert pool is not None
        wait_ready(runner)
        time.sleep(wait)
        assert runner.run_python("print('still there')").stdout == b"still there\n"
        assert pool.taken == 1


def test_a_sandbox_that_ended_by_itself_is_not_used() -> None:
    """A warm sandbox killed from outside (the host's OOM killer, an admin) is passed
    over: the call runs fresh and succeeds."""
    with Runner(warm=1) as runner:
        wait_ready(runner)
        ((_, launched),) = runner._pool._ready  # type: ignore[union-attr]
        for pid in _tree_of([launched._sandbox.pid]) - {launched._sandbox.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + PROMPTLY
        while not launched.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        result = runner.run_python("print('fresh')")
        assert result.stdout == b"fresh\n"
        assert runner._pool.taken == 0  # type: ignore[union-attr]


def test_a_waiter_that_cannot_be_told_to_go_is_killed_before_its_code_runs() -> None:
    """If the go byte cannot be written at the hand-over, the code never runs in that
    sandbox: it is killed and reaped, and the call raises."""
    from pysandbox._api import run as _run
    from pysandbox._launch import launcher as _launch
    from pysandbox._launch.waiter import Handover, waiting_plan

    program, source = _run.python_program("print('ran')", ())
    plan, _ = _run.build_plan(_run.Call(program, code=source))
    warm_plan, _ = _run.build_plan(_run.Call(program, code=source), waiter=True)
    launched = _launch.start(waiting_plan(warm_plan))
    try:
        handover = Handover(tuple(program), 2)
        launched.hand_over(source, handover, time.monotonic() + PROMPTLY, PROMPTLY)
        waiter = launched._setup.waiter
        assert waiter is not None
        waiter.go = waiter._go_read  # a pipe's read end: writing fails (EBADF)
        with pytest.raises(SandboxError, match="could not be handed its code"):
            launched.finish(plan)
        assert launched.exited()
    finally:
        launched.close()


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (-1, ValueError, "warm must be at least 0"),
        (1.5, TypeError, "warm must be an int"),
        (True, TypeError, "warm must be an int"),
        ("2", TypeError, "warm must be an int"),
    ],
)
def test_warm_is_checked(value: object, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        Runner(warm=value)  # type: ignore[arg-type]


def test_warm_zero_keeps_no_pool() -> None:
    with Runner(warm=0) as runner:
        assert runner.warm == 0 and runner.warm_ready == 0
        assert runner._pool is None
