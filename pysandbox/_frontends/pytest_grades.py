# SPDX-License-Identifier: MIT
"""Points for a grader's tests: the ``points`` marker, partial credit (``award``), each
test's score in its reports, and the grader's options; the plugin calls ``add_options``
and ``configure``.

A test is worth the points of its nearest ``points`` marker (the test's over its
class's over its module's, keyword by keyword), else the ini option
``sandbox_default_points`` (1).  It scores them when it passes; ``award`` gives part of
them: a passing test that awarded scores what it awarded, a failing, skipped or erroring
one scores what it awarded before it failed (0 when it awarded nothing).  Each score
travels in the reports' ``user_properties``, the only per-test data pytest-xdist sends
to its controller: ``max_score`` (and the marker's ``name``, ``number`` and
``visibility``) from collection on, ``score`` from the teardown's report on; JUnit XML
writes them as properties.  Imports pytest: the plugin's alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

from .pytest_report import VISIBILITIES, Gradebook, number

__all__ = ["DEFAULT_POINTS", "add_options", "award", "configure", "points_of"]

#: What a test is worth without a ``points`` marker, unless ``sandbox_default_points``.
DEFAULT_POINTS = 1.0
_KEYWORDS = ("visibility", "name", "number")


@dataclasses.dataclass(frozen=True)
class _Points:
    """What a test is worth, and how Gradescope shows it."""

    max_score: float
    visibility: str | None = None
    name: str | None = None
    number: str | None = None


_DEFAULT_POINTS = pytest.StashKey[float]()
_POINTS = pytest.StashKey[_Points]()
_AWARDED = pytest.StashKey[float]()
_FAILED = pytest.StashKey[bool]()
_PASSED = pytest.StashKey[bool]()


def _is_positive(value: object) -> bool:
    """Whether ``value`` is an int or a float, finite and above 0 (a bool is not)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _check_keyword(item: pytest.Item, key: str, value: object) -> None:
    """``UsageError`` naming the test for a keyword of ``points`` it may not have."""
    where = f"{item.nodeid}: @pytest.mark.points({key}={value!r})"
    if key not in _KEYWORDS:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.points: unknown keyword {key!r}; "
            f"the keywords are {', '.join(_KEYWORDS)}"
        )
    if key == "visibility" and value not in VISIBILITIES:
        raise pytest.UsageError(f"{where}: the visibility is one of {', '.join(VISIBILITIES)}")
    if key != "visibility" and not (isinstance(value, str) and value.strip()):
        raise pytest.UsageError(f"{where}: the {key} is a non-empty str")


def points_of(item: pytest.Item) -> _Points:
    """The points of ``item`` from its ``points`` markers (the nearest wins, keyword by
    keyword) over the default; ``UsageError`` naming the test for a bad marker."""
    cached = item.stash.get(_POINTS, None)
    if cached is not None:
        return cached
    fields: dict[str, Any] = {"max_score": item.config.stash.get(_DEFAULT_POINTS, DEFAULT_POINTS)}
    for marker in reversed(list(item.iter_markers(name="points"))):
        if len(marker.args) != 1 or not _is_positive(marker.args[0]):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.points takes one positive number, the "
                f"test's points, got {marker.args!r}"
            )
        fields["max_score"] = float(marker.args[0])
        for key, value in marker.kwargs.items():
            _check_keyword(item, key, value)
            fields[key] = value
    callspec = getattr(item, "callspec", None)
    if "name" in fields and callspec is not None:
        fields["name"] = f"{fields['name']} [{callspec.id}]"
    points = _Points(**fields)
    item.stash[_POINTS] = points
    return points


def award(item_or_request: pytest.Item | pytest.FixtureRequest, points: float) -> None:
    """Give the test part of its points: each award adds to the test's, whose total may
    not pass its ``max_score``.  A passing test that awarded scores what it awarded
    (award all of its points or none); a failing one scores what it awarded before it
    failed.

    :param item_or_request: the test's item, or a request whose node is the test's
        (a function-scoped fixture's, or the test's ``request``).
    :raises TypeError: ``points`` is not a number, or the request is not a test's.
    :raises ValueError: ``points`` is negative, or would pass the test's ``max_score``.
    """
    item: object = item_or_request
    if isinstance(item_or_request, pytest.FixtureRequest):
        item = item_or_request.node
    if not isinstance(item, pytest.Item):
        raise TypeError(
            "item_or_request must be a test's item or a request whose node is the test "
            f"(a function-scoped fixture's), got one of {item!r}"
        )
    if isinstance(points, bool) or not isinstance(points, (int, float)):
        raise TypeError(f"points must be an int or a float, got {type(points).__name__}")
    most = points_of(item).max_score
    total = item.stash.get(_AWARDED, 0.0) + points
    if not math.isfinite(points) or points < 0 or total > most + 1e-9:
        raise ValueError(
            f"points must be at least 0 and bring the test's award to at most its "
            f"{most:g} points ({total - points:g} already awarded), got {points!r}"
        )
    item.stash[_AWARDED] = total


