# SPDX-License-Identifier: MIT
"""``Runner.session``: sessions with the Runner's defaults, at most ``max_sessions`` live
(the idlest evicted at the cap, an error when every one is busy, ended ones freeing
their place at once), warm sessions handed out once each and refilled, and ``close()``
leaving no process.  Every session is a real sandbox; what is left is watched from the
host through each test's marker in the sessions' environment (on bwrap's command line).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

import pytest
from support.processes import pids_with_marker, survivors, unique_marker
from support.runner import gated, wait_until
from support.timing import slow

from pysandbox import CellResult, Limits, Runner, SandboxError, Session
from pysandbox._runner.sessions import SESSION_DEFAULTS, HeldSession


def _calls(session: Session) -> int:
    """Calls of ``session`` begun and not returned, as its Runner counts them."""
    assert isinstance(session, HeldSession)
    return session._calls


def _in_thread(session: Session, code: str) -> tuple[threading.Thread, list[CellResult]]:
    """Run ``code`` in ``session`` in a thread of its own; its result lands in the list."""
    results: list[CellResult] = []
    thread = threading.Thread(target=lambda: results.append(session.run(code, wall_time=60)))
    thread.start()
    wait_until(lambda: _calls(session) == 1, "the call to begin")
    return thread, results


@pytest.mark.no_bwrap
def test_the_runners_session_clocks_are_sessions_own() -> None:
    """The clocks ``Runner.session`` defaults to, and makes warm sessions with, are
    ``Session``'s: a call with no argument is one with the defaults."""
    for function in (Session, Runner.session, Runner.session_async):
        parameters = inspect.signature(function).parameters
        assert {name: parameters[name].default for name in SESSION_DEFAULTS} == (SESSION_DEFAULTS)


def test_a_session_takes_the_runners_defaults(
    runners: list[Runner], world_readable_dir: Path
) -> None:
    (world_readable_dir / "data.txt").write_text("shared")
    limits = Limits(wall_time=7, stdout=1000)
    runner = Runner(limits=limits, readable=[str(world_readable_dir)], env={"A": "1", "B": "2"})
    runners.append(runner)
    session = runner.session(env={"B": "3"})
    assert session.limits == limits and runner.sessions == 1
    read = f"open({str(world_readable_dir / 'data.txt')!r}).read()"
    assert session.run(read).value == "'shared'"
    assert session.run("import os; os.environ['A'] + os.environ['B']").value == "'13'"
    other = runner.session(limits=Limits(wall_time=3))
    assert other.limits == Limits(wall_time=3) and runner.sessions == 2


def test_the_cap_evicts_the_session_idle_the_longest(runners: list[Runner]) -> None:
    runner = Runner(max_sessions=2)
    runners.append(runner)
    first, second = runner.session(), runner.session()
    assert first.run("x = 1").committed
    assert second.run("y = 2").committed  # now `first` has been idle the longest
    third = runner.session()
    assert runner.sessions == 2 and not first.alive
    with pytest.raises(SandboxError, match=r"evicted to respect max_sessions=2"):
        first.run("x")
    assert second.run("y").value == "2" and third.run("1 + 1").value == "2"
    assert runner.sessions == 2


def test_a_session_running_a_call_is_never_evicted(
    runners: list[Runner], world_readable_dir: Path
) -> None:
    """With every live session running a call, a new one is refused, naming the cap, and
    nothing is evicted; once a call has ended, that session is the one to go."""
    runner = Runner(max_sessions=2, readable=[str(world_readable_dir)])
    runners.append(runner)
    gate = world_readable_dir / "gate"
    busy = [runner.session(), runner.session()]
    running = [_in_thread(session, gated(gate)) for session in busy]
    with pytest.raises(SandboxError, match=r"max_sessions=2 .*every one is running a call"):
        runner.session()
    with pytest.raises(SandboxError, match=r"max_sessions=2"):
        asyncio.run(runner.session_async())
    assert runner.sessions == 2 and all(session.alive for session in busy)
    gate.touch()
    for thread, results in running:
        thread.join()
        assert results[0].committed and results[0].stdout == b"through\n"
    assert busy[1].run("2").value == "2"  # busy[0] is now the idlest
    runner.session()
    assert not busy[0].alive and busy[1].alive


def test_sessions_that_ended_free_their_place_at_once(runners: list[Runner]) -> None:
    runner = Runner(max_sessions=1)
    runners.append(runner)
    closed = runner.session()
    closed.close()
    assert runner.sessions == 0
    idle = runner.session(idle_timeout=0.2)
    wait_until(lambda: runner.sessions == 0, "the idle timeout to end the session")
    short = runner.session(lifetime=slow(1))
    wait_until(lambda: runner.sessions == 0, "the lifetime to end the session")
    kept = runner.session()
    assert kept.run("1").committed and runner.sessions == 1
    # Neither was evicted: each says why it really ended.
    with pytest.raises(SandboxError, match="idle timeout"):
        idle.run("1")
    with pytest.raises(SandboxError, match="lifetime"):
        short.run("1")


