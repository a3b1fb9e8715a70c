# SPDX-License-Identifier: MIT
"""``sweep.creator_of`` reads a group's name as the regular expression it stands for."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pysandbox._cgroups.sweep import creator_of

pytestmark = pytest.mark.no_bwrap

#: What ``creator_of`` reads without ``re``.
GROUP_NAME = re.compile(r"pysandbox-([1-9][0-9]{0,8})-([0-9]+)-[0-9]+-[0-9a-f]+")

#: The pieces names are made of: digits (ASCII and not), hex, the separator, other text.
PIECES = st.sampled_from(
    [
        "pysandbox",
        "-",
        "0",
        "1",
        "9",
        "123456789",
        "1234567890",
        "ab",
        "f",
        "g",
        "A",
        "",
        "\u0661",
        "\u00b2",
        "\n",
        " ",
        "+1",
        "_",
    ]
)


def expected(name: str) -> tuple[int, int] | None:
    match = GROUP_NAME.fullmatch(name)
    return None if match is None else (int(match[1]), int(match[2]))


@given(st.lists(PIECES, max_size=12).map("".join))
def test_names_are_read_as_the_regular_expression(name: str) -> None:
    assert creator_of(name) == expected(name)


@pytest.mark.parametrize(
    "name",
    [
        "pysandbox-12-4026531836-0-b9df61fb",
        "pysandbox-123456789-1-2-0",
        "pysandbox-1234567890-1-2-0",
        "pysandbox-012-1-2-a",
        "pysandbox-12-1-2-",
        "pysandbox-12-1-2-A",
        "pysandbox-12-\u0661-2-a",
        "pysandbox-12-1-2-a-b",
        "pysandbox-12-1-2-a\n",
        "pysandbox",
        "other-12-1-2-a",
    ],
)
def test_the_edges_of_the_form(name: str) -> None:
    assert creator_of(name) == expected(name)
