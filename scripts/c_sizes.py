# SPDX-License-Identifier: MIT
"""The sizes of the C files and their functions, held to the limits CONTRIBUTING sets.

Prints each C file of ``src/`` and ``tests/core/c/`` (or of the paths given) with its line
count and its longest function, then every file over ``MAX_FILE`` lines and every
function over ``MAX_FUNCTION`` lines, counted from the line of its opening brace to the
line of its closing brace (the code is clang-formatted: a function's braces stand alone
in column 0).  A longer function passes when the block comment above it says why, in
words that include "longer than 80 lines".  Exits 1 when anything is over.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MAX_FILE = 500
MAX_FUNCTION = 80
EXCUSE = "longer than 80 lines"
ROOT = Path(__file__).resolve().parent.parent


def functions(lines: list[str]) -> list[tuple[str, int, bool]]:
    """Each function's name, length and whether its block comment excuses a long body."""
    found = []
    start = None
    for number, line in enumerate(lines):
        if line == "{":
            start = number
        elif line == "}" and start is not None:
            head = start - 1
            while head > 0 and "(" not in lines[head]:
                head -= 1
            name = re.search(r"(\w+)\s*\(", lines[head])
            comment_end = head - 1
            while comment_end >= 0 and not lines[comment_end].strip().endswith("*/"):
                if lines[comment_end].strip() == "":
                    break
                comment_end -= 1
            comment_start = comment_end
            while comment_start > 0 and not lines[comment_start].lstrip().startswith("/*"):
                comment_start -= 1
            comment = " ".join(lines[comment_start : comment_end + 1])
            comment = re.sub(r"\s*\*\s*", " ", comment)
            found.append(
                (name.group(1) if name else "?", number - start + 1, EXCUSE in comment.lower())
            )
            start = None
    return found


def main(paths: list[str]) -> int:
    files = [Path(p) for p in paths] or sorted(
        [*(ROOT / "src").glob("*.c"), *(ROOT / "tests" / "core" / "c").glob("*.c")]
    )
    over = []
    for path in files:
        lines = path.read_text().splitlines()
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        found = functions(lines)
        longest = max(found, key=lambda f: f[1], default=("-", 0, False))
        print(f"{name!s:28} {len(lines):5} lines   longest: {longest[0]} ({longest[1]})")
        if len(lines) > MAX_FILE:
            over.append(f"{name}: {len(lines)} lines (at most {MAX_FILE})")
        for function, length, excused in found:
            if length > MAX_FUNCTION:
                why = "excused by its comment" if excused else f"at most {MAX_FUNCTION}"
                line = f"{name}: {function}() is {length} lines ({why})"
                print(line)
                if not excused:
                    over.append(line)
    for line in over:
        print("over:", line)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
