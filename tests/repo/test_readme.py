# SPDX-License-Identifier: MIT
"""The README's Python quick starts run, in order, and do what they say (the guide's
examples are run by test_docs.py; the notebook, grader and shell quick starts by the
tests of those front ends)."""

from __future__ import annotations

import textwrap

from support.docs import README, code_blocks


def test_readme_examples_run_in_order() -> None:
    """Each example may use names that an earlier one imported, as a reader would."""
    blocks = code_blocks("python", README)
    assert len(blocks) >= 2
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(textwrap.dedent(block), str(README), "exec"), namespace)
