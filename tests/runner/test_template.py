# SPDX-License-Identifier: MIT
"""Templates (``Runner(warm=K, template=Template(...))``): each warm sandbox imports the
template's modules, places its files and runs its set-up before it waits, so a call
finds them done; the set-up's time is not the call's, its namespace is not the code's,
and a set-up that fails or hangs is reported, never run around."""

from __future__ import annotations

import concurrent.futures
import json
import os
import threading
import time

import pytest
from support.processes import children_of
from support.timing import slow
from support.warm import wait_ready

from pysandbox import Cancelled, Limits, Runner, SandboxError, Status, Template
from pysandbox._model.record import replace
from pysandbox._runner import warm as _warm

#: What the code sees of the modules, its namespace and its directory.
LOOK = """
import json, os, sys, __main__
print(json.dumps({
    "loaded": "xml.dom.minidom" in sys.modules,
    "names": sorted(vars(__main__)),
    "files": sorted(os.listdir(".")),
    "argv": sys.argv,
}))
"""

TEMPLATE = Template(
    imports=["xml.dom.minidom"],
    setup="import time\nsecret_of_setup = 42\ntime.sleep(2.0)\n",
    files={"model/weights.txt": b"w"},
)


def _look(runner: Runner, **keywords: object) -> dict[str, object]:
    result = runner.run_python(LOOK, **keywords)  # type: ignore[arg-type]
    assert result.status is Status.OK, result
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_call_finds_the_template_done_and_pays_nothing_for_it() -> None:
    """The modules are loaded, the files in place, the set-up's two seconds of sleep are
    not in the call's wall time, and ``__main__`` is as fresh as in a new sandbox."""
    with Runner() as fresh_runner:
        fresh = _look(fresh_runner, args=["a"], files={"in.txt": b"x"})
    with Runner(warm=1, template=TEMPLATE) as runner:
        assert runner.template is TEMPLATE
        wait_ready(runner)
        pool = runner._pool
        assert pool is not None
        result = runner.run_python(LOOK, args=["a"], files={"in.txt": b"x"})
        assert pool.taken == 1
    assert result.status is Status.OK and result.wall_time < 2.0
    warm = json.loads(result.stdout)
    assert fresh["loaded"] is False and warm["loaded"] is True
    assert warm["names"] == fresh["names"]
    assert warm["argv"] == fresh["argv"] == ["/sandbox/main.py", "a"]
    assert warm["files"] == ["in.txt", "main.py", "model"]
    assert sorted(result.files) == ["in.txt", "model/weights.txt"]


def test_a_call_without_a_warm_sandbox_runs_the_set_up_first() -> None:
    """Two calls at once with one warm sandbox: the second starts one of the template's
    kind itself, and finds the template done too."""
    template = replace(TEMPLATE, setup="")
    with Runner(warm=1, template=template, max_concurrent=2) as runner:
        wait_ready(runner)
        with concurrent.futures.ThreadPoolExecutor(2) as executor:
            looks = list(executor.map(lambda _: _look(runner), range(2)))
    assert [look["loaded"] for look in looks] == [True, True]


def test_the_set_up_cpu_is_not_the_calls() -> None:
    """A set-up that burns more CPU than a call may use: the call still runs, and its
    CPU time counts from the hand-over."""
    burn = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"
    with Runner(warm=1, template=Template(setup=burn), limits=Limits(cpu_time=1.0)) as runner:
        wait_ready(runner)
        result = runner.run_python("print('ran')")
        assert runner._pool is not None and runner._pool.taken == 1
    assert result.status is Status.OK, result
    assert result.cpu_time < 1.0


def test_a_failing_set_up_raises_with_its_traceback() -> None:
    template = Template(
        setup="def broken():\n    raise RuntimeError('the set-up broke')\nbroken()\n"
    )
    with (
        Runner(warm=1, template=template) as runner,
        pytest.raises(SandboxError, match=r"(?s)set-up failed.*the set-up broke"),
    ):
        runner.run_python("print('never')")
    assert children_of(os.getpid()) == []


def test_a_set_up_that_does_not_finish_in_time_is_reported() -> None:
    template = Template(setup="import time\ntime.sleep(60)\n", timeout=0.5)
    with (
        Runner(warm=1, template=template) as runner,
        pytest.raises(SandboxError, match=r"not ready within 0\.5 s"),
    ):
        runner.run_python("print('never')")
    assert children_of(os.getpid()) == []