def test_close_leaves_no_process(runners: list[Runner]) -> None:
    """``close()`` closes every session the Runner made, a running call's included
    (it ends lost), and every warm session; nothing with the marker is left."""
    marker = unique_marker()
    runner = Runner(env={"PYSANDBOX_TEST_MARKER": marker}, warm_sessions=2, max_sessions=4)
    runners.append(runner)
    idle = runner.session()
    fresh = runner.session(env={"OTHER": "1"}, files={"f.txt": b"x"})
    thread, results = _in_thread(runner.session(), "import time\ntime.sleep(60)")
    wait_until(lambda: runner.warm_sessions_ready == 2, "the warm sessions to refill")
    assert len(pids_with_marker(marker)) >= 5  # bwrap of each session, warm ones too
    runner.close()
    thread.join(slow(10))
    assert not thread.is_alive() and results[0].lost
    assert not idle.alive and not fresh.alive and runner.sessions == 0
    assert survivors(marker) == []
    with pytest.raises(RuntimeError, match="closed"):
        runner.session()


def test_warm_sessions_are_handed_out_once_each_and_refilled(runners: list[Runner]) -> None:
    runner = Runner(warm_sessions=2, max_sessions=8)
    runners.append(runner)
    pool = runner._warm_sessions
    assert pool is not None and runner.warm_sessions == 2
    wait_until(lambda: runner.warm_sessions_ready == 2, "the warm sessions to start")
    got: list[Session] = []
    threads = [threading.Thread(target=lambda: got.append(runner.session())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(session) for session in got}) == 4 and runner.sessions == 4
    assert 1 <= pool.taken <= 4
    # Each is a sandbox of its own: state set in one is not in another.
    assert got[0].run("x = 1").committed
    assert all(session.run("x").error is not None for session in got[1:])
    wait_until(lambda: runner.warm_sessions_ready == 2, "the warm sessions to refill")
    assert pool.started >= 2 + pool.taken


def test_options_that_differ_start_a_fresh_session(
    runners: list[Runner], world_readable_dir: Path
) -> None:
    runner = Runner(warm_sessions=1, env={"A": "1"})
    runners.append(runner)
    pool = runner._warm_sessions
    assert pool is not None
    wait_until(lambda: runner.warm_sessions_ready == 1, "the warm session to start")
    different = [
        {"limits": Limits(wall_time=3)},
        {"readable": [str(world_readable_dir)]},
        {"env": {"A": "2"}},
        {"files": {"f.txt": b"x"}},
        {"lifetime": 100},
        {"idle_timeout": 100},
        {"cpu_budget": 100},
    ]
    for options in different:
        assert runner.session(**options).run("1").committed, options  # type: ignore[arg-type]
    assert pool.taken == 0
    # The same as the defaults, said explicitly, is the defaults.
    same = runner.session(limits=runner.limits, env={"A": "1"}, lifetime=3600, files={})
    assert pool.taken == 1
    assert same.run("import os; os.environ['A']").value == "'1'"


@pytest.mark.parametrize(
    ("options", "error", "name"),
    [
        ({"max_sessions": 0}, ValueError, "max_sessions"),
        ({"max_sessions": "2"}, TypeError, "max_sessions"),
        ({"max_sessions": True}, TypeError, "max_sessions"),
        ({"warm_sessions": -1}, ValueError, "warm_sessions"),
        ({"warm_sessions": 1.0}, TypeError, "warm_sessions"),
    ],
)
@pytest.mark.no_bwrap
def test_bad_runner_arguments_are_named(
    options: dict[str, object], error: type[Exception], name: str
) -> None:
    with pytest.raises(error, match=name):
        Runner(**options)  # type: ignore[arg-type]


def test_bad_session_arguments_are_named_and_evict_nothing(runners: list[Runner]) -> None:
    runner = Runner(max_sessions=1)
    runners.append(runner)
    kept = runner.session()
    bad: list[tuple[dict[str, object], type[Exception], str]] = [
        ({"lifetime": -1}, ValueError, "lifetime"),
        ({"idle_timeout": "1"}, TypeError, "idle_timeout"),
        ({"cpu_budget": float("nan")}, ValueError, "cpu_budget"),
        ({"limits": "big"}, TypeError, "limits"),
        ({"env": {"A": 1}}, TypeError, "env"),
        ({"readable": "/etc"}, TypeError, "readable"),
        ({"files": {"../x": b""}}, ValueError, "x"),
    ]
    for options, error, name in bad:
        with pytest.raises(error, match=name):
            runner.session(**options)  # type: ignore[arg-type]
    assert kept.alive and kept.run("1").committed and runner.sessions == 1


def test_session_async(runners: list[Runner]) -> None:
    runner = Runner(max_sessions=2)
    runners.append(runner)

    async def main() -> None:
        session = await runner.session_async(env={"A": "1"})
        assert session.run("import os; os.environ['A']").value == "'1'"
        started = asyncio.create_task(runner.session_async())
        await asyncio.sleep(0)
        started.cancel()
        with pytest.raises(asyncio.CancelledError):
            await started

    asyncio.run(main())
    # The cancelled start left no session behind (closed once it had started).
    wait_until(lambda: runner.sessions == 1, "the cancelled session to close")
