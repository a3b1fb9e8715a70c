# SPDX-License-Identifier: MIT
"""``%%sandbox --session NAME``: cells that share a live interpreter, and
``%sandbox_close``.

Each shell keeps its sessions in a ``SessionBook``, by name.  The first cell that names
a session starts it (a ``Session``) with the options that hold for the whole session:
``--memory``, ``--disk``, ``--processes``, ``--open-files``, ``--file-size``,
``--files-out``, ``--files-out-count``, ``--readable``, ``--env``, ``--files-include``,
``--files-exclude``, ``--lifetime``, ``--idle-timeout``, ``--cpu-budget``; its
``--files`` are put in before its code runs.
A later cell naming it runs in it: its ``--wall-time``, ``--cpu-time``,
``--stdout-limit``, ``--stderr-limit`` and ``--truncate-output`` hold for that cell alone
(the defaults are ``Limits()``'s, as for a one-shot cell), and its ``--files`` go in
before it runs.  A session-wide option on a later cell must repeat the value the session
started with (so a notebook run again from the top works); another value is a
``UsageError`` that names it, since changing it means a new interpreter.

A session that ended (its idle timeout, lifetime or CPU budget, or a cell that lost it)
is started again, with the options it had, by the next cell that names it; that cell
says so on stderr, since the earlier state is gone.  ``%sandbox_close NAME`` ends a
session and forgets it; every session ends when the extension is unloaded or the
interpreter exits.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import TYPE_CHECKING, TypedDict

from .._api.session import Session
from .._model.errors import SandboxError
from .._model.escape import escape_controls
from .._model.file import File
from .._model.limits import Limits
from .._model.record import record, replace
from .._model.rich import Bundle
from .._model.session_result import CellResult, OutputEvent
from .._model.units import LIMIT_OPTIONS, parse_seconds
from .ipython_shell import LiveStream, Shell, usage
from .options import argparse_type
from .session_cell import cell_verdict_html, cell_verdict_text, display_data, value_data

if TYPE_CHECKING:
    import argparse

__all__ = [
    "CLOSE_MAGIC",
    "SessionBook",
    "add_session_options",
    "close_sessions",
    "refuse_session_options",
    "run_in_session",
]

#: The line magic that closes sessions.
CLOSE_MAGIC = "sandbox_close"
#: The ``Limits`` fields that hold for a whole session (the others are per call).
SESSION_LIMITS = (
    "memory",
    "file_size",
    "disk",
    "files_out",
    "files_out_count",
    "displays",
    "displays_count",
    "values",
    "processes",
    "open_files",
)
#: The ``Session`` keywords of time, by option.
TIMEOUTS = {
    "--lifetime": "lifetime",
    "--idle-timeout": "idle_timeout",
    "--cpu-budget": "cpu_budget",
}
_FLAGS = {option.field: option.flag for option in LIMIT_OPTIONS}
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class Timeouts(TypedDict, total=False):
    """The ``Session`` keywords of time that a cell gave (the others keep their default)."""

    lifetime: float
    idle_timeout: float
    cpu_budget: float


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--session`` and the options only a session has to the magic's parser."""
    group = parser.add_argument_group("sessions (a live interpreter kept from cell to cell)")
    group.add_argument(
        "--session",
        metavar="NAME",
        help="run the cell in the session NAME (letters, digits, _ . -), which the first "
        "cell naming it starts: its variables, imports and files stay for the next cell, "
        "and a cell that a limit ends is rolled back.  --memory, --disk, --processes, "
        "--open-files, --file-size, --files-out, --files-out-count, --readable, --env, "
        "--files-include, --files-exclude and the options below are set when the session "
        "starts; %%sandbox_close NAME ends it",
    )
    group.add_argument(
        "--in",
        dest="push_names",
        action="append",
        default=[],
        metavar="NAME",
        help="set the session's variable NAME to a copy of the notebook's before the cell "
        "runs (JSON-like values, bytes, numpy arrays, pandas frames; never pickled); "
        "repeatable",
    )
    group.add_argument(
        "--out",
        dest="pull_names",
        action="append",
        default=[],
        metavar="NAME",
        help="after a cell that ran to its end, set the notebook's variable NAME to a copy "
        "of the session's; repeatable",
    )
    for flag, what in (
        ("--lifetime", "seconds the session may live (default 3600)"),
        ("--idle-timeout", "seconds without a cell after which the session ends (default 600)"),
        ("--cpu-budget", "CPU seconds of the whole session, cells and between (default 600)"),
    ):
        group.add_argument(
            flag,
            dest=TIMEOUTS[flag],
            type=argparse_type(parse_seconds),
            metavar="SECONDS",
            help=what,
        )


