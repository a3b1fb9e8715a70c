# SPDX-License-Identifier: MIT
"""``Runner``: what a service or a batch creates once: default limits, readable paths and
environment, a cap on the sandboxes running at once, ``map`` for many jobs, and the
sessions it makes (``sessions.py``: their cap and the warm ones).

Every call takes a slot of the Runner's ``Slots`` before its sandbox starts and gives it
back once the sandbox is reaped; the time it waited is ``Result.queued_time`` and is not
in ``wall_time`` (the C core starts the wall clock at the spawn, after the wait).

The module is longer than 500 lines because it is the one public class ``Runner``,
whose methods (each sync and async form of every call, ``run_job``, ``map`` and
``session``) are thin entries with their own docstrings over ``_result`` and
``sessions.py``; mixins in other files would scatter one class's API and its shared
state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from .._api.aio import in_thread, on_loop
from .._api.call import Call
from .._api.eval import eval_plan, read_output
from .._api.run import (
    OnOutput,
    Stdin,
    build_plan,
    check_argv,
    check_env,
    check_file_filter,
    check_output_callback,
    check_readable,
    finish,
    python_program,
)
from .._api.session import DEFAULT_CPU_BUDGET, DEFAULT_IDLE_TIMEOUT, DEFAULT_LIFETIME, Session
from .._launch import closer
from .._launch.launcher import launch
from .._launch.plan import Facts, Plan
from .._launch.waiter import Handover
from .._model.cancel import AnyOf, CancelEvent, Cancelled
from .._model.file import File
from .._model.limits import Limits
from .._model.result import ProcessOutput, Result
from .._model.template import Template
from .job import Job
from .map import map_jobs
from .outcome import Outcome
from .progress import Tally, check_progress, open_bar
from .sessions import (
    SESSION_DEFAULTS,
    SessionBook,
    WarmSessions,
    check_count,
    open_session,
)
from .slots import Slots, check_short_slots
from .warm import WarmPool
from .warm_form import eval_form, python_form

__all__ = ["Runner"]

#: How long a call waits for a warm sandbox without a template that is still starting.
_READY_WITHIN = 10.0

#: How long ``close()`` waits for the closer to finish what the warm calls left.
_CLOSE_SECONDS = 10.0

#: Makes a run's output callbacks once its cancel event is known (the async forms hand
#: each chunk to the event loop and give up when that event is set).
OutputsFor = Callable[[CancelEvent], "tuple[OnOutput, OnOutput]"]


def _check_warm(value: object) -> int:
    """``warm`` as an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"warm must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"warm must be at least 0, got {value!r}")
    return int(value)


def _check_max_concurrent(value: object) -> int:
    """``max_concurrent`` as an int >= 1 (None: the number of CPUs)."""
    if value is None:
        return os.cpu_count() or 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_concurrent must be an int or None, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"max_concurrent must be at least 1, got {value!r}")
    return int(value)


