# SPDX-License-Identifier: MIT
"""``Runner.map(client=...)`` on real Dask clusters on 127.0.0.1: a ``LocalCluster`` with
worker processes (under nannies), and a scheduler and workers started with Dask's own
command-line programs.  Each test watches the sandboxes from the host through a marker
in their command lines and finds the worker that started each by walking up the
parents in ``/proc``: one outcome per job, the cap per worker process, the window, the
sandboxes of a left loop killed, and a worker killed with SIGKILL mid-batch."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
from distributed import Client
from support.batch import outcomes as result_lines
from support.batch import summary, write_jobs
from support.cli import assert_usage_error, cli
from support.dask_cluster import local_cluster
from support.processes import pids_with_marker, survivors, unique_marker
from support.runner import gated, running, wait_until
from support.timing import PROMPTLY, slow
from tqdm import tqdm

from pysandbox import Job, Outcome, Runner
from pysandbox._runner.dask import WINDOW_PER_SLOT, connect, worker_runners


def _ancestors(pid: int) -> Iterator[int]:
    """The parents of ``pid``, nearest first, while ``/proc`` knows them."""
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return
        yield pid


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _sandboxes_by_worker(
    markers: list[str], workers: dict[str, int], *, bwrap: bool = False
) -> dict[str, set[int]]:
    """For each worker address, the indices of ``markers`` whose programs run under it
    (with ``bwrap``: the pids of every process of those sandboxes, bwrap and init too)."""
    found: dict[str, set[int]] = {address: set() for address in workers}
    owner = {pid: address for address, pid in workers.items()}
    for index, marker in enumerate(markers):
        for pid in pids_with_marker(marker, bwrap=bwrap):
            address = next((owner[p] for p in _ancestors(pid) if p in owner), None)
            if address is not None:
                found[address].add(pid if bwrap else index)
    return found


def _gated_jobs(gate_dir: Path, markers: list[str]) -> list[Job]:
    """One job per marker, each waiting for its gate file in ``gate_dir``."""
    return [
        Job(id=f"job-{i}", code=gated(gate_dir / f"gate-{i}"), args=(marker,))
        for i, marker in enumerate(markers)
    ]


def _open_gates(gate_dir: Path, count: int) -> None:
    for i in range(count):
        (gate_dir / f"gate-{i}").touch()


def _consume(outcomes: Iterator[Outcome]) -> tuple[threading.Thread, list[Outcome]]:
    """A started thread that collects ``outcomes`` into the returned list."""
    collected: list[Outcome] = []
    thread = threading.Thread(target=lambda: collected.extend(outcomes), daemon=True)
    thread.start()
    return thread, collected


@pytest.fixture
def client() -> Iterator[Client]:
    """A client of a fresh two-worker LocalCluster (processes under nannies, two threads
    each, its HTTP server on a free port), closed whatever happens."""
    with local_cluster() as made:
        yield made


def _worker_pids(client: Client) -> dict[str, int]:
    return client.run(os.getpid)  # type: ignore[no-any-return]


def test_a_map_on_a_cluster_gives_each_job_its_outcome(client: Client) -> None:
    """Twenty jobs, as they end and in input order: one outcome per id, each right,
    counted on a tqdm bar, and the work done by Runners made in the worker processes,
    not by the caller."""
    jobs = [Job(id=i, code=f"print({i} * {i})") for i in range(19)] + [Job(code="print(361)")]
    bar = tqdm(total=len(jobs), file=io.StringIO())
    with Runner(max_concurrent=2) as runner:
        as_they_end = list(runner.map(jobs, client=client, progress=bar))
        in_order = list(runner.map(jobs, client=client, ordered=True))
        not_all_jobs: list[object] = [Job(code="print(1)"), "print(2)"]
        mixed = list(runner.map(not_all_jobs, client=client, ordered=True))  # type: ignore[arg-type]
        assert runner.running == 0
    assert sorted(o.id for o in as_they_end) == list(range(20))  # type: ignore[type-var]
    assert [o.id for o in in_order] == list(range(20))
    for outcomes in (as_they_end, in_order):
        assert all(
            o.result is not None and o.result.stdout == f"{o.id**2}\n".encode() for o in outcomes
        )  # type: ignore[operator]
    assert mixed[0].result is not None and mixed[0].result.stdout == b"1\n"
    assert (mixed[1].id, mixed[1].error_type) == (1, "TypeError")
    assert bar.n == 20
    assert bar.postfix == "OK=20"
    caps = client.run(lambda: [r.max_concurrent for r in worker_runners()])
    assert sum(len(made) for made in caps.values()) >= 1
    assert all(cap == [2] for cap in caps.values() if cap)


def _warm_gauges(client: Client) -> dict[str, list[tuple[int, int, int]]]:
    """Per worker: (warm, warm_ready, taken) of each of its Runners."""
    return client.run(  # type: ignore[no-any-return]
        lambda: [(r.warm, r.warm_ready, r._pool.taken if r._pool else 0) for r in worker_runners()]
    )


def test_a_warm_runner_keeps_warm_sandboxes_in_each_worker_that_runs_its_jobs(
    client: Client,
) -> None:
    """``Runner(warm=1)`` on the caller's side: each worker's Runner keeps one warm
    sandbox, and a job that finds it ready runs in it."""
    with Runner(warm=1, max_concurrent=1) as runner:
        first = list(runner.map((Job(id=n, code=f"print({n})") for n in range(4)), client=client))
        assert all(o.result is not None and o.result.stdout == f"{o.id}\n".encode() for o in first)
        deadline = time.monotonic() + slow(20)
        while True:
            gauges = _warm_gauges(client)
            made = [runner for runners in gauges.values() for runner in runners]
            assert made and all(warm == 1 for warm, _, _ in made), gauges
            if all(ready == 1 for _, ready, _ in made):
                break
            assert time.monotonic() < deadline, f"the workers' pools never refilled: {gauges}"
            time.sleep(0.05)
        taken_before = sum(taken for _, _, taken in made)
        second = list(runner.map([Job(id="again", code="print('warm')")], client=client))
    assert second[0].result is not None and second[0].result.stdout == b"warm\n"
    after = [runner for runners in _warm_gauges(client).values() for runner in runners]
    assert sum(taken for _, _, taken in after) == taken_before + 1


def test_each_worker_process_runs_its_jobs_under_its_own_cap(
    client: Client, world_readable_dir: Path
) -> None:
    """max_concurrent=1 on workers of two threads: each worker runs one sandbox at a time
    while a second task waits for its slot, and both workers run jobs at once."""
    base = unique_marker()
    markers = [f"{base}-{i}-" for i in range(6)]
    workers = _worker_pids(client)
    with Runner(max_concurrent=1, readable=[str(world_readable_dir)]) as runner:
        thread, outcomes = _consume(
            runner.map(_gated_jobs(world_readable_dir, markers), client=client)
        )
        try:
            seen_both = seen_waiting = False
            deadline = time.monotonic() + slow(20)
            while not (seen_both and seen_waiting):
                assert time.monotonic() < deadline, "no worker ever ran and queued at once"
                running = _sandboxes_by_worker(markers, workers)
                assert all(len(held) <= 1 for held in running.values()), running
                seen_both = seen_both or all(len(held) == 1 for held in running.values())
                gauges = client.run(lambda: [r.waiting for r in worker_runners()])
                seen_waiting = seen_waiting or any(sum(g) >= 1 for g in gauges.values())
                time.sleep(0.02)
        finally:
            _open_gates(world_readable_dir, len(markers))
        thread.join(slow(30))
    assert sorted(o.id for o in outcomes) == [f"job-{i}" for i in range(6)]
    assert all(o.result is not None and o.result.stdout == b"through\n" for o in outcomes)


def test_leaving_the_loop_kills_the_sandboxes_on_the_workers(
    client: Client, world_readable_dir: Path
) -> None:
    """A map of a thousand jobs, read lazily: no more than the window is read, and
    leaving the loop after the first outcome kills the sandboxes running on the workers
    (their gates never open; without the kill they would wait a minute)."""
    base = unique_marker()
    read = 0

    def jobs() -> Iterator[Job]:
        nonlocal read
        read += 1
        yield Job(code="print('first')")
        for i in range(999):
            read += 1
            yield Job(code=gated(world_readable_dir / "never"), args=(f"{base}-{i}-",))

    with Runner(max_concurrent=2, readable=[str(world_readable_dir)]) as runner:
        outcomes = runner.map(jobs(), client=client)
        for outcome in outcomes:
            assert outcome.result is not None and outcome.result.stdout == b"first\n"
            # Two per worker (its cap); each sandbox's program counted once (not its init).
            wait_until(lambda: len(running(base)) == 4, "4 sandboxed programs")
            break
        assert read <= WINDOW_PER_SLOT * 4
        outcomes.close()  # type: ignore[attr-defined]
        assert survivors(base, within=PROMPTLY) == []
    assert read <= WINDOW_PER_SLOT * 4


def _kill_a_worker_mid_batch(
    client: Client, gate_dir: Path, markers: list[str]
) -> tuple[list[Outcome], set[str]]:
    """Map gated jobs, SIGKILL one worker process once both run sandboxes, check that
    every process of its sandboxes ends before any gate opens, then open the gates and
    return the outcomes and the ids of the jobs that ran on the killed worker."""
    workers = _worker_pids(client)
    victim, other = sorted(workers)
    with Runner(max_concurrent=2, readable=[str(gate_dir)]) as runner:
        thread, outcomes = _consume(runner.map(_gated_jobs(gate_dir, markers), client=client))
        try:
            wait_until(
                lambda: all(_sandboxes_by_worker(markers, workers).values()),
                "sandboxes running on both workers",
            )
            doomed = _sandboxes_by_worker(markers, workers, bwrap=True)[victim]
            ran_there = {f"job-{i}" for i in _sandboxes_by_worker(markers, workers)[victim]}
            os.kill(workers[victim], signal.SIGKILL)
            wait_until(
                lambda: not any(_alive(pid) for pid in doomed),
                "the sandboxes of the killed worker to end",
                within=PROMPTLY,
            )
        finally:
            _open_gates(gate_dir, len(markers))
        thread.join(slow(30))
        assert not thread.is_alive()
    assert len(doomed) >= 3  # bwrap, the init and the program of at least one sandbox
    assert other in client.nthreads()
    return outcomes, ran_there


def test_a_killed_worker_leaves_no_sandbox_and_its_jobs_run_elsewhere_once(
    tmp_path: Path, world_readable_dir: Path
) -> None:
    """A scheduler and two workers (no nanny) started with Dask's command-line programs;
    one worker is killed with SIGKILL while its jobs run: none of its sandboxes survives,
    Dask runs its jobs on the other, and every job's outcome arrives exactly once."""
    base = unique_marker()
    markers = [f"{base}-{i}-" for i in range(8)]
    with _command_line_cluster(tmp_path) as client:
        outcomes, ran_there = _kill_a_worker_mid_batch(client, world_readable_dir, markers)
        assert len(client.nthreads()) == 1
    assert ran_there
    assert sorted(o.id for o in outcomes) == sorted(f"job-{i}" for i in range(8))  # type: ignore[type-var]
    assert all(o.result is not None and o.result.stdout == b"through\n" for o in outcomes)
    assert survivors(base) == []