def refuse_session_options(options: argparse.Namespace) -> None:
    """``UsageError`` for an option of sessions on a cell without ``--session``."""
    for flag, key in TIMEOUTS.items():
        if getattr(options, key) is not None:
            usage(f"{flag}: only with --session NAME")
    for flag, names in (("--in", options.push_names), ("--out", options.pull_names)):
        if names:
            usage(f"{flag}: only with --session NAME")


@record(frozen=False)
class _Entry:
    """One name of the book: how its session starts, and the session while it lives."""

    limits: Limits
    readable: tuple[str, ...]
    env: dict[str, str]
    files: dict[str, File]
    timeouts: Timeouts
    #: ``--files-include`` and ``--files-exclude``.
    patterns: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    session: Session | None = None
    #: Why the session ended, when a cell saw it end (a lost call).
    ended: str = ""


class SessionBook:
    """The sessions of one IPython shell, by name."""

    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}

    def close(self, name: str) -> None:
        """End the session ``name`` (its sandbox killed and reaped) and forget it."""
        entry = self.entries.pop(name)
        if entry.session is not None:
            entry.session.close()

    def close_all(self) -> None:
        """End every session: at unload, and at the interpreter's exit (``atexit``)."""
        for name in list(self.entries):
            self.close(name)


def close_sessions(book: SessionBook, line: str) -> None:
    """``%sandbox_close [NAME ...]``: end the sessions named, or all of them."""
    try:
        names = shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        usage(str(exc), f"%{CLOSE_MAGIC}")
    unknown = [name for name in names if name not in book.entries]
    if unknown:
        known = ", ".join(sorted(book.entries)) or "none"
        usage(f"no session named {', '.join(unknown)} (open: {known})", f"%{CLOSE_MAGIC}")
    for name in names or sorted(book.entries):
        book.close(name)
        sys.stdout.write(f"pysandbox: session {name!r} closed\n")


def _limits(options: argparse.Namespace, base: Limits) -> Limits:
    """``base`` with the session-wide limit options this cell gave."""
    given = {
        field: getattr(options, field)
        for field in SESSION_LIMITS
        if getattr(options, field) is not None
    }
    return replace(base, **given)


def _timeouts(options: argparse.Namespace, base: Timeouts) -> Timeouts:
    timeouts = Timeouts(**base)
    for key in TIMEOUTS.values():
        if getattr(options, key) is not None:
            timeouts[key] = getattr(options, key)  # type: ignore[literal-required]
    return timeouts


def _refuse_changes(
    entry: _Entry,
    session: Session,
    options: argparse.Namespace,
    env: dict[str, str],
    readable: list[str],
    name: str,
) -> None:
    """``UsageError`` naming each session-wide option that differs from the session's."""
    changed = [
        _FLAGS[field]
        for field in SESSION_LIMITS
        if getattr(options, field) is not None
        and getattr(options, field) != getattr(session.limits, field)
    ]
    changed += [
        flag
        for flag, key in TIMEOUTS.items()
        if getattr(options, key) is not None and getattr(options, key) != getattr(session, key)
    ]
    if readable and tuple(readable) != entry.readable:
        changed.append("--readable")
    if env and env != entry.env:
        changed.append("--env")
    for flag, given, started in zip(
        ("--files-include", "--files-exclude"),
        (options.files_include, options.files_exclude),
        entry.patterns,
    ):
        if given and tuple(given) != started:
            changed.append(flag)
    if changed:
        usage(
            f"{', '.join(changed)}: session {name!r} started with another value; these "
            f"options hold for the whole session (%{CLOSE_MAGIC} {name} first, which ends "
            "it and its state, to start it anew with them)"
        )


def _why_ended(entry: _Entry) -> str:
    """Why the (no longer alive) session of ``entry`` ended, in words."""
    if entry.ended or entry.session is None:
        return entry.ended or "it ended"
    try:
        entry.session.run("pass")  # a session that has ended refuses with the reason
    except SandboxError as exc:
        return str(exc)
    return "it ended"


