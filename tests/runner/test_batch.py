# SPDX-License-Identifier: MIT
"""``pysandbox batch``: the installed console script in a real subprocess, real sandboxes,
real signals; and ``run_batch`` itself for how far ahead it reads its jobs."""

from __future__ import annotations

import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from support.batch import by_id, outcomes, summary, write_jobs
from support.cli import SCRIPT, TIMEOUT, WITH_DEFAULT_SIGINT, assert_usage_error, cli
from support.processes import survivors, unique_marker
from support.runner import running
from support.timing import PROMPTLY

from pysandbox import Limits, Outcome, Status
from pysandbox._runner.batch import BatchReport, run_batch
from pysandbox._runner.map import READ_AHEAD
from pysandbox._runner.results_file import ResultsFile


def test_python_and_argv_jobs_with_stdin_files_limits_and_ids(tmp_path: Path) -> None:
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        {"id": "rev", "python": "print(input()[::-1])", "stdin": "olleh"},
        {"argv": ["sh", "-c", 'echo "$0 $1"; cat data.txt', "x", "y"],
         "files": {"data.txt": {"data": "from a file\n", "encoding": "utf-8"}}},
        "",
        {"id": 7, "python": "import sys; print(sys.argv[1:])", "args": ["-v", "2"]},
        {"id": "spin", "python": "while True: pass", "limits": {"cpu_time": "300ms"}},
        {"id": "loud", "python": "print('x' * 100)"},
    )  # fmt: skip
    results = tmp_path / "results.jsonl"
    done = cli("batch", str(jobs), "--out", str(results), "--stdout-limit", "50")
    assert done.returncode == 0, done.stderr
    found = by_id(results)
    assert sorted(map(str, found)) == ["2", "7", "loud", "rev", "spin"]
    assert found["rev"]["stdout"] == "hello\n"
    assert found[2]["stdout"] == "x y\nfrom a file\n"  # no id: its line number
    assert found[7]["stdout"] == "['-v', '2']\n"
    # The job's own limits replace the command line's; the others get --stdout-limit.
    assert found["spin"]["status"] == Status.CPU_TIME_EXCEEDED.name
    assert found["loud"]["status"] == Status.OUTPUT_EXCEEDED.name
    assert Outcome.from_dict(found["rev"]).result is not None
    assert "5 jobs in " in summary(done)
    assert "CPU_TIME_EXCEEDED=1, OK=3, OUTPUT_EXCEEDED=1" in summary(done)


def test_jobs_from_stdin_with_a_progress_bar(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"id": n, "python": f"print({n} * 2)"}) + "\n" for n in range(3))
    results = tmp_path / "results.jsonl"
    done = cli("batch", "-", "--out", str(results), "--progress", stdin=lines.encode())
    assert done.returncode == 0, done.stderr
    assert {n: line["stdout"] for n, line in by_id(results).items()} == {
        0: "0\n",
        1: "2\n",
        2: "4\n",
    }
    assert "OK=3" in done.stderr.decode().splitlines()[-2]  # the bar's verdict counts


