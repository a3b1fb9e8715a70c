# SPDX-License-Identifier: MIT
"""The pytest plugin for graders: a ``sandbox`` fixture whose runs take their limits from
the test's ``@pytest.mark.sandbox(...)`` markers and the ``sandbox_*`` ini options, and
whose every run is attached to the test's report; points, partial credit, Gradescope's
``results.json`` and the ``submission`` fixture (``_frontends/pytest_grades.py`` and its
neighbours).

pytest loads it through the ``pytest11`` entry point named ``pysandbox`` as soon as
pysandbox is installed (``-p no:pysandbox`` turns it off).  It and the ``pytest_*``
modules of ``_frontends`` that it imports are the only ones that import pytest:
``import pysandbox`` never does.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from ._api.aio import run_async, run_python_async
from ._api.run import run, run_python
from ._frontends.pytest_grades import add_options, award, configure
from ._frontends.pytest_report import SECTION_PREFIX, sandbox_report
from ._frontends.pytest_student import Submission, submission
from ._model.limits import Limits
from ._model.result import Result, output_tails
from ._model.units import LIMIT_OPTIONS
from ._model.verdict import describe, size_text

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._api.options import AsyncPythonOptions, AsyncRunOptions, PythonOptions, RunOptions

__all__ = ["SECTION_PREFIX", "Sandbox", "Submission", "award", "sandbox_report", "submission"]

#: The fields of ``Limits``, by name, with the type of their default (float, int, bool).
_FIELD_TYPES: dict[str, type] = {
    field.name: type(field.default) for field in dataclasses.fields(Limits)
}
#: How a string becomes the value of each field but ``truncate_output``: the parsers of
#: the command line's options, so ``"256M"`` and ``"500ms"`` mean the same everywhere.
_PARSERS = {option.field: option.parse for option in LIMIT_OPTIONS}
#: The fields that are counts, not sizes.
_COUNTS = {option.field for option in LIMIT_OPTIONS if option.metavar == "N"}
_INI_PREFIX = "sandbox_"
#: How long a title's program or code may be before it is cut.
_TITLE_WIDTH = 60
_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off")


class _Run(NamedTuple):
    """One run made through the fixture: its number in the test, what ran, how it went."""

    number: int
    what: str
    limits: Limits
    result: Result


_BASE_LIMITS = pytest.StashKey[Limits]()
_RUNS = pytest.StashKey["list[_Run]"]()


def _parse(name: str, text: str) -> object:
    """A limit written as a string (an ini value, or a marker's ``"256M"``) as the type
    of ``Limits.<name>``: seconds and sizes take the command line's units (``500ms``,
    ``256M``); ``truncate_output`` takes true or false.  ``ValueError`` says why not."""
    if _FIELD_TYPES[name] is bool:
        word = text.strip().lower()
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return word in _TRUE_WORDS
        raise ValueError(f"expected true or false, got {text!r}")
    return _PARSERS[name](text)


def _base_limits(config: pytest.Config) -> Limits:
    """``Limits()`` with every ``sandbox_*`` ini option that is set; ``UsageError``
    naming the option for a value that is not one."""
    limits = Limits()
    for name in _FIELD_TYPES:
        text = config.getini(_INI_PREFIX + name)
        if not text:
            continue
        try:
            value: Any = _parse(name, str(text))
            limits = dataclasses.replace(limits, **{name: value})
        except (TypeError, ValueError) as exc:
            raise pytest.UsageError(f"ini option {_INI_PREFIX}{name}: {exc}") from None
    return limits


def _limits_for(item: pytest.Item, base: Limits) -> Limits:
    """``base`` overridden by the item's ``sandbox`` markers, the nearest winning per
    field (the test's own over its class's over its module's).

    :raises pytest.UsageError: a positional argument, an unknown keyword or a value
        ``Limits`` refuses, naming the test and the keyword.
    """
    values: dict[str, Any] = {}
    for marker in reversed(list(item.iter_markers(name="sandbox"))):
        if marker.args:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.sandbox takes keyword arguments only "
                f"(the fields of pysandbox.Limits), got {marker.args!r}"
            )
        for key, value in marker.kwargs.items():
            if key not in _FIELD_TYPES:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.sandbox: unknown limit {key!r}; "
                    f"the limits are {', '.join(_FIELD_TYPES)}"
                )
            try:
                values[key] = _parse(key, value) if isinstance(value, str) else value
            except ValueError as exc:
                raise pytest.UsageError(
                    f"{item.nodeid}: @pytest.mark.sandbox({key}={value!r}): {exc}"
                ) from None
    try:
        return dataclasses.replace(base, **values)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.sandbox: {exc}") from None


def _shorten(text: str) -> str:
    """``text`` cut to ``_TITLE_WIDTH`` characters, with ``...`` when it was longer."""
    return text if len(text) <= _TITLE_WIDTH else text[: _TITLE_WIDTH - 3] + "..."


def _code_title(code: str) -> str:
    """``run_python: <first non-blank line of code>``, shortened."""
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    return "run_python: " + _shorten(lines[0] if lines else "(empty)")


def _section(entry: _Run) -> tuple[str, str]:
    """The report section of one run: a title naming it, the verdict, the limits in
    force and the tails of stdout and stderr."""
    limits = entry.limits
    text = (
        f"{describe(entry.result, limits)}\n"
        f"limits: cpu {limits.cpu_time:g} s, wall {limits.wall_time:g} s, "
        f"memory {size_text(limits.memory)}, processes {limits.processes}\n"
        f"{output_tails(entry.result)}\n"
    )
    return f"{SECTION_PREFIX} {entry.number}: {entry.what}", text


class Sandbox:
    """What the ``sandbox`` fixture gives a test: ``run``, ``run_python`` and their async
    forms, with the signatures of ``pysandbox.run`` and the others, whose ``limits``
    default to the test's (``limits``), and whose every result is attached to the test's
    report (a section and a ``user_properties`` entry per run)."""

    def __init__(self, item: pytest.Item, limits: Limits) -> None:
        self._item = item
        self._limits = limits
        # Runs may end in several threads at once (a test's own thread pool): one number each.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Sandbox of {self._item.nodeid}: {self._limits!r}>"

    @property
    def limits(self) -> Limits:
        """The test's limits: the ``sandbox_*`` ini options over ``Limits()``, and the
        ``sandbox`` markers over those (the nearest wins per field)."""
        return self._limits

    def award(self, points: float) -> None:
        """Give the test ``points`` of its ``max_score``: partial credit (see
        ``pysandbox.pytest_plugin.award``)."""
        award(self._item, points)

    @property
    def results(self) -> tuple[Result, ...]:
        """The results of the runs made through this fixture so far, in the order they
        ended."""
        return tuple(entry.result for entry in self._item.stash.get(_RUNS, []))

    def _record(self, what: str, limits: Limits, result: Result) -> Result:
        """Number the run, keep it for the report and add its verdict to the test's
        ``user_properties`` (which JUnit XML carries); return ``result``."""
        with self._lock:
            runs = self._item.stash.setdefault(_RUNS, [])
            entry = _Run(len(runs) + 1, what, limits, result)
            runs.append(entry)
            self._item.user_properties.append(
                (f"{SECTION_PREFIX} {entry.number}", f"{describe(result, limits)}: {what}")
            )
        return result

    def run(
        self, argv: Sequence[str], *, limits: Limits | None = None, **options: Unpack[RunOptions]
    ) -> Result:
        """``pysandbox.run(argv, ...)`` with the test's limits unless ``limits`` is given."""
        chosen = self._limits if limits is None else limits
        result = run(argv, limits=chosen, **options)
        return self._record(_shorten(repr(list(argv))), chosen, result)

    def run_python(
        self, code: str, *, limits: Limits | None = None, **options: Unpack[PythonOptions]
    ) -> Result:
        """``pysandbox.run_python(code, ...)`` with the test's limits unless ``limits``
        is given."""
        chosen = self._limits if limits is None else limits
        result = run_python(code, limits=chosen, **options)
        return self._record(_code_title(code), chosen, result)

    async def run_async(
        self,
        argv: Sequence[str],
        *,
        limits: Limits | None = None,
        **options: Unpack[AsyncRunOptions],
    ) -> Result:
        """``pysandbox.run_async(argv, ...)`` with the test's limits unless ``limits``
        is given."""
        chosen = self._limits if limits is None else limits
        result = await run_async(argv, limits=chosen, **options)
        return self._record(_shorten(repr(list(argv))), chosen, result)

    async def run_python_async(
        self, code: str, *, limits: Limits | None = None, **options: Unpack[AsyncPythonOptions]
    ) -> Result:
        """``pysandbox.run_python_async(code, ...)`` with the test's limits unless
        ``limits`` is given."""
        chosen = self._limits if limits is None else limits
        result = await run_python_async(code, limits=chosen, **options)
        return self._record(_code_title(code), chosen, result)


@pytest.fixture
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Runs in a sandbox under the test's limits, each attached to the test's report."""
    item = request.node
    assert isinstance(item, pytest.Item)
    return Sandbox(item, _limits_for(item, item.config.stash[_BASE_LIMITS]))


def pytest_addoption(parser: pytest.Parser) -> None:
    """One ini option per field of ``Limits``: ``sandbox_cpu_time = 0.5`` and so on; and
    the grader's options (``--submission``, ``--sandbox-gradescope``...)."""
    add_options(parser)
    for name, kind in _FIELD_TYPES.items():
        unit = {float: "seconds, or 500ms", int: "bytes, or 256M", bool: "true or false"}[kind]
        if name in _COUNTS:
            unit = "a whole number"
        parser.addini(
            _INI_PREFIX + name,
            f"pysandbox: the sandbox fixture's default Limits.{name} ({unit})",
        )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (so ``--strict-markers`` passes), read the ini options and
    register the grader's hooks."""
    config.addinivalue_line(
        "markers",
        "sandbox(**limits): the limits of the sandbox fixture's runs in this test, class "
        "or module (keywords: the fields of pysandbox.Limits; the nearest marker wins)",
    )
    config.stash[_BASE_LIMITS] = _base_limits(config)
    configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: Iterable[pytest.Item]) -> None:
    """Check every ``sandbox`` marker before anything runs: a typo is a usage error."""
    base = config.stash[_BASE_LIMITS]
    for item in items:
        if item.get_closest_marker("sandbox") is not None:
            _limits_for(item, base)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, Any, None]:
    """Attach a section per run made so far to each phase's report, as pytest does
    with captured output; forget the runs once the test is over."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    runs = item.stash.get(_RUNS, [])
    report.sections.extend(_section(entry) for entry in runs)
    if report.when == "teardown":
        item.stash[_RUNS] = []
