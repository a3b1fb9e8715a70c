# SPDX-License-Identifier: MIT
"""``Runner.map``: the cap holds, outcomes come as jobs end or in input order, a failing
job is an error outcome, jobs are read lazily, leaving the loop (``break``, Ctrl-C)
kills the running sandboxes, and the tqdm bar counts verdicts.  Real sandboxes, real
tqdm, a real SIGINT to a real process."""

from __future__ import annotations

import io
import itertools
import json
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import survivors, unique_marker
from support.runner import alive, gated, running, wait_until
from support.timing import PROMPTLY, slow
from tqdm import tqdm

from pysandbox import Job, Limits, Outcome, Result, Runner, Status


def test_the_cap_holds_over_a_map(world_readable_dir: Path) -> None:
    """Six gated jobs on a Runner of two: never more than two programs alive, two at once
    at some point, and every job through."""
    base = unique_marker()
    markers = [f"{base}-{i}-" for i in range(6)]
    gates = [world_readable_dir / f"gate-{i}" for i in range(6)]
    jobs = [Job(id=i, code=gated(gates[i]), args=(markers[i],)) for i in range(6)]
    outcomes: list[Outcome] = []
    with Runner(max_concurrent=2, readable=[str(world_readable_dir)]) as runner:
        consumer = threading.Thread(target=lambda: outcomes.extend(runner.map(jobs)))
        consumer.start()
        most = 0
        opened: set[int] = set()
        while len(opened) < 6:
            now = alive(markers)
            assert len(now) <= 2, f"more sandboxes alive than max_concurrent: {sorted(now)}"
            most = max(most, len(now))
            if len(now - opened) == min(2, 6 - len(opened)):
                chosen = min(now - opened)
                gates[chosen].touch()
                opened.add(chosen)
            time.sleep(0.01)
        consumer.join(slow(30))
    assert most == 2
    assert sorted(o.id for o in outcomes) == list(range(6))  # type: ignore[type-var]
    assert all(o.result is not None and o.result.stdout == b"through\n" for o in outcomes)


@pytest.mark.parametrize("ordered", [False, True])
def test_outcomes_come_as_jobs_end_or_in_input_order(
    world_readable_dir: Path, ordered: bool
) -> None:
    """Job 0 waits for its gate; jobs 1 and 2 do not.  Unordered, the gate is opened only
    once two outcomes arrived, which must then be 1 and 2.  Ordered, it is opened once
    jobs 1 and 2 have given their slots back, and the outcomes still come 0, 1, 2."""
    gate = world_readable_dir / "gate"
    jobs = [Job(code=gated(gate)), Job(code="print(1)"), Job(code="print(2)")]
    with Runner(max_concurrent=3, readable=[str(world_readable_dir)]) as runner:

        def open_once_two_ended() -> None:
            wait_until(lambda: runner.running == 1, "jobs 1 and 2 to end")
            gate.touch()

        opener = threading.Thread(target=open_once_two_ended)
        if ordered:
            opener.start()
        seen = []
        for outcome in runner.map(jobs, ordered=ordered):
            assert outcome.result is not None and outcome.result.returncode == 0
            seen.append(outcome.id)
            if len(seen) == 2 and not ordered:
                gate.touch()
        if ordered:
            opener.join(slow(30))
    if ordered:
        assert seen == [0, 1, 2]
    else:
        assert sorted(seen[:2]) == [1, 2] and seen[2] == 0


def test_a_failing_job_is_an_error_outcome_and_the_map_goes_on() -> None:
    jobs: list[object] = [
        Job(id="ok", code="print('fine')"),
        Job(id="missing", argv=["/no/such/program"]),
        Job(id="unreadable", code="print(1)", readable=("/no/such/dir",)),
        "not a job",
        Job(id="slow", code="while True: pass", limits=Limits(cpu_time=0.2)),
        Job(code="print('last')"),
    ]
    with Runner(max_concurrent=2) as runner:
        outcomes = {o.id: o for o in runner.map(jobs, ordered=True)}  # type: ignore[arg-type]
    assert list(outcomes) == ["ok", "missing", "unreadable", 3, "slow", 5]
    assert outcomes["ok"].verdict == "OK"
    assert outcomes["missing"].error_type == "SandboxError"
    assert "/no/such/program" in str(outcomes["missing"].error)
    assert outcomes["unreadable"].error_type == "ValueError"
    assert "readable" in str(outcomes["unreadable"].error)
    assert outcomes[3].error_type == "TypeError" and "jobs[3]" in str(outcomes[3].error)
    assert outcomes["slow"].verdict == "CPU_TIME_EXCEEDED"
    last = outcomes[5].result
    assert last is not None and last.stdout == b"last\n"


def counting(jobs: Iterator[Job], pulled: list[int]) -> Iterator[Job]:
    """``jobs``, counting in ``pulled[0]`` how many were taken."""
    for job in jobs:
        pulled[0] += 1
        yield job


def test_jobs_are_read_lazily() -> None:
    pulled = [0]
    endless = counting((Job(id=i, code="print(1)") for i in range(100_000)), pulled)
    with Runner(max_concurrent=2) as runner:
        taken = []
        for outcome in runner.map(endless):
            taken.append(outcome)
            if len(taken) == 3:
                break
    # Four jobs in flight (two per worker), one more read per outcome yielded.
    assert pulled[0] <= 2 * 2 + 3
    assert all(outcome for outcome in taken)


