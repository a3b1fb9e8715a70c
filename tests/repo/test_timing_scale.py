# SPDX-License-Identifier: MIT
"""The tests' time budgets follow what the VM lab measures (tests/support/timing.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1]

READ = """
import json
from support import timing
print(json.dumps([timing.CPU_SCALE, timing.SLOWDOWN, timing.cpu(0.3), timing.eval_cpu(),
                  timing.eval_cpu(10), timing.slow(2), timing.PROMPTLY, timing.KILL_LATENCY]))
"""


def _budgets(**env: str) -> list[float]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYSANDBOX_TEST_")}
    out = subprocess.run(
        [sys.executable, "-c", READ],
        cwd=SUPPORT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_on_real_hardware_the_budgets_are_the_idle_ones() -> None:
    assert _budgets() == [1.0, 3.0, 0.3, 1, 10, 6.0, 5.0, 1.5]


def test_the_labs_measured_slowdown_scales_cpu_budgets_and_deadlines() -> None:
    scale, slowdown, budget, eval_budget, eval_ten, deadline, promptly, kill = _budgets(
        PYSANDBOX_TEST_CPU_SCALE="20", PYSANDBOX_TEST_SLOWDOWN="20"
    )
    assert (scale, slowdown) == (20.0, 20.0)
    assert budget == 6.0 and (eval_budget, eval_ten) == (20, 200)
    assert deadline == 40.0 and promptly == 100 / 3 and kill == 10.0


def test_a_scale_below_the_floor_is_the_floor() -> None:
    """A lab faster than the development machine keeps the idle budgets."""
    assert _budgets(PYSANDBOX_TEST_CPU_SCALE="0.5", PYSANDBOX_TEST_SLOWDOWN="1")[:2] == [1.0, 3.0]
