# SPDX-License-Identifier: MIT
"""What joining a fresh cgroup v2 group costs a spawn: born in it, or moved into it.

Usage: python benchmarks/bench_join.py [--quick] [--gap SECONDS]

Three spawns of ``/bin/true`` by the C core (``pysandbox._sandbox.run``) are measured in
the same run, interleaved call by call (the order rotates every round):

* ``plain``: no cgroup at all, the floor;
* ``write``: into a fresh group through its ``cgroup.procs`` (``cgroup_procs``): the
  child writes "0" there before its exec: a migration, which takes the kernel's
  ``cgroup_threadgroup_rwsem`` for writing, and with it waits for an RCU grace period
  unless another migration on the host did so just before;
* ``clone3``: into a fresh group through its directory (``cgroup_dir_fd``): the kernel
  creates the child there with ``clone3(CLONE_INTO_CGROUP)``, no migration.

Each round makes one fresh group per variant below this process's own cgroup v2 group
(on a hybrid host, in the controller-less v2 hierarchy) and removes it afterwards,
outside the timed call.  With ``--gap`` the script sleeps that long before each timed
call: the kernel's cost of a migration depends on how recently any process on the host
migrated one (the rwsem's RCU synchronisation stays warm for a grace period after the
last one), so back-to-back calls on a busy host show the least of it, and calls a few
tens of milliseconds apart on an idle host the most.  Every call is checked: exit status
0, and the result's ``cgroup_joined_at_clone`` as the variant wants it; before timing,
each variant runs ``cat /proc/self/cgroup`` once to show that the child really was in
its group.  The script prints the median and quartiles of each variant, and the ratios
and differences of medians.  It is a measurement, not a test: it exits 0 whatever the
figures are, and fails only if a call fails or lands in the wrong group.  Needs a
writable cgroup v2 hierarchy (root, or a delegated subtree).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import shlex
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from bench_run import print_ratios
from measuring import loadavg, quartiles

from pysandbox import _sandbox
from pysandbox._host.mountinfo import unescape

TRUE_ARGV = ["/bin/true"]
CAT_CGROUP = ["/bin/cat", "/proc/self/cgroup"]


@dataclasses.dataclass(frozen=True)
class Settings:
    warmup: int
    rounds: int
    #: Seconds slept before each timed call.
    gap: float = 0.0


FULL = Settings(warmup=10, rounds=300)
QUICK = Settings(warmup=2, rounds=10)


def own_v2_group() -> tuple[Path, str]:
    """This process's own cgroup v2 group: its directory and its path."""
    own = next(
        line[3:]
        for line in Path("/proc/self/cgroup").read_text().splitlines()
        if line.startswith("0::")
    )
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, kind = before.split(), after.split()
        if len(fields) >= 5 and kind and kind[0] == "cgroup2":
            root, mountpoint = unescape(fields[3]), unescape(fields[4])
            if own == root or own.startswith(root.rstrip("/") + "/"):
                return Path(mountpoint, own[len(root) :].lstrip("/")), own
    raise RuntimeError("no cgroup2 hierarchy is mounted that shows this process's group")


@contextlib.contextmanager
def fresh_group(parent: Path) -> Iterator[Path]:
    group = parent / f"pysandbox-bench-join-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        yield group
    finally:
        group.rmdir()


@contextlib.contextmanager
def opened(path: Path, flags: int) -> Iterator[int]:
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def spawn_plain(parent: Path, argv: list[str], gap: float) -> tuple[float, _sandbox.RawResult]:
    del parent
    time.sleep(gap)
    t0 = time.perf_counter()
    raw = _sandbox.run(argv, [], timeout=30.0)
    return time.perf_counter() - t0, raw


def spawn_write(parent: Path, argv: list[str], gap: float) -> tuple[float, _sandbox.RawResult]:
    with fresh_group(parent) as group, opened(group / "cgroup.procs", os.O_WRONLY) as procs:
        time.sleep(gap)
        t0 = time.perf_counter()
        raw = _sandbox.run(argv, [], timeout=30.0, cgroup_procs=[procs])
        return time.perf_counter() - t0, raw


