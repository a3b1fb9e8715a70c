# SPDX-License-Identifier: MIT
"""The README's Python examples run, in order, and do what they say."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.rst"
BLOCKS = re.findall(r"\.\. code-block:: python\n\n((?:(?: {3,}.*)?\n)+)", README.read_text())


def test_readme_examples_run_in_order() -> None:
    """Each example may use names that an earlier one imported, as a reader would."""
    assert len(BLOCKS) >= 3
    namespace: dict[str, object] = {}
    for block in BLOCKS:
        exec(compile(textwrap.dedent(block), str(README), "exec"), namespace)
