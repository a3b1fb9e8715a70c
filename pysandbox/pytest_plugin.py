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

import contextlib
import dataclasses
from collections.abc import Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ._api.aio import run_async, run_python_async
from ._api.run import run, run_python
from ._api.session import Session
from ._frontends.pytest_grades import add_options, award, configure
from ._frontends.pytest_report import SECTION_PREFIX, sandbox_report
from ._frontends.pytest_runs import cell_tails, record_run, recorded_results, run_sections, shorten
from ._frontends.pytest_session import (
    LiveSession,
    SessionSandbox,
    check_module_marker,
    load_plan,
)
from ._frontends.pytest_student import Submission, submission, submission_directory
from ._model.call_result import CallResult
from ._model.cell_verdict import describe_cell
from ._model.limits import Limits
from ._model.result import Result, output_tails
from ._model.units import LIMIT_OPTIONS
from ._model.verdict import describe

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._api.options import AsyncPythonOptions, AsyncRunOptions, PythonOptions, RunOptions

__all__ = [
    "SECTION_PREFIX",
    "Sandbox",
    "SessionSandbox",
    "Submission",
    "award",
    "sandbox_report",
    "submission",
]


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
_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off")


_BASE_LIMITS = pytest.StashKey[Limits]()


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


def _limits_for(item: pytest.Item | pytest.Collector, base: Limits) -> Limits:
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


def _code_title(code: str) -> str:
    """``run_python: <first non-blank line of code>``, shortened."""
    lines = [line.strip() for line in code.splitlines() if line.strip()]
    return "run_python: " + shorten(lines[0] if lines else "(empty)")


class Sandbox:
    """What the ``sandbox`` fixture gives a test: ``run``, ``run_python`` and their async
    forms, with the signatures of ``pysandbox.run`` and the others, whose ``limits``
    default to the test's (``limits``), and whose every result is attached to the test's
    report (a section and a ``user_properties`` entry per run)."""

    def __init__(self, item: pytest.Item, limits: Limits) -> None:
        self._item = item
        self._limits = limits

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

    def call(self, target: str, /, *args: object, **kwargs: object) -> object:
        """The return value of the function ``target`` (``"solution.add"``) called with
        copies of ``args`` and ``kwargs`` in a fresh sandbox holding the submission's
        files, under the test's limits (``call_result``).  Fails the test with
        ``pysandbox.SandboxFailure`` when it raised, did not finish, or returned what
        cannot cross, with a message for the function's author."""
        __tracebackhide__ = True
        return self.call_result(target, *args, **kwargs).check().value

    def call_result(self, target: str, /, *args: object, **kwargs: object) -> CallResult:
        """``Session.call``'s whole ``CallResult`` in a session of one call, started with
        the submission's files (``--submission``) and the test's limits, and closed."""
        limits = self._limits
        with Session(limits=limits, files=_submission_files(self._item.config)) as session:
            result = session.call_with(target, args, kwargs)
        verdict = describe_cell(result, limits)
        record_run(self._item, f"call {result.call}", verdict, limits, cell_tails(result), result)
        return result

    @property
    def results(self) -> tuple[Result, ...]:
        """The results of the runs made through this fixture so far, in the order they
        ended."""
        return tuple(run for run in recorded_results(self._item) if isinstance(run, Result))

    def _record(self, what: str, limits: Limits, result: Result) -> Result:
        """Number the run, keep it for the report and add its verdict to the test's
        ``user_properties`` (which JUnit XML carries); return ``result``."""
        record_run(self._item, what, describe(result, limits), limits, output_tails(result), result)
        return result

    def run(
        self, argv: Sequence[str], *, limits: Limits | None = None, **options: Unpack[RunOptions]
    ) -> Result:
        """``pysandbox.run(argv, ...)`` with the test's limits unless ``limits`` is given."""
        chosen = self._limits if limits is None else limits
        result = run(argv, limits=chosen, **options)
        return self._record(shorten(repr(list(argv))), chosen, result)

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
        return self._record(shorten(repr(list(argv))), chosen, result)

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