def test_env_and_readable_for_every_job(tmp_path: Path, world_readable_dir: Path) -> None:
    shared = world_readable_dir / "shared.txt"
    shared.write_text("visible\n")
    shared.chmod(0o644)
    show = ["sh", "-c", f'echo "$A $B"; cat {shared}']
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        {"id": "defaults", "argv": show},
        {"id": "own", "argv": show, "env": {"B": "job"}},
    )
    results = tmp_path / "results.jsonl"
    done = cli(
        "batch", str(jobs), "--out", str(results),
        "--env", "A=batch", "--env", "B=batch", "--readable", str(shared),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = by_id(results)
    assert found["defaults"]["stdout"] == "batch batch\nvisible\n"
    assert found["own"]["stdout"] == "batch job\nvisible\n"


def test_malformed_lines_are_error_outcomes_with_their_line_numbers(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_bytes(
        b'{"id": "good", "python": "print(1)"}\n'
        b"not json\n"
        b"\n"
        b'{"id": "keyed", "python": "pass", "colour": "red"}\n'
        b'["a", "list"]\n'
        b'{"id": "bytes", "argv": ["echo", "\xff"]}\n'
        b'{"id": true, "argv": 5}\n'
        b'{"id": "limit", "python": "pass", "limits": {"memory": "0"}}\n'
        b'{"id": "after", "argv": ["echo", "still running"]}\n'
    )
    results = tmp_path / "results.jsonl"
    done = cli("batch", str(jobs), "--out", str(results))
    assert done.returncode == 0, done.stderr
    found = by_id(results)
    assert found["good"]["stdout"] == "1\n"
    assert found["after"]["stdout"] == "still running\n"
    errors = {key: (line["error_type"], line["error"]) for key, line in found.items()
              if "error" in line}  # fmt: skip
    assert errors[2] == ("JobLineError", "line 2: bad JSON: Expecting value, column 1")
    assert errors["keyed"][1].startswith("line 4: colour: unknown key")
    assert errors[5][1].startswith("line 5: a job must be a JSON object")
    assert errors[6][1].startswith("line 6: not UTF-8 text")  # its id unreadable: the line
    assert errors[7][1].startswith("line 7: id must be")  # a bool is no id: the line number
    assert errors["limit"][1].startswith("line 8: limits.memory")
    assert "ERROR=6, OK=2" in summary(done)


def test_a_duplicate_id_is_an_error_for_the_later_line_and_a_rerun_adds_nothing(
    tmp_path: Path,
) -> None:
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        {"id": "a", "argv": ["echo", "first"]},
        {"argv": ["echo", "second"]},
        {"id": "a", "argv": ["echo", "third"]},
        {"id": 2, "argv": ["echo", "fourth"]},  # line 2's id, given to a job without one
    )
    results = tmp_path / "results.jsonl"
    assert cli("batch", str(jobs), "--out", str(results), "--ordered").returncode == 0
    lines = outcomes(results)
    assert [(line["id"], line.get("stdout"), line.get("error_type")) for line in lines] == [
        ("a", "first\n", None),
        (2, "second\n", None),
        ("a", None, "DuplicateIdError"),
        (2, None, "DuplicateIdError"),
    ]
    assert lines[2]["error"] == 'line 3: duplicate id "a", also on line 1; ids must be unique'
    written = results.read_bytes()
    again = cli("batch", str(jobs), "--out", str(results))
    assert again.returncode == 0, again.stderr
    assert results.read_bytes() == written
    assert summary(again).startswith("pysandbox: batch done: 0 jobs in ")
    assert summary(again).endswith("; 4 skipped, already in the results")


def test_ordered_writes_in_the_order_of_the_lines(tmp_path: Path) -> None:
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        {"argv": ["sleep", "1"]},
        *({"argv": ["true"]} for _ in range(5)),
    )
    results = tmp_path / "results.jsonl"
    done = cli("batch", str(jobs), "--out", str(results), "--ordered", "--max-concurrent", "2")
    assert done.returncode == 0, done.stderr
    assert [line["id"] for line in outcomes(results)] == [1, 2, 3, 4, 5, 6]


def _waiting_job(job_id: int, flag: Path, marker: str) -> dict[str, object]:
    """A job that runs until ``flag`` exists on the host, with ``marker`` in its argv."""
    code = f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.02)\n"
    return {"id": job_id, "python": code, "args": [marker], "readable": [str(flag.parent)]}


