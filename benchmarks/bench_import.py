# SPDX-License-Identifier: MIT
"""Start-up cost: ``import pysandbox`` and the command line against a bare interpreter.

Usage: .venv/bin/python benchmarks/bench_import.py [--quick]

Times, side by side in one run and in a rotating order, ``python -I -c pass`` (the
baseline), ``python -I -c "import pysandbox"``, ``pysandbox run -q -- true`` (the
console script next to this interpreter) and ``pysandbox --help``, and prints each as a
ratio of the baseline; issue 20's goals are at most 1.3 for the import and 3.5 for
``run``.  ``run`` includes its sandbox, so its ratio is bounded below by what a sandbox
costs on this host.  Run ``python -I -X importtime -c "import pysandbox"`` to see where
an import's time goes.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable

from measuring import interleaved, loadavg, quartiles, ratio

#: (key, label, argv after the interpreter or the console script, whether via the script)
COMMANDS = [
    ("pass", "python -I -c pass (baseline)", ["-I", "-c", "pass"], False),
    ("import", "python -I -c 'import pysandbox'", ["-I", "-c", "import pysandbox"], False),
    ("run", "pysandbox run -q -- true", ["run", "-q", "--", "true"], True),
    ("help", "pysandbox --help", ["--help"], True),
]

#: (label, key, the goal of issue 20 or None)
RATIOS = [
    ("import / pass", "import", 1.3),
    ("run / pass", "run", 3.5),
    ("help / pass", "help", None),
]


def console_script() -> str:
    """The ``pysandbox`` script installed beside this interpreter."""
    script = os.path.join(os.path.dirname(sys.executable), "pysandbox")
    if not os.access(script, os.X_OK):
        raise SystemExit(f"no pysandbox script at {script}: install the package first")
    return script


def call(argv: list[str]) -> Callable[[], None]:
    """Run ``argv`` from a scratch directory; raise unless it exits 0."""

    def run() -> None:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd="/")
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr!r}")

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args(argv)
    warmup, rounds = (1, 5) if args.quick else (3, 40)
    script = console_script()
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:  {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"loadavg: {loadavg()} (other work on the machine skews the figures)")
    argvs = [[script if script_ else sys.executable, *rest] for *_, rest, script_ in COMMANDS]
    for argv in argvs:
        print(f"  {shlex.join(argv)}")
    samples = interleaved([call(a) for a in argvs], warmup=warmup, rounds=rounds)
    by_key = {key: values for (key, *_), values in zip(COMMANDS, samples)}
    print()
    print(f"{f'wall time, {rounds} runs each [ms]':<40} {'median':>8} {'q1':>8} {'q3':>8}")
    print("-" * 67)
    for (_, label, _, _), values in zip(COMMANDS, samples):
        q1, q2, q3 = (1e3 * q for q in quartiles(values))
        print(f"{label:<40} {q2:>8.2f} {q1:>8.2f} {q3:>8.2f}")
    print()
    print(f"{'ratio':<20} {'of medians':>11} {'median per round':>17} {'goal':>6}")
    print("-" * 57)
    for label, key, goal in RATIOS:
        of_medians, per_round = ratio(by_key[key], by_key["pass"])
        shown = "" if goal is None else f"{goal:.1f}"
        print(f"{label:<20} {of_medians:>11.2f} {per_round:>17.2f} {shown:>6}")
    print()
    print(f"loadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
