# SPDX-License-Identifier: MIT
"""A misspelled limit keyword is a type error through every public entry point, so a
user's checker catches it before a sandbox ignores it or a call fails at run time."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support.mypy import mypy_strict

EXAMPLES = Path(__file__).resolve().parent / "typing_misspelled.py"
pytestmark = pytest.mark.no_bwrap


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="mypy 2.4 needs Python 3.10+ (the default Python checks)"
)
def test_mypy_rejects_each_misspelled_limit_keyword(tmp_path: Path) -> None:
    """``mypy --strict`` on tests/repo/typing_misspelled.py, from a scratch directory (the
    installed package is checked): an error on each line marked ``# E`` and on no other."""
    lines = EXAMPLES.read_text().splitlines()
    marked = {number for number, line in enumerate(lines, 1) if line.endswith("# E")}
    assert len(marked) >= 6
    checked = mypy_strict(EXAMPLES, tmp_path)
    errors = re.findall(r"^.*?:(\d+): error: (.*)$", checked.stdout, re.MULTILINE)
    assert {int(number) for number, _ in errors} == marked, checked.stdout
    assert all("Unexpected keyword argument" in message for _, message in errors), errors