def _submission_files(config: pytest.Config) -> dict[str, bytes]:
    """Every file of the submission to grade (none without one), for a session's
    ``/sandbox``; a directory that is missing or hostile fails the test that loads it."""
    directory = submission_directory(config)
    if directory is None:
        return {}
    if not directory.is_dir():
        pytest.fail(f"--submission {directory}: not a directory", pytrace=False)
    return Submission(directory).files()


@pytest.fixture(scope="session")
def _sandbox_session_pool() -> Generator[dict[object, LiveSession], None, None]:
    """The live sessions shared by every module of the run (``sandbox_session_scope =
    session``), one per load and limits; closed at the end of the run."""
    pool: dict[object, LiveSession] = {}
    yield pool
    with contextlib.ExitStack() as closing:  # each closed, whatever another raises
        for live in pool.values():
            closing.callback(live.close)


@pytest.fixture(scope="module")
def _sandbox_module_session(
    request: pytest.FixtureRequest, _sandbox_session_pool: dict[object, LiveSession]
) -> Generator[LiveSession, None, None]:
    """The module's live session: its own (closed at the module's end), or the run's
    for the same load and limits when ``sandbox_session_scope = session``."""
    module = request.node
    config = request.config
    plan = load_plan(module)
    limits = _limits_for(module, config.stash[_BASE_LIMITS])
    if config.getini("sandbox_session_scope") == "session":
        key = (plan, limits)
        if key not in _sandbox_session_pool:
            _sandbox_session_pool[key] = LiveSession(
                plan, limits, lambda: _submission_files(config)
            )
        yield _sandbox_session_pool[key]
        return
    live = LiveSession(plan, limits, lambda: _submission_files(config))
    yield live
    live.close()


@pytest.fixture
def sandbox_session(
    request: pytest.FixtureRequest, _sandbox_module_session: LiveSession
) -> SessionSandbox:
    """Calls in the module's live session, the submission loaded once (see the
    ``sandbox_session`` marker), each under the test's limits and attached to its report."""
    item = request.node
    assert isinstance(item, pytest.Item)
    limits = _limits_for(item, item.config.stash[_BASE_LIMITS])
    return SessionSandbox(item, _sandbox_module_session, limits)


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
    parser.addini(
        "sandbox_session_scope",
        "pysandbox: module (one session per test module, the default) or session (one "
        "per load and limits for the whole run)",
        default="module",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (so ``--strict-markers`` passes), read the ini options and
    register the grader's hooks."""
    config.addinivalue_line(
        "markers",
        "sandbox(**limits): the limits of the sandbox fixture's runs in this test, class "
        "or module (keywords: the fields of pysandbox.Limits; the nearest marker wins)",
    )
    config.addinivalue_line(
        "markers",
        "sandbox_session(setup=None, notebook=None, setup_cpu_time=None, "
        "setup_wall_time=None): how the module's sandbox_session loads the submission: "
        "Python code (str) or a program (list of str) run once, or a notebook of the "
        "submission run cell by cell",
    )
    config.stash[_BASE_LIMITS] = _base_limits(config)
    if config.getini("sandbox_session_scope") not in ("module", "session"):
        raise pytest.UsageError("ini option sandbox_session_scope: module or session")
    configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: Iterable[pytest.Item]) -> None:
    """Check every ``sandbox`` marker before anything runs: a typo is a usage error."""
    base = config.stash[_BASE_LIMITS]
    for item in items:
        if item.get_closest_marker("sandbox") is not None:
            _limits_for(item, base)
        module = item.getparent(pytest.Module)
        if module is not None and item.get_closest_marker("sandbox_session") is not None:
            check_module_marker(item, module)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Attach a section per run made so far to each phase's report, as pytest does
    with captured output; forget the runs once the test is over."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    failure = call.excinfo.value if call.excinfo is not None else None
    report.sections.extend(run_sections(item, failure, last=report.when == "teardown"))
