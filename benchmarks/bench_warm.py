# SPDX-License-Identifier: MIT
"""Warm sandboxes against fresh ones and against starting Python with no sandbox at all.

Usage: python benchmarks/bench_warm.py [--quick] [--rounds N]

Three parts, each measured in the same run as its yardstick:

1. **Idle gaps.**  Every round, in an order that rotates, with a pause between calls (an
   agent's tool call, a notebook cell: the pool has refilled by the next call):

   * ``Runner(warm=1).eval_in_sandbox("print(1)")`` (the call's latency, seen by the
     caller; the Runner served that kind before, so a warm sandbox waits);
   * ``Runner(warm=1).run_python("print(1)")`` in the same way;
   * ``pysandbox.eval_in_sandbox("print(1)")``: a fresh sandbox;
   * ``python3 -I -c pass`` started by ``subprocess.run``: the interpreter alone, no
     sandbox (issue 12's yardstick; this machine's site-packages run a ``.pth`` file at
     every start, so the figure is what starting Python costs here);
   * ``python3 -I -S -c pass``: the same without ``site``, the interpreter's floor.

   Printed: median, p99 and the ratios; goals: a warm call's median at most 0.25x, and
   its p99 at most 1.0x, the median of ``python3 -I -c pass``.
2. **Back to back.**  Calls with no pause, one after the other from one thread, in
   alternating blocks: ``Runner(warm=2).eval_in_sandbox`` against fresh
   ``eval_in_sandbox``, and ``Runner(warm=2, template=Template(copies=True))
   .run_python`` (each warm sandbox a copy of one template sandbox) against fresh
   ``run_python``.  Goal: at least 2x the calls per second.
3. **Real traffic.**  A replay of calls that alternate between two kinds
   (``run_python`` with the Runner's limits, ``eval_in_sandbox`` with another memory
   limit) with a pause between calls, through ``Runner(warm=2)``; every ``run_python``
   call brings other input files, another environment variable and other arguments,
   as an agent's calls do: the share of calls that took a warm sandbox (goal: at least
   80 %), and the sandboxes the pool started (goal: at most the calls plus the pool's
   size).
4. **Memory of a waiting sandbox.**  A ``Runner(warm=4)`` once every interpreter waits:
   the proportional set size (PSS: each shared page split among its users) and the
   private memory (USS) of every process of the four sandboxes (bwrap, the init, the
   interpreter), summed and divided by four.  Goal: at most 12 MiB each.

Every call is checked (output, exit code), so a broken sandbox cannot look fast.  It is
a measurement, not a test: it exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from types import ModuleType

from measuring import percentile, print_latencies

import pysandbox
from pysandbox import Runner, Template

MIB = 2**20
PAUSE = 0.25
GOAL_MEDIAN = 0.25
GOAL_P99 = 1.0
GOAL_BACK_TO_BACK = 2.0
GOAL_MEMORY_MIB = 12.0


@dataclasses.dataclass(frozen=True)
class Settings:
    rounds: int
    block: int
    blocks: int


FULL = Settings(rounds=100, block=20, blocks=6)
QUICK = Settings(rounds=10, block=5, blocks=2)


def ready(runner: Runner, count: int = 1, limit: float = 60.0) -> None:
    """Wait (up to ``limit`` seconds) until ``count`` warm sandboxes wait."""
    deadline = time.monotonic() + limit
    while runner.warm_ready < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the warm pool did not refill")
        time.sleep(0.005)


def checked_eval(call: Callable[[str], pysandbox.ProcessOutput]) -> None:
    out = call("print(1)")
    if out.returncode != 0 or out.stdout != "1":
        raise RuntimeError(f"eval_in_sandbox failed: {out}")


def checked_run_python(runner: Runner | ModuleType) -> None:
    """``run_python("print(1)")`` through ``runner``, or fresh through the module."""
    result = runner.run_python("print(1)")
    if result.status is not pysandbox.Status.OK or result.stdout != b"1\n":
        raise RuntimeError(f"run_python failed: {result}")


def bare(*flags: str) -> Callable[[], None]:
    argv = [sys.executable, *flags, "-c", "pass"]

    def call() -> None:
        subprocess.run(argv, check=True)

    return call


def idle_gaps(settings: Settings) -> dict[str, list[float]]:
    """Part 1: each call after a pause, the order rotating every round."""
    with Runner(warm=1) as warm_eval, Runner(warm=1) as warm_run:
        checked_eval(warm_eval.eval_in_sandbox)  # this kind is what the pool keeps now
        checked_run_python(warm_run)
        calls: dict[str, tuple[Callable[[], None], Runner | None]] = {
            "warm eval_in_sandbox": (lambda: checked_eval(warm_eval.eval_in_sandbox), warm_eval),
            "warm run_python": (lambda: checked_run_python(warm_run), warm_run),
            "fresh eval_in_sandbox": (lambda: checked_eval(pysandbox.eval_in_sandbox), None),
            "python3 -I -c pass": (bare("-I"), None),
            "python3 -I -S -c pass": (bare("-I", "-S"), None),
        }
        names = list(calls)
        samples: dict[str, list[float]] = {name: [] for name in names}
        taken = {name: runner._pool.taken for name, (_, runner) in calls.items() if runner}  # type: ignore[union-attr]
        for round_ in range(settings.rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                call, runner = calls[name]
                time.sleep(PAUSE)
                if runner is not None:
                    ready(runner)
                started = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - started)
        for name, (_, runner) in calls.items():
            if runner is not None:
                used = runner._pool.taken - taken[name]  # type: ignore[union-attr]
                if used != settings.rounds:
                    raise RuntimeError(f"{name}: only {used} of the calls were warm")
    return samples


def back_to_back(settings: Settings) -> dict[str, float]:
    """Part 2: calls per second, no pause, in alternating blocks: warm
    ``eval_in_sandbox`` and ``run_python`` through copies of an empty template, each
    against the same call in fresh sandboxes."""
    elapsed = dict.fromkeys(("warm", "copies", "fresh eval", "fresh run_python"), 0.0)
    copies = Template(copies=True)
    with Runner(warm=2) as runner, Runner(warm=2, template=copies) as copier:
        checked_eval(runner.eval_in_sandbox)
        checked_run_python(copier)
        ready(runner, 1)
        ready(copier, 1)
        arms: tuple[tuple[str, Callable[[], None]], ...] = (
            ("warm", lambda: checked_eval(runner.eval_in_sandbox)),
            ("fresh eval", lambda: checked_eval(pysandbox.eval_in_sandbox)),
            ("copies", lambda: checked_run_python(copier)),
            ("fresh run_python", lambda: checked_run_python(pysandbox)),
        )
        for _ in range(settings.blocks):
            for kind, call in arms:
                started = time.perf_counter()
                for _ in range(settings.block):
                    call()
                elapsed[kind] += time.perf_counter() - started
    calls = settings.block * settings.blocks
    return {kind: calls / seconds for kind, seconds in elapsed.items()}


def two_kinds(calls: int) -> tuple[int, int, int]:
    """``calls`` calls of two kinds in turn through ``Runner(warm=2)``, ``PAUSE`` apart:
    (calls, taken warm, sandboxes started)."""
    with Runner(warm=2) as runner:
        ready(runner, 2)
        for number in range(calls):
            time.sleep(PAUSE)
            if number % 2:
                result = runner.run_python(
                    "import os, sys; print(open(sys.argv[1]).read(), os.environ['CALL'])",
                    args=[f"input-{number}.txt"],
                    files={f"input-{number}.txt": f"call {number}".encode()},
                    env={"CALL": str(number)},
                )
                if result.stdout != f"call {number} {number}\n".encode():
                    raise RuntimeError(f"run_python failed: {result}")
            else:
                checked_eval(lambda code: runner.eval_in_sandbox(code, mem_max_mb=200))
        pool = runner._pool
        assert pool is not None
        time.sleep(PAUSE)
        return calls, pool.taken, pool.started


def tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as children:
                todo += [int(child) for child in children.read().split()]
        except OSError:
            pass
    return found


def rollup(pid: int) -> tuple[int, int]:
    """(PSS, USS) of one process in bytes, from smaps_rollup."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as file:
        for line in file:
            parts = line.split()
            if len(parts) >= 3 and parts[1].isdigit():
                fields[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return fields["Pss"], fields["Private_Clean"] + fields["Private_Dirty"]


def waiting_memory(count: int = 4) -> tuple[float, float, int]:
    """Part 3: PSS and USS per waiting sandbox, in MiB, and the processes each has."""
    with Runner(warm=count) as runner:
        ready(runner, count)
        time.sleep(0.5)
        pids = [p for _, launched in runner._pool._ready for p in tree(launched._sandbox.pid)]  # type: ignore[union-attr]
        pss = uss = 0
        for pid in pids:
            one_pss, one_uss = rollup(pid)
            pss += one_pss
            uss += one_uss
    return pss / count / MIB, uss / count / MIB, len(pids) // count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, help="rounds of part 1")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    print(f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"load average before: {os.getloadavg()[0]:.2f}")

    samples = idle_gaps(settings)
    print(f"\n1. idle gaps ({settings.rounds} rounds, {PAUSE} s pause before each call), ms:")
    print_latencies(samples, 24)
    base = statistics.median(samples["python3 -I -c pass"])
    floor = statistics.median(samples["python3 -I -S -c pass"])
    for name in ("warm eval_in_sandbox", "warm run_python"):
        median, p99 = statistics.median(samples[name]), percentile(samples[name], 0.99)
        print(
            f"   {name}: median / python3 -I -c pass = {median / base:.2f} (goal <= "
            f"{GOAL_MEDIAN}), p99 / that median = {p99 / base:.2f} (goal <= {GOAL_P99}); "
            f"median / python3 -I -S -c pass = {median / floor:.2f}"
        )
    fresh = statistics.median(samples["fresh eval_in_sandbox"])
    warm = statistics.median(samples["warm eval_in_sandbox"])
    print(f"   fresh / warm eval_in_sandbox = {fresh / warm:.2f}")

    rates = back_to_back(settings)
    print(f"\n2. back to back ({settings.blocks} blocks of {settings.block} calls each):")
    for arm, yardstick in (("warm", "fresh eval"), ("copies", "fresh run_python")):
        print(
            f"   {arm} {rates[arm]:.1f} calls/s, {yardstick} {rates[yardstick]:.1f} calls/s: "
            f"{arm} / {yardstick} = {rates[arm] / rates[yardstick]:.2f} "
            f"(goal >= {GOAL_BACK_TO_BACK})"
        )

    calls, taken, started = two_kinds(settings.rounds)
    print(
        f"\n3. real traffic: two kinds in turn, other files, env and args each call, "
        f"{calls} calls, {PAUSE} s apart, Runner(warm=2):"
    )
    print(f"   warm: {taken / calls:.0%} (goal >= 80%); sandboxes started: {started}")
    print(f"   (goal <= calls + 2 = {calls + 2})")

    pss, uss, processes = waiting_memory()
    print("\n4. a waiting warm sandbox (4 waiting, each", processes, "processes):")
    print(f"   PSS {pss:.1f} MiB, USS {uss:.1f} MiB per sandbox (goal <= {GOAL_MEMORY_MIB} MiB)")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
