# SPDX-License-Identifier: MIT
"""What the benchmarks share: timing calls in a rotating order, and summing the times up.

Each ``bench_*.py`` is run as a script, so this folder is first on ``sys.path`` and
``import measuring`` finds this module.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def interleaved(
    calls: Sequence[Callable[[], T]],
    *,
    warmup: int,
    rounds: int,
    check: Callable[[int, T], None] | None = None,
    rotate: bool = True,
) -> list[list[float]]:
    """Wall times of each of ``calls``: ``warmup`` untimed rounds, then ``rounds`` timed
    ones of one call each, the order rotating every round so that no call always runs
    first or right after another (``rotate=False``: the same order every round, so
    that each call runs right after the one before it in ``calls``, the first after
    the last).  ``check(index, result)`` sees every result (warm-up included) after its
    call was timed, so a call that fails cannot look fast."""
    count = len(calls)
    for _ in range(warmup):
        for index, call in enumerate(calls):
            result = call()
            if check is not None:
                check(index, result)
    samples: list[list[float]] = [[] for _ in calls]
    for round_number in range(rounds):
        for shift in range(count):
            index = (round_number + shift) % count if rotate else shift
            started = time.perf_counter()
            result = calls[index]()
            samples[index].append(time.perf_counter() - started)
            if check is not None:
                check(index, result)
            del result
    return samples


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile of ``values`` (at least two)."""
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` (0 to 1) quantile of ``values``, interpolating linearly between
    the two nearest ranks."""
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, for the header and footer of a report."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def ratio(values: Sequence[float], baseline: Sequence[float]) -> tuple[float, float]:
    """``values`` against ``baseline``, timed in the same rounds: the ratio of their
    medians, and the median of the ratios round by round."""
    of_medians = statistics.median(values) / statistics.median(baseline)
    return of_medians, statistics.median(x / y for x, y in zip(values, baseline))


def print_latencies(samples: dict[str, list[float]], width: int) -> None:
    """One line per call: its name (``width`` wide), its median and its p99, in ms."""
    print(f"   {'call':<{width}} {'median':>8} {'p99':>8}")
    for name, values in samples.items():
        median, p99 = statistics.median(values), percentile(values, 0.99)
        print(f"   {name:<{width}} {median * 1e3:8.2f} {p99 * 1e3:8.2f}")
