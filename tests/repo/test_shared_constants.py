# SPDX-License-Identifier: MIT
"""The constants both ends of a pipe must agree on, stated once on each side because
the programs inside a sandbox (the keeper, the display hook) import nothing of the
package, and ``_model`` may not import ``_api``: read from the sources with ``ast``,
each pair must be written alike, so a change on one side alone fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_bwrap

PACKAGE = Path(__file__).resolve().parents[2] / "pysandbox"

#: (name, where it is stated): every place must give it the same value.
SHARED = [
    ("FRAME", ["_model/display_frames.py", "_api/display_hook.py"]),
    ("DISPLAY", ["_model/display_frames.py", "_api/display_hook.py", "_api/session_channel.py"]),
    ("VALUES", ["_api/session_keeper.py", "_api/session_channel.py"]),
    ("VALUES_ROOM", ["_api/session_reply.py", "_api/session_keeper.py"]),
    ("ERROR_ROOM", ["_api/session_reply.py", "_api/session_keeper.py"]),
    ("VALUE_ERROR_MAX", ["_api/session_reply.py", "_api/session_keeper.py"]),
    ("HEADER", ["_api/session_channel.py", "_api/session_keeper.py"]),
]


def stated(path: str, name: str) -> str:
    """The source of the module-level value of ``name`` in ``path`` (a tuple assignment
    such as ``A, B = 1, 2`` included), as ``ast.unparse`` writes it."""
    tree = ast.parse((PACKAGE / path).read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == name:
            return ast.unparse(value)
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for element, part in zip(target.elts, value.elts):
                if isinstance(element, ast.Name) and element.id == name:
                    return ast.unparse(part)
    raise AssertionError(f"{path} states no {name}")


@pytest.mark.parametrize(("name", "places"), SHARED, ids=[name for name, _ in SHARED])
def test_both_ends_state_the_same_value(name: str, places: list[str]) -> None:
    values = {place: stated(place, name) for place in places}
    assert len(set(values.values())) == 1, values


def test_a_changed_value_is_seen() -> None:
    # The reading itself: a value written differently is told apart.
    assert stated("_api/session_reply.py", "VALUES_ROOM") == "64"
    assert stated("_api/session_channel.py", "DISPLAY") == "ord('P')"
