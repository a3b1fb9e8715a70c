# SPDX-License-Identifier: MIT
"""The start-up of a static program of glibc against one of musl: why the programs every
sandbox starts (the init, a copy's client) are built with musl where it is installed.

Usage: python benchmarks/bench_programs.py [--rounds N]

An empty ``main`` is compiled twice into a temporary directory, ``cc -static -O2``
(glibc) and ``musl-gcc -static -O2``; each is started with ``posix_spawn`` and waited
for, 200 times a round, the two interleaved round by round.  Printed: the time per
start of each, and the difference, which every sandbox pays once per program.  It is a
measurement, not a test: it exits 0 whatever the figures are, and fails only when a
compiler is missing or a program does not exit 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

from measuring import interleaved, loadavg, ratio

#: Starts per timed call, so that one call is long enough to time.
STARTS = 200


def build(compiler: str, directory: str) -> str:
    """An empty program compiled statically by ``compiler`` in ``directory``."""
    found = shutil.which(compiler)
    if found is None:
        sys.exit(f"bench_programs.py: {compiler} is missing (apt-get install gcc musl-tools)")
    source = os.path.join(directory, "empty.c")
    with open(source, "w") as file:
        file.write("int main(void) { return 0; }\n")
    program = os.path.join(directory, f"empty-{compiler}")
    subprocess.run([found, "-static", "-O2", source, "-o", program], check=True)
    return program


def starts(program: str) -> Callable[[], int]:
    """A call that starts ``program`` ``STARTS`` times and returns how many exited 0."""

    def call() -> int:
        clean = 0
        for _ in range(STARTS):
            pid = os.posix_spawn(program, [program], {})
            clean += os.waitpid(pid, 0)[1] == 0
        return clean

    return call


def check(index: int, clean: int) -> None:
    if clean != STARTS:
        raise RuntimeError(f"program {index}: {STARTS - clean} starts did not exit 0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds")
    args = parser.parse_args(argv)
    print(f"load average before: {loadavg()}")
    with tempfile.TemporaryDirectory() as directory:
        programs = [build("cc", directory), build("musl-gcc", directory)]
        glibc, musl = interleaved(
            [starts(p) for p in programs], warmup=1, rounds=args.rounds, check=check
        )
    per_start = [statistics.median(s) / STARTS * 1e6 for s in (glibc, musl)]
    print(f"static glibc program: {per_start[0]:.0f} us a start (median of {args.rounds})")
    print(f"static musl program:  {per_start[1]:.0f} us a start")
    of_medians, per_round = ratio(musl, glibc)
    print(f"musl / glibc: {of_medians:.2f} (per round {per_round:.2f}); ", end="")
    print(f"difference {per_start[0] - per_start[1]:.0f} us a start")
    print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
