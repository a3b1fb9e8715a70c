"""The README's Python examples run, and do what they say."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.rst"
BLOCKS = re.findall(r"\.\. code-block:: python\n\n((?:(?: {3,}.*)?\n)+)", README.read_text())


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(block: str) -> None:
    exec(compile(textwrap.dedent(block), str(README), "exec"), {})