class Runner:
    """Runs sandboxes with shared defaults, at most ``max_concurrent`` at once.

    :param limits: the ``Limits`` of every call that gives none (``Limits()`` when None).
    :param readable: host paths every call may read; a call's ``readable`` adds to them.
    :param env: variables every call gets; a call's ``env`` adds to them and wins on the
        same name.
    :param max_concurrent: the most sandboxes running at once (None: ``os.cpu_count()``);
        a call beyond it waits for a slot, without counting that wait in its wall time.
    :param warm: how many single-use sandboxes to keep started ahead of need, their
        interpreter waiting for its code (docs/services.rst, *Warm sandboxes*): first for
        ``run_python`` with this Runner's defaults, then for the kinds of the calls made.
        A ``run_python`` or ``eval_in_sandbox`` call of a kind takes one (its code,
        ``args``, files and most ``env`` are handed over, not part of the kind); the pool
        refills after the call returns.  0: none.
    :param template: a ``Template`` each warm sandbox runs before it waits (modules
        imported, set-up code run, files placed), for ``run_python`` calls
        (docs/services.rst, *Templates*); needs ``warm`` >= 1.
    :param max_sessions: the most sessions of ``session()`` live at once; at the cap a
        new session evicts the one idle the longest (docs/services.rst, *Sessions in a
        Runner*).
    :param warm_sessions: how many sessions with this Runner's defaults to keep started
        ahead of need for ``session()``.  0: none.
    :param short_slots: how many of the ``max_concurrent`` slots to keep for short
        calls, those whose wall time (``Limits.wall_time``; ``eval_in_sandbox``'s
        ``timeout_max_time_sec``) is at most ``short_wall_time`` seconds, so that they
        never queue behind long ones (docs/services.rst, *Short slots*).  0 (the
        default): none, every call queues first come first served.  At most
        ``max_concurrent - 1``; needs ``short_wall_time``.
    :param short_wall_time: the most seconds of wall time a short call may have.
    :raises SandboxError: ``warm`` > 0 on a host that cannot hold warm sandboxes.

    ``run``, ``run_python`` and ``eval_in_sandbox`` take the module-level functions'
    arguments, and ``run_async``, ``run_python_async`` and ``eval_in_sandbox_async`` are
    their asyncio forms (cancelling the task kills the sandbox, or leaves the queue).
    Thread-safe.  A context manager (``with``, ``async with``): ``close()`` kills and
    reaps every sandbox still running (those calls raise ``Cancelled``), releases the
    calls waiting for a slot (``Cancelled`` too), closes every session it made, and
    makes later calls raise ``RuntimeError``.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        max_concurrent: int | None = None,
        warm: int = 0,
        max_sessions: int = 16,
        warm_sessions: int = 0,
        template: Template | None = None,
        short_slots: int = 0,
        short_wall_time: float | None = None,
    ) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a Limits or None, not {type(limits).__name__}")
        self._limits = limits if limits is not None else Limits()
        self._readable = check_readable(readable)
        check_env(env)
        self._env = dict(env or {})
        size = _check_warm(warm)
        if template is not None and not isinstance(template, Template):
            raise TypeError(f"template must be a Template or None, not {type(template).__name__}")
        if template is not None and not size:
            raise ValueError("template needs warm >= 1 (the sandboxes it prepares)")
        self._template = template
        self._book = SessionBook(check_count(max_sessions, "max_sessions", 1))
        warm_count = check_count(warm_sessions, "warm_sessions", 0)
        cap = _check_max_concurrent(max_concurrent)
        self._slots = Slots(cap, *check_short_slots(short_slots, short_wall_time, cap))
        self._pool: WarmPool | None = None
        if size:
            program, source = python_program("", ())
            call = Call(
                program, code=source, limits=self._limits, readable=self._readable, env=self._env
            )
            self._pool = WarmPool(size, python_form(call, template)[0])
            weakref.finalize(self, self._pool.close)
        self._warm_sessions: WarmSessions | None = None
        if warm_count:
            options = self._session_options(None, (), None, (None, None), SESSION_DEFAULTS)
            self._warm_sessions = WarmSessions(warm_count, self._book, options)
            weakref.finalize(self, self._warm_sessions.close)

    @property
    def max_concurrent(self) -> int:
        """The most sandboxes this Runner has running at once."""
        return self._slots.size

    @property
    def short_slots(self) -> int:
        """The slots kept for short calls (0: none)."""
        return self._slots.short_slots

    @property
    def short_wall_time(self) -> float | None:
        """The most wall time of a short call, in seconds (None without short slots)."""
        return self._slots.short_wall_time

    @property
    def limits(self) -> Limits:
        """The limits of a call that gives none."""
        return self._limits

    @property
    def readable(self) -> tuple[str, ...]:
        """The host paths every call may read."""
        return tuple(self._readable)

    @property
    def env(self) -> dict[str, str]:
        """A copy of the variables every call gets."""
        return dict(self._env)

    @property
    def warm(self) -> int:
        """How many warm sandboxes this Runner keeps (0: none)."""
        return 0 if self._pool is None else self._pool.size

    @property
    def template(self) -> Template | None:
        """The ``Template`` this Runner's warm sandboxes run before they wait, or None."""
        return self._template

    @property
    def warm_ready(self) -> int:
        """Warm sandboxes of the last call's kind (before any call, ``run_python`` with
        this Runner's defaults) waiting for a call now (a gauge: the pool refills in the
        background after each call)."""
        return 0 if self._pool is None else self._pool.ready

    @property
    def running(self) -> int:
        """Calls that hold a slot now: their sandboxes are starting, running or being
        reaped (a gauge for a service's metrics)."""
        return self._slots.running

    @property
    def waiting(self) -> int:
        """Calls accepted that do not hold a slot yet: queued for one, or being checked."""
        return self._slots.waiting

    @property
    def max_sessions(self) -> int:
        """The most sessions of ``session()`` live at once."""
        return self._book.size

    @property
    def sessions(self) -> int:
        """Sessions of ``session()`` live now (a gauge: one that ended, closed, lost or
        idle too long, no longer counts)."""
        return self._book.live

    @property
    def warm_sessions(self) -> int:
        """How many warm sessions this Runner keeps (0: none)."""
        return 0 if self._warm_sessions is None else self._warm_sessions.size

    @property
    def warm_sessions_ready(self) -> int:
        """Warm sessions waiting to be handed out now (a gauge: refilled in the
        background)."""
        return 0 if self._warm_sessions is None else self._warm_sessions.ready

    @property
    def closed(self) -> bool:
        """``close()`` was called."""
        return self._slots.closed

    def close(self) -> None:
        """Kill and reap every sandbox still running and every warm one, release every
        call waiting for a slot (each raises ``Cancelled``), close every session this
        Runner made (a call running in one ends ``lost``) and every warm session, and
        refuse new calls (``RuntimeError``).

        Returns once every call of other threads has ended, within the C core's 50 ms
        tick plus the reaping, and what the warm sandboxes it ran left is closed.
        Idempotent.
        """
        self._slots.close()
        if self._pool is not None:
            self._pool.close()
            closer.drain(_CLOSE_SECONDS)
        if self._warm_sessions is not None:
            self._warm_sessions.close()
        self._book.close()

    def _facts(self, plan: Plan, form: tuple[Plan, Handover] | None) -> Facts:
        """Run ``plan`` in a warm sandbox of its warm ``form``'s kind if there is one,
        else in a fresh one (with a template: one started now, which runs the set-up
        first); the pool refills for this kind once the run has ended."""
        pool = self._pool
        if pool is None or form is None or plan.code is None:
            return launch(plan)
        waiting, handover = form
        template = self._template if waiting.template else None
        within = _READY_WITHIN if template is None else template.timeout
        until = time.monotonic() + within  # one wait for the call, however many it tries
        try:
            launched = pool.take(waiting, plan.code, handover, until, within, plan.cancel)
            if launched is None and template is not None:
                launched = pool.start_now(waiting, until, within)
                try:
                    launched.hand_over(plan.code, handover, until, within, plan.cancel)
                except BaseException:
                    launched.close()
                    raise
            return launch(plan) if launched is None else launched.finish(plan)
        finally:
            pool.served(waiting)

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Runner:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def _merged_readable(self, readable: Sequence[str]) -> list[str]:
        """The Runner's readable paths, then the call's that are not among them."""
        extra = check_readable(readable)
        return self._readable + [path for path in extra if path not in self._readable]

    def _merged_env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """The Runner's variables updated with the call's."""
        check_env(env)
        return {**self._env, **(env or {})}

    def _session_options(
        self,
        limits: Limits | None,
        readable: Sequence[str],
        env: Mapping[str, str] | None,
        patterns: tuple[object, object],
        clocks: Mapping[str, float],
    ) -> dict[str, Any]:
        """``Session``'s keywords (but ``files``) with this Runner's defaults; the
        ``files_include`` and ``files_exclude`` ``patterns`` checked (as tuples, so a
        session without any compares equal to a warm one)."""
        include, exclude = check_file_filter(*patterns)
        return {
            "limits": self._limits if limits is None else limits,
            "readable": self._merged_readable(readable),
            "env": self._merged_env(env),
            "files_include": include,
            "files_exclude": exclude,
            **clocks,
        }

    def session(
        self,
        *,
        limits: Limits | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes | File] | None = None,
        lifetime: float = DEFAULT_LIFETIME,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        cpu_budget: float = DEFAULT_CPU_BUDGET,
        files_include: Iterable[str] | None = None,
        files_exclude: Iterable[str] | None = None,
    ) -> Session:
        """A ``Session`` with this Runner's defaults: ``limits`` (None: the Runner's),
        ``readable`` and ``env`` added to the Runner's; the other arguments (its
        ``files_include`` and ``files_exclude`` too) are ``Session``'s.  A warm session
        when the Runner keeps them (``warm_sessions``) and no argument differs from the
        defaults, else a fresh one.

        Counted against ``max_sessions`` until it ends: at the cap, the live session
        idle the longest (running no call) is closed to make room, and its next call
        raises ``SandboxError`` saying it was evicted.

        :raises SandboxError: every live session is running a call at the cap, or the
            session could not start.
        :raises TypeError, ValueError: a bad argument, before any session is evicted.
        :raises RuntimeError: the Runner is closed.
        """
        if self.closed:
            raise RuntimeError("the Runner is closed: make a new Runner to run more")
        options = self._session_options(
            limits,
            readable,
            env,
            (files_include, files_exclude),
            {"lifetime": lifetime, "idle_timeout": idle_timeout, "cpu_budget": cpu_budget},
        )
        return open_session(self._book, self._warm_sessions, options, files)

    async def session_async(
        self,
        *,
        limits: Limits | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes | File] | None = None,
        lifetime: float = DEFAULT_LIFETIME,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        cpu_budget: float = DEFAULT_CPU_BUDGET,
        files_include: Iterable[str] | None = None,
        files_exclude: Iterable[str] | None = None,
    ) -> Session:
        """``session`` for asyncio: the start runs in a thread of its own.  Cancelling
        the task closes the session once it has started (within its start, ~60 ms)."""

        def start(cancel: threading.Event) -> Session:
            session = self.session(
                limits=limits,
                readable=readable,
                env=env,
                files=files,
                lifetime=lifetime,
                idle_timeout=idle_timeout,
                cpu_budget=cpu_budget,
                files_include=files_include,
                files_exclude=files_exclude,
            )
            if cancel.is_set():
                session.close()
                raise Cancelled("the awaiting task was cancelled; the session was closed")
            return session

        return await in_thread(start)

    def _result(self, call: Call, outputs: OutputsFor) -> Result:
        """One run: checked and planned with this Runner's defaults (``call.cancel`` also
        ends the wait for a slot; ``outputs`` gives the output callbacks for the run's
        stop event), then run once a slot is free, the wait in the result's
        ``queued_time``."""
        with self._slots.ticket() as ticket:
            stop = AnyOf(call.cancel, ticket.stop)
            on_stdout, on_stderr = outputs(stop)
            plan, checked = build_plan(
                dataclasses.replace(
                    call,
                    limits=self._limits if call.limits is None else call.limits,
                    readable=self._merged_readable(call.readable),
                    env=self._merged_env(call.env),
                    cancel=stop,
                    on_stdout=on_stdout,
                    on_stderr=on_stderr,
                )
            )
            form = None
            if self._pool is not None and plan.code is not None:
                merged = dataclasses.replace(
                    call,
                    limits=checked,
                    readable=self._merged_readable(call.readable),
                    env=self._merged_env(call.env),
                )
                files = plan.payloads[0] if call.files else b""
                form = python_form(merged, self._template, files)
            queued = ticket.wait(call.cancel, wall_time=checked.wall_time)
            facts = finish(plan, checked, lambda ready: self._facts(ready, form))
            return dataclasses.replace(facts, queued_time=queued)

    def _eval(
        self,
        python_code: str,
        mem_max_mb: int,
        cpu_max_time_sec: int,
        timeout_max_time_sec: float,
        io_max_kb: int,
        cancel: CancelEvent | None,
    ) -> ProcessOutput:
        """``eval_in_sandbox`` in a slot; the reference's record has no room for the wait."""
        with self._slots.ticket() as ticket:
            plan = eval_plan(
                python_code,
                mem_max_mb,
                cpu_max_time_sec,
                timeout_max_time_sec,
                io_max_kb,
                cancel=AnyOf(cancel, ticket.stop),
            )
            form = None
            if self._pool is not None:
                form = eval_form(
                    eval_plan(
                        python_code,
                        mem_max_mb,
                        cpu_max_time_sec,
                        timeout_max_time_sec,
                        io_max_kb,
                        waiter=True,
                    )
                )
            ticket.wait(cancel, wall_time=float(timeout_max_time_sec))
            return read_output(self._facts(plan, form))

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: Stdin = None,
        limits: Limits | None = None,
        files: Mapping[str, bytes | File] | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cancel: CancelEvent | None = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        files_include: Iterable[str] | None = None,
        files_exclude: Iterable[str] | None = None,
    ) -> Result:
        """``pysandbox.run`` in a slot of this Runner, with its defaults: ``limits`` (None:
        the Runner's), ``readable`` and ``env`` added to the Runner's (``files_include``
        and ``files_exclude`` are the call's alone, also in a warm sandbox or a
        template's copy).  ``cancel`` also ends a call still waiting for a slot
        (``Cancelled``).  The arguments are checked before the wait (a ``stdin``
        callback is first called, with ``b""``, then too)."""

        program = check_argv(argv)
        return self._result(
            Call(
                program,
                stdin=stdin,
                limits=limits,
                files=files,
                readable=readable,
                env=env,
                cancel=cancel,
                files_include=files_include,
                files_exclude=files_exclude,
            ),
            lambda _: (on_stdout, on_stderr),
        )

    def run_python(
        self,
        code: str,
        *,
        args: Sequence[str] = (),
        stdin: Stdin = None,
        limits: Limits | None = None,
        files: Mapping[str, bytes | File] | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cancel: CancelEvent | None = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        files_include: Iterable[str] | None = None,
        files_exclude: Iterable[str] | None = None,
    ) -> Result:
        """``pysandbox.run_python`` in a slot of this Runner, with its defaults (as ``run``)."""
        program, source = python_program(code, args)
        return self._result(
            Call(
                program,
                code=source,
                stdin=stdin,
                limits=limits,
                files=files,
                readable=readable,
                env=env,
                cancel=cancel,
                files_include=files_include,
                files_exclude=files_exclude,
            ),
            lambda _: (on_stdout, on_stderr),
        )

    def eval_in_sandbox(
        self,
        python_code: str,
        mem_max_mb: int = 100,
        cpu_max_time_sec: int = 1,
        timeout_max_time_sec: float = 10,
        io_max_kb: int = 128,
    ) -> ProcessOutput:
        """``pysandbox.eval_in_sandbox`` in a slot of this Runner.  Its limits are its own
        arguments, as in the reference: the Runner's defaults do not apply, and its
        ``ProcessOutput`` does not report the wait."""
        return self._eval(
            python_code, mem_max_mb, cpu_max_time_sec, timeout_max_time_sec, io_max_kb, None
        )

    async def run_async(
        self,
        argv: Sequence[str],
        *,
        stdin: Stdin = None,
        limits: Limits | None = None,
        files: Mapping[str, bytes | File] | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        files_include: Iterable[str] | None = None,
        files_exclude: Iterable[str] | None = None,
    ) -> Result:
        """``pysandbox.run_async`` in a slot of this Runner, with its defaults.  The wait
        for a slot happens in the run's own thread: the event loop never blocks, and
        cancelling the task while it waits takes it out of the queue."""
        check_output_callback(on_stdout, "on_stdout")
        check_output_callback(on_stderr, "on_stderr")
        check_file_filter(files_include, files_exclude)
        program = check_argv(argv)
        loop = asyncio.get_running_loop()
        return await in_thread(
            lambda cancel: self._result(
                Call(
                    program,
                    stdin=stdin,
                    limits=limits,
                    files=files,
                    readable=readable,
                    env=env,
                    cancel=cancel,
                    files_include=files_include,
                    files_exclude=files_exclude,
                ),
                lambda stop: (
                    on_loop(on_stdout, "on_stdout", loop, stop),
                    on_loop(on_stderr, "on_stderr", loop, stop),
                ),
            )
        )

    async def run_python_async(
        self,
        code: str,
        *,
        args: Sequence[str] = (),
        stdin: Stdin = None,
        limits: Limits | None = None,
        files: Mapping[str, bytes | File] | None = None,
        readable: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        files_include: Iterable[str] | None = None,
        files_exclude: Iterable[str] | None = None,
    ) -> Result:
        """``pysandbox.run_python_async`` in a slot of this Runner, as ``run_async``."""
        check_output_callback(on_stdout, "on_stdout")
        check_output_callback(on_stderr, "on_stderr")
        check_file_filter(files_include, files_exclude)
        program, source = python_program(code, args)
        loop = asyncio.get_running_loop()
        return await in_thread(
            lambda cancel: self._result(
                Call(
                    program,
                    code=source,
                    stdin=stdin,
                    limits=limits,
                    files=files,
                    readable=readable,
                    env=env,
                    cancel=cancel,
                    files_include=files_include,
                    files_exclude=files_exclude,
                ),
                lambda stop: (
                    on_loop(on_stdout, "on_stdout", loop, stop),
                    on_loop(on_stderr, "on_stderr", loop, stop),
                ),
            )
        )

    async def eval_in_sandbox_async(
        self,
        python_code: str,
        mem_max_mb: int = 100,
        cpu_max_time_sec: int = 1,
        timeout_max_time_sec: float = 10,
        io_max_kb: int = 128,
    ) -> ProcessOutput:
        """``eval_in_sandbox`` for asyncio, in a slot of this Runner: cancelling the task
        kills the sandbox (or leaves the queue) before the cancellation propagates."""
        eval_plan(python_code, mem_max_mb, cpu_max_time_sec, timeout_max_time_sec, io_max_kb)
        return await in_thread(
            lambda cancel: self._eval(
                python_code,
                mem_max_mb,
                cpu_max_time_sec,
                timeout_max_time_sec,
                io_max_kb,
                cancel,
            )
        )

    def run_job(self, job: Job, *, cancel: CancelEvent | None = None) -> Outcome:
        """Run one ``Job`` in a slot of this Runner and return its ``Outcome``: the
        result, or the error that kept the job from one (a bad file, a host fault, a
        cancelled run, a closed Runner), never raised.  What ``map`` does per job, and
        what a worker of another engine can call."""
        if not isinstance(job, Job):
            raise TypeError(f"job must be a Job, not {type(job).__name__}")
        try:
            if job.argv is not None:
                result = self.run(
                    job.argv,
                    stdin=job.stdin,
                    limits=job.limits,
                    files=job.files,
                    readable=job.readable,
                    env=job.env,
                    cancel=cancel,
                    files_include=job.files_include,
                    files_exclude=job.files_exclude,
                )
            else:
                assert job.code is not None  # Job has exactly one of argv and code
                result = self.run_python(
                    job.code,
                    args=job.args,
                    stdin=job.stdin,
                    limits=job.limits,
                    files=job.files,
                    readable=job.readable,
                    env=job.env,
                    cancel=cancel,
                    files_include=job.files_include,
                    files_exclude=job.files_exclude,
                )
        except Exception as exc:  # Cancelled, SandboxError, a bad file: the job's own end
            return Outcome.of_error(job.id, exc)
        return Outcome(job.id, result)

    def _answer_here(self, job: Job) -> Outcome | None:
        """The outcome of ``job`` when this Runner gives it without a sandbox (here never:
        None).  A cluster map answers such jobs in the caller and sends only the others to
        its workers, whose Runners are plain ones (``_batch``'s bad lines)."""
        return None

    def map(
        self,
        jobs: Iterable[Job],
        *,
        ordered: bool = False,
        progress: object = False,
        client: object = None,
    ) -> Iterator[Outcome]:
        """Run many jobs, at most ``max_concurrent`` at once, and yield one ``Outcome`` per
        job as each ends (``ordered=True``: in input order).

        ``jobs`` is read lazily, a few jobs ahead of the runs, so it may be a generator
        of any length.  A job that fails to run (a bad file name, a host fault) yields
        an error outcome and the map goes on; a job without an ``id`` gets its place in
        the input.  Leaving the loop early (``break``, an exception, ``KeyboardInterrupt``)
        kills and reaps the running sandboxes and reads no more jobs.

        :param progress: True shows a tqdm bar (``tqdm.auto``: a widget in notebooks)
            with the count of each verdict; needs ``pip install pysandbox[progress]``,
            else ``ImportError``.  A tqdm bar (or any object with ``update`` and
            ``set_postfix``) is used as it is and left open.
        :param client: a ``distributed.Client``: the jobs run on the workers of its Dask
            cluster, each worker process with a Runner of this one's settings, so
            ``max_concurrent`` caps each worker process (docs/graders.rst, *On a Dask
            cluster*); needs ``pip install pysandbox[dask]``.
        :raises TypeError: ``jobs`` is not iterable, ``ordered`` not a bool,
            ``progress`` neither a bool nor a bar, or ``client`` not a Client; checked
            when ``map`` is called.
        :raises RuntimeError: the Runner is closed, or is closed during the map.
        """
        if isinstance(jobs, (str, bytes, Mapping)) or not isinstance(jobs, Iterable):
            raise TypeError(f"jobs must be an iterable of Job, not {type(jobs).__name__}")
        if not isinstance(ordered, bool):
            raise TypeError(f"ordered must be a bool, not {type(ordered).__name__}")
        check_progress(progress)
        if self.closed:
            raise RuntimeError("the Runner is closed: make a new Runner to run more")
        if client is not None:
            from .dask import check_client, map_on_cluster

            check_client(client)
        total = len(jobs) if isinstance(jobs, Sequence) else None
        bar = open_bar(total) if progress is True else (None if progress is False else progress)
        if client is not None:
            outcomes = map_on_cluster(
                self, client, jobs, ordered=ordered, closed=lambda: self.closed
            )
        else:
            outcomes = map_jobs(
                lambda job, cancel: self.run_job(job, cancel=cancel),
                jobs,
                workers=self.max_concurrent,
                ordered=ordered,
                closed=lambda: self.closed,
            )
        return _counted(outcomes, bar, owned=progress is True)


def _counted(
    outcomes: Generator[Outcome, None, None], bar: Any, *, owned: bool
) -> Iterator[Outcome]:
    """``outcomes``, each counted on ``bar`` (when there is one) as it passes; a bar the
    map opened is closed at the end, however the loop ends."""
    tally = Tally(bar) if bar is not None else None
    try:
        for outcome in outcomes:
            if tally is not None:
                tally.add(outcome)
            yield outcome
    finally:
        outcomes.close()
        if owned:
            bar.close()
