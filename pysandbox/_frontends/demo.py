# SPDX-License-Identifier: MIT
"""The reference implementation's demo: ``pysandbox demo``, and bare ``python -m pysandbox``.

The program greets on stdout, shows who and where it is and its environment, tries to
write a file and to delete its own code, greets on stderr, and exits 42.  Inside the
sandbox the environment is (almost) empty and both file operations fail.
"""

from __future__ import annotations

from .._api.eval import eval_in_sandbox

__all__ = ["DEMO_PROGRAM", "demo"]

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


def demo() -> int:
    """Run the demo program and print what came back, as the reference does; 0 when it
    returned 42 as expected, else 1."""
    result = eval_in_sandbox(DEMO_PROGRAM)
    print(f"Stdout:     {result.stdout}")
    print(f"Stderr:     {result.stderr}")
    print(f"Returncode: {result.returncode}")
    return 0 if result.returncode == 42 else 1
