# SPDX-License-Identifier: MIT
"""The agent service of ``examples/agent_service`` under a mixed load, with the Runner's
short slots and without them (one first-come-first-served queue), in one run.

Usage: .venv/bin/python benchmarks/bench_agent_service.py [--quick] [--rounds N]
       [--requests N] [--concurrency N]

Sends ``--requests`` (300) ``POST /run`` requests, ``--concurrency`` (16) at a time,
through the app in process with a real HTTP client (httpx over ``ASGITransport``, the
app's lifespan around it), of seven kinds in a shuffled order that both services get
alike: a print and a syntax error (the cheap calls, with a 2 s wall time: short), a CPU
loop past its CPU limit, a memory hog past its memory limit, an output flood past its
stdout cap, a sleep past its wall time (the slow call: 6 s, long for a Runner whose
short calls have at most 5 s) and a matplotlib plot.  Each round runs the app once
with ``short_slots=1`` and once without (the baseline), in an order that alternates
from round to round, on the same ``max_concurrent=4``.

Prints, for each service: the cheap calls' queueing delay (``queued_time``: the wait
for a slot, as the Runner measured it) at the median, p99 and its max against issue 23's
goal, never more than one slow call's wall time; every kind's verdicts (each request
must get the verdict its code deserves, else the benchmark fails); the throughput; and
the processes left after the app has shut down, read from ``/proc`` (goal: 0).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib.util
import os
import platform
import random
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from measuring import loadavg, percentile

APP = Path(__file__).resolve().parents[1] / "examples" / "agent_service" / "app.py"
#: The slow call's wall time: the goal's bound on a cheap call's wait.
SLOW_WALL_TIME = 6.0
CHEAP = ("print", "syntax error")


@dataclass(frozen=True)
class Kind:
    code: str
    limits: dict[str, float]
    #: Whether a reply is the verdict this code deserves.
    deserved: Callable[[dict[str, Any]], bool]


KINDS = {
    "print": Kind(
        "print('hi')",
        {"wall_time": 2},
        lambda reply: reply["status"] == "ok" and reply["stdout"] == "hi\n",
    ),
    "syntax error": Kind(
        "print(",
        {"wall_time": 2},
        lambda reply: reply["status"] == "nonzero_exit" and "SyntaxError" in reply["stderr"],
    ),
    "cpu loop": Kind(
        "while True: pass",
        {"cpu_time": 0.5, "wall_time": 20},
        lambda reply: reply["status"] == "cpu_time_exceeded",
    ),
    "memory hog": Kind(
        "chunks = []\nwhile True: chunks.append(bytearray(16 << 20))",
        {"memory": 256 * 2**20, "wall_time": 20},
        lambda reply: (
            reply["status"] == "memory_exceeded"
            or (reply["status"] == "nonzero_exit" and "MemoryError" in reply["stderr"])
        ),
    ),
    "flood": Kind(
        "while True: print('x' * 1000)",
        {"stdout": 64 * 1024, "wall_time": 20},
        lambda reply: reply["status"] == "output_exceeded",
    ),
    "sleep": Kind(
        "import time; time.sleep(60)",
        {"wall_time": SLOW_WALL_TIME},
        lambda reply: reply["status"] == "wall_time_exceeded",
    ),
    "plot": Kind(
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('plot.png')",
        {},  # the service's own limits: 30 s of CPU, 90 s of wall time
        lambda reply: reply["status"] == "ok" and len(reply["images"]) == 1,
    ),
}


@dataclass
class Figures:
    """One service's replies, over every round."""

    cheap_waits: list[float] = field(default_factory=list)
    verdicts: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    wrong: list[str] = field(default_factory=list)
    seconds: float = 0.0
    requests: int = 0
    left: list[int] = field(default_factory=list)


