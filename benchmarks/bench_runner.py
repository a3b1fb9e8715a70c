# SPDX-License-Identifier: MIT
"""Many short jobs: Runner.map against a hand-written thread pool, the baseline and a cluster.

Usage: python benchmarks/bench_runner.py [--quick] [--jobs N] [--rounds N]

The batch is 1,000 jobs (``--quick``: 40), mixed in a fixed rotation so every stretch of
the batch has the same mix: half ``print(1)``, a quarter burning 50 ms of CPU time
(measured by ``time.process_time``, so the work is the same however loaded the machine
is), a quarter writing 1 MiB to stdout.  The same jobs go through:

* ``Runner().map(jobs)``: the default Runner (``max_concurrent`` = the number of CPUs),
  and ``Runner(max_concurrent=N).map(jobs)`` for the loops' other worker counts N, so the
  map and a loop can be compared with as many sandboxes at once;
* a plain hand-written ``concurrent.futures.ThreadPoolExecutor`` loop over
  ``pysandbox.run_python``, the way a user writes it without a Runner: every job
  submitted at once, the results taken with ``as_completed``; with the worker counts a
  user would try (2, 4, 8 and ``os.cpu_count()``), each measured and the best by
  throughput reported as "best loop";
* the same loop over ``benchmarks/baseline.py``'s ``eval_in_sandbox`` (the pure-Python
  reference: ``prlimit`` + ``bwrap`` through ``subprocess``), at the same worker counts,
  the best of them being the baseline of the ratios;
* ``Runner(max_concurrent=N, warm=N).map(jobs)`` for the default cap and the largest
  loop count: the same map with ``N`` warm sandboxes (docs/services.rst, *Warm sandboxes*), whose
  start-up overlaps the other jobs' runs;
* ``Runner().map(jobs, client=client)`` on a ``distributed.LocalCluster`` of two worker
  processes of one thread each, started before the clock and closed after.

Every outcome is checked (status OK, the expected stdout), so a failing run cannot look
fast.  The methods run in rounds (``--rounds``, default 2; 1 with ``--quick``), their
order rotating every round; a method's throughput is its jobs over its total time, and
its latencies are pooled over the rounds.

Latency of a job: from the moment the job is handed to the engine to the moment the
caller's loop holds its outcome.  For a map, the job is handed over when the map pulls it
from the jobs iterable (a generator that stamps the time of each ``next``); for a loop,
when ``pool.submit`` is called for it.  Both include every wait the engine imposes on the
job: the map's read-ahead window and slot wait (``Result.queued_time``), the executor's
queue, and the time the caller's loop takes to come back to the outcome.  What neither
includes is time the job spent in the caller's own iterable before the engine asked for
it: a map reads jobs only a window ahead (twice its threads), while the plain loop takes
the whole batch at once, so its queue, and its latency, grows with the batch.  That is
the difference a service sees.  The run itself, ``Result.wall_time`` (spawn to reap), is
reported too (p99 over the pysandbox methods), so a method that only looked good by
starting fewer sandboxes at once would show it there.

Memory: a fresh child process (this script with ``--rss-child``) runs the batch through
``Runner().map`` alone and reads its own ``VmRSS`` after the first tenth of the jobs
(100 of 1,000) and after all of them; the goal is a ratio within 1.10.

The script prints throughput (jobs/s), p50 and p99 latency per method, the ratios to
the baseline measured in the same run, the share of the machine's CPU time left idle
while each method ran (``/proc/stat``), and the goal of issue 11 (the map at least
matches the best loop's throughput with a lower p99; flat memory), for the default map
and for the map with as many sandboxes at once as the best loop.  Read the idle column
first: on a machine that other work keeps busy, a method with more sandboxes at once
gets a larger share of the CPUs, so it wins on throughput by taking CPU time from the
other work, not by running sandboxes faster; on an idle machine every method with at
least as many sandboxes as CPUs keeps the CPUs busy.  It is a measurement,
not a test: it exits 0 whatever the figures, and fails only if a call fails or returns
something else.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator

import baseline
from measuring import percentile

import pysandbox
from pysandbox import Job, Outcome, Runner, Status

MIB = 2**20
PRINT_CODE = "print(1)"
CPU_CODE = (
    "import time\nend = time.process_time() + 0.05\nwhile time.process_time() < end:\n    pass\n"
)
WRITE_CODE = f"import sys; sys.stdout.buffer.write(b'x' * {MIB})"
#: One cycle of the mix: half print(1), a quarter CPU-bound, a quarter 1 MiB out.
MIX = (PRINT_CODE, CPU_CODE, PRINT_CODE, WRITE_CODE)
EXPECTED = {PRINT_CODE: b"1\n", CPU_CODE: b"", WRITE_CODE: b"x" * MIB}
#: The worker counts a user would try for a hand-written pool (plus os.cpu_count()).
LOOP_WORKERS = (2, 4, 8)
#: The baseline's output cap: the 1 MiB jobs must fit (it counts KiB).
BASELINE_IO_KB = 2 * 1024
CLUSTER = "Runner.map on 2 Dask workers"


#: How a method runs a batch (the code of each job) and adds what it measured.
Method = Callable[[list[str], "Figures"], None]


@dataclasses.dataclass(frozen=True)
class Settings:
    jobs: int
    rounds: int


FULL = Settings(jobs=1000, rounds=2)
QUICK = Settings(jobs=40, rounds=1)


@dataclasses.dataclass
class Figures:
    """What a method measured over the rounds."""

    jobs: int = 0
    seconds: float = 0.0
    latencies: list[float] = dataclasses.field(default_factory=list)
    wall_times: list[float] = dataclasses.field(default_factory=list)

    #: The machine's CPU time (all CPUs, in clock ticks) idle and in all, while it ran.
    idle_ticks: int = 0
    all_ticks: int = 0

    def add_ticks(self, before: tuple[int, int], after: tuple[int, int]) -> None:
        self.idle_ticks += after[0] - before[0]
        self.all_ticks += after[1] - before[1]

    @property
    def idle(self) -> float:
        """The share of the machine's CPU time left idle while this method ran: near 0,
        the method had the CPUs busy (or other work on the machine did)."""
        return self.idle_ticks / self.all_ticks if self.all_ticks else 0.0

    @property
    def throughput(self) -> float:
        return self.jobs / self.seconds

    def latency(self, quantile: float) -> float:
        return percentile(self.latencies, quantile)


def codes(count: int) -> list[str]:
    return [MIX[i % len(MIX)] for i in range(count)]


def check_result(index: int, code: str, result: pysandbox.Result) -> None:
    if result.status is not Status.OK or result.stdout != EXPECTED[code]:
        raise RuntimeError(
            f"job {index} ({code.splitlines()[0]!r}) gave {result.status.name}, "
            f"stdout {result.stdout[:60]!r}, stderr {result.stderr[-300:]!r}"
        )


def check_outcome(code_of: list[str], outcome: Outcome) -> pysandbox.Result:
    assert isinstance(outcome.id, int)
    if outcome.result is None:
        raise RuntimeError(f"job {outcome.id} failed: {outcome.error_type}: {outcome.error}")
    check_result(outcome.id, code_of[outcome.id], outcome.result)
    return outcome.result


def stamped_jobs(code_of: list[str], handed: dict[int, float]) -> Iterator[Job]:
    """The jobs, each stamped in ``handed`` when the map pulls it."""
    for index, code in enumerate(code_of):
        handed[index] = time.perf_counter()
        yield Job(id=index, code=code)


def through_map(
    code_of: list[str], figures: Figures, *, runner: Runner, client: object = None
) -> None:
    handed: dict[int, float] = {}
    start = time.perf_counter()
    for outcome in runner.map(stamped_jobs(code_of, handed), client=client):
        now = time.perf_counter()
        result = check_outcome(code_of, outcome)
        assert isinstance(outcome.id, int)
        figures.latencies.append(now - handed.pop(outcome.id))
        figures.wall_times.append(result.wall_time)
    figures.seconds += time.perf_counter() - start
    figures.jobs += len(code_of)


def run_python_job(index: int, code: str) -> pysandbox.Result:
    result = pysandbox.run_python(code)
    check_result(index, code, result)
    return result


def baseline_job(index: int, code: str) -> None:
    out = baseline.eval_in_sandbox(code, io_max_kb=BASELINE_IO_KB)
    expected = EXPECTED[code].decode().strip()
    if out.returncode != 0 or out.stdout != expected:
        raise RuntimeError(
            f"baseline job {index} ({code.splitlines()[0]!r}) exited {out.returncode}, "
            f"stdout {out.stdout[:60]!r}, stderr {out.stderr[-300:]!r}"
        )


def through_loop(
    code_of: list[str],
    figures: Figures,
    *,
    workers: int,
    call: Callable[[int, str], pysandbox.Result | None],
) -> None:
    """The plain loop: every job submitted at once, the results as they complete."""
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        handed: dict[concurrent.futures.Future[pysandbox.Result | None], float] = {}
        for index, code in enumerate(code_of):
            handed[pool.submit(call, index, code)] = time.perf_counter()
        for future in concurrent.futures.as_completed(handed):
            result = future.result()
            figures.latencies.append(time.perf_counter() - handed[future])
            if result is not None:
                figures.wall_times.append(result.wall_time)
    figures.seconds += time.perf_counter() - start
    figures.jobs += len(code_of)


@contextlib.contextmanager
def local_cluster() -> Iterator[object]:
    """A client of a two-process LocalCluster of one thread each on 127.0.0.1."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2, timeout=60)
        yield client


