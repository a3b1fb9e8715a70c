# SPDX-License-Identifier: MIT
"""``benchmarks/bench_agent_service.py --quick`` runs to the end: every request gets the
verdict its code deserves, with short slots and without, and nothing is left running
after either service shuts down.  The figures themselves are not judged: a benchmark is
a measurement, not a test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.timing import slow

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_agent_service.py"


@pytest.mark.slow
def test_the_agent_service_benchmark_runs_quick() -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    pytest.importorskip("matplotlib")
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick"],
        capture_output=True,
        text=True,
        timeout=slow(300),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for service in ("short slots (short_slots=1)", "one queue (FIFO, baseline)"):
        assert f"\n{service}\n" in done.stdout, done.stdout
    assert done.stdout.count("processes left after: 0 (goal: 0)") == 2, done.stdout
    assert "FIFO / short slots, cheap calls' p99 wait: " in done.stdout