def test_leaving_the_loop_kills_the_running_sandboxes() -> None:
    """A quick job, then sleepers: the loop breaks once three sleepers run; the sandboxes
    are gone as soon as the loop is left, and no more jobs were read."""
    marker = unique_marker()
    pulled = [0]
    sleepers = (Job(code="import time; time.sleep(60)", args=(marker,)) for _ in range(1000))
    jobs = counting(itertools.chain([Job(id="quick", code="print(1)")], sleepers), pulled)
    with Runner(max_concurrent=3) as runner:
        for outcome in runner.map(jobs):
            assert outcome.id == "quick"
            wait_until(lambda: len(running(marker)) == 3, "three sleepers")
            left_at = time.monotonic()
            break
        # The sleepers would take 60 s: only killing them ends the loop this soon.
        assert time.monotonic() - left_at < PROMPTLY
        assert survivors(marker, within=0) == []
        assert (runner.running, runner.waiting) == (0, 0)
    assert pulled[0] <= 2 * 3 + 1


def test_ctrl_c_during_a_map_kills_and_reaps_every_sandbox(tmp_path: Path) -> None:
    marker = unique_marker()
    script = tmp_path / "batch.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import faulthandler, signal
            faulthandler.register(signal.SIGUSR1, all_threads=True)
            # Ctrl-C as a terminal's finds it, even if this test's process ignores SIGINT
            # (which a child inherits, and then Python installs no handler).
            signal.signal(signal.SIGINT, signal.default_int_handler)
            from pysandbox import Job, Runner
            jobs = (Job(code="import time; time.sleep(60)", args=({marker!r},))
                    for _ in range(100))
            with Runner(max_concurrent=2) as runner:
                for outcome in runner.map(jobs):
                    print(outcome)
            """
        )
    )
    batch = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: len(running(marker)) >= 2, "two sleepers")
        batch.send_signal(signal.SIGINT)
        try:
            _, stderr = batch.communicate(timeout=PROMPTLY * 2)
        except subprocess.TimeoutExpired:
            batch.send_signal(signal.SIGUSR1)  # every thread's stack, for the report
            time.sleep(1)
            batch.kill()
            _, stderr = batch.communicate()
            pytest.fail(f"the map did not end after Ctrl-C: {stderr.decode()}")
    finally:
        batch.kill()
        batch.wait()
    assert batch.returncode != 0
    assert b"KeyboardInterrupt" in stderr
    assert survivors(marker, within=0) == []


def test_progress_true_shows_a_bar_with_counts_by_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    jobs = [
        Job(code="print(1)"),
        Job(code="raise SystemExit(2)"),
        Job(argv=["/no/such/program"]),
        Job(code="print(2)"),
    ]
    with Runner(max_concurrent=2) as runner:
        outcomes = list(runner.map(jobs, progress=True))
    assert len(outcomes) == 4
    err = capsys.readouterr().err
    assert "4/4" in err
    assert "ERROR=1, NONZERO_EXIT=1, OK=2" in err


def test_progress_takes_a_tqdm_bar_and_leaves_it_open() -> None:
    shown = io.StringIO()
    with tqdm(total=2, file=shown, mininterval=0) as bar, Runner(max_concurrent=2) as runner:
        assert all(runner.map([Job(code="print(1)"), Job(code="print(2)")], progress=bar))
        assert bar.n == 2 and not bar.disable
        bar.refresh()
    assert "OK=2" in shown.getvalue()


def test_progress_without_tqdm_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with Runner() as runner, pytest.raises(ImportError, match=r"pysandbox\[progress\]"):
        runner.map([Job(code="print(1)")], progress=True)


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("arguments", "error", "named"),
    [
        ({"jobs": 3}, TypeError, "jobs"),
        ({"jobs": "print(1)"}, TypeError, "jobs"),
        ({"jobs": [], "ordered": 1}, TypeError, "ordered"),
        ({"jobs": [], "progress": "yes"}, TypeError, "progress"),
    ],
)
def test_map_checks_its_arguments_when_called(
    arguments: dict[str, object], error: type[Exception], named: str
) -> None:
    with Runner() as runner, pytest.raises(error, match=named):
        runner.map(**arguments)  # type: ignore[arg-type]


def test_a_closed_runner_refuses_to_map() -> None:
    runner = Runner()
    runner.close()
    with pytest.raises(RuntimeError, match="closed"):
        runner.map([Job(code="print(1)")])


def test_run_job_returns_an_outcome_that_travels() -> None:
    with Runner() as runner:
        outcome = runner.run_job(Job(id=3, code="print('hi')"))
        failed = runner.run_job(Job(id=4, argv=["/no/such/program"]))
    result = outcome.result
    assert isinstance(result, Result) and result.status is Status.OK
    data = json.loads(json.dumps(outcome.to_dict()))
    assert data == {"id": 3, **result.to_dict()}
    assert Outcome.from_dict(data) == outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome
    assert Outcome.from_dict(json.loads(json.dumps(failed.to_dict()))) == failed
    assert failed.verdict == "ERROR" and failed.error_type == "SandboxError"


def test_a_job_combines_with_the_runners_defaults() -> None:
    with Runner(max_concurrent=2, env={"X": "1", "Y": "2"}, limits=Limits(stdout=8)) as runner:
        (combined,) = runner.map(
            [Job(code="import os; print(os.environ['X'] + os.environ['Y'])", env={"Y": "3"})]
        )
        (capped,) = runner.map([Job(code="print('x' * 100)")])
        (own,) = runner.map([Job(code="print('x' * 100)", limits=Limits())])
    assert combined.result is not None and combined.result.stdout == b"13\n"
    assert capped.verdict == "OUTPUT_EXCEEDED"
    assert own.verdict == "OK"
