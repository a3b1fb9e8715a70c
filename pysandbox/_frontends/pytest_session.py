# SPDX-License-Identifier: MIT
"""The pytest plugin's ``sandbox_session`` fixture: one live session per test module (or
per pytest run) holding the submission, loaded once, and each test's calls made in it.

The module says how to load the submission with ``@pytest.mark.sandbox_session(...)``
(``LoadPlan``): Python code to run (``setup="import solution"``), a program to run
(``setup=["gcc", "-o", "sum", "sum.c"]``), or a notebook to run cell by cell
(``notebook="analysis.ipynb"``).  A call a limit ends, or that crashes the interpreter, is
rolled back: the test loses its own points, and the next test runs in the state from
before that call.  A session lost whole (its memory or lifetime used up) is started and
loaded again for the next test.  A load that fails errors every test that needs it, with
the load's verdict and output.

Imported by the plugin only (it imports pytest).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from .._api.notebook import run_notebook
from .._api.session import GRACE, Session
from .._api.session_program import run_program
from .._model.call_result import CallResult
from .._model.cell_verdict import describe_cell
from .._model.escape import escape_report
from .._model.limits import Limits
from .._model.notebook_result import NotebookResult
from .._model.result import Result, output_tails
from .._model.session_result import CellResult
from .._model.verdict import describe
from .pytest_grades import award
from .pytest_runs import cell_tails, fail_with, record_run, shorten

if TYPE_CHECKING:
    from .._model.file import File

__all__ = ["LiveSession", "LoadPlan", "SessionSandbox", "check_module_marker", "load_plan"]

#: The seconds a session of the fixture may live and stay idle: a whole grading run.
SESSION_LIFETIME = 3600.0
#: Its CPU budget: every call of every test of the module, and the load.
SESSION_CPU_BUDGET = 3600.0
_MARKER = "sandbox_session"


@dataclasses.dataclass(frozen=True)
class LoadPlan:
    """How a module's session loads the submission: ``setup`` code (str) or program
    (argv), or a ``notebook`` in the submission; with the limits of that step."""

    setup: str | tuple[str, ...] | None = None
    notebook: str | None = None
    cpu_time: float | None = None
    wall_time: float | None = None

    def describe(self) -> str:
        """The load as a report section's title."""
        if self.notebook is not None:
            return f"notebook {self.notebook}"
        if isinstance(self.setup, tuple):
            return f"setup: {shorten(repr(list(self.setup)))}"
        if self.setup is not None:
            first = next((line.strip() for line in self.setup.splitlines() if line.strip()), "")
            return f"setup: {shorten(first)}"
        return "setup: (none)"


def _seconds(node: pytest.Item | pytest.Collector, key: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise pytest.UsageError(
            f"{node.nodeid}: @pytest.mark.{_MARKER}({key}=...) must be seconds > 0, not {value!r}"
        )
    return float(value)


def load_plan(node: pytest.Item | pytest.Collector) -> LoadPlan:
    """The nearest ``sandbox_session`` marker of ``node`` as a ``LoadPlan`` (an empty one
    without a marker).

    :raises pytest.UsageError: a positional argument, an unknown keyword, both ``setup``
        and ``notebook``, or a value of the wrong kind; naming the node.
    """
    marker = node.get_closest_marker(_MARKER)
    if marker is None:
        return LoadPlan()
    where = f"{node.nodeid}: @pytest.mark.{_MARKER}"
    known = {"setup", "notebook", "setup_cpu_time", "setup_wall_time"}
    if marker.args or set(marker.kwargs) - known:
        raise pytest.UsageError(f"{where} takes the keywords {', '.join(sorted(known))} only")
    setup = marker.kwargs.get("setup")
    notebook = marker.kwargs.get("notebook")
    if setup is not None and notebook is not None:
        raise pytest.UsageError(f"{where}: give setup or notebook, not both")
    if isinstance(setup, Sequence) and not isinstance(setup, str):
        if not setup or not all(isinstance(word, str) for word in setup):
            raise pytest.UsageError(f"{where}: setup as a program is a non-empty list of str")
        setup = tuple(setup)
    elif setup is not None and not isinstance(setup, str):
        raise pytest.UsageError(f"{where}: setup is Python code (str) or a program (list of str)")
    if notebook is not None and not isinstance(notebook, str):
        raise pytest.UsageError(f"{where}: notebook is a file name of the submission (str)")
    return LoadPlan(
        setup,
        notebook,
        _seconds(node, "setup_cpu_time", marker.kwargs.get("setup_cpu_time")),
        _seconds(node, "setup_wall_time", marker.kwargs.get("setup_wall_time")),
    )


def check_module_marker(item: pytest.Item, module: pytest.Module) -> None:
    """``UsageError`` unless ``item``'s ``sandbox_session`` markers are its module's: one
    session serves the whole module, so it is loaded one way."""
    load_plan(module)
    if len(list(item.iter_markers(_MARKER))) != len(list(module.iter_markers(_MARKER))):
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{_MARKER} marks a module (pytestmark = ...), "
            "not a test or a class: the module's tests share one session"
        )