def spawn_clone3(parent: Path, argv: list[str], gap: float) -> tuple[float, _sandbox.RawResult]:
    with fresh_group(parent) as group, opened(group, os.O_RDONLY | os.O_DIRECTORY) as fd:
        time.sleep(gap)
        t0 = time.perf_counter()
        raw = _sandbox.run(argv, [], timeout=30.0, cgroup_dir_fd=fd)
        return time.perf_counter() - t0, raw


@dataclasses.dataclass(frozen=True)
class Variant:
    key: str
    label: str
    spawn: Callable[[Path, list[str], float], tuple[float, _sandbox.RawResult]]
    #: The cgroup_joined_at_clone every call must report; whether it lands in a group.
    at_clone: bool
    in_group: bool

    def call(
        self, parent: Path, argv: list[str], gap: float = 0.0
    ) -> tuple[float, _sandbox.RawResult]:
        elapsed, raw = self.spawn(parent, argv, gap)
        if raw["wait_status"] != 0 or raw["cgroup_joined_at_clone"] != self.at_clone:
            raise RuntimeError(f"{self.key}: {argv} returned {raw}")
        return elapsed, raw


VARIANTS = [
    Variant("plain", "no cgroup (plain)", spawn_plain, False, False),
    Variant("write", "fresh v2 group, cgroup.procs write (write)", spawn_write, False, True),
    Variant("clone3", "fresh v2 group, clone3 into it (clone3)", spawn_clone3, True, True),
]


def verify(parent: Path, parent_path: str) -> None:
    """Each variant's child is where it should be: in a fresh group below ``parent``, or
    (plain) in this process's own group."""
    for variant in VARIANTS:
        _, raw = variant.call(parent, CAT_CGROUP)
        stdout = raw["stdout"]
        assert isinstance(stdout, bytes)
        (line,) = [x for x in stdout.decode().splitlines() if x.startswith("0::")]
        where = line[3:]
        prefix = parent_path.rstrip("/") + "/pysandbox-bench-join-"
        if not (where.startswith(prefix) if variant.in_group else where == parent_path):
            raise RuntimeError(f"{variant.key}: the child was in {where}")


def interleaved(parent: Path, settings: Settings) -> list[list[float]]:
    for _ in range(settings.warmup):
        for variant in VARIANTS:
            variant.call(parent, TRUE_ARGV)
    samples: list[list[float]] = [[] for _ in VARIANTS]
    n = len(VARIANTS)
    for r in range(settings.rounds):
        for k in range(n):
            i = (r + k) % n
            samples[i].append(VARIANTS[i].call(parent, TRUE_ARGV, settings.gap)[0])
    return samples


def report(samples: list[list[float]], rounds: int) -> None:
    print()
    title = f"spawn of /bin/true, {rounds} calls each [ms]"
    print(f"{title:<52} {'median':>8} {'q1':>8} {'q3':>8}")
    print("-" * 79)
    for variant, values in zip(VARIANTS, samples):
        q1, q2, q3 = (1e3 * q for q in quartiles(values))
        print(f"{variant.label:<52} {q2:>8.3f} {q1:>8.3f} {q3:>8.3f}")
    pairs = [
        ("write / clone3", "write", "clone3"),
        ("write / plain (the cost of a migration)", "write", "plain"),
        ("clone3 / plain (the cost of a birth in the group)", "clone3", "plain"),
    ]
    print_ratios(pairs, [variant.key for variant in VARIANTS], samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    parser.add_argument(
        "--gap", type=float, default=0.0, help="seconds to sleep before each timed call"
    )
    args = parser.parse_args(argv)
    settings = dataclasses.replace(QUICK if args.quick else FULL, gap=args.gap)
    parent, parent_path = own_v2_group()
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:    {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"kernel:    {platform.release()}, groups made below {parent}")
    print(f"loadavg:   {loadavg()} (other work on the machine skews the figures)")
    print(f"settings:  {settings}")
    verify(parent, parent_path)
    samples = interleaved(parent, settings)
    report(samples, settings.rounds)
    print()
    print(f"loadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
