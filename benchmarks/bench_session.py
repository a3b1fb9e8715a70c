# SPDX-License-Identifier: MIT
"""What a call in a live ``Session`` costs, against starting Python, in one run.

Usage: .venv/bin/python benchmarks/bench_session.py [--quick]

Times, side by side, ``python3 -I -c pass`` (the baseline) and a trivial call (``x = 1``
then ``print(x)``, alternately) in an empty session and in one holding 500 MiB of
Python objects, and prints issue 21's goals next to the figures:

* a trivial call at most 0.1x the baseline at the median and 0.3x at p99, each call
  right after a run of the baseline, as an agent's calls come with time between them;
  and, with no goal, calls back to back (each right after the one before: the call's
  process for the next call, a fork of the session's state, is made once a call is
  over, so a call that comes at once waits for that fork);
* with 500 MiB of objects, at most 5 ms more than with an empty session (median), with
  the baseline's run between two calls, and with 0.1 s between them: after each call a
  large session frees its previous copy and forks the next call's process, which takes
  milliseconds of CPU per 100 MiB and delays a call that comes sooner;
* ``while True: pass`` with ``wall_time=1`` returns within 1.1 s and the next call sees
  every earlier variable intact, 100 times of 100 (``--quick``: 5);
* a waiting session costs at most 12 MiB of host memory beyond its interpreter's own:
  the caller's growth per session plus the private memory of bwrap, the init, the
  keeper and the next call's spare process (the state process, the interpreter, is the
  session's own).

And ``Runner.session()`` from a warm session (``Runner(warm_sessions=1)``) against a
cold start (a Runner without warm sessions), alternately, each time with the pool
refilled and the previous session closed before the next is timed; the ratio of the
medians is printed (no goal: the figure says what a warm session saves).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from measuring import interleaved, loadavg, percentile

from pysandbox import Limits, Runner, Session

KEEPER_MARK = b"/.pysandbox-session/keeper.py"
#: 500 MiB of objects: half a million 1 KiB bytearrays (each ~1.1 KiB with its header).
BIG_STATE = "blob = [bytearray(1024) for _ in range(470 * 1024)]\nlen(blob)"


def python_pass() -> Callable[[], None]:
    argv = [sys.executable, "-I", "-c", "pass"]
    return lambda: subprocess.run(argv, check=True)  # type: ignore[return-value]


def trivial_calls(session: Session) -> Callable[[], None]:
    """Alternately ``x = 1`` and ``print(x)``; raises unless each does what it should."""
    turn = [0]

    def call() -> None:
        turn[0] += 1
        if turn[0] % 2:
            result = session.run("x = 1")
            ok = result.committed
        else:
            result = session.run("print(x)")
            ok = result.stdout == b"1\n"
        if not ok:
            raise RuntimeError(f"a trivial call failed: {result}")

    return call


def spaced_calls(call: Callable[[], None], count: int, gap: float) -> list[float]:
    """Wall times of ``count`` calls with ``gap`` seconds of idleness before each (an
    agent's calls come seconds apart: what a large session frees and copies after a
    call is then done before the next one; 0: back to back)."""
    times = []
    for _ in range(count):
        time.sleep(gap)
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def rss_kib(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def private_kib(pid: int) -> int:
    """Private (not shared) resident memory of ``pid``."""
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as smaps:
        for line in smaps:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total


def keeper_pids() -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    if KEEPER_MARK in cmdline.read():
                        found.add(int(name))
            except OSError:
                continue
    return found


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return int(stat.read().rsplit(b")", 1)[1].split()[1])


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(child) for child in children.read().split()]


def session_overhead_kib(keeper: int) -> int:
    """Private memory of a session's processes but its state (the interpreter itself):
    bwrap and the init above the keeper, the keeper, and the state's spare below."""
    total, pid = 0, keeper
    while pid not in (0, 1, os.getpid()):
        total += private_kib(pid)
        pid = parent_of(pid)
    for state in children_of(keeper):
        total += sum(private_kib(spare) for spare in children_of(state))
    return total


def waiting_cost(count: int) -> tuple[float, float]:
    """MiB per waiting session: the caller's growth, and the private memory of the
    session's processes but its interpreter (bwrap, the init, the keeper, the spare)."""
    gc.collect()
    before_pids = keeper_pids()
    before = rss_kib()
    sessions = [Session() for _ in range(count)]
    for session in sessions:
        session.run("x = 1")
    time.sleep(0.5)  # the spares' warm-up
    gc.collect()
    caller = (rss_kib() - before) / count / 1024
    keepers = keeper_pids() - before_pids
    processes = statistics.median(session_overhead_kib(pid) for pid in keepers) / 1024
    for session in sessions:
        session.close()
    return caller, processes


def rollbacks(times: int) -> tuple[int, float]:
    """How many of ``times`` infinite loops with ``wall_time=1`` came back within 1.1 s
    with the state intact, and the slowest."""
    good, slowest = 0, 0.0
    with Session(limits=Limits(wall_time=1, cpu_time=30), cpu_budget=10 * times) as session:
        session.run("kept = list(range(100))\nname = 'intact'")
        for _ in range(times):
            started = time.perf_counter()
            result = session.run("kept.clear()\nname = None\nwhile True: pass")
            elapsed = time.perf_counter() - started
            slowest = max(slowest, elapsed)
            after = session.run("(sum(kept), name)")
            if result.rolled_back and elapsed <= 1.1 and after.value == "(4950, 'intact')":
                good += 1
    return good, slowest