def cpu_ticks() -> tuple[int, int]:
    """The machine's idle (idle + iowait) and total CPU clock ticks (``/proc/stat``)."""
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(field) for field in stat.readline().split()[1:]]
    return values[3] + values[4], sum(values)


def vm_rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def rss_child(count: int) -> None:
    """``--rss-child``: the batch through ``Runner().map`` alone; prints the RSS (KiB)
    after the first tenth of the jobs and after all of them, as JSON."""
    code_of = codes(count)
    early = max(count // 10, 1)
    seen = 0
    figures: dict[str, int] = {}
    with Runner() as runner:
        for outcome in runner.map(Job(id=i, code=code) for i, code in enumerate(code_of)):
            check_outcome(code_of, outcome)
            seen += 1
            if seen == early:
                figures["early"] = vm_rss_kib()
        figures["late"] = vm_rss_kib()
    print(json.dumps({"early_jobs": early, "late_jobs": seen, **figures}))


def measure_rss(count: int) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--rss-child", str(count)],
        capture_output=True,
        check=True,
        text=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def rotated(items: list[str], by: int) -> list[str]:
    by %= len(items)
    return items[by:] + items[:by]


def loop_counts() -> list[int]:
    return sorted({*LOOP_WORKERS, os.cpu_count() or 1})


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few jobs, one round")
    parser.add_argument("--jobs", type=int, help="jobs per batch (default 1000; quick: 40)")
    parser.add_argument("--rounds", type=int, help="rounds of every method (default 2)")
    parser.add_argument("--rss-child", type=int, metavar="N", help=argparse.SUPPRESS)
    options = parser.parse_args(None if argv is None else list(argv))
    if options.rss_child is not None:
        rss_child(options.rss_child)
        return 0
    settings = QUICK if options.quick else FULL
    settings = dataclasses.replace(
        settings,
        jobs=options.jobs or settings.jobs,
        rounds=options.rounds or settings.rounds,
    )
    code_of = codes(settings.jobs)
    print(
        f"{settings.jobs} jobs (half print(1), a quarter 50 ms of CPU, a quarter 1 MiB out) "
        f"x {settings.rounds} round(s); {os.cpu_count()} CPUs; Python "
        f"{platform.python_version()}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    figures: dict[str, Figures] = {}
    methods: dict[str, Method] = {}
    default_cap = os.cpu_count() or 1
    with contextlib.ExitStack() as stack:
        runners = {cap: stack.enter_context(Runner(max_concurrent=cap)) for cap in loop_counts()}
        runners[default_cap] = stack.enter_context(Runner())  # the default: a cap of CPUs
        methods["Runner.map"] = lambda c, f: through_map(c, f, runner=runners[default_cap])
        for cap in loop_counts():
            if cap != default_cap:
                methods[f"Runner(max_concurrent={cap}).map"] = lambda c, f, r=runners[cap]: (
                    through_map(c, f, runner=r)
                )
        for cap in sorted({default_cap, max(loop_counts())}):
            warm = stack.enter_context(Runner(max_concurrent=cap, warm=cap))
            methods[f"Runner(max_concurrent={cap}, warm={cap}).map"] = lambda c, f, r=warm: (
                through_map(c, f, runner=r)
            )
        for workers in loop_counts():
            methods[f"loop run_python x{workers}"] = lambda c, f, w=workers: through_loop(
                c, f, workers=w, call=run_python_job
            )
            methods[f"loop baseline x{workers}"] = lambda c, f, w=workers: through_loop(
                c, f, workers=w, call=baseline_job
            )
        client = stack.enter_context(local_cluster())
        methods[CLUSTER] = lambda c, f: through_map(
            c, f, runner=runners[default_cap], client=client
        )
        for name, method in methods.items():  # warm-up: imports, the workers' Runners
            method(codes(len(MIX)), Figures())
            figures[name] = Figures()
        names = list(methods)
        for round_number in range(settings.rounds):
            for name in rotated(names, round_number):
                before = cpu_ticks()
                methods[name](code_of, figures[name])
                figures[name].add_ticks(before, cpu_ticks())
                print(f"  round {round_number + 1}: {name} done", flush=True)
    rss = measure_rss(settings.jobs)
    print(f"load at the end {os.getloadavg()[0]:.2f}")
    report(figures, rss)
    return 0


def best(figures: dict[str, Figures], prefix: str) -> tuple[str, Figures]:
    name = max((n for n in figures if n.startswith(prefix)), key=lambda n: figures[n].throughput)
    return name, figures[name]


def map_at(figures: dict[str, Figures], cap: int) -> tuple[str, Figures]:
    """The local map with ``cap`` sandboxes at once."""
    if cap == (os.cpu_count() or 1):
        return "Runner.map", figures["Runner.map"]
    name = f"Runner(max_concurrent={cap}).map"
    return name, figures[name]


def goal_line(label: str, mapped: Figures, loop_name: str, loop: Figures) -> str:
    throughput = mapped.throughput / loop.throughput
    p99 = mapped.latency(0.99) / loop.latency(0.99)
    met = "met" if throughput >= 1 and p99 < 1 else "NOT met"
    return (
        f"{label} / {loop_name}: throughput {throughput:.2f} (goal >= 1), "
        f"p99 {p99:.2f} (goal < 1): {met}"
    )


def report(figures: dict[str, Figures], rss: dict[str, int]) -> None:
    base_name, base = best(figures, "loop baseline")
    loop_name, loop = best(figures, "loop run_python")
    print()
    print(f"baseline: {base_name} (the best baseline loop)")
    header = (
        f"{'method':<32} {'jobs/s':>7} {'x base':>7} {'p50 s':>7} {'p99 s':>7} "
        f"{'x base':>7} {'wall p99':>8} {'idle':>5}"
    )
    print(header)
    print("-" * len(header))
    for name, fig in figures.items():
        wall = f"{percentile(fig.wall_times, 0.99):.3f}" if fig.wall_times else "n/a"
        print(
            f"{name:<32} {fig.throughput:>7.1f} {fig.throughput / base.throughput:>7.2f} "
            f"{fig.latency(0.5):>7.3f} {fig.latency(0.99):>7.3f} "
            f"{fig.latency(0.99) / base.latency(0.99):>7.2f} {wall:>8} {fig.idle:>5.0%}"
        )
    ratio = rss["late"] / rss["early"]
    print()
    print(
        f"host RSS of Runner.map alone: {rss['early']} KiB after {rss['early_jobs']} jobs, "
        f"{rss['late']} KiB after {rss['late_jobs']}: ratio {ratio:.3f} (goal <= 1.10: "
        f"{'met' if ratio <= 1.10 else 'NOT met'})"
    )
    print(goal_line("Runner.map", figures["Runner.map"], f"the best loop ({loop_name})", loop))
    workers = int(loop_name.rsplit("x", 1)[1])
    same_name, same = map_at(figures, workers)
    print(goal_line(same_name, same, f"{loop_name} (as many sandboxes at once)", loop))
    warm_name, warm = best(figures, "Runner(max_concurrent=")
    if "warm" in warm_name:
        print(goal_line(warm_name, warm, f"the best loop ({loop_name})", loop))


if __name__ == "__main__":
    sys.exit(main())
