# SPDX-License-Identifier: MIT
"""``benchmarks/bench_runner.py --quick`` runs to the end: every method's jobs pass their
checks and the report has a line per method, the memory figures and the goal.  The
figures themselves are not judged: a benchmark is a measurement, not a test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.timing import slow

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runner.py"


@pytest.mark.slow
def test_the_runner_benchmark_runs_quick() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick"],
        capture_output=True,
        text=True,
        timeout=slow(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = done.stdout
    for method in (
        "Runner.map ",
        "loop run_python x2",
        "loop baseline x4",
        "Runner.map on 2 Dask workers",
    ):
        assert f"\n{method}" in report, report
    assert "host RSS of Runner.map alone: " in report
    assert "Runner.map / the best loop (loop run_python x" in report
    assert "(as many sandboxes at once): throughput " in report
