# SPDX-License-Identifier: MIT
"""What the tests of ``files_include`` and ``files_exclude`` run: code that leaves three
files in ``/sandbox``, one in a directory of output, one in a cache, one at the top."""

from __future__ import annotations

__all__ = ["ALL", "WRITE", "WRITE_SH"]

#: Python that leaves ``out/a.png``, ``.cache/x/y.json`` and ``notes.txt``.
WRITE = """
import os
os.makedirs("out", exist_ok=True)
os.makedirs(".cache/x", exist_ok=True)
for name, text in (("out/a.png", "png"), (".cache/x/y.json", "{}"), ("notes.txt", "n")):
    with open(name, "w") as file:
        file.write(text)
"""

#: The same as a shell command.
WRITE_SH = (
    "mkdir -p out .cache/x && echo png > out/a.png && echo {} > .cache/x/y.json"
    " && echo n > notes.txt"
)

#: The three files.
ALL = {"out/a.png", ".cache/x/y.json", "notes.txt"}