def test_a_job_whose_workers_died_too_often_is_an_error_outcome(
    world_readable_dir: Path,
) -> None:
    """With Dask's allowed-failures at 0, the jobs of a worker (under a nanny) killed
    with SIGKILL end as KilledWorker error outcomes; the map goes on and the others
    succeed, one outcome per job, and the killed worker's sandboxes are gone."""
    base = unique_marker()
    markers = [f"{base}-{i}-" for i in range(8)]
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), local_cluster() as client:
        outcomes, ran_there = _kill_a_worker_mid_batch(client, world_readable_dir, markers)
    assert sorted(o.id for o in outcomes) == sorted(f"job-{i}" for i in range(8))  # type: ignore[type-var]
    by_id = {o.id: o for o in outcomes}
    assert ran_there
    assert all(by_id[job].error_type == "KilledWorker" for job in ran_there)
    for outcome in outcomes:
        assert outcome.error_type == "KilledWorker" or (
            outcome.result is not None and outcome.result.stdout == b"through\n"
        )
    assert any(outcome for outcome in outcomes)
    assert survivors(base) == []


@contextlib.contextmanager
def _command_line_cluster(
    tmp_path: Path, worker_env: dict[str, str] | None = None
) -> Iterator[Client]:
    """``dask scheduler`` on a free port of 127.0.0.1 and two ``dask worker`` of two
    threads without a nanny (in ``worker_env``, when given), from this interpreter's bin
    directory, and a client made by ``connect`` (what ``--scheduler`` calls); every
    process killed (its whole session) and reaped on leaving."""
    dask_program = str(Path(sys.executable).parent / "dask")
    scheduler_file = tmp_path / "scheduler.json"
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *argv: str, env: dict[str, str] | None = None) -> None:
        with open(tmp_path / f"{name}.log", "wb") as log:
            started.append(
                subprocess.Popen(
                    [dask_program, *argv],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        start(
            "scheduler",
            "scheduler",
            "--host=127.0.0.1",
            "--port=0",
            "--no-dashboard",
            f"--scheduler-file={scheduler_file}",
        )
        wait_until(lambda: _address_in(scheduler_file) is not None, "the scheduler's address")
        for number in range(2):
            start(
                f"worker-{number}",
                "worker",
                f"--scheduler-file={scheduler_file}",
                "--host=127.0.0.1",
                "--nthreads=2",
                "--no-nanny",
                "--no-dashboard",
                env=worker_env,
            )
        with connect(_address_in(scheduler_file)) as made:
            made.wait_for_workers(2, timeout=slow(30))
            yield made
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _address_in(scheduler_file: Path) -> Any:
    """The scheduler's address from its file, or None before it is written whole."""
    try:
        return json.loads(scheduler_file.read_text())["address"]
    except (OSError, ValueError, KeyError):
        return None


def test_dask_is_imported_only_for_a_map_with_a_client() -> None:
    """``import pysandbox``, a Runner and a local map import neither dask nor
    distributed, so the [dask] extra stays optional."""
    probe = (
        "import sys, pysandbox\n"
        "with pysandbox.Runner() as runner:\n"
        "    list(runner.map([pysandbox.Job(code='pass')]))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True)
    assert done.stdout == b"[]\n", done.stderr


def test_a_client_that_is_not_a_dask_client_is_refused() -> None:
    """``client`` is checked when ``map`` is called, before any job is read."""
    with (
        Runner() as runner,
        pytest.raises(TypeError, match=r"client must be a distributed\.Client"),
    ):
        runner.map([Job(code="pass")], client="tcp://127.0.0.1:8786")


def test_connect_checks_the_address_first() -> None:
    """``connect`` (for ``pysandbox batch --scheduler``) names a bad ``address``."""
    with pytest.raises(TypeError, match="address must be a str"):
        connect(8786)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="address must name a scheduler"):
        connect("")


# ---- pysandbox batch --scheduler ----------------------------------------------------


def _batch_jobs(path: Path, ids: list[str]) -> Path:
    """A jobs file: a good job per id, each printing its id, with a malformed line and a
    duplicate id among them (lines 3 and 5)."""
    lines = [json.dumps({"id": job_id, "python": f"print({job_id!r})"}) for job_id in ids]
    lines.insert(2, "not json")
    lines.insert(4, json.dumps({"id": ids[0], "python": "print('again')"}))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_batch_on_a_scheduler_runs_on_its_workers_answers_bad_lines_here_and_resumes(
    tmp_path: Path,
) -> None:
    """``pysandbox batch --scheduler`` on a scheduler and two workers started with Dask's
    command-line programs, from a caller whose PATH has no bwrap (so no job can have run
    in the caller): every job's output comes back from the workers, in the order of the
    lines with ``--ordered``; the malformed line and the duplicate id are error outcomes
    in their places, never run as jobs on a worker; and a rerun after lines were lost
    runs exactly the missing jobs."""
    ids = [f"job-{n}" for n in range(10)]
    jobs = _batch_jobs(tmp_path / "jobs.jsonl", ids)
    results = tmp_path / "results.jsonl"
    no_bwrap = {**os.environ, "PATH": str(tmp_path / "empty")}
    with _command_line_cluster(tmp_path) as client:
        address = client.scheduler.address
        batch = ("batch", str(jobs), "--out", str(results), "--scheduler", address)
        done = cli(*batch, "--ordered", env=no_bwrap)
        assert done.returncode == 0, done.stderr
        lines = result_lines(results)
        assert [line["id"] for line in lines] == [*ids[:2], 3, ids[2], ids[0], *ids[3:]]
        assert lines[2]["error_type"] == "JobLineError"
        assert lines[2]["error"] == "line 3: bad JSON: Expecting value, column 1"
        assert lines[4]["error_type"] == "DuplicateIdError"
        assert "stdout" not in lines[2] and "stdout" not in lines[4]
        good = [line for line in lines if "error" not in line]
        assert [line["stdout"] for line in good] == [f"{job_id}\n" for job_id in ids]
        assert "ERROR=2, OK=10" in summary(done)

        kept = results.read_text().splitlines(keepends=True)
        results.write_text("".join(kept[:2] + kept[5:9]))  # jobs 0, 1, 3..6 stay done
        again = cli(*batch, env=no_bwrap)
        assert again.returncode == 0, again.stderr
        assert summary(again).endswith("; 6 skipped, already in the results")
        assert "ERROR=2, OK=4" in summary(again)  # job-2, job-7..9 and the two bad lines
    final = result_lines(results)
    assert sorted(line["error_type"] for line in final if "error" in line) == [
        "DuplicateIdError",
        "JobLineError",
    ]
    ran = sorted((str(line["id"]), line["stdout"]) for line in final if "error" not in line)
    assert ran == sorted((job_id, f"{job_id}\n") for job_id in ids)  # each once


def test_batch_on_workers_that_cannot_start_a_sandbox_fails_before_opening_results(
    tmp_path: Path,
) -> None:
    """Workers whose PATH has no bwrap: the batch's probe on each worker fails, so it
    exits 125 naming a worker and the reason, and writes no RESULTS full of errors."""
    write_jobs(tmp_path / "jobs.jsonl", *({"argv": ["true"]} for _ in range(3)))
    no_bwrap = {**os.environ, "PATH": str(tmp_path / "empty")}
    with _command_line_cluster(tmp_path, worker_env=no_bwrap) as client:
        address = client.scheduler.address
        done = cli("batch", "jobs.jsonl", "--out", "r.jsonl", "--scheduler", address)
    assert done.returncode == 125, done.stderr
    error = done.stderr.decode()
    assert error.startswith(f"pysandbox: sandbox error: 2 of the 2 workers of {address} ")
    assert error.endswith("SandboxError: Cannot find the `bwrap` executable\n"), error
    assert not (tmp_path / "r.jsonl").exists()


def test_batch_with_an_unreachable_scheduler_fails_before_opening_results(
    tmp_path: Path,
) -> None:
    """No scheduler listens on the port: exit 125 with a message, and no RESULTS."""
    with socket.socket() as probe:  # a port of 127.0.0.1 that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    write_jobs(tmp_path / "jobs.jsonl", {"argv": ["true"]})
    address = f"tcp://127.0.0.1:{port}"
    done = cli("batch", "jobs.jsonl", "--out", "r.jsonl", "--scheduler", address)
    assert done.returncode == 125, done.stderr
    error = done.stderr.decode()
    assert error.startswith(
        f"pysandbox: sandbox error: cannot reach the Dask scheduler at {address}"
    )
    assert "Traceback" not in error
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("address", ["127.0.0.1", "tcp:/127.0.0.1:8786", "bogus://127.0.0.1:1"])
def test_batch_refuses_a_scheduler_address_without_a_host_and_port(
    tmp_path: Path, address: str
) -> None:
    write_jobs(tmp_path / "jobs.jsonl", {"argv": ["true"]})
    error = assert_usage_error(
        cli("batch", "jobs.jsonl", "--out", "r.jsonl", "--scheduler", address)
    )
    assert "argument --scheduler: " in error
    assert not (tmp_path / "r.jsonl").exists()
