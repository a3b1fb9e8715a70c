# SPDX-License-Identifier: MIT
"""Templates: a job whose imports are heavy, through a template's warm sandboxes against
the same job in fresh sandboxes, measured side by side in one run.

Usage: python benchmarks/bench_template.py [--quick] [--rounds N] [--jobs N] [--copies N]

The job is ``import numpy, pandas; print(1)`` when the interpreter running this has
numpy and pandas (the sandbox runs the caller's interpreter); else a stand-in made of
heavy standard modules (``asyncio``, ``email``, ``http.client``, ``decimal``,
``unittest``...), said in the output.

1. **Idle gaps.**  Each round, in an order that rotates, with a pause between calls:
   the job through ``Runner(warm=1, template=Template(imports=MODULES))`` (a warm
   sandbox waits, its set-up done), the same through copies of the template
   (``Template(copies=True)``: a warm sandbox is a fork of one that did the set-up),
   the job in a fresh sandbox (``run_python``), and ``python3 -I -c pass``.  Goals:
   the template's median at most 15 ms and at most 0.05x the fresh job's.
2. **A batch.**  Jobs through ``Runner.map`` with two slots, jobs per second, every
   verdict checked: ``--copies`` jobs through copies of the template (``warm=2``),
   ``--jobs`` through the template's warm sandboxes (each still starts an interpreter
   and runs the set-up) and as many in fresh sandboxes.  Goals: copies at least 20x
   the jobs per second of fresh sandboxes, and this process's resident set after all
   the copies' jobs within 10 % of what it was after the first tenth.
3. **Memory.**  The proportional set size of a waiting template sandbox (bwrap, the
   init, the interpreter with the modules loaded), and of a waiting copy: its unique
   set (the pages it does not share with its template) and its PSS.

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
from pysandbox._launch.launcher import Launched
from pysandbox._runner.warm import WarmPool

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


LIMITS = pysandbox.Limits(memory=1024 * 2**20, cpu_time=20, wall_time=60)


def idle_gaps(names: list[str], rounds: int) -> dict[str, list[float]]:
    """Part 1."""
    code = job_code(names)
    warm = Runner(warm=1, template=Template(imports=names), limits=LIMITS)
    copies = Runner(warm=1, template=Template(imports=names, copies=True), limits=LIMITS)
    with warm, copies:
        runners = {"template": warm, "copy": copies}
        calls: dict[str, Callable[[], None]] = {
            "template": lambda: checked(warm.run_python(code)),
            "copy": lambda: checked(copies.run_python(code)),
            "fresh": lambda: checked(pysandbox.run_python(code, limits=LIMITS)),
            "python3 -I -c pass": lambda: subprocess.run(
                [sys.executable, "-I", "-c", "pass"], check=True
            ),
        }
        names_ = list(calls)
        samples: dict[str, list[float]] = {name: [] for name in names_}
        taken = {name: _pool(runner).taken for name, runner in runners.items()}
        for round_ in range(rounds):
            shift = round_ % len(names_)
            for name in names_[shift:] + names_[:shift]:
                time.sleep(PAUSE)
                if name in runners:
                    ready(runners[name])
                started = time.perf_counter()
                calls[name]()
                samples[name].append(time.perf_counter() - started)
        for name, runner in runners.items():
            if _pool(runner).taken - taken[name] != rounds:
                raise RuntimeError(f"a {name} call did not take a warm sandbox")
    return samples


def _pool(runner: Runner) -> WarmPool:
    pool = runner._pool
    assert pool is not None
    return pool


def _resident() -> int:
    """This process's resident set, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _map(runner: Runner, code: str, jobs: int) -> float:
    """Seconds ``jobs`` runs of ``code`` through ``runner.map`` take, each checked."""
    started = time.perf_counter()
    outcomes = list(runner.map(Job(code=code) for _ in range(jobs)))
    elapsed = time.perf_counter() - started
    for outcome in outcomes:
        if outcome.result is None:
            raise RuntimeError(f"a job failed: {outcome}")
        checked(outcome.result)
    return elapsed


