"""``python -m pysandbox``: run the reference implementation's demo program in the sandbox;
``python -m pysandbox --selftest``: attack a sandbox on this host and report what holds.

The program greets on stdout, shows who and where it is and its environment, tries to
write a file and to delete its own code, greets on stderr, and exits 42.  Inside the
sandbox the environment is (almost) empty and both file operations fail.
"""

from __future__ import annotations

import sys

from ._eval import eval_in_sandbox
from ._selftest import selftest

DEMO_PROGRAM = r"""
import json
import os
import sys

print("Hello World from stdout!")
print("My UID is", os.getuid())
print("My GID is", os.getgid())
print("My PID is", os.getpid())
print("My CWD is", os.getcwd())
print("My environment is", json.dumps(dict(os.environ), indent=4))

for attempt, action in (
    ("Writing to a file", lambda: open("./foo.txt", "w").write("EVIL\n")),
    ("Deleting a file", lambda: os.unlink("code.py")),
):
    try:
        action()
    except BaseException as error:
        print(f"{attempt} failed with: {error}")

sys.stderr.write("Hello World from stderr!")
sys.exit(42)
"""


def main(argv: list[str] | None = None) -> int:
    """Run the demo (or the self-test) and print what came back; exit 0 when the
    sandbox behaved as expected."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--selftest"]:
        report = selftest()
        print(report)
        return 0 if report else 1
    if args:
        print("usage: python -m pysandbox [--selftest]", file=sys.stderr)
        return 2
    result = eval_in_sandbox(DEMO_PROGRAM)
    print(f"Stdout:     {result.stdout}")
    print(f"Stderr:     {result.stderr}")
    print(f"Returncode: {result.returncode}")
    return 0 if result.returncode == 42 else 1


if __name__ == "__main__":
    sys.exit(main())
