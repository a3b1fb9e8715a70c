# SPDX-License-Identifier: MIT
"""Grading 20 test cases against one submission through one session (``sandbox_session``)
and with a fresh sandbox per test (``sandbox``), by real pytest runs, in one run.

Usage: .venv/bin/python benchmarks/bench_grader.py [--quick] [--rounds N]

Writes a submission (``solution.py``: ``is_prime``, ``add``, ``reverse_words``) and two
test modules grading the same 20 cases: one with the ``sandbox`` fixture, each case a
fresh sandbox running a harness that imports the module, calls the function and writes
its value to a file (the pre-kit way, as ``examples/grader`` did it), and one with the
``sandbox_session`` fixture, the module imported once and each case a
``sandbox_session.call``.  Each round runs ``pytest --submission ... --sandbox-gradescope
...`` on each module, in an order that rotates; the cost of grading is the sum of the
20 test cases' times in the JUnit XML (setup, call and teardown: the session's start
and load are in the first case's setup), pytest's own start-up left out; the
whole pytest run's wall time is printed too.  Each run's ``results.json`` must score
the same (a wrong grade fails the benchmark).  Prints the medians, their ratio, and
issue 24's goal: grading through a session costs at most 0.3x the fresh way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from measuring import loadavg, quartiles

#: The goal: the session's grading cost over the fresh one's.
GOAL = 0.3

SOLUTION = """\
def is_prime(n):
    if n < 2:
        return False
    divisor = 2
    while divisor * divisor <= n:
        if n % divisor == 0:
            return False
        divisor += 1
    return True


def add(a, b):
    print("adding", a, b)
    return a + b


def reverse_words(text):
    return " ".join(text.split()[::-1])
"""

CASES = [("is_prime", [n], None) for n in (1, 2, 3, 4, 17, 91, 97, 7919)]
CASES += [("add", [a, b], None) for a, b in ((2, 3), (-7, 7), (10**20, 1), (0, 0))]
CASES += [("reverse_words", [text], None) for text in ("a b", " to be ", "x", "")]
CASES += [("is_prime", [n], None) for n in (0, 25, 101, 104729)]

HEADER = """\
import json

import pytest

CASES = @CASES@
"""

FRESH = (
    HEADER
    + '''
HARNESS = """
import json, sys
import solution
answer = getattr(solution, sys.argv[1])(*json.loads(sys.argv[2]))
with open("answer.json", "w") as out:
    json.dump(answer, out)
"""


@pytest.mark.parametrize(("function", "args"), CASES)
def test_case(sandbox, submission, function, args):
    result = sandbox.run_python(
        HARNESS,
        args=[function, json.dumps(args)],
        files={"solution.py": submission.read("solution.py")},
    ).check()
    assert json.loads(result.files["answer.json"]) == EXPECTED[f"{function}{args}"]
'''
)

SESSION = (
    HEADER
    + """
pytestmark = pytest.mark.sandbox_session(setup="import solution")


@pytest.mark.parametrize(("function", "args"), CASES)
def test_case(sandbox_session, function, args):
    assert sandbox_session.call(f"solution.{function}", *args) == EXPECTED[f"{function}{args}"]
"""
)


def expected() -> dict[str, object]:
    """Each case's right answer, computed here; ``is_prime(97)`` is made wrong on
    purpose, so that both ways must fail the same case."""
    namespace: dict[str, object] = {"print": lambda *args: None}
    exec(SOLUTION, namespace)
    answers = {f"{f}{args}": namespace[f](*args) for f, args, _ in CASES}  # type: ignore[operator]
    answers["is_prime[97]"] = False
    return answers


def write_grader(directory: Path) -> None:
    (directory / "sub").mkdir()
    (directory / "sub" / "solution.py").write_text(SOLUTION)
    cases = [(function, args) for function, args, _ in CASES]
    tail = f"\nEXPECTED = {expected()!r}\n"
    (directory / "test_fresh.py").write_text(FRESH.replace("@CASES@", repr(cases)) + tail)
    (directory / "test_session.py").write_text(SESSION.replace("@CASES@", repr(cases)) + tail)
    (directory / "pytest.ini").write_text(
        "[pytest]\nsandbox_cpu_time = 1\nsandbox_wall_time = 10\n"
    )


def grade(directory: Path, module: str) -> tuple[float, float, float]:
    """One pytest run of ``module``: the cases' summed times, the run's wall time, and
    the score of its results.json."""
    junit, results = directory / f"{module}.xml", directory / f"{module}.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"{module}.py", "--submission", "sub", "--junitxml", str(junit),
         "--sandbox-gradescope", str(results)],
        cwd=directory, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    cases = [float(case.get("time", "0")) for case in ET.parse(junit).getroot().iter("testcase")]
    if len(cases) != len(CASES) or done.returncode not in (0, 1):
        raise RuntimeError(f"{module}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    score = json.loads(results.read_text())["score"]
    return sum(cases), wall, float(score)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    parser.add_argument("--rounds", type=int, help="timed rounds of the two (default 7)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 7)
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:  {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"loadavg: {loadavg()} (other work on the machine skews the figures)")
    modules = ["test_fresh", "test_session"]
    grading: dict[str, list[float]] = {module: [] for module in modules}
    walls: dict[str, list[float]] = {module: [] for module in modules}
    scores: set[float] = set()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        write_grader(directory)
        grade(directory, "test_session")  # warm-up: the page cache, pytest's imports
        for round_number in range(rounds):
            order = modules if round_number % 2 == 0 else modules[::-1]
            for module in order:
                cost, wall, score = grade(directory, module)
                grading[module].append(cost)
                walls[module].append(wall)
                scores.add(score)
    if len(scores) != 1 or scores != {len(CASES) - 1.0}:
        raise RuntimeError(f"the two ways graded differently: scores {sorted(scores)}")
    print()
    print(f"{len(CASES)} cases, {rounds} runs each; both scored {scores.pop():g} of {len(CASES)}")
    print(f"{'[s]':<40} {'median':>8} {'q1':>8} {'q3':>8} {'pytest wall':>12}")
    print("-" * 80)
    labels = {
        "test_fresh": "fresh sandbox per test (baseline)",
        "test_session": "one session, a call per test",
    }
    medians = {}
    for module in modules:
        q1, q2, q3 = quartiles(grading[module])
        medians[module] = q2
        wall = quartiles(walls[module])[1]
        print(f"{labels[module]:<40} {q2:>8.3f} {q1:>8.3f} {q3:>8.3f} {wall:>12.3f}")
    ratio = medians["test_session"] / medians["test_fresh"]
    print()
    print(f"grading cost, session / fresh: {ratio:.2f} (goal: at most {GOAL})")
    print(f"loadavg at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