def batch(names: list[str], jobs: int, copies: int) -> tuple[dict[str, float], list[int]]:
    """Part 2: jobs per second through ``Runner.map``, through copies, through the
    template's warm sandboxes and in fresh ones; and this process's resident set after
    a tenth of the copies' jobs and after all of them."""
    code = job_code(names)
    rates = {}
    resident = []
    template = Template(imports=names, copies=True)
    with Runner(max_concurrent=2, limits=LIMITS, warm=2, template=template) as runner:
        ready(runner, 2)
        first = max(1, copies // 10)
        elapsed = _map(runner, code, first)
        resident.append(_resident())
        elapsed += _map(runner, code, copies - first)
        resident.append(_resident())
    rates["copies"] = copies / elapsed
    for kind in ("template", "fresh"):
        options = {"warm": 2, "template": Template(imports=names)} if kind == "template" else {}
        with Runner(max_concurrent=2, limits=LIMITS, **options) as runner:  # type: ignore[arg-type]
            if kind == "template":
                ready(runner, 2)
            rates[kind] = jobs / _map(runner, code, jobs)
    return rates, resident


def waiting_memory(names: list[str]) -> float:
    """Part 3: PSS of one waiting template sandbox, MiB."""
    limits = pysandbox.Limits(memory=1024 * 2**20)
    with Runner(warm=2, template=Template(imports=names), limits=limits) as runner:
        ready(runner, 2)
        time.sleep(0.5)
        pids = [pid for _, launched in _pool(runner)._ready for pid in tree(launched._sandbox.pid)]
        return sum(rollup(pid)[0] for pid in pids) / 2 / 2**20


def _copy_processes(launched: Launched) -> list[int]:
    """The processes of a waiting copy: its copy client, and those of its cgroup (its
    fork, init and program: not the client's children)."""
    cgroup = launched._setup.confinement.cgroup
    pids = {launched._sandbox.pid}
    for path in cgroup.paths if cgroup is not None else []:
        with open(os.path.join(path, "cgroup.procs")) as procs:
            pids.update(int(pid) for pid in procs.read().split())
    return sorted(pids)


def waiting_copy_memory(names: list[str]) -> tuple[float, float]:
    """Part 3: USS and PSS of one waiting copy, MiB."""
    limits = pysandbox.Limits(memory=1024 * 2**20)
    template = Template(imports=names, copies=True)
    with Runner(warm=2, template=template, limits=limits) as runner:
        ready(runner, 2)
        time.sleep(0.5)
        pids = [pid for _, launched in _pool(runner)._ready for pid in _copy_processes(launched)]
        figures = [rollup(pid) for pid in pids]
    pss = sum(pss for pss, _ in figures) / 2 / 2**20
    uss = sum(uss for _, uss in figures) / 2 / 2**20
    return uss, pss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, help="rounds of part 1 (default 40)")
    parser.add_argument("--jobs", type=int, help="warm and fresh jobs of part 2 (default 60)")
    parser.add_argument("--copies", type=int, help="copies' jobs of part 2 (default 1000)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (4 if args.quick else 40)
    jobs = args.jobs or (6 if args.quick else 60)
    copies = args.copies or (20 if args.quick else 1000)
    names = modules()
    print(f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"the job: import {', '.join(names)}; print(1)")
    print(f"load average before: {os.getloadavg()[0]:.2f}")

    samples = idle_gaps(names, rounds)
    print(f"\n1. idle gaps ({rounds} rounds, {PAUSE} s before each call), ms:")
    print_latencies(samples, 20)
    fresh = statistics.median(samples["fresh"])
    for kind in ("template", "copy"):
        median = statistics.median(samples[kind])
        print(
            f"   {kind} median {median * 1e3:.1f} ms (goal <= {GOAL_MS:g}); "
            f"{kind} / fresh = {median / fresh:.3f} (goal <= {GOAL_RATIO})"
        )

    rates, resident = batch(names, jobs, copies)
    print(f"\n2. jobs through Runner.map, 2 slots ({copies} through copies, {jobs} each else):")
    print(
        f"   copies {rates['copies']:.2f} jobs/s, template {rates['template']:.2f} jobs/s, "
        f"fresh {rates['fresh']:.2f} jobs/s: copies / fresh = "
        f"{rates['copies'] / rates['fresh']:.1f} (goal >= 20), template / fresh = "
        f"{rates['template'] / rates['fresh']:.2f}"
    )
    print(
        f"   this process's RSS after {max(1, copies // 10)} copies' jobs "
        f"{resident[0] / 2**20:.1f} MiB, after {copies}: {resident[1] / 2**20:.1f} MiB "
        f"({resident[1] / resident[0]:.3f}; goal <= 1.10)"
    )

    print(f"\n3. a waiting template sandbox: PSS {waiting_memory(names):.1f} MiB")
    uss, pss = waiting_copy_memory(names)
    print(f"   a waiting copy: USS {uss:.1f} MiB (goal <= 12), PSS {pss:.1f} MiB")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
