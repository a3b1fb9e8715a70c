# SPDX-License-Identifier: MIT
"""The limit options with units: what they accept, what they refuse, and the Limits they
make.  Pure argparse, no sandbox."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from pysandbox import Limits
from pysandbox._frontends.options import add_limit_options, limits_from
from pysandbox._model.units import LIMIT_OPTIONS

pytestmark = pytest.mark.no_bwrap


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prog")
    add_limit_options(parser)
    return parser


def _limits(*argv: str) -> Limits:
    return limits_from(_parser().parse_args(list(argv)))


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The usage error argparse prints for ``argv``; fails unless it exits 2."""
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(list(argv))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: prog") and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("64k", 64 * 1024),
        ("64K", 64 * 1024),
        ("64KiB", 64 * 1024),
        ("256M", 256 * 2**20),
        ("256mib", 256 * 2**20),
        ("1G", 2**30),
        ("1.5G", 3 * 2**29),
        ("0.5M", 2**19),
        ("2T", 2 * 2**40),
    ],
)
def test_sizes_take_binary_units(text: str, expected: int) -> None:
    assert _limits("--memory", text).memory == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2", 2.0), ("0.5", 0.5), ("1.5s", 1.5), ("500ms", 0.5), (".25", 0.25), ("3S", 3.0)],
)
def test_times_are_seconds_or_milliseconds(text: str, expected: float) -> None:
    assert _limits("--cpu-time", text).cpu_time == expected
    assert _limits("--wall-time", text).wall_time == expected


def test_every_option_sets_its_field_and_the_rest_keep_their_defaults() -> None:
    limits = _limits(
        "--wall-time=3",
        "--cpu-time=0.25",
        "--memory=128M",
        "--stdout-limit=1K",
        "--stderr-limit=2K",
        "--file-size=3K",
        "--disk=4M",
        "--files-out=5K",
        "--files-out-count=100",
        "--processes=16",
        "--open-files=32",
        "--truncate-output",
    )
    assert limits == Limits(
        wall_time=3,
        cpu_time=0.25,
        memory=128 * 2**20,
        stdout=1024,
        stderr=2048,
        file_size=3072,
        disk=4 * 2**20,
        files_out=5120,
        files_out_count=100,
        processes=16,
        open_files=32,
        truncate_output=True,
    )
    assert _limits() == Limits()
    assert _limits("--processes", "8") == dataclasses.replace(Limits(), processes=8)


def test_options_replace_the_fields_of_a_base() -> None:
    base = Limits(cpu_time=5, memory=2**30, truncate_output=True)
    limits = limits_from(_parser().parse_args(["--memory", "64M"]), base)
    assert limits == dataclasses.replace(base, memory=64 * 2**20)


def test_each_option_is_named_after_its_field() -> None:
    fields = {field.name for field in dataclasses.fields(Limits)}
    assert {option.field for option in LIMIT_OPTIONS} | {"truncate_output"} == fields


_NOT_POSITIVE = {
    "SECONDS": ["0", "-1", "0ms", "0.0s", "-0.5"],
    "SIZE": ["0", "-1", "0K", "-2M", "0.0001K"],
    "N": ["0", "-1", "-64"],
}


@pytest.mark.parametrize(
    ("option", "value"),
    [(option.flag, value) for option in LIMIT_OPTIONS for value in _NOT_POSITIVE[option.metavar]],
)
def test_zero_or_negative_is_a_usage_error_never_unlimited(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    """``--memory=-2M``: argparse takes ``--memory -2M`` for a missing value and an option."""
    err = _refusal(capsys, f"{option}={value}")
    assert f"argument {option}: must be greater than 0" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--memory", "1MB"], "binary unit"),
        (["--memory", "12 parsecs"], "binary unit"),
        (["--memory", "0.5"], "whole"),
        (["--memory", "iB"], "binary unit"),
        (["--memory", "8iB"], "needs a unit"),
        (["--memory", "9999999T"], "at most"),
        (["--cpu-time", "1h"], "seconds"),
        (["--cpu-time", "nan"], "seconds"),
        (["--wall-time", "inf"], "seconds"),
        (["--wall-time", "1e3"], "seconds"),
        (["--processes", "1.5"], "whole number"),
        (["--processes", "2"], "at least 3"),
        (["--open-files", "14"], "at least 15"),
        (["--open-files", "lots"], "whole number"),
        (["--files-out-count", "1K"], "whole number"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    err = _refusal(capsys, *argv)
    assert f"argument {argv[0]}: " in err and says in err


def test_help_shows_the_defaults_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "(default 1 s)" in out and "(default 256M)" in out and "(default 64)" in out
    assert "--files-out-count N" in out and "(default 16384)" in out


def test_options_fit_in_an_argument_group() -> None:
    parser = argparse.ArgumentParser()
    add_limit_options(parser.add_argument_group("mine"))
    assert limits_from(parser.parse_args(["--disk", "1M"])).disk == 2**20
