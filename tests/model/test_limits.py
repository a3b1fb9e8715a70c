# SPDX-License-Identifier: MIT
"""Limits: every field checked when made, and the rlimits derived from it."""

from __future__ import annotations

import dataclasses
import math
import resource
from fractions import Fraction

import pytest

from pysandbox._model.limits import MAX_LIMIT, MIN_OPEN_FILES, MIN_PROCESSES, Limits

pytestmark = pytest.mark.no_bwrap

INT_FIELDS = [
    "memory",
    "stdout",
    "stderr",
    "processes",
    "file_size",
    "open_files",
    "disk",
    "files_out",
    "files_out_count",
]
SECONDS_FIELDS = ["wall_time", "cpu_time"]
#: The smallest value of each int field that has one above 1.
MINIMA = {"processes": 3, "open_files": 15}


def _named(field: str) -> str:
    """A regex for an error message that names ``field``."""
    return rf"^Limits\.{field} "


class _MyInt(int):
    pass


def test_fields_and_defaults_are_the_spec() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(Limits)}
    assert defaults == {
        "wall_time": 10.0,
        "cpu_time": 1.0,
        "memory": 256 * 2**20,
        "stdout": 2**20,
        "stderr": 2**20,
        "truncate_output": False,
        "processes": 64,
        "file_size": 16 * 2**20,
        "open_files": 256,
        "disk": 64 * 2**20,
        "files_out": 16 * 2**20,
        "files_out_count": 16384,
        "displays": 16 * 2**20,
        "displays_count": 256,
        "values": 16 * 2**20,
    }
    Limits()  # the defaults pass their own checks


def test_frozen_and_unknown_fields_rejected() -> None:
    limits = Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.memory = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        Limits(mem=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("value", [True, False, 1.0, 2.5, "1", None, b"1", Fraction(1)])
def test_int_field_of_wrong_type_is_a_type_error(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=_named(field)):
        Limits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("value", [0, -1, -(2**62), MAX_LIMIT + 1, 2**64, 10**100])
def test_int_field_out_of_range_is_a_value_error(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=_named(field)):
        Limits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("above_minimum", [0, 1, None])
def test_int_field_boundaries_accepted(field: str, above_minimum: int | None) -> None:
    minimum = MINIMA.get(field, 1)
    value = MAX_LIMIT if above_minimum is None else minimum + above_minimum
    assert getattr(Limits(**{field: value}), field) == value  # type: ignore[arg-type]


@pytest.mark.parametrize("field", INT_FIELDS)
def test_int_subclass_is_stored_as_plain_int(field: str) -> None:
    stored = getattr(Limits(**{field: _MyInt(70)}), field)  # type: ignore[arg-type]
    assert stored == 70 and type(stored) is int


def test_the_minima_are_the_spec() -> None:
    assert {"processes": MIN_PROCESSES, "open_files": MIN_OPEN_FILES} == MINIMA


@pytest.mark.parametrize(
    ("field", "value"),
    [("processes", 0), ("processes", 1), ("processes", 2)]
    + [("open_files", v) for v in (0, 1, 4, 8, 12, 13)],
)
def test_a_limit_too_small_to_start_anything_names_the_smallest_that_works(
    field: str, value: int
) -> None:
    """Below the minimum the sandbox could not even start the program (bwrap would fail,
    or the init could not fork it): refused when made, with the value that works."""
    expected = rf"^Limits\.{field} must be at least {MINIMA[field]} to start a program "
    with pytest.raises(ValueError, match=expected):
        Limits(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=expected):
        dataclasses.replace(Limits(), **{field: value})


@pytest.mark.parametrize("field", SECONDS_FIELDS)
@pytest.mark.parametrize("value", [True, False, "1", None, b"1", Fraction(1, 2), 1j])
def test_seconds_of_wrong_type_are_a_type_error(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=_named(field)):
        Limits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", SECONDS_FIELDS)
@pytest.mark.parametrize(
    "value",
    [
        0,
        0.0,
        -0.0,
        -1,
        -1e-9,
        math.nan,
        -math.nan,
        math.inf,
        -math.inf,
        MAX_LIMIT + 1,
        float(MAX_LIMIT) * 2,
        1e300,
        10**400,  # float() of it would overflow: must still be a ValueError
    ],
)
def test_seconds_out_of_range_are_a_value_error(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=_named(field)):
        Limits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", SECONDS_FIELDS)
@pytest.mark.parametrize("value", [5e-324, 1e-9, 0.5, 1, 3, float(MAX_LIMIT), MAX_LIMIT])
def test_seconds_accept_int_and_float_and_are_stored_as_float(field: str, value: float) -> None:
    stored = getattr(Limits(**{field: value}), field)  # type: ignore[arg-type]
    assert type(stored) is float and stored == value


@pytest.mark.parametrize("value", [1, 0, None, "yes", 1.0])
def test_truncate_output_must_be_a_bool(value: object) -> None:
    with pytest.raises(TypeError, match=_named("truncate_output")):
        Limits(truncate_output=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, False])
def test_truncate_output_bools_accepted(value: bool) -> None:
    assert Limits(truncate_output=value).truncate_output is value


def test_replace_checks_again() -> None:
    assert dataclasses.replace(Limits(), memory=2**30).memory == 2**30
    with pytest.raises(ValueError, match=_named("memory")):
        dataclasses.replace(Limits(), memory=0)


def test_equal_limits_are_equal_and_hash_alike() -> None:
    assert Limits(wall_time=5) == Limits(wall_time=5.0)
    assert hash(Limits(wall_time=5)) == hash(Limits(wall_time=5.0))


def test_rlimits_of_the_defaults() -> None:
    mib = 2**20
    assert Limits().rlimits() == [
        (resource.RLIMIT_AS, 256 * mib, 256 * mib),
        (resource.RLIMIT_NPROC, 64, 64),
        (resource.RLIMIT_FSIZE, 16 * mib, 16 * mib),
        (resource.RLIMIT_NOFILE, 256, 256),
        (resource.RLIMIT_CPU, 2, 3),
    ]


def test_rlimits_follow_each_field() -> None:
    limits = Limits(memory=11, processes=12, file_size=13, open_files=16, cpu_time=15)
    got = {res: (soft, hard) for res, soft, hard in limits.rlimits()}
    assert got == {
        resource.RLIMIT_AS: (11, 11),
        resource.RLIMIT_NPROC: (12, 12),
        resource.RLIMIT_FSIZE: (13, 13),
        resource.RLIMIT_NOFILE: (16, 16),
        resource.RLIMIT_CPU: (16, 17),
    }


@pytest.mark.parametrize(
    ("cpu_time", "soft"),
    [(5e-324, 2), (0.001, 2), (0.5, 2), (1, 2), (1.0, 2), (1.000001, 3), (1.5, 3), (2, 3)],
)
def test_rlimit_cpu_is_a_backstop_past_the_ceiling(cpu_time: float, soft: int) -> None:
    (cpu,) = [r for r in Limits(cpu_time=cpu_time).rlimits() if r[0] == resource.RLIMIT_CPU]
    assert cpu == (resource.RLIMIT_CPU, soft, soft + 1)


def test_rlimits_at_the_maximum_are_plain_ints_that_fit_64_bits() -> None:
    limits = Limits(
        memory=MAX_LIMIT,
        processes=MAX_LIMIT,
        file_size=MAX_LIMIT,
        open_files=MAX_LIMIT,
        cpu_time=MAX_LIMIT,
    )
    for triple in limits.rlimits():
        assert all(type(v) is int for v in triple)
        _, soft, hard = triple
        assert 0 <= soft <= hard < 2**63