def _notebook_lines(notebook: NotebookResult) -> str:
    """A line per code cell that did not end ok: its index, state and reason."""
    lines = []
    for cell in notebook.cells:
        if cell.state in ("ok", "skipped"):
            continue
        result = cell.result
        why = ""
        if result is not None and result.error is not None:
            why = f": {result.error.type}: {result.error.message}"
        elif result is not None and result.reason:
            why = f": {result.reason}"
        lines.append(f"[{cell.index}] {cell.state}{why}")
    return escape_report("\n".join(lines) or "every code cell ran ok")


class LiveSession:
    """One session of the fixture, with the submission loaded: started on first use,
    started and loaded again after it was lost, closed at the end of its scope."""

    def __init__(
        self,
        plan: LoadPlan,
        limits: Limits,
        files: Callable[[], Mapping[str, bytes | File]],
    ) -> None:
        self.plan = plan
        self.limits = limits
        self._files = files
        self._session: Session | None = None
        self._started = 0.0
        #: Why the load failed, with its verdict and output ("" when it did not).
        self.failure = ""
        #: The load's notebook run, when it ran one.
        self.notebook: NotebookResult | None = None

    def ready(self, item: pytest.Item, wall_time: float) -> Session:
        """The live session, started and loaded if it is not, or if less of its lifetime
        is left than a call of ``wall_time`` may need (the load recorded in ``item``'s
        report); ``pytest.fail`` with the load's failure when it failed."""
        if self.failure:
            fail_with(item, self.failure, None)
        left = SESSION_LIFETIME - (time.monotonic() - self._started)
        if self._session is None or not self._session.alive or left < wall_time + GRACE:
            self.close()
            files = self._files()
            try:
                self._session = Session(
                    limits=self.limits,
                    files=files,
                    lifetime=SESSION_LIFETIME,
                    idle_timeout=SESSION_LIFETIME,
                    cpu_budget=SESSION_CPU_BUDGET,
                )
            except (TypeError, ValueError) as exc:  # a file the sandbox refuses
                self.failure = f"the submission could not be loaded: {escape_report(str(exc))}"
                fail_with(item, self.failure, None)
            self._started = time.monotonic()
            try:
                self.failure, ran = self._load(item, self._session, files)
            except BaseException:  # never a session left unloaded for the next test
                self.close()
                raise
            if self.failure:
                self.close()
                fail_with(item, self.failure, ran)
        return self._session

    def _load(
        self, item: pytest.Item, session: Session, files: Mapping[str, bytes | File]
    ) -> tuple[str, object]:
        """Load the submission in ``session``: why it failed ("" when it did not), and
        the run that loaded it."""
        plan, what = self.plan, self.plan.describe()
        ran: object
        limits = dataclasses.replace(
            self.limits,
            cpu_time=plan.cpu_time or self.limits.cpu_time,
            wall_time=plan.wall_time or self.limits.wall_time,
        )
        if plan.notebook is not None:
            return self._load_notebook(item, session, limits, files)
        if isinstance(plan.setup, tuple):
            result, _ = run_program(session, plan.setup, **program_limits(limits))
            verdict = describe(result, limits)
            record_run(item, what, verdict, limits, output_tails(result), result)
            ok, tails, ran = bool(result), output_tails(result), result
        elif plan.setup is not None:
            cell = session.run(plan.setup, cpu_time=limits.cpu_time, wall_time=limits.wall_time)
            verdict = describe_cell(cell, limits)
            record_run(item, what, verdict, limits, cell_tails(cell), cell)
            ok, tails, ran = bool(cell), cell_tails(cell), cell
        else:
            return "", None
        if ok:
            return "", ran
        return f"the submission could not be loaded ({what}): {verdict}\n{tails}", ran

    def _load_notebook(
        self,
        item: pytest.Item,
        session: Session,
        limits: Limits,
        files: Mapping[str, bytes | File],
    ) -> tuple[str, object]:
        """Run the plan's notebook cell by cell in ``session``, each cell under
        ``limits``' CPU and wall time.  Cells that raise or that a limit ends are the
        grader's to judge (``notebook``): only a notebook that cannot be read fails."""
        name = self.plan.notebook
        assert name is not None
        what = self.plan.describe()
        given = files.get(name)
        if given is None:
            return f"the submission could not be loaded ({what}): it has no {name}", None
        data = given if isinstance(given, bytes) else given.content
        try:
            notebook = run_notebook(
                data,
                session=session,
                cell_cpu_time=limits.cpu_time,
                cell_wall_time=limits.wall_time,
            )
        except ValueError as exc:
            return f"the submission could not be loaded ({what}): {exc}", None
        self.notebook = notebook
        lost = [cell.result.reason for cell in notebook.cells if cell.result and cell.result.lost]
        if lost or not session.alive:
            why = escape_report(lost[0] if lost else "the session ended")
            return (
                f"the submission could not be loaded ({what}): a cell lost the session: {why}",
                None,
            )
        counts = ", ".join(f"{count} {state}" for state, count in notebook.counts.items() if count)
        verdict = (
            f"{len(notebook.cells)} cells: {counts or 'none'}, wall {notebook.wall_time:.2f} s"
        )
        record_run(item, what, verdict, limits, _notebook_lines(notebook), notebook)
        return "", notebook

    def close(self) -> None:
        """Close the session, if it was started; the next ``ready`` starts another."""
        if self._session is not None:
            self._session.close()
            self._session = None


