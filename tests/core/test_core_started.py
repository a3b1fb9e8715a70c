# SPDX-License-Identifier: MIT
"""The C core's two-step form: ``_sandbox.start`` gives a ``Sandbox`` that ``pump`` runs
to its end later (a warm sandbox), or ``kill`` (or dropping it) ends unrun."""

from __future__ import annotations

import gc
import os
import time

import pytest
from support.processes import children_of
from support.timing import KILL_LATENCY, PROMPTLY

from pysandbox import _sandbox

SH = "/bin/sh"


def own_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def started(script: str) -> _sandbox.Sandbox:
    return _sandbox.start([SH, "-c", script], [])


def test_pump_runs_a_started_program_to_its_end() -> None:
    sandbox = started("read line; echo got $line")
    assert sandbox.pid in children_of(os.getpid())
    assert not sandbox.exited()
    raw = sandbox.pump(stdin=b"hello\n", timeout=PROMPTLY)
    assert raw["stdout"] == b"got hello\n"
    assert raw["status_known"] and raw["wait_status"] == 0
    assert sandbox.exited() and sandbox.pid == -1
    with pytest.raises(RuntimeError, match="already run or killed"):
        sandbox.pump(timeout=1.0)
    sandbox.kill()  # a no-op now


def test_kill_ends_it_unrun_and_leaves_nothing() -> None:
    before = own_fds()
    sandbox = started("sleep 60")
    pid = sandbox.pid
    sandbox.kill()
    assert not os.path.exists(f"/proc/{pid}")  # reaped, not even a zombie
    assert own_fds() == before
    assert sandbox.cpu_time() == -1.0
    with pytest.raises(RuntimeError):
        sandbox.pump(timeout=1.0)


def test_dropping_it_kills_and_reaps() -> None:
    before = own_fds()
    sandbox = started("sleep 60")
    pid = sandbox.pid
    del sandbox
    gc.collect()
    assert not os.path.exists(f"/proc/{pid}")
    assert own_fds() == before


def test_exited_sees_a_program_that_ended_by_itself() -> None:
    sandbox = started("exit 3")
    deadline = time.monotonic() + PROMPTLY
    while not sandbox.exited() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sandbox.exited()
    raw = sandbox.pump(timeout=PROMPTLY)
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == 3


def test_the_clock_counts_from_since() -> None:
    """A deadline given from an earlier moment: the run is killed that much sooner, and
    its wall time counts from that moment."""
    sandbox = started("sleep 60")
    since = time.monotonic()
    time.sleep(0.5)
    raw = sandbox.pump(timeout=1.0, since=since)
    assert raw["timed_out"]
    assert 1.0 <= raw["wall_time"] < 1.0 + KILL_LATENCY


def test_cpu_time_samples_the_running_tree() -> None:
    sandbox = started("while :; do :; done")
    try:
        time.sleep(0.3)
        first = sandbox.cpu_time()
        time.sleep(0.3)
        assert 0 < first < sandbox.cpu_time()
    finally:
        sandbox.kill()