def session_starts(rounds: int) -> tuple[list[float], list[float]]:
    """Wall times of ``Runner.session()``: from a warm session, and started cold."""
    warm, cold = Runner(warm_sessions=1), Runner()

    def settle(_: int, session: Session) -> None:
        """Check the session works, close it, and wait for the pool to refill."""
        if session.run("6 * 7").value != "42":
            raise RuntimeError("a session from the Runner failed")
        session.close()
        deadline = time.monotonic() + 30
        while warm.warm_sessions_ready < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the warm session did not refill")
            time.sleep(0.005)

    try:
        samples = interleaved([warm.session, cold.session], warmup=2, rounds=rounds, check=settle)
    finally:
        warm.close()
        cold.close()
    return samples[0], samples[1]


def print_session_starts(rounds: int) -> None:
    warm, cold = session_starts(rounds)
    print()
    print(f"{f'Runner.session(), {rounds} starts each [ms]':<40} {'median':>8} {'p99':>8}")
    print("-" * 58)
    for label, values in (("warm (warm_sessions=1)", warm), ("cold", cold)):
        median, p99 = statistics.median(values) * 1e3, percentile(values, 0.99) * 1e3
        print(f"{label:<40} {median:>8.2f} {p99:>8.2f}")
    ratio = statistics.median(warm) / statistics.median(cold)
    print(f"{'warm / cold, median':<40} {ratio:>8.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args(argv)
    warmup, rounds, loops = (2, 20, 5) if args.quick else (20, 400, 100)
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:  {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"loadavg: {loadavg()} (other work on the machine skews the figures)")
    with Session(limits=Limits(wall_time=10)) as empty:
        first = interleaved(
            [python_pass(), trivial_calls(empty)], warmup=warmup, rounds=rounds, rotate=False
        )
        rushed = spaced_calls(trivial_calls(empty), rounds, gap=0.0)
        with Session(limits=Limits(memory=2 * 2**30, wall_time=60, cpu_time=30)) as big:
            loaded = big.run(BIG_STATE)
            if loaded.value != str(470 * 1024):
                raise SystemExit(f"could not fill the big session: {loaded}")
            second = interleaved(
                [python_pass(), trivial_calls(big)], warmup=warmup, rounds=rounds, rotate=False
            )
            spaced = spaced_calls(trivial_calls(big), max(10, rounds // 8), gap=0.1)
    labels = [
        "python3 -I -c pass (baseline)",
        "trivial call, empty session",
        "python3 -I -c pass (2nd)",
        "trivial call, 500 MiB session",
        "trivial calls back to back, empty",
    ]
    print()
    print("The baseline against an empty session, then against the 500 MiB one: each call")
    print("of a session comes after the baseline's run, a gap as between an agent's calls.")
    print(f"{f'wall time, {rounds} runs each [ms]':<34} {'median':>8} {'p99':>8}")
    print("-" * 52)
    for label, values in zip(labels, [*first, *second, rushed]):
        median, p99 = statistics.median(values) * 1e3, percentile(values, 0.99) * 1e3
        print(f"{label:<34} {median:>8.2f} {p99:>8.2f}")
    baseline = statistics.median(first[0])
    print()
    print(f"{'goal':<52} {'measured':>9} {'goal':>6}")
    print("-" * 69)
    print(
        f"{'trivial call / baseline, median':<52} "
        f"{statistics.median(first[1]) / baseline:>9.3f} {0.1:>6.2f}"
    )
    print(
        f"{'trivial call p99 / baseline median':<52} "
        f"{percentile(first[1], 0.99) / baseline:>9.3f} {0.3:>6.2f}"
    )
    print(
        f"{'  back to back / baseline, median (no goal)':<52} "
        f"{statistics.median(rushed) / baseline:>9.3f}"
    )
    extra = (statistics.median(second[1]) - statistics.median(first[1])) * 1e3
    print(f"{'500 MiB session minus empty, median [ms]':<52} {extra:>9.2f} {5.0:>6.1f}")
    extra = (statistics.median(spaced) - statistics.median(first[1])) * 1e3
    print(f"{'  the same, 0.1 s between its calls [ms]':<52} {extra:>9.2f} {5.0:>6.1f}")
    good, slowest = rollbacks(loops)
    print(f"{f'wall_time=1 loops rolled back within 1.1 s, of {loops}':<52} {good:>9} {loops:>6}")
    print(f"{'  the slowest of them [s]':<52} {slowest:>9.3f}")
    caller, keeper = waiting_cost(5)
    print(f"{'waiting session: caller growth [MiB]':<52} {caller:>9.2f}")
    print(f"{'waiting session: bwrap, init, keeper, spare [MiB]':<52} {keeper:>9.2f}")
    print(f"{'waiting session: both [MiB]':<52} {caller + keeper:>9.2f} {12:>6}")
    print_session_starts(10 if args.quick else 100)
    print()
    print(f"loadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
