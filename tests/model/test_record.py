# SPDX-License-Identifier: MIT
"""``@record``, the internal value classes: what a frozen dataclass would do, without
``dataclasses``."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from pysandbox._launch.plan import FdLayout
from pysandbox._model.record import record, replace

pytestmark = pytest.mark.no_bwrap


@record
class Point:
    x: int
    y: int = 0
    label: str = "p"


@record(frozen=False)
class Box:
    content: list[int]


def test_fields_by_position_and_name_with_defaults() -> None:
    assert (Point(1).x, Point(1).y, Point(1).label) == (1, 0, "p")
    point = Point(1, label="q", y=2)
    assert (point.x, point.y, point.label) == (1, 2, "q")


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        ((), {}, "missing required argument: 'x'"),
        ((1, 2, "a", 4), {}, "takes 3 positional arguments but 4 were given"),
        ((1,), {"z": 1}, "unexpected keyword argument 'z'"),
        ((1,), {"x": 2}, "multiple values for argument 'x'"),
    ],
)
def test_wrong_arguments_are_type_errors(
    args: tuple[object, ...], kwargs: dict[str, object], says: str
) -> None:
    with pytest.raises(TypeError, match=says):
        Point(*args, **kwargs)  # type: ignore[arg-type, call-arg, misc]


def test_equal_by_fields_and_type_hashable_and_shown() -> None:
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(1, 3)
    assert Point(1) != (1, 0, "p")
    assert hash(Point(1, 2)) == hash(Point(1, 2))
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert repr(Point(1, label="x")) == "Point(x=1, y=0, label='x')"


def test_frozen_refuses_assignment_and_deletion() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del point.y  # type: ignore[misc]
    assert point.x == 1


def test_not_frozen_may_change_and_is_not_hashable() -> None:
    box = Box([1])
    box.content = [2]
    assert box == Box([2])
    with pytest.raises(TypeError):
        hash(box)


def test_replace_copies_with_changes_and_refuses_strangers() -> None:
    point = Point(1, 2)
    assert replace(point, y=5) == Point(1, 5)
    assert point == Point(1, 2)
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(point, z=1)


def test_a_required_field_after_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="'b' without a default follows one with"):

        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_records_of_the_package_pickle_and_match_by_position() -> None:
    layout = FdLayout.of(payloads=1, captures=2, code=True)
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert FdLayout.__match_args__[:2] == ("payloads", "code")