def test_release_fd_lets_a_waiting_reader_go_once_the_clock_runs() -> None:
    """A program blocked reading a pipe goes on when ``pump`` writes one byte into the
    pipe's write end, not before: it has read nothing until then."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        sandbox = _sandbox.start(
            [SH, "-c", "head -c 1 <&3 > /dev/null; echo went after $SECONDS"],
            [],
            pass_fds=[read_end],
        )
        time.sleep(0.2)
        assert not sandbox.exited()
        raw = sandbox.pump(timeout=PROMPTLY, release_fd=write_end)
        assert raw["stdout"].startswith(b"went after")
        assert raw["status_known"] and raw["wait_status"] == 0
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_release_that_fails_kills_the_program_first() -> None:
    """A byte that cannot be written (here: to a pipe's read end, EBADF)."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        sandbox = started("sleep 60")
        pid = sandbox.pid
        with pytest.raises(OSError, match="releasing the warm sandbox's waiter") as caught:
            sandbox.pump(timeout=PROMPTLY, release_fd=read_end)
        assert caught.value.stage == _sandbox.STAGE_RELEASE
        assert not os.path.exists(f"/proc/{pid}")
    finally:
        os.close(read_end)
        os.close(write_end)


#: A program that reports as the init does (on its second capture, fd 4) once it has
#: written its output, then goes on as bwrap does after its init has exited.
REPORTS_THEN_LINGERS = "head -c 100000 /dev/zero; printf 'exit 0 1 2 3\\n' >&4; exec sleep 60"


def test_end_at_report_returns_at_the_report_with_all_the_output() -> None:
    """With ``end_at_report``, ``pump`` returns once that capture holds an ``exit``
    line, with everything written before it (more than a pipe holds), and leaves the
    process, still running, to ``kill``, which reaps it and closes what is left."""
    before = own_fds()
    sandbox = _sandbox.start([SH, "-c", REPORTS_THEN_LINGERS], [], captures=[100, 100])
    pid = sandbox.pid
    raw = sandbox.pump(timeout=PROMPTLY, end_at_report=1)
    assert raw["reported"] and not raw["timed_out"]
    assert raw["stdout"] == b"\0" * 100000
    assert raw["captures"][1] == b"exit 0 1 2 3\n"
    assert not raw["status_known"]
    assert os.path.exists(f"/proc/{pid}/status")  # not reaped
    assert sandbox.exited()
    with pytest.raises(RuntimeError, match="already run or killed"):
        sandbox.pump(timeout=1.0)
    sandbox.kill()
    assert not os.path.exists(f"/proc/{pid}")
    assert own_fds() == before


def test_a_sandbox_left_at_its_report_is_reaped_when_dropped() -> None:
    before = own_fds()
    sandbox = _sandbox.start([SH, "-c", REPORTS_THEN_LINGERS], [], captures=[100, 100])
    pid = sandbox.pid
    assert sandbox.pump(timeout=PROMPTLY, end_at_report=1)["reported"]
    del sandbox
    gc.collect()
    assert not os.path.exists(f"/proc/{pid}")
    assert own_fds() == before


def test_end_at_report_waits_for_a_whole_exit_line() -> None:
    """Another line, or a part of one, is no report: the run goes to its end."""
    for script in ("printf 'fail 2 oops\\n' >&4; exit 5", "printf 'exit 0 1' >&4; exit 5"):
        sandbox = _sandbox.start([SH, "-c", script], [], captures=[100, 100])
        raw = sandbox.pump(timeout=PROMPTLY, end_at_report=1)
        assert not raw["reported"]
        assert raw["status_known"] and os.waitstatus_to_exitcode(raw["wait_status"]) == 5


#: The init's file records for one file ``a`` holding ``x``, then the end record.
ONE_FILE = "F\\000\\001\\000\\000\\000a\\001\\000\\000\\000\\000\\000\\000\\000x"


def test_end_after_stream_waits_for_the_file_records_end() -> None:
    """With ``end_after_stream``, the report is not enough: the file records the init
    streams after it must have ended too ('E' and its flags)."""
    reports = "printf 'exit 0 1 2 3\\n' >&4"
    whole = f"{reports}; printf '{ONE_FILE}' >&5; sleep 0.2; printf 'E\\000' >&5; exec sleep 60"
    sandbox = _sandbox.start([SH, "-c", whole], [], captures=[100, 100, 100])
    raw = sandbox.pump(timeout=PROMPTLY, end_at_report=1, end_after_stream=2)
    assert raw["reported"] and not raw["timed_out"]
    assert raw["captures"][2] == b"F\0\1\0\0\0a\1\0\0\0\0\0\0\0xE\0"
    sandbox.kill()
    for cut in (f"printf '{ONE_FILE}' >&5", "printf 'F\\000\\001\\000' >&5"):
        sandbox = _sandbox.start([SH, "-c", f"{reports}; {cut}; exit 5"], [], captures=[100] * 3)
        raw = sandbox.pump(timeout=PROMPTLY, end_at_report=1, end_after_stream=2)
        assert not raw["reported"]
        assert os.waitstatus_to_exitcode(raw["wait_status"]) == 5


def test_a_stream_past_its_cap_never_ends_the_run_early() -> None:
    script = f"printf 'exit 0 1 2 3\\n' >&4; printf '{ONE_FILE}E\\000' >&5; exit 5"
    sandbox = _sandbox.start([SH, "-c", script], [], captures=[100, 100, 8])
    raw = sandbox.pump(timeout=PROMPTLY, end_at_report=1, end_after_stream=2)
    assert not raw["reported"] and raw["captures_truncated"][2]


@pytest.mark.no_bwrap
def test_end_at_report_must_name_a_capture() -> None:
    for wrong in (-2, 0, 99):
        sandbox = started("true")
        with pytest.raises(ValueError, match="end_at_report"):
            sandbox.pump(timeout=1.0, end_at_report=wrong)
        sandbox.kill()
    for wrong in (-2, 0, 99):
        sandbox = started("true")
        with pytest.raises(ValueError, match="end_after_stream"):
            sandbox.pump(timeout=1.0, end_after_stream=wrong)
        sandbox.kill()


def test_a_forked_child_leaves_the_parents_sandbox_alone() -> None:
    """A process forked from the one that started a sandbox (``multiprocessing``, a
    server's worker) gets copies of the ``Sandbox`` objects; when it kills or drops
    them, it only closes its copies of the fds."""
    sandbox = started("sleep 60")
    child = os.fork()
    if child == 0:
        try:
            sandbox.kill()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert not sandbox.exited()
    assert sandbox.pid in children_of(os.getpid())
    sandbox.kill()


@pytest.mark.no_bwrap
def test_run_takes_neither_since_nor_release_fd() -> None:
    for keyword in ("since", "release_fd", "end_at_report", "end_after_stream"):
        with pytest.raises(TypeError, match=keyword):
            _sandbox.run([SH, "-c", "true"], [], timeout=1.0, **{keyword: 1})


@pytest.mark.no_bwrap
def test_sandbox_cannot_be_made_directly() -> None:
    with pytest.raises(TypeError):
        _sandbox.Sandbox()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="use start"):
        type(_sandbox.start([SH, "-c", "true"], []))()
