# SPDX-License-Identifier: MIT
"""Core benchmarks: pysandbox.eval_in_sandbox against the pure-Python baseline.

Usage: python benchmarks/bench_core.py [--quick]

Both implementations are measured in the same run (interleaved call by call
where possible, so machine drift hits both equally).  The script prints the
figures, the ratios pysandbox/baseline and whether each target is met.  It is a
measurement, not a test: it exits 0 whatever the figures are, and only fails
if a sandbox call raises or returns something other than what was asked for.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import baseline
from measuring import loadavg

EvalFn = Callable[..., Any]

MIB = 2**20
BIG_HEAP_BYTES = 3 * 2**30
PAGE = os.sysconf("SC_PAGE_SIZE")
BIG_OUT_BYTES = 32 * MIB
BIG_OUT_CODE = "import sys; sys.stdout.write('x' * (32 * 2**20))"
BIG_OUT_KWARGS: dict[str, int] = {
    "io_max_kb": 40 * 1024,
    "mem_max_mb": 512,
    "cpu_max_time_sec": 10,
    "timeout_max_time_sec": 120,
}


@dataclasses.dataclass(frozen=True)
class Settings:
    warmup: int
    latency_calls: int
    big_out_reps: int
    threads: int
    calls_per_thread: int


FULL = Settings(warmup=5, latency_calls=50, big_out_reps=5, threads=8, calls_per_thread=10)
QUICK = Settings(warmup=2, latency_calls=10, big_out_reps=1, threads=8, calls_per_thread=2)


@dataclasses.dataclass
class Pair:
    pysandbox: float | None
    baseline: float

    def scaled(self, factor: float) -> Pair:
        pys = None if self.pysandbox is None else self.pysandbox * factor
        return Pair(pys, self.baseline * factor)


@dataclasses.dataclass
class Row:
    metric: str
    unit: str
    figures: Pair


@dataclasses.dataclass
class Check:
    name: str
    expr: str
    value: float | None
    limit: float
    higher_is_better: bool

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "N/A "
        ok = self.value >= self.limit if self.higher_is_better else self.value <= self.limit
        return "PASS" if ok else "FAIL"


@dataclasses.dataclass
class Results:
    latency: Pair
    latency_big_heap: Pair
    big_out: Pair
    big_out_floor: float
    throughput: Pair


def load_pysandbox() -> tuple[EvalFn | None, str]:
    """Import pysandbox.eval_in_sandbox, or explain why it is unavailable."""
    try:
        import pysandbox
        from pysandbox import eval_in_sandbox
    except Exception as exc:
        return None, f"NOT IMPORTABLE ({type(exc).__name__}: {exc})"
    version = getattr(pysandbox, "__version__", "?")
    return (
        eval_in_sandbox,
        f"{version} from {os.path.dirname(pysandbox.__file__ or '?')}",
    )


def call_checked(fn: EvalFn, code: str, expected: str, **kwargs: int) -> None:
    """One sandbox call; raise if the output is not what the code prints."""
    res = fn(code, **kwargs)
    if res.returncode != 0 or res.stdout != expected:
        stdout = res.stdout if len(res.stdout) < 200 else f"<{len(res.stdout)} chars>"
        raise RuntimeError(
            f"{fn.__module__}.eval_in_sandbox({code[:40]!r}) returned "
            f"rc={res.returncode} stdout={stdout!r} stderr={res.stderr[-500:]!r}"
        )


def timed_call(fn: EvalFn, code: str, expected: str, **kwargs: int) -> float:
    t0 = time.perf_counter()
    call_checked(fn, code, expected, **kwargs)
    return time.perf_counter() - t0


def interleaved_medians(
    fns: list[EvalFn], code: str, expected: str, warmup: int, reps: int, **kwargs: int
) -> list[float]:
    """Median wall time of each fn, alternating fns call by call."""
    for _ in range(warmup):
        for fn in fns:
            call_checked(fn, code, expected, **kwargs)
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, out in zip(fns, samples):
            out.append(timed_call(fn, code, expected, **kwargs))
    return [statistics.median(s) for s in samples]


def throughput(fn: EvalFn, threads: int, calls_per_thread: int) -> float:
    """Calls/second with `threads` threads each making `calls_per_thread` calls."""
    errors: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def worker() -> None:
        start.wait()
        try:
            for _ in range(calls_per_thread):
                call_checked(fn, "print(1)", "1")
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return threads * calls_per_thread / elapsed


def allocate_big_heap() -> bytearray:
    """3 GiB in this process, every page written so it is really resident."""
    heap = bytearray(BIG_HEAP_BYTES)
    heap[::PAGE] = b"\x01" * len(range(0, BIG_HEAP_BYTES, PAGE))
    return heap


def status_mib(field: str) -> float:
    """A kB field of /proc/self/status (e.g. VmRSS, VmPTE) in MiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


def to_pair(values: list[float]) -> Pair:
    """Figures ordered like the fns list: [pysandbox, baseline] or [baseline]."""
    return Pair(values[0], values[1]) if len(values) == 2 else Pair(None, values[0])


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def print_rows(rows: list[Row]) -> None:
    print(f"{'metric':<50} {'pysandbox':>10} {'baseline':>10} {'pys/base':>9}")
    print("-" * 82)
    for r in rows:
        label = f"{r.metric} [{r.unit}]"
        pys, base = r.figures.pysandbox, r.figures.baseline
        print(f"{label:<50} {fmt(pys):>10} {fmt(base):>10} {fmt(ratio(pys, base), 3):>9}")