def _wait_for(what: str, condition: object, proc: subprocess.Popen[bytes]) -> None:
    """Wait until ``condition()`` holds while ``proc`` runs.  The CLI starts, then runs
    several sandboxes first, which is more than one prompt call on a busy machine (CI saw
    5 s go by), so this allows ``TIMEOUT``: a batch that never gets there still fails."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():  # type: ignore[operator]
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _run_past_the_flag(
    command: list[str], flag: Path, *waits: tuple[str, Callable[[int], bool]]
) -> None:
    """Start the batch ``command``; while it runs, wait for each ``(what, condition)`` in
    turn (``condition`` gets the batch's pid); then make ``flag`` (the waiting jobs end)
    and check that the batch exits 0.  It is killed whatever happens."""
    proc = subprocess.Popen(command, stderr=subprocess.PIPE)
    try:
        for what, condition in waits:
            _wait_for(what, functools.partial(condition, proc.pid), proc)
        flag.touch()
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_outcomes_are_written_line_by_line_as_jobs_end(
    tmp_path: Path, world_readable_dir: Path
) -> None:
    """The first job waits for a host file that the test makes only once the lines of
    the others are in the file: unordered, each line is written (and flushed) as its job
    ends."""
    flag = world_readable_dir / "go"
    marker = unique_marker()
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        _waiting_job(0, flag, marker),
        *({"id": n, "argv": ["true"]} for n in range(1, 4)),
    )
    results = tmp_path / "results.jsonl"
    _run_past_the_flag(
        [SCRIPT, "batch", str(jobs), "--out", str(results), "--max-concurrent", "2"],
        flag,
        ("the quick jobs' lines", lambda _: len(outcomes(results)) == 3),
    )
    assert [line["id"] for line in outcomes(results)][-1] == 0
    assert survivors(marker) == []


@pytest.mark.parametrize(
    ("signum", "status", "kind"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_batch_kills_its_sandboxes_and_a_rerun_resumes(
    tmp_path: Path, world_readable_dir: Path, signum: int, status: int, kind: str
) -> None:
    flag = world_readable_dir / "go"
    marker = unique_marker()
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        *({"id": n, "python": f"print({n})"} for n in range(3)),
        *(_waiting_job(n, flag, marker) for n in range(3, 8)),
    )
    results = tmp_path / "results.jsonl"
    command = [SCRIPT, "batch", str(jobs), "--out", str(results), "--max-concurrent", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-c", WITH_DEFAULT_SIGINT, *command], stderr=subprocess.PIPE
    )
    try:
        _wait_for("the quick jobs' lines", lambda: len(outcomes(results)) == 3, proc)
        _wait_for("two waiting sandboxes", lambda: len(running(marker)) >= 2, proc)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=PROMPTLY)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status
    last = stderr.decode().splitlines()[-1]
    assert last.startswith(f"pysandbox: {kind}: the running sandboxes were killed; 3 jobs in ")
    assert last.endswith("rerun the same command to resume"), last
    assert survivors(marker) == [], "a sandbox outlived the batch"
    assert sorted(by_id(results)) == [0, 1, 2]  # whole lines, and only finished jobs
    flag.touch()
    again = subprocess.run(command, capture_output=True, timeout=TIMEOUT, check=False)
    assert again.returncode == 0, again.stderr
    assert "3 skipped, already in the results" in summary(again)
    found = by_id(results)
    assert sorted(found) == list(range(8))
    assert all(line["status"] == "OK" for line in found.values())


def _bwrap_children(pid: int) -> int:
    """How many bwrap processes ``pid`` has started that still run: its sandboxes."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                name, rest = stat.read().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        if name.endswith("(bwrap") and fields[0] != "Z" and int(fields[1]) == pid:
            count += 1
    return count


@pytest.mark.parametrize("warm", [0, 1, 2])
def test_warm_keeps_that_many_sandboxes_started_beside_the_running_job(
    tmp_path: Path, world_readable_dir: Path, warm: int
) -> None:
    """``--warm K``: while one job runs (``--max-concurrent 1``), the batch has ``K``
    more sandboxes started and waiting; the jobs' outcomes are the same."""
    flag = world_readable_dir / "go"
    marker = unique_marker()
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        _waiting_job(0, flag, marker),
        *({"id": n, "python": f"print({n})"} for n in range(1, 4)),
    )
    results = tmp_path / "results.jsonl"
    command = [SCRIPT, "batch", str(jobs), "--out", str(results), "--max-concurrent", "1"]
    _run_past_the_flag(
        [*command, "--warm", str(warm)],
        flag,
        ("the waiting job", lambda _: running(marker) != set()),
        ("the warm sandboxes", lambda pid: _bwrap_children(pid) == 1 + warm),
    )
    found = by_id(results)
    assert {key: line["stdout"] for key, line in found.items() if key != 0} == {
        n: f"{n}\n" for n in range(1, 4)
    }
    assert all(line["status"] == "OK" for line in found.values())


def test_a_partial_last_line_is_cut_off_and_its_job_run_again(tmp_path: Path) -> None:
    jobs = write_jobs(
        tmp_path / "jobs.jsonl",
        {"id": "a", "argv": ["echo", "a"]},
        {"id": "b", "argv": ["echo", "b"]},
    )
    results = tmp_path / "results.jsonl"
    assert cli("batch", str(jobs), "--out", str(results), "--ordered").returncode == 0
    whole = results.read_text().splitlines(keepends=True)[0]
    results.write_text(whole + '{"id": "b", "status": "O')  # killed mid-write
    done = cli("batch", str(jobs), "--out", str(results))
    assert done.returncode == 0, done.stderr
    assert "cut off a partial last line" in done.stderr.decode()
    assert "1 skipped" in summary(done)
    assert results.read_text().startswith(whole)
    assert {key: line["stdout"] for key, line in by_id(results).items()} == {
        "a": "a\n",
        "b": "b\n",
    }


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    "args",
    [
        ["batch", "jobs.jsonl"],
        ["batch", "--out", "r.jsonl"],
        ["batch", "missing.jsonl", "--out", "r.jsonl"],
        ["batch", "jobs.jsonl", "--out", "r.jsonl", "--max-concurrent", "0"],
        ["batch", "jobs.jsonl", "--out", "r.jsonl", "--warm", "-1"],
        ["batch", "jobs.jsonl", "--out", "r.jsonl", "--warm", "two"],
        ["batch", "jobs.jsonl", "--out", "r.jsonl", "--memory", "-1"],
        ["batch", "jobs.jsonl", "--out", "jobs.jsonl"],
        ["batch", "jobs.jsonl", "--out", "no/such/dir/r.jsonl"],
        ["batch", "jobs.jsonl", "--out", "r.jsonl", "--env", "NOEQUALS"],
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    write_jobs(tmp_path / "jobs.jsonl", {"argv": ["true"]})
    assert_usage_error(cli(*args))
    assert not (tmp_path / "r.jsonl").exists()


def test_a_file_that_is_not_a_batchs_results_is_refused_untouched(tmp_path: Path) -> None:
    write_jobs(tmp_path / "jobs.jsonl", {"argv": ["true"]})
    other = tmp_path / "notes.txt"
    other.write_text("my notes\nnot results")
    error = assert_usage_error(cli("batch", "jobs.jsonl", "--out", str(other)))
    assert "notes.txt line 1 is not a batch result" in error
    assert other.read_text() == "my notes\nnot results"


@pytest.mark.no_bwrap
def test_a_host_without_bwrap_fails_once_before_writing_results(tmp_path: Path) -> None:
    write_jobs(tmp_path / "jobs.jsonl", *({"argv": ["true"]} for _ in range(3)))
    done = cli("batch", "jobs.jsonl", "--out", "r.jsonl", env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 125
    assert done.stderr.decode() == "pysandbox: sandbox error: Cannot find the `bwrap` executable\n"
    assert not (tmp_path / "r.jsonl").exists()


class _Stop(Exception):
    """Ends the batch from its results file once enough outcomes are written."""


def test_run_batch_reads_a_bounded_window_ahead_of_the_outcomes(tmp_path: Path) -> None:
    """A generator of 100,000 job lines, stopped after a dozen outcomes: at each outcome
    written, the lines read are at most the window of ``Runner.map`` ahead of the
    outcomes (a reader that read them all would fail, not hang)."""
    max_concurrent = 2
    lines_read = itertools.count(1)
    read = 0

    def lines() -> Iterator[bytes]:
        nonlocal read
        for n in range(100_000):
            read = next(lines_read)
            yield json.dumps({"id": n, "argv": ["true"]}).encode() + b"\n"

    class Watched(ResultsFile):
        ahead: ClassVar[list[int]] = []

        def append(self, outcome: Outcome) -> None:
            super().append(outcome)
            self.ahead.append(read - (len(self.ahead) + 1))
            if len(self.ahead) == 12:
                raise _Stop

    results = Watched(str(tmp_path / "r.jsonl"), duplicate_error="DuplicateIdError")
    with results, pytest.raises(_Stop):
        run_batch(
            lines(),
            results,
            BatchReport(),
            limits=Limits(),
            max_concurrent=max_concurrent,
            ordered=False,
            progress=False,
        )
    assert max(results.ahead) <= READ_AHEAD * max_concurrent + 1, results.ahead
    assert len(outcomes(tmp_path / "r.jsonl")) == 12
