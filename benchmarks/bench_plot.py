# SPDX-License-Identifier: MIT
"""One simple matplotlib plot through ``run_python`` against the same plot outside.

Usage: .venv/bin/python benchmarks/bench_plot.py [--quick] [--rounds N]

Times, side by side in one run and in a rotating order, ``plt.plot([1, 3, 2]);
plt.savefig('p.png')`` (Agg) run by this interpreter as ``python -I -c CODE`` in a
scratch directory with a warm matplotlib cache of its own (the baseline), and the same
code through ``pysandbox.run_python`` (a fresh sandbox each time, which reads the font
list pysandbox built once on this host, see ``pysandbox/_api/fontlist.py``).  Prints the
medians and the ratio; issue 23's goal is at most 1.3.  The CPU time of both is shown
too: the sandbox's is the figure the caller's limits count.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

from measuring import interleaved, loadavg, quartiles, ratio

import pysandbox

CODE = (
    "import matplotlib\n"
    "matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "plt.plot([1, 3, 2])\n"
    "plt.savefig('p.png')\n"
)
GOAL = 1.3
LIMITS = pysandbox.Limits(cpu_time=30, wall_time=90, memory=512 * 2**20)


def outside(workdir: str, cpu: list[float]) -> Callable[[], None]:
    """The plot by ``python -I -c`` in ``workdir``, matplotlib's cache in it (warmed by
    the warm-up round); each run's CPU seconds appended to ``cpu``."""
    env = {**os.environ, "MPLCONFIGDIR": os.path.join(workdir, "mpl")}

    def run() -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-I", "-c", CODE], cwd=workdir, env=env, capture_output=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0 or not os.path.exists(os.path.join(workdir, "p.png")):
            raise RuntimeError(f"the plot outside failed: {done.stderr!r}")
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)

    return run


def inside(cpu: list[float]) -> Callable[[], None]:
    """The plot through ``run_python``; its CPU seconds appended to ``cpu``."""

    def run() -> None:
        result = pysandbox.run_python(CODE, limits=LIMITS)
        if result.status is not pysandbox.Status.OK or list(result.files) != ["p.png"]:
            raise RuntimeError(f"the plot inside failed: {result.status} {result.stderr!r}")
        if b"Fontconfig" in result.stderr:
            raise RuntimeError(f"fontconfig complained: {result.stderr!r}")
        cpu.append(result.cpu_time)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    parser.add_argument("--rounds", type=int, help="timed rounds of the two (default 20)")
    args = parser.parse_args(argv)
    warmup, rounds = (1, 3) if args.quick else (2, 20)
    if args.rounds:
        rounds = args.rounds
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:  {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"loadavg: {loadavg()} (other work on the machine skews the figures)")
    cpu_out: list[float] = []
    cpu_in: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-plot-") as workdir:
        samples = interleaved(
            [outside(workdir, cpu_out), inside(cpu_in)], warmup=warmup, rounds=rounds
        )
    cpu_out, cpu_in = cpu_out[warmup:], cpu_in[warmup:]
    print()
    print(f"{f'wall time, {rounds} runs each [ms]':<40} {'median':>8} {'q1':>8} {'q3':>8}")
    print("-" * 67)
    for label, values in zip(["python -I -c (baseline)", "pysandbox.run_python"], samples):
        q1, q2, q3 = (1e3 * q for q in quartiles(values))
        print(f"{label:<40} {q2:>8.1f} {q1:>8.1f} {q3:>8.1f}")
    print()
    print(f"{'CPU time, median [ms]':<40} {'outside':>8} {'inside':>8}")
    print(
        f"{'':<40} {1e3 * statistics.median(cpu_out):>8.1f} {1e3 * statistics.median(cpu_in):>8.1f}"
    )
    print()
    of_medians, per_round = ratio(samples[1], samples[0])
    print(f"{'ratio':<24} {'of medians':>11} {'median per round':>17} {'goal':>6}")
    print("-" * 61)
    print(f"{'run_python / outside':<24} {of_medians:>11.2f} {per_round:>17.2f} {GOAL:>6.1f}")
    cpu_ratio = statistics.median(cpu_in) / statistics.median(cpu_out)
    print(f"{'CPU, inside / outside':<24} {cpu_ratio:>11.2f}")
    print()
    print(f"loadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