def _start(
    book: SessionBook,
    name: str,
    options: argparse.Namespace,
    files: dict[str, File],
    env: dict[str, str],
    readable: list[str],
) -> Session:
    """Start the session ``name``: anew, or again with the options of the one that
    ended (this cell's options win, its files join the earlier ones)."""
    old = book.entries.get(name)
    if old is not None:
        message = f"pysandbox: session {name!r} had ended ({_why_ended(old)}); this cell "
        message += "starts it again with the same options, without its earlier state\n"
        sys.stderr.write(escape_controls(message))
    entry = _Entry(
        limits=_limits(options, old.limits if old else Limits()),
        readable=tuple(readable) if readable or old is None else old.readable,
        env=env if env or old is None else old.env,
        files={**(old.files if old else {}), **files},
        timeouts=_timeouts(options, old.timeouts if old else Timeouts()),
        patterns=(
            tuple(options.files_include or (old.patterns[0] if old else ())),
            tuple(options.files_exclude or (old.patterns[1] if old else ())),
        ),
    )
    try:
        session = Session(
            limits=entry.limits,
            readable=entry.readable,
            env=entry.env,
            files=entry.files or None,
            files_include=entry.patterns[0],
            files_exclude=entry.patterns[1],
            **entry.timeouts,
        )
    except (TypeError, ValueError) as exc:  # refused before anything started
        usage(str(exc))
    entry.session = session
    book.entries[name] = entry
    return session


def _push(shell: Shell, session: Session, names: list[str]) -> None:
    """``--in``: copies of the notebook's variables ``names`` set in the session."""
    missing = [name for name in names if name not in shell.user_ns]
    if missing:
        usage(f"--in {missing[0]}: the notebook has no such variable")
    if names:
        session.push({name: shell.user_ns[name] for name in names})


def _display(shell: Shell, event: OutputEvent) -> None:
    """Show a display of the cell as it comes, between the output around it."""
    if isinstance(event.data, Bundle):
        shell.display_pub.publish(data=display_data(event.data))


def _show(shell: Shell, result: CellResult, limits: Limits, name: str) -> None:
    """After the cell's output (shown as it came): its value as ``Out[]`` shows one, the
    traceback of what it raised (on stderr), then the verdict."""
    if result.value is not None and not result.value_displayed:
        shell.display_pub.publish(data=value_data(result.value))
    if result.error is not None:
        traceback = result.error.traceback
        LiveStream("stderr").write(traceback if traceback.endswith("\n") else traceback + "\n")
    shell.display_pub.publish(
        data={
            "text/plain": cell_verdict_text(result, limits, name),
            "text/html": cell_verdict_html(result, limits, name),
        }
    )


def run_in_session(
    shell: Shell,
    book: SessionBook,
    options: argparse.Namespace,
    cell: str,
    files: dict[str, File],
    env: dict[str, str],
    readable: list[str],
) -> None:
    """Run ``cell`` in the session ``options.session`` (started if need be), its output
    shown as it comes, show what it did, and store its ``CellResult`` under
    ``--result``.  An interrupt rolls the cell back, says so, and propagates: the
    session goes on."""
    name = options.session
    if not _NAME.fullmatch(name):
        usage(f"--session: a name of 1 to 64 letters, digits, '_', '.' or '-', got {name!r}")
    entry = book.entries.get(name)
    session = entry.session if entry is not None else None
    if entry is not None and session is not None and session.alive:
        _refuse_changes(entry, session, options, env, readable, name)
    else:
        session, files = _start(book, name, options, files, env, readable), {}
    per_call = {
        key: getattr(options, key)
        for key in ("wall_time", "cpu_time", "stdout", "stderr", "truncate_output")
        if getattr(options, key) is not None
    }
    try:
        limits = replace(session.limits, **per_call)  # for the verdict; checks them too
    except (TypeError, ValueError) as exc:
        usage(str(exc))
    _push(shell, session, options.push_names)
    shown_out, shown_err = LiveStream("stdout"), LiveStream("stderr")
    try:
        result = session.run(
            cell,
            files=files or None,
            on_stdout=shown_out,
            on_stderr=shown_err,
            on_event=lambda event: _display(shell, event),
            **per_call,
        )
    except KeyboardInterrupt:
        sys.stderr.write(f"pysandbox: interrupted; the cell was rolled back, {name!r} goes on\n")
        raise
    finally:
        shown_out.close()
        shown_err.close()
    if options.result is not None:
        shell.user_ns[options.result] = result
    if result.lost:
        book.entries[name].ended = result.reason
        session.close()
    _show(shell, result, limits, name)
    if result and options.pull_names:
        shell.user_ns.update(session.pull(*options.pull_names))
