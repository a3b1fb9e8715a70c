# SPDX-License-Identifier: MIT
"""Templates: a job whose imports are heavy, through a template's warm sandboxes against
the same job in fresh sandboxes, measured side by side in one run.

Usage: python benchmarks/bench_template.py [--quick] [--rounds N] [--jobs N]

The job is ``import numpy, pandas; print(1)`` when the interpreter running this has
numpy and pandas (the sandbox runs the caller's interpreter); else a stand-in made of
heavy standard modules (``asyncio``, ``email``, ``http.client``, ``decimal``,
``unittest``...), said in the output.

1. **Idle gaps.**  Each round, in an order that rotates, with a pause between calls:
   the job through ``Runner(warm=1, template=Template(imports=MODULES))`` (a warm
   sandbox waits, its set-up done), the job in a fresh sandbox (``run_python``), and
   ``python3 -I -c pass``.  Goals: the template's median at most 15 ms and at most
   0.05x the fresh job's.
2. **A batch.**  ``--jobs`` jobs through ``Runner.map`` with two slots: with the
   template's warm pool (``warm=2``) against fresh sandboxes, jobs per second, every
   verdict checked.  Each template sandbox still starts an interpreter and runs the
   set-up (the pool starts them one at a time, after a call has returned): copies of a
   template (a fork after its set-up) are what would make this fast, and are not built
   yet.
3. **Memory.**  The proportional set size of a waiting template sandbox (bwrap, the
   init, the interpreter with the modules loaded).

Every call is checked, so a broken sandbox cannot look fast.  A measurement, not a
test: it exits 0 whatever the figures are.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from bench_warm import ready, rollup, tree
from measuring import print_latencies

import pysandbox
from pysandbox import Job, Runner, Template

PAUSE = 0.25
GOAL_MS = 15.0
GOAL_RATIO = 0.05
STAND_IN = ["asyncio", "email.mime.multipart", "http.client", "decimal", "unittest", "json"]


def modules() -> list[str]:
    """numpy and pandas where this interpreter has them, else the stand-in."""
    if all(importlib.util.find_spec(name) for name in ("numpy", "pandas")):
        return ["numpy", "pandas"]
    return STAND_IN


def job_code(names: list[str]) -> str:
    return f"import {', '.join(names)}\nprint(1)\n"


def checked(result: pysandbox.Result) -> None:
    if result.status is not pysandbox.Status.OK or result.stdout != b"1\n":
        raise RuntimeError(f"the job failed: {result}")


def idle_gaps(names: list[str], rounds: int) -> dict[str, list[float]]:
    """Part 1."""
    code = job_code(names)
    limits = pysandbox.Limits(memory=1024 * 2**20, cpu_time=20, wall_time=60)
    with Runner(warm=1, template=Template(imports=names), limits=limits) as runner:
        ready(runner)
        calls: dict[str, Callable[[], None]] = {
            "template": lambda: checked(runner.run_python(code)),
            "fresh": lambda: checked(pysandbox.run_python(code, limits=limits)),
            "python3 -I -c pass": lambda: subprocess.run(
                [sys.executable, "-I", "-c", "pass"], check=True
            ),
        }
        names_ = list(calls)
        samples: dict[str, list[float]] = {name: [] for name in names_}
        pool = runner._pool
        assert pool is not None
        taken = pool.taken
        for round_ in range(rounds):
            shift = round_ % len(names_)
            for name in names_[shift:] + names_[:shift]:
                time.sleep(PAUSE)
                if name == "template":
                    ready(runner)
                started = time.perf_counter()
                calls[name]()
                samples[name].append(time.perf_counter() - started)
        if pool.taken - taken != rounds:
            raise RuntimeError("a template call did not take a warm sandbox")
    return samples


def batch(names: list[str], jobs: int) -> dict[str, float]:
    """Part 2: jobs per second through ``Runner.map``, with and without the template."""
    code = job_code(names)
    limits = pysandbox.Limits(memory=1024 * 2**20, cpu_time=20, wall_time=60)
    rates = {}
    for kind in ("template", "fresh"):
        options = {"warm": 2, "template": Template(imports=names)} if kind == "template" else {}
        with Runner(max_concurrent=2, limits=limits, **options) as runner:  # type: ignore[arg-type]
            if kind == "template":
                ready(runner, 2)
            started = time.perf_counter()
            outcomes = list(runner.map(Job(code=code) for _ in range(jobs)))
            elapsed = time.perf_counter() - started
        for outcome in outcomes:
            if outcome.result is None:
                raise RuntimeError(f"a job failed: {outcome}")
            checked(outcome.result)
        rates[kind] = jobs / elapsed
    return rates


def waiting_memory(names: list[str]) -> float:
    """Part 3: PSS of one waiting template sandbox, MiB."""
    limits = pysandbox.Limits(memory=1024 * 2**20)
    with Runner(warm=2, template=Template(imports=names), limits=limits) as runner:
        ready(runner, 2)
        time.sleep(0.5)
        pool = runner._pool
        assert pool is not None
        pids = [pid for _, launched in pool._ready for pid in tree(launched._sandbox.pid)]
        return sum(rollup(pid)[0] for pid in pids) / 2 / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, help="rounds of part 1 (default 40)")
    parser.add_argument("--jobs", type=int, help="jobs of part 2 (default 60)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (4 if args.quick else 40)
    jobs = args.jobs or (6 if args.quick else 60)
    names = modules()
    print(f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"the job: import {', '.join(names)}; print(1)")
    print(f"load average before: {os.getloadavg()[0]:.2f}")

    samples = idle_gaps(names, rounds)
    print(f"\n1. idle gaps ({rounds} rounds, {PAUSE} s before each call), ms:")
    print_latencies(samples, 20)
    template = statistics.median(samples["template"])
    fresh = statistics.median(samples["fresh"])
    print(
        f"   template median {template * 1e3:.1f} ms (goal <= {GOAL_MS:g}); "
        f"template / fresh = {template / fresh:.3f} (goal <= {GOAL_RATIO})"
    )

    rates = batch(names, jobs)
    print(f"\n2. a batch of {jobs} jobs through Runner.map, 2 slots:")
    print(
        f"   template {rates['template']:.2f} jobs/s, fresh {rates['fresh']:.2f} jobs/s: "
        f"template / fresh = {rates['template'] / rates['fresh']:.2f} (goal >= 20, with copies)"
    )

    print(f"\n3. a waiting template sandbox: PSS {waiting_memory(names):.1f} MiB")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