class SessionSandbox:
    """What the ``sandbox_session`` fixture gives a test: calls in the module's live
    session, under the test's limits, each attached to the test's report."""

    def __init__(self, item: pytest.Item, live: LiveSession, limits: Limits) -> None:
        self._item = item
        self._live = live
        self._limits = limits
        self._session = live.ready(item, limits.wall_time)

    def __repr__(self) -> str:
        return f"<SessionSandbox of {self._item.nodeid}: {self._limits!r}>"

    @property
    def limits(self) -> Limits:
        """The test's limits: ``cpu_time``, ``wall_time``, ``stdout``, ``stderr`` and
        ``truncate_output`` are each call's; the rest are the session's (the module's)."""
        return self._limits

    @property
    def session(self) -> Session:
        """The live ``pysandbox.Session`` itself; calls made on it are not reported."""
        return self._session

    def _alive(self) -> Session:
        """The session, or the test failed when an earlier call of it lost the session
        (the next test gets a new one, loaded again)."""
        if not self._session.alive:
            fail_with(self._item, "the session was lost by an earlier call of this test", None)
        return self._session

    @property
    def notebook(self) -> NotebookResult | None:
        """The notebook run that loaded the session (``NotebookResult``), or None."""
        return self._live.notebook

    def run_python(
        self, code: str, *, files: Mapping[str, bytes | File] | None = None
    ) -> CellResult:
        """``code`` run in the session as ``Session.run`` runs it, under the test's
        limits; the call's ``CellResult``."""
        cell = self._alive().run(code, files=files, **program_limits(self._limits))
        first = next((line.strip() for line in code.splitlines() if line.strip()), "(empty)")
        self._record(f"run_python: {shorten(first)}", cell)
        return cell

    def run(self, argv: Sequence[str], *, stdin: bytes | str = b"") -> Result:
        """The program ``argv`` run in the session with ``stdin`` (text is UTF-8), under
        the test's limits; its end as a ``Result`` (``check()`` works)."""
        data = stdin.encode() if isinstance(stdin, str) else stdin
        limits = self._limits
        result, _ = run_program(self._alive(), argv, stdin=data, **program_limits(limits))
        what = shorten(repr(list(argv)))
        record_run(self._item, what, describe(result, limits), limits, output_tails(result), result)
        return result

    def call(self, target: str, /, *args: object, **kwargs: object) -> object:
        """The return value of the function ``target`` of the session's code called
        with copies of ``args`` and ``kwargs`` (``Session.call``), under the test's
        limits.  Fails the test with ``pysandbox.SandboxFailure`` when the function
        raised, did not finish, or returned what cannot cross: the message says which,
        with its traceback and output, as its author needs it."""
        __tracebackhide__ = True
        return self.call_result(target, *args, **kwargs).check().value

    def call_result(self, target: str, /, *args: object, **kwargs: object) -> CallResult:
        """``Session.call``'s whole ``CallResult`` under the test's limits: the value,
        the function's output apart, or its exception; nothing fails the test."""
        result = self._alive().call_with(target, args, kwargs, **program_limits(self._limits))
        self._record(f"call {result.call}", result)
        return result

    def award(self, points: float) -> None:
        """Partial credit: the test scores ``points`` (at most its ``points`` marker's),
        passed or failed; see ``pysandbox.pytest_plugin.award``."""
        award(self._item, points)

    def push(self, values: Mapping[str, object] | None = None, /, **named: object) -> None:
        """``Session.push``: set the session's variables to copies of these."""
        self._alive().push(values, **named)

    def pull(self, *names: str) -> dict[str, object]:
        """``Session.pull``: copies of the session's variables ``names``."""
        return self._alive().pull(*names)

    def _record(self, what: str, cell: CellResult | CallResult) -> None:
        verdict = describe_cell(cell, self._limits)
        record_run(self._item, what, verdict, self._limits, cell_tails(cell), cell)


def program_limits(limits: Limits) -> dict[str, Any]:
    """``limits`` as ``run_program``'s per-call options."""
    return {
        "wall_time": limits.wall_time,
        "cpu_time": limits.cpu_time,
        "stdout": limits.stdout,
        "stderr": limits.stderr,
        "truncate_output": limits.truncate_output,
    }