def service() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_service_app", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def descendants() -> list[int]:
    """Every process below this one, read from ``/proc``."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parents[int(stat.read().rsplit(b")", 1)[1].split()[1])].append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


async def load(kinds: list[str], concurrency: int, short: bool, figures: Figures) -> None:
    """Every request of ``kinds`` through a fresh app, ``concurrency`` at a time."""
    settings: dict[str, Any] = {} if short else {"short_slots": 0, "short_wall_time": None}
    app = service().create_app(**settings)
    todo = collections.deque(enumerate(kinds))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as client:

            async def worker() -> None:
                while todo:
                    index, name = todo.popleft()
                    kind = KINDS[name]
                    body = {"code": kind.code, "limits": kind.limits}
                    reply = await client.post("/run", json=body, timeout=None)
                    answer = reply.json() if reply.status_code == 200 else {"status": reply.text}
                    figures.verdicts[name][answer["status"]] += 1
                    if reply.status_code != 200 or not kind.deserved(answer):
                        figures.wrong.append(f"request {index} ({name}): {answer}")
                    elif name in CHEAP:
                        figures.cheap_waits.append(answer["queued_time"])

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            figures.seconds += time.perf_counter() - started
            figures.requests += len(kinds)
    figures.left = descendants()


def report(name: str, figures: Figures) -> None:
    waits = figures.cheap_waits
    print(f"\n{name}")
    if waits:
        worst = max(waits)
        print(
            f"   cheap calls ({len(waits)}) queued: p50 {statistics.median(waits):.3f} s, "
            f"p99 {percentile(waits, 0.99):.3f} s, max {worst:.3f} s; goal: at most one "
            f"slow call's wall time ({SLOW_WALL_TIME:g} s): "
            f"{'met' if worst <= SLOW_WALL_TIME else 'MISSED'}"
        )
    for kind in KINDS:
        counts = ", ".join(f"{status} {n}" for status, n in figures.verdicts[kind].most_common())
        print(f"   {kind:<13} {counts}")
    print(
        f"   throughput: {figures.requests / figures.seconds:.2f} requests/s "
        f"({figures.requests} in {figures.seconds:.1f} s)"
    )
    print(f"   processes left after: {len(figures.left)} (goal: 0)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="28 requests (smoke test)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each service (1)")
    parser.add_argument("--requests", type=int, help="requests per run (300)")
    parser.add_argument("--concurrency", type=int, default=16, help="at once (16)")
    args = parser.parse_args(argv)
    count = args.requests or (4 * len(KINDS) if args.quick else 300)
    names = list(KINDS)
    kinds = [names[index % len(names)] for index in range(count)]
    random.Random(23).shuffle(kinds)
    print(f"# {shlex.join(['bench_agent_service.py', *sys.argv[1:]])}")
    print(f"# {platform.python_version()}, {os.cpu_count()} CPUs, load {loadavg()}")
    print(f"# {count} requests at concurrency {args.concurrency}, {args.rounds} round(s)")
    services = {"short slots (short_slots=1)": True, "one queue (FIFO, baseline)": False}
    figures = {name: Figures() for name in services}
    for round_number in range(args.rounds):
        order = list(services) if round_number % 2 else list(services)[::-1]
        for name in order:
            asyncio.run(load(kinds, args.concurrency, services[name], figures[name]))
    for name in services:
        report(name, figures[name])
    short, fifo = (figures[name] for name in services)
    if short.cheap_waits and fifo.cheap_waits:
        p99 = percentile(fifo.cheap_waits, 0.99) / max(percentile(short.cheap_waits, 0.99), 1e-6)
        speed = (short.requests / short.seconds) / (fifo.requests / fifo.seconds)
        print(f"\nFIFO / short slots, cheap calls' p99 wait: {p99:.1f}x")
        print(f"short slots / FIFO, throughput: {speed:.2f}x")
    print(f"# load after: {loadavg()}")
    wrong = short.wrong + fifo.wrong
    for line in wrong[:10]:
        print(f"WRONG VERDICT: {line}", file=sys.stderr)
    return 1 if wrong or short.left or fifo.left else 0


if __name__ == "__main__":
    sys.exit(main())