def print_checks(checks: list[Check]) -> None:
    print()
    print("targets:")
    for c in checks:
        op = ">=" if c.higher_is_better else "<="
        print(f"  [{c.verdict}] {c.name}: {c.expr} = {fmt(c.value, 3)} {op} {c.limit}")


def measure_latency(fns: list[EvalFn], settings: Settings) -> Pair:
    medians = interleaved_medians(fns, "print(1)", "1", settings.warmup, settings.latency_calls)
    return to_pair(medians)


def measure_big_heap_latency(fns: list[EvalFn], settings: Settings) -> Pair:
    heap = allocate_big_heap()
    print(
        f"(3 GiB heap allocated and touched: VmRSS {status_mib('VmRSS'):.0f} MiB, "
        f"VmPTE {status_mib('VmPTE'):.1f} MiB)"
    )
    try:
        return measure_latency(fns, settings)
    finally:
        del heap


def measure_big_out(fns: list[EvalFn], settings: Settings) -> Pair:
    expected = "x" * BIG_OUT_BYTES
    medians = interleaved_medians(
        fns, BIG_OUT_CODE, expected, 0, settings.big_out_reps, **BIG_OUT_KWARGS
    )
    return to_pair(medians)


def measure_big_out_floor(settings: Settings) -> float:
    """The baseline's own sandboxed command with stdout to /dev/null: no reader at all."""
    with tempfile.TemporaryDirectory() as tmp_dir:
        with open(os.path.join(tmp_dir, "code.py"), "w", encoding="utf-8") as f:
            f.write(BIG_OUT_CODE + "\n")
        argv = baseline.sandbox_argv(
            tmp_dir, BIG_OUT_KWARGS["mem_max_mb"], BIG_OUT_KWARGS["cpu_max_time_sec"]
        )
        samples = []
        for _ in range(settings.big_out_reps):
            t0 = time.perf_counter()
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
            samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure_throughput(pys_fn: EvalFn | None, settings: Settings) -> Pair:
    n, calls = settings.threads, settings.calls_per_thread
    base = throughput(baseline.eval_in_sandbox, n, calls)
    return Pair(throughput(pys_fn, n, calls) if pys_fn else None, base)


def build_rows(res: Results, settings: Settings) -> list[Row]:
    n_lat, n_out = settings.latency_calls, settings.big_out_reps
    n_tp = f"{settings.threads}x{settings.calls_per_thread}"
    return [
        Row(f"latency print(1), median of {n_lat}", "ms", res.latency.scaled(1e3)),
        Row(
            f"latency print(1), 3 GiB heap, median of {n_lat}",
            "ms",
            res.latency_big_heap.scaled(1e3),
        ),
        Row(f"32 MiB stdout, median of {n_out}", "s", res.big_out),
        Row(f"throughput print(1), {n_tp} threads", "calls/s", res.throughput),
    ]


def build_checks(res: Results) -> list[Check]:
    lat, big, out, tput = res.latency, res.latency_big_heap, res.big_out, res.throughput
    return [
        Check("latency", "pysandbox/baseline", ratio(lat.pysandbox, lat.baseline), 0.9, False),
        Check(
            "big heap", "pysandbox big/small heap", ratio(big.pysandbox, lat.pysandbox), 1.1, False
        ),
        Check("32 MiB stdout", "baseline/pysandbox", ratio(out.baseline, out.pysandbox), 5.0, True),
        Check("throughput", "pysandbox/baseline", ratio(tput.pysandbox, tput.baseline), 1.0, True),
    ]


def print_notes(res: Results) -> None:
    floor = res.big_out_floor
    best = fmt(ratio(res.big_out.baseline, floor))
    print()
    print("notes:")
    print(
        f"  baseline big/small heap latency ratio: "
        f"{fmt(ratio(res.latency_big_heap.baseline, res.latency.baseline), 3)}"
    )
    print(
        f"  32 MiB floor (baseline's prlimit+bwrap+python command, stdout > /dev/null): "
        f"{floor:.3f} s -> best possible baseline/x speedup {best}"
    )


def run(settings: Settings) -> None:
    pys_fn, pys_desc = load_pysandbox()
    fns: list[EvalFn] = ([pys_fn] if pys_fn is not None else []) + [baseline.eval_in_sandbox]
    print(f"pysandbox: {pys_desc}")
    print(f"baseline:  sandboxes run {baseline.sandbox_argv('/tmp', 1, 1)[-3]}")
    print(f"settings:  {settings}")
    latency = measure_latency(fns, settings)
    tput = measure_throughput(pys_fn, settings)
    big_out = measure_big_out(fns, settings)
    floor = measure_big_out_floor(settings)
    big_heap = measure_big_heap_latency(fns, settings)
    res = Results(latency, big_heap, big_out, floor, tput)
    print()
    print_rows(build_rows(res, settings))
    print_checks(build_checks(res))
    print_notes(res)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args(argv)
    print("command:", shlex.join([sys.executable, *sys.argv]))
    load = loadavg()
    print(f"python:    {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"loadavg:   {load} (other work on the machine skews the figures)")
    run(QUICK if args.quick else FULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