def test_an_input_file_cannot_replace_a_template_file() -> None:
    with (
        Runner(warm=1, template=TEMPLATE) as runner,
        pytest.raises(ValueError, match="clashes with the template's file"),
    ):
        runner.run_python("pass", files={"model": b"x"})


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("keywords", "error", "words"),
    [
        ({"imports": "numpy"}, TypeError, "Template.imports must be a sequence"),
        ({"imports": [1]}, TypeError, "Template.imports items must be str"),
        ({"imports": ["not-a-module"]}, ValueError, "is not a module name"),
        ({"setup": b"x"}, TypeError, "Template.setup must be str"),
        ({"setup": "\0"}, ValueError, "must not contain NUL"),
        ({"files": {"../x": b""}}, ValueError, "files"),
        ({"timeout": 0}, ValueError, "Template.timeout must be finite and > 0"),
        ({"timeout": True}, TypeError, "Template.timeout must be a number"),
    ],
)
def test_a_template_is_checked(keywords: dict[str, object], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        Template(**keywords)  # type: ignore[arg-type]


@pytest.mark.no_bwrap
def test_a_template_needs_a_warm_pool() -> None:
    with pytest.raises(ValueError, match="template needs warm >= 1"):
        Runner(template=Template())
    with pytest.raises(TypeError, match="template must be a Template"):
        Runner(warm=1, template="numpy")  # type: ignore[arg-type]


def test_a_template_that_fails_is_not_restarted_for_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three set-ups that failed in a row end the warming of that kind: the keeper,
    looking every 20 ms, starts no more; calls still say why."""
    monkeypatch.setattr(_warm, "_CHECK_SECONDS", 0.02)
    with Runner(warm=2, template=Template(imports=["pysandbox_no_such_module"])) as runner:
        pool = runner._pool
        assert pool is not None
        deadline = time.monotonic() + slow(20.0)
        while pool.started < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)
        started = pool.started
        time.sleep(1.0)
        assert pool.started == started <= 4
        with pytest.raises(SandboxError, match="No module named 'pysandbox_no_such_module'"):
            runner.run_python("print('never')")


def test_the_set_up_output_is_not_the_calls() -> None:
    """What the set-up writes (more than a pipe holds) goes nowhere."""
    noisy = Template(setup="import sys\nprint('noise' * 40000)\nsys.stderr.write('e' * 200000)\n")
    with Runner(warm=1, template=noisy) as runner:
        wait_ready(runner)
        result = runner.run_python("print(1)")
        assert runner._pool is not None and runner._pool.taken == 1
    assert result.stdout == b"1\n" and result.stderr == b""


def test_with_a_template_the_env_is_the_set_ups_too() -> None:
    """A call's variables reach the set-up (a module reads its own as it is imported):
    with a template, another value is another kind."""
    template = Template(setup="import os\nopen('/sandbox/seen', 'w').write(os.environ['MODE'])\n")
    with Runner(warm=1, template=template, env={"MODE": "fast"}) as runner:
        wait_ready(runner)
        fast = runner.run_python("pass")
        slow_one = runner.run_python("pass", env={"MODE": "slow"})
        assert runner._pool is not None and runner._pool.taken == 1
    assert fast.files["seen"] == b"fast"
    assert slow_one.files["seen"] == b"slow"


def test_a_process_the_set_up_left_holds_none_of_the_waiters_fds() -> None:
    """A child forked by the set-up outlives it; the code finds it, but not the go pipe,
    the ready pipe or the payload in it (closed at the fork), so it cannot tell the
    waiter or the host anything."""
    # The set-up waits until its child runs (a starved child has not yet closed them).
    lingering = Template(
        setup=(
            "import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n"
            "    os.close(r)\n    os.write(w, b'x')\n    os.close(w)\n"
            "    time.sleep(60)\n    os._exit(0)\n"
            "os.close(w)\nos.read(r, 1)\nos.close(r)\n"
        )
    )
    code = (
        "import os\n"
        "me = os.getpid()\n"
        "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)]\n"
        "print([sorted(os.listdir(f'/proc/{p}/fd'), key=int) for p in others])\n"
    )
    with Runner(warm=1, template=lingering) as runner:
        wait_ready(runner)
        result = runner.run_python(code)
        assert runner._pool is not None and runner._pool.taken == 1
    assert result.status is Status.OK, result
    assert result.stdout == b"[['0', '1', '2']]\n"


def test_a_call_waiting_for_a_set_up_ends_when_cancelled() -> None:
    """A set-up that takes a minute: the call waiting for it ends as soon as its
    ``cancel`` is set, and ``close()`` returns as soon as it has ended."""
    template = Template(setup="import time\ntime.sleep(60)\n", timeout=60.0)
    cancel = threading.Event()
    with Runner(warm=1, template=template) as runner:
        threading.Timer(0.5, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            runner.run_python("print('never')", cancel=cancel)
        assert time.monotonic() - started < slow(10.0)
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                runner.run_python("print('never')")
            except BaseException as error:  # Cancelled, the Runner's close
                outcome.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(0.5)
        started = time.monotonic()
        runner.close()
        caller.join(slow(10.0))
        assert not caller.is_alive()
        assert time.monotonic() - started < slow(10.0)
        assert [type(error) for error in outcome] == [Cancelled]
    assert children_of(os.getpid()) == []


def test_what_a_failing_set_up_says_is_bounded_and_inert() -> None:
    """The ready pipe is read back from the sandbox: at most 4 KiB of it reaches the
    error, with terminal controls and CI log commands escaped."""
    hostile = (
        "\\x1b[2J\\x1b]52;c;aGk=\\x07\\n::error::faked\\n##vso[task.complete]\\r" + "y" * 100000
    )
    template = Template(setup=f"raise RuntimeError({hostile!r})")
    with (
        Runner(warm=1, template=template) as runner,
        pytest.raises(SandboxError, match="set-up failed") as caught,
    ):
        runner.run_python("print('never')")
    message = str(caught.value)
    assert len(message) < 4096 + 200
    assert not any(ord(char) < 0x20 and char not in "\n\t" for char in message)
    assert "\n::error" not in message and "##vso[" not in message
