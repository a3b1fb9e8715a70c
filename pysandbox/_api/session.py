# SPDX-License-Identifier: MIT
"""``Session``: a live interpreter in one sandbox that keeps its state between calls and
rolls back a call that a limit ended.

The sandbox is an ordinary launch (``_launch.launch``, in a thread of the session, for
the session's whole life): every protection of a one-shot run holds, the lifeline and
the cgroup included, and the session's limits are the launch's (memory, disk, processes
for the whole sandbox; ``lifetime`` as its wall time, ``cpu_budget`` as its CPU time).
Its program is the keeper (``session_keeper.py``), reached through three pipes
(``session_channel.py``); per-call limits are the keeper's to apply, and the host
bounds each call again (its wall time plus ``GRACE``, its caps): a keeper that breaks
the protocol or goes silent loses the session, never the caller.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from .._launch.launcher import launch
from .._launch.plan import Facts, Plan
from .._launch.readable import check_readable
from .._model.call_result import CallResult
from .._model.cancel import CancelEvent
from .._model.errors import SandboxError
from .._model.file import File
from .._model.filestream import check_fits_tmpfs, encode_files
from .._model.limits import Limits
from .._model.session_result import LOST, CellResult
from .call import OnOutput
from .run import check_env, check_file_filter, check_output_callback
from .session_args import call_limits, call_order, positive_seconds, session_limits
from .session_call import call_function
from .session_cap import ProcessCapWatch
from .session_channel import (
    CONTROL_MAX,
    FATAL,
    READY,
    VALUE_CAP,
    Channel,
    ChannelTimeout,
    FilesRefused,
    ProtocolError,
    Values,
    fatal_reason,
)
from .session_ending import ending_words, lost_status
from .session_idle import IdleWatch
from .session_plan import CHANNELS, session_plan
from .session_reply import OnEvent, Reply
from .session_values import pull_values, push_values

__all__ = [
    "DEFAULT_CPU_BUDGET",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_LIFETIME",
    "GRACE",
    "VALUE_CAP",
    "Session",
]

#: Seconds past a call's wall time that the host waits for the keeper's answer before it
#: ends the session: the keeper kills at the wall time and needs only to reap and report.
GRACE = 2.0
#: A session's clocks unless given: its lifetime, its idle timeout (seconds) and its CPU
#: budget (CPU seconds).
DEFAULT_LIFETIME = 3600.0
DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_CPU_BUDGET = 600.0
#: Seconds a new session may take to start its keeper.
START_TIMEOUT = 30.0


class Session:
    """A live Python interpreter in a sandbox of its own, for code that runs in steps.

    ``with Session() as s: s.run("x = 1"); s.run("x + 1").value == "2"``.  See the
    guide's *Sessions* page for what persists, what rolls back, and what each limit
    covers.

    :param limits: per session, ``memory``, ``disk``, ``processes``, ``open_files`` and
        ``file_size`` of the whole sandbox; per call, the defaults of ``run``'s
        ``wall_time``, ``cpu_time``, ``stdout``, ``stderr``, ``truncate_output``,
        ``files_out`` and ``files_out_count``.
    :param readable: host paths the code may read, as for ``run``.
    :param env: environment variables, as for ``run``.
    :param files: files put in the working directory ``/sandbox`` before the first call.
    :param lifetime: seconds the session may live; past them it ends (``lost``).
    :param idle_timeout: seconds without a call after which the session ends.
    :param cpu_budget: CPU seconds of everything the session runs, calls and whatever
        runs between them; past them it ends.
    :param files_include: as for ``run``, for every call of the session: only the
        changed files one matches come back in ``CellResult.files``.
    :param files_exclude: as for ``run``, for every call: no file one matches comes
        back, and a directory one matches is not walked.
    :raises TypeError, ValueError: a bad argument, before anything starts.
    :raises SandboxError: the sandbox could not be started.
    """

    def __init__(
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
    ) -> None:
        self.limits = limits = session_limits(limits, CHANNELS)
        self.lifetime = positive_seconds(lifetime, "lifetime")
        self.idle_timeout = positive_seconds(idle_timeout, "idle_timeout")
        self.cpu_budget = positive_seconds(cpu_budget, "cpu_budget")
        files_stream = encode_files(files) if files else None
        check_fits_tmpfs(files or {}, limits.disk, limits.disk_inodes())
        paths = check_readable(readable)
        env_options = check_env(env)
        patterns = check_file_filter(files_include, files_exclude)
        self._lock = threading.Lock()
        self._kill = threading.Event()
        self._gone = threading.Event()
        self._facts: Facts | None = None
        self._failure: BaseException | None = None
        self._lost_reason = ""
        self._cap = ProcessCapWatch()
        self._closed = False
        self._idle: IdleWatch | None = None
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        call_read, call_write = os.pipe()
        self._channel = Channel(request_write, reply_read, call_write)
        inside = (request_read, reply_write, call_read)
        #: Calls sent so far, each's number in its traceback (``<cell-N>``).
        self._cells = 0
        try:
            plan = session_plan(
                limits,
                lifetime=self.lifetime,
                cpu_budget=self.cpu_budget,
                files_stream=files_stream,
                readable=paths,
                env_options=env_options,
                patterns=patterns,
                channels=inside,
                cancel=self._kill,
                on_cgroup=self._cap.watch,
            )
            self._thread = threading.Thread(
                target=self._hold, args=(plan,), name="pysandbox-session", daemon=True
            )
            self._thread.start()
            self._wait_ready()
        except BaseException:
            self._kill.set()
            if hasattr(self, "_thread"):
                self._thread.join()
            self._channel.close()
            raise
        finally:
            for fd in inside:
                os.close(fd)
        self._idle = IdleWatch(self.idle_timeout, self._expire)

    def _hold(self, plan: Plan) -> None:
        """The session's thread: the launch, from the sandbox's start to its end."""
        try:
            self._facts = launch(plan)
        except BaseException as exc:  # kept for the caller: the thread has nobody else
            self._failure = exc
        finally:
            self._gone.set()

    def _wait_ready(self) -> None:
        """Wait for the keeper's ``READY``; raise what the launch raised, or a
        ``SandboxError`` saying why the keeper did not start."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                kind, payload = self._channel.receive(
                    min(deadline, time.monotonic() + 0.05), {READY: 4096, FATAL: CONTROL_MAX}
                )
            except ChannelTimeout:
                if self._gone.is_set() or time.monotonic() >= deadline:
                    break
                continue
            except ProtocolError:
                break
            if kind == READY:
                return
            self._lost_reason = fatal_reason(payload)
            break
        self._kill.set()
        self._thread.join()
        if self._failure is not None and not isinstance(self._failure, ProtocolError):
            raise self._failure
        raise SandboxError(f"the session could not start: {self._ending()}")

    def _expire(self) -> bool:
        """The idle timeout passed: end the session, unless a call has just begun."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._end(f"no call for {self.idle_timeout:g} s (the idle timeout)")
        finally:
            self._lock.release()
        return True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """The session can run a call."""
        return not self._closed and not self._gone.is_set() and not self._lost_reason

    def run(
        self,
        code: str,
        *,
        wall_time: float | None = None,
        cpu_time: float | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        truncate_output: bool | None = None,
        files: Mapping[str, bytes | File] | None = None,
        cancel: CancelEvent | None = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        on_event: OnEvent = None,
    ) -> CellResult:
        """Run ``code`` in the session as a notebook cell runs, and say what it did.

        Globals, imports, functions and the working directory persist to the next call;
        the value of a final expression comes back as ``CellResult.value`` (its
        ``repr``), an exception as ``CellResult.error``.  A call that a limit ends, or
        that crashes the interpreter, is rolled back: the session's state is exactly
        what it was before it.  Each limit left None is the session's ``limits``'.

        :raises TypeError, ValueError: a bad argument, before anything runs.
        :raises SandboxError: the session was closed, or lost by an earlier call; or
            the call's ``files`` could not be written (the disk is full, a directory has
            that name): the code did not run, and the session goes on.
        :param cancel: an object whose ``is_set()`` is asked every 50 ms; once true,
            the call is interrupted and rolled back, then ``Cancelled`` is raised
            (``threading.Event`` fits).
        :param on_stdout: shown each chunk of the call's stdout as it comes (bytes, in
            order, joining to ``CellResult.stdout``), in this thread; if it raises, the
            call is interrupted and rolled back, then the exception propagates.
        :param on_stderr: the same for stderr.
        :param on_event: shown each ``OutputEvent`` as it comes: the chunks of stdout and
            stderr and the displays (``CellResult.displays``), in the order the code
            made them; if it raises, as ``on_stdout``.
        :raises KeyboardInterrupt: Ctrl-C while the call ran; the call was rolled back
            first and the session goes on.
        """
        limits, inputs = call_order(
            self.limits, code, wall_time, cpu_time, stdout, stderr, truncate_output, files
        )
        for callback, name in ((on_stdout, "on_stdout"), (on_stderr, "on_stderr")):
            check_output_callback(callback, name)
        check_output_callback(on_event, "on_event")
        reply = Reply(limits, on_stdout, on_stderr, on_event)
        return self._locked_call(code, inputs, cancel, reply, Values())

    async def run_async(
        self,
        code: str,
        *,
        wall_time: float | None = None,
        cpu_time: float | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        truncate_output: bool | None = None,
        files: Mapping[str, bytes | File] | None = None,
        on_stdout: OnOutput = None,
        on_stderr: OnOutput = None,
        on_event: OnEvent = None,
    ) -> CellResult:
        """``run`` for asyncio, in a thread of its own.  Cancelling the awaiting task
        interrupts the call: it is rolled back, and the cancellation propagates once it
        has; the session goes on.  The output callbacks run on the event loop (and may
        be coroutine functions), as ``run_async``'s."""
        from .aio import session_run_async  # only for callers that await

        options: dict[str, object] = {"wall_time": wall_time, "cpu_time": cpu_time}
        options.update(stdout=stdout, stderr=stderr, truncate_output=truncate_output, files=files)
        return await session_run_async(self, code, options, on_stdout, on_stderr, on_event)

    def touch(self) -> None:
        """Count the idle timeout from now, as a call does (for a session handed out
        after it waited, say)."""
        if self._idle is not None:
            self._idle.end()

    def push(self, values: Mapping[str, object] | None = None, /, **named: object) -> None:
        """Set the session's variables ``values`` and ``named`` to copies, passed in the
        value codec's format, never pickled: None, bool, int, float, complex, str, bytes,
        bytearray, list, tuple, dict, set, numpy arrays and scalars, pandas frames.

        :raises TypeError, ValueError: a name that is no identifier, or a value the codec
            cannot pass (the message says where) or over ``limits.values``; before
            anything runs.
        :raises SandboxError: the session has ended, or could not set them (numpy
            missing in the sandbox, its memory ran out)."""
        push_values(self, {**(values or {}), **named})

    def pull(self, *names: str) -> dict[str, object]:
        """Copies of the session's variables ``names``, rebuilt from the value codec's
        format with its checks and bounds (never unpickled).

        :raises TypeError, ValueError: a name that is no identifier (before anything
            runs); a value the codec cannot pass, or over ``limits.values``.
        :raises NameError: a name the session has not defined.
        :raises SandboxError: the session has ended, or what came back was malformed."""
        return pull_values(self, names)

    def call(self, target: str, /, *args: object, **kwargs: object) -> CallResult:
        """Call the function ``target`` of the session's code with copies of ``args`` and
        ``kwargs``; every keyword is the function's (``call_with`` says more)."""
        return call_function(self, target, args, kwargs)

    def call_with(
        self,
        target: str,
        /,
        args: Sequence[object] = (),
        kwargs: Mapping[str, object] | None = None,
        *,
        wall_time: float | None = None,
        cpu_time: float | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        truncate_output: bool | None = None,
        cancel: CancelEvent | None = None,
    ) -> CallResult:
        """``call(target, *args, **kwargs)`` with the call's limits and ``cancel`` as
        ``run``'s: the function's return value as a Python value, its output apart, or
        the exception it raised (``session_call.call_function`` says how).

        :raises TypeError, ValueError: a bad ``target``, or an argument the value codec
            cannot pass (named: ``args[1]``) or over ``limits.values``; before anything
            runs.
        :raises SandboxError: the session has ended."""
        return call_function(
            self, target, args, kwargs, wall_time, cpu_time, stdout, stderr, truncate_output, cancel
        )

    async def call_async(self, target: str, /, *args: object, **kwargs: object) -> CallResult:
        """``call`` for asyncio, in a thread of its own; cancelling the awaiting task
        rolls the call back, as ``run_async``'s."""
        from .aio import in_thread

        return await in_thread(lambda cancel: self.call_with(target, args, kwargs, cancel=cancel))

    def _locked_call(
        self,
        code: str,
        inputs: list[tuple[str, int, bytes]],
        cancel: CancelEvent | None,
        reply: Reply,
        values: Values,
    ) -> CellResult:
        """One call at a time, on a live session, counted as not idle."""
        with self._lock:
            if not self.alive:
                raise SandboxError(f"the session has ended: {self._ending()}")
            assert self._idle is not None
            self._idle.begin()
            try:
                return self._call(code, inputs, cancel, reply, values)
            finally:
                self._idle.end()

    def _call(
        self,
        code: str,
        inputs: list[tuple[str, int, bytes]],
        cancel: CancelEvent | None,
        reply: Reply,
        values: Values,
    ) -> CellResult:
        limits = reply.limits
        order = call_limits(limits, pull=bool(values.pull))
        refused = self._cap.count()
        started = time.monotonic()
        deadline = started + limits.wall_time + GRACE
        try:
            self._start(code, order, inputs, deadline, values)
            reply.collect(self._channel, deadline, cancel, GRACE)
            # Inside the try: a DONE whose fields are unfit (a value that is no str, an
            # error that is no dict...) is a broken protocol too, and must lose the
            # session rather than raise ProtocolError at the caller.
            result = reply.result(time.monotonic() - started, self._cap.count() > refused)
        except ProtocolError as exc:
            return self._lose(str(exc), reply, started)
        except SandboxError:
            raise  # its files were refused before it was sent: the session goes on
        except BaseException:  # frames half read: never taken for the next call's
            self._end("a call's answer could not be read whole")
            raise
        if result.lost:
            return self._lose(result.reason, reply, started)
        if reply.stopped_by is not None:
            raise reply.stopped_by
        return result

    def _start(
        self,
        code: str,
        order: Mapping[str, object],
        inputs: list[tuple[str, int, bytes]],
        deadline: float,
        values: Values,
    ) -> None:
        """Send a call (``Channel.start_call``).  Anything that stops it half-sent
        (Ctrl-C as megabytes of files are written) ends the session: what the sandbox
        has of the call could be taken for a later one's."""
        self._cells += 1
        try:
            self._channel.start_call(code, self._cells, order, inputs, deadline, values)
        except FilesRefused as refused:
            raise SandboxError(f"the call's files could not be written: {refused}") from None
        except ProtocolError:
            raise
        except BaseException:
            self._end("a call was stopped as it was sent")
            raise

    def _lose(self, why: str, reply: Reply, started: float) -> CellResult:
        """End the session and say so as the call's result."""
        self._end(why)
        return CellResult(
            outcome=LOST,
            status=lost_status(self._facts),
            stdout=bytes(reply.stdout),
            stderr=bytes(reply.stderr),
            reason=self._ending(),
            wall_time=time.monotonic() - started,
        )

    def _end(self, why: str) -> None:
        """Kill the sandbox (if it runs) and wait until it is gone and reaped."""
        if not self._lost_reason:
            self._lost_reason = why
        if self._idle is not None:
            self._idle.stop()
        self._kill.set()
        self._thread.join()

    def _ending(self) -> str:
        """Why the session ended, in words (``ending_words``)."""
        return ending_words(
            self._facts,
            lifetime=self.lifetime,
            cpu_budget=self.cpu_budget,
            closed=self._closed,
            failure=self._failure,
            lost_reason=self._lost_reason,
        )

    def interrupt(self) -> None:
        """End the running call, if any, with rollback; the session goes on.  Safe to
        call from any thread."""
        if self.alive:
            self._channel.interrupt()

    def close(self) -> None:
        """End the session: its sandbox is killed and reaped, nothing of it is left.
        Idempotent; a call running in another thread ends ``lost``."""
        if self._closed:
            return
        self._closed = True
        if self._idle is not None:
            self._idle.stop()
        self._kill.set()
        with self._lock:
            self._thread.join()
            self._channel.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and hasattr(self, "_thread"):
            self._kill.set()
