# SPDX-License-Identifier: MIT
"""Capturing a flood of stdout: 32 MiB to stdout against the same sandbox writing to /dev/null.

Usage: python benchmarks/bench_capture.py [--quick] [--rounds N] [--mib N]

Four calls are measured in the same run, interleaved call by call (the order rotates
every round, so no call always runs first or right after another):

* ``pysandbox.run_python`` of code that writes 32 MiB to fd 1 with ``os.write``, with
  ``Limits.stdout`` large enough to keep it all (``cap`` below);
* the same call, the same sandbox and the same code, writing to ``/dev/null`` instead:
  everything the first call costs but the pipe, the capture and the final bytes;
* ``pysandbox.eval_in_sandbox`` of the same code with ``io_max_kb`` large enough
  (stdout comes back as str);
* and the same writing to ``/dev/null``.

Every call is checked after it is timed (status, exit code, exactly the bytes written),
so a capture that loses or adds a byte cannot look fast.  The script prints the median
and quartiles of each call, the ratios capture / /dev/null (issue 22's goal: at most
1.5; issue 12's was 1.8) and the differences in ms.  It is a measurement, not a test: it
exits 0 whatever the figures are, and fails only if a call raises or returns something
else.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import statistics
import sys
from collections.abc import Callable

from measuring import interleaved, loadavg, quartiles, ratio

import pysandbox
from pysandbox import Limits, Status

MIB = 2**20
#: The child's code: ``size`` bytes of "x" written whole to ``fd`` (1 or /dev/null).
CODE = """\
import os
data = memoryview(b"x" * {size})
fd = {fd}
while data:
    data = data[os.write(fd, data):]
"""
TO_STDOUT = "1"
TO_NULL = 'os.open("/dev/null", os.O_WRONLY)'
GOAL = 1.5


@dataclasses.dataclass(frozen=True)
class Settings:
    warmup: int
    rounds: int


FULL = Settings(warmup=2, rounds=30)
QUICK = Settings(warmup=1, rounds=5)


@dataclasses.dataclass(frozen=True)
class Measure:
    key: str
    label: str
    call: Callable[[], object]
    check: Callable[[object], None]


def run_python_measures(size: int) -> list[Measure]:
    # Room for the child's bytes object and its memoryview, and for the cap's rounding.
    limits = Limits(
        stdout=size + MIB, memory=max(512 * MIB, 4 * size), cpu_time=20.0, wall_time=120.0
    )

    def check(expected: bytes) -> Callable[[object], None]:
        def checked(res: object) -> None:
            assert isinstance(res, pysandbox.Result)
            if res.status is not Status.OK or res.returncode != 0 or res.stderr:
                raise RuntimeError(f"run_python: {res.status} rc={res.returncode} {res.stderr!r}")
            if res.stdout != expected:
                raise RuntimeError(f"run_python: {len(res.stdout)} bytes, not the {size} written")

        return checked

    def call(fd: str) -> Callable[[], object]:
        code = CODE.format(size=size, fd=fd)
        return lambda: pysandbox.run_python(code, limits=limits)

    return [
        Measure("rp.out", f"run_python, {size // MIB} MiB to stdout", call(TO_STDOUT),
                check(b"x" * size)),
        Measure("rp.null", "  the same to /dev/null", call(TO_NULL), check(b"")),
    ]  # fmt: skip


def eval_measures(size: int) -> list[Measure]:
    kwargs = {
        "io_max_kb": size // 1024 + 1024,
        "mem_max_mb": max(512, 4 * size // MIB),
        "cpu_max_time_sec": 20,
        "timeout_max_time_sec": 120,
    }

    def check(expected: str) -> Callable[[object], None]:
        def checked(out: object) -> None:
            assert isinstance(out, pysandbox.ProcessOutput)
            if out.returncode != 0 or out.stderr:
                raise RuntimeError(f"eval_in_sandbox: rc={out.returncode} {out.stderr!r}")
            if out.stdout != expected:
                raise RuntimeError(
                    f"eval_in_sandbox: {len(out.stdout)} characters, not the {size} written"
                )

        return checked

    def call(fd: str) -> Callable[[], object]:
        code = CODE.format(size=size, fd=fd)
        return lambda: pysandbox.eval_in_sandbox(code, **kwargs)

    return [
        Measure("ev.out", f"eval_in_sandbox, {size // MIB} MiB to stdout", call(TO_STDOUT),
                check("x" * size)),
        Measure("ev.null", "  the same to /dev/null", call(TO_NULL), check("")),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds of the four calls (default 30)")
    parser.add_argument("--mib", type=int, default=32, help="MiB written (default 32)")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    size = args.mib * MIB
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:    {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"pysandbox: {pysandbox.__version__} from {os.path.dirname(pysandbox.__file__ or '?')}")
    print(f"settings:  {settings}")
    print(f"loadavg:   {loadavg()} (other work on the machine skews the figures)")

    measures = run_python_measures(size) + eval_measures(size)
    samples = interleaved(
        [m.call for m in measures],
        warmup=settings.warmup,
        rounds=settings.rounds,
        check=lambda index, result: measures[index].check(result),
    )
    by_key = {m.key: values for m, values in zip(measures, samples)}

    print()
    print(f"{f'latency, {settings.rounds} calls each [ms]':<50} {'median':>8} {'q1':>8} {'q3':>8}")
    print("-" * 77)
    for m, values in zip(measures, samples):
        q1, q2, q3 = (1e3 * q for q in quartiles(values))
        print(f"{m.label:<50} {q2:>8.2f} {q1:>8.2f} {q3:>8.2f}")
    print()
    print(f"{f'ratio (goal: <= {GOAL})':<50} {'of medians':>11} {'median per round':>17}")
    print("-" * 80)
    for label, num, den in [
        ("run_python: stdout / /dev/null", "rp.out", "rp.null"),
        ("eval_in_sandbox: stdout / /dev/null", "ev.out", "ev.null"),
    ]:
        a, b = by_key[num], by_key[den]
        of_medians, per_round = ratio(a, b)
        diff = 1e3 * (statistics.median(a) - statistics.median(b))
        print(f"{label:<50} {of_medians:>11.3f} {per_round:>17.3f}   ({diff:+.1f} ms)")
    print()
    print(f"loadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
