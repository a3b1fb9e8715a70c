# SPDX-License-Identifier: MIT
"""A misspelled limit keyword is a type error through every public entry point, and a
misspelled key of a result's JSON dict too, so a user's checker catches it before a
sandbox ignores it or a call fails at run time."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support.mypy import mypy_strict

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE / "typing_misspelled.py"
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


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="mypy 2.4 needs Python 3.10+ (the default Python checks)"
)
def test_mypy_types_the_json_dicts(tmp_path: Path) -> None:
    """``mypy --strict`` on tests/repo/typing_schema.py: ``to_dict()``'s keys and value
    types are known (``ResultDict``), so a misspelled key, a wrong type and a key of one
    outcome shape read from the other are errors, on the lines marked ``# E`` only."""
    examples = HERE / "typing_schema.py"
    lines = examples.read_text().splitlines()
    marked = {number for number, line in enumerate(lines, 1) if line.endswith("# E")}
    assert len(marked) == 4
    checked = mypy_strict(examples, tmp_path)
    errors = re.findall(r"^.*?:(\d+): error: (.*)$", checked.stdout, re.MULTILINE)
    assert {int(number) for number, _ in errors} == marked, checked.stdout