def _score(item: pytest.Item) -> float:
    """The test's score once its phases are over."""
    awarded = item.stash.get(_AWARDED, None)
    if item.stash.get(_FAILED, False) or not item.stash.get(_PASSED, False):
        return awarded or 0.0
    return points_of(item).max_score if awarded is None else awarded


class _Grades:
    """The hooks that put the points and the score of every test in its reports."""

    def pytest_collection_modifyitems(self, items: Iterable[pytest.Item]) -> None:
        """Check every ``points`` marker before anything runs (a bad one is a usage
        error) and record each test's ``max_score`` and presentation."""
        for item in items:
            points = points_of(item)
            item.user_properties.append(("max_score", number(points.max_score)))
            for key in _KEYWORDS:
                value = getattr(points, key)
                if value is not None:
                    item.user_properties.append((key, value))

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item) -> Generator[None, Any, None]:
        """Note each phase's outcome (as the other plugins left it: xfail included);
        at teardown, put the test's score in the report and in the item's properties."""
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        if report.failed or report.skipped:
            item.stash[_FAILED] = True
        elif report.when == "call":
            item.stash[_PASSED] = True
        if report.when == "teardown":
            entry = ("score", number(_score(item)))
            item.user_properties.append(entry)
            report.user_properties.append(entry)


def add_options(parser: pytest.Parser) -> None:
    """The grader's command-line and ini options."""
    group = parser.getgroup("pysandbox", "pysandbox: grading")
    group.addoption(
        "--submission",
        metavar="DIR",
        help="the directory of the submission to grade (the submission fixture)",
    )
    group.addoption(
        "--sandbox-gradescope",
        metavar="PATH",
        help="write Gradescope's results.json to PATH at the end of the session",
    )
    parser.addini("sandbox_submission", "pysandbox: the submission's directory (from the ini's)")
    parser.addini("sandbox_default_points", "pysandbox: the points of a test without a marker")
    parser.addini("sandbox_gradescope", "pysandbox: where to write Gradescope's results.json")
    for scope in ("", "stdout_"):
        parser.addini(
            f"sandbox_gradescope_{scope}visibility",
            f"pysandbox: results.json's {scope}visibility ({', '.join(VISIBILITIES)})",
        )


def _ini_visibility(config: pytest.Config, name: str) -> str | None:
    value = str(config.getini(name) or "").strip()
    if value and value not in VISIBILITIES:
        raise pytest.UsageError(
            f"ini option {name}: one of {', '.join(VISIBILITIES)}, got {value!r}"
        )
    return value or None


def _gradescope_path(config: pytest.Config) -> Path | None:
    """``--sandbox-gradescope`` (from where pytest started), else the ini option
    ``sandbox_gradescope`` (from the ini file's directory); its directory must exist."""
    option = config.getoption("sandbox_gradescope")
    ini = str(config.getini("sandbox_gradescope") or "")
    if option:
        path = config.invocation_params.dir / str(option)
    elif ini:
        path = (config.inipath.parent if config.inipath else config.rootpath) / ini
    else:
        return None
    if not path.parent.is_dir():
        raise pytest.UsageError(f"--sandbox-gradescope {path}: {path.parent} is not a directory")
    return path


def _default_points(config: pytest.Config) -> float:
    text = str(config.getini("sandbox_default_points") or "").strip()
    if not text:
        return DEFAULT_POINTS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not _is_positive(value):
        raise pytest.UsageError(
            f"ini option sandbox_default_points: a positive number, got {text!r}"
        )
    return value


def configure(config: pytest.Config) -> None:
    """Register the marker and the hooks; where the reports arrive (no xdist, or its
    controller) and a path is set, the writer of Gradescope's ``results.json``."""
    config.addinivalue_line(
        "markers",
        "points(n, *, visibility=None, name=None, number=None): what the test is worth "
        "(a positive number; the nearest marker wins), and how Gradescope shows it",
    )
    default = _default_points(config)
    config.stash[_DEFAULT_POINTS] = default
    config.pluginmanager.register(_Grades(), "pysandbox-grades")
    path = _gradescope_path(config)
    visibility = _ini_visibility(config, "sandbox_gradescope_visibility")
    stdout_visibility = _ini_visibility(config, "sandbox_gradescope_stdout_visibility")
    if path is not None and not hasattr(config, "workerinput"):
        book = Gradebook(
            path,
            default_points=default,
            visibility=visibility,
            stdout_visibility=stdout_visibility,
        )
        config.pluginmanager.register(book, "pysandbox-gradescope")
