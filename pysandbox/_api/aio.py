# SPDX-License-Identifier: MIT
"""``run_async``, ``run_python_async`` and ``Session.run_async``: the same runs and calls,
awaited without blocking the event loop, and cancellable."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from .._model.cancel import CancelEvent, Cancelled
from .._model.file import File
from .._model.limits import Limits
from .._model.result import Result
from .run import OnOutput, Stdin, check_file_filter, check_output_callback, run, run_python
from .session_args import call_order

if TYPE_CHECKING:
    from .._model.session_result import CellResult
    from .session import Session
    from .session_reply import OnEvent

__all__ = ["in_thread", "on_loop", "run_async", "run_python_async", "session_run_async"]

_T = TypeVar("_T")
#: What an output callback is shown: a chunk of bytes, or a session's ``OutputEvent``.
_C = TypeVar("_C")

#: Seconds between two looks at the cancel event and the loop while the run's thread
#: waits for an output callback on the loop: the C core's tick.
CALLBACK_WAIT_SLICE = 0.05


async def _show(callback: Callable[[_C], object], chunk: _C) -> None:
    """Call ``callback(chunk)`` and await what it returns if that is awaitable."""
    shown = callback(chunk)
    if inspect.isawaitable(shown):
        await shown


def on_loop(
    callback: Callable[[_C], object] | None,
    name: str,
    loop: asyncio.AbstractEventLoop,
    cancel: CancelEvent,
) -> Callable[[_C], None] | None:
    """``callback`` as the run's thread calls it: each chunk is handed to the event loop
    and the thread waits until the callback (and what it returned, if awaitable) is done,
    so chunks arrive in order, a slow callback slows the reading (never the loop), and an
    exception comes back to the run, which kills the sandbox and re-raises it.  The wait
    gives up, cancelling the callback, once the awaiting task was cancelled or the loop
    closed: the run then ends with ``Cancelled`` instead of waiting for a loop that will
    not run the callback."""
    if callback is None:
        return None
    shown_by = callback

    gone = (
        f"the awaiting task was cancelled or its event loop closed while its {name} "
        "callback was pending; the sandbox was killed"
    )

    def show_on_loop(chunk: _C) -> None:
        showing = _show(shown_by, chunk)
        try:
            pending = asyncio.run_coroutine_threadsafe(showing, loop)
        except RuntimeError:  # the loop is closed
            showing.close()
            raise Cancelled(gone) from None
        while True:
            try:
                pending.result(timeout=CALLBACK_WAIT_SLICE)
                return
            except concurrent.futures.TimeoutError:
                if cancel.is_set() or loop.is_closed():
                    pending.cancel()
                    raise Cancelled(gone) from None

    return show_on_loop


async def in_thread(call: Callable[[threading.Event], _T]) -> _T:
    """Run ``call(cancel_event)`` in a thread of its own and await its result.

    One thread per run (the C core releases the GIL while it waits), so any number of
    runs overlap, unlike a bounded executor.  Cancelling the awaiting task sets the
    event: the C core kills the sandbox at its next tick (50 ms), reaps it, and only
    then does the cancellation propagate (however often the task is cancelled again
    meanwhile), so no process outlives the task.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()
    cancel = threading.Event()

    def settle(outcome: _T | BaseException) -> None:
        if done.cancelled():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    def worker() -> None:
        try:
            outcome: _T | BaseException = call(cancel)
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            outcome = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits
            loop.call_soon_threadsafe(settle, outcome)

    thread = threading.Thread(target=worker, name="pysandbox-run", daemon=True)
    thread.start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        cancel.set()
        # Until the run has ended: anyio's cancel scopes (FastAPI, the MCP SDK) cancel
        # every await of a cancelled task again, not only the first.
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError, Cancelled, Exception):
                await asyncio.shield(done)
        raise


async def run_async(
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
    """``run`` for asyncio: awaits the result without blocking the event loop; cancelling
    the task kills the sandbox and leaves no process.  A ``stdin`` callback runs in the
    run's own thread, not in the event loop.

    ``on_stdout`` and ``on_stderr`` are plain callables or coroutine functions (any
    callable; what it returns is awaited when awaitable).  Unlike ``stdin``, they run on
    this event loop, one chunk at a time: the run reads on only once the last chunk's
    callback is done.  An exception in one kills the sandbox and is raised here.
    """
    check_output_callback(on_stdout, "on_stdout")
    check_output_callback(on_stderr, "on_stderr")
    check_file_filter(files_include, files_exclude)
    loop = asyncio.get_running_loop()
    return await in_thread(
        lambda cancel: run(
            argv,
            stdin=stdin,
            limits=limits,
            files=files,
            readable=readable,
            env=env,
            cancel=cancel,
            on_stdout=on_loop(on_stdout, "on_stdout", loop, cancel),
            on_stderr=on_loop(on_stderr, "on_stderr", loop, cancel),
            files_include=files_include,
            files_exclude=files_exclude,
        )
    )


async def run_python_async(
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
    displays: bool = False,
) -> Result:
    """``run_python`` for asyncio, as ``run_async``."""
    check_output_callback(on_stdout, "on_stdout")
    check_output_callback(on_stderr, "on_stderr")
    check_file_filter(files_include, files_exclude)
    if not isinstance(displays, bool):
        raise TypeError(f"displays must be a bool, not {type(displays).__name__}")
    loop = asyncio.get_running_loop()
    return await in_thread(
        lambda cancel: run_python(
            code,
            args=args,
            stdin=stdin,
            limits=limits,
            files=files,
            readable=readable,
            env=env,
            cancel=cancel,
            on_stdout=on_loop(on_stdout, "on_stdout", loop, cancel),
            on_stderr=on_loop(on_stderr, "on_stderr", loop, cancel),
            files_include=files_include,
            files_exclude=files_exclude,
            displays=displays,
        )
    )


async def session_run_async(
    session: Session,
    code: str,
    options: Mapping[str, object],
    on_stdout: OnOutput,
    on_stderr: OnOutput,
    on_event: OnEvent,
) -> CellResult:
    """``Session.run_async``: the call's ``options`` (its limits and files) and the
    callbacks checked here, then ``Session.run`` in a thread of its own, the callbacks
    on this event loop."""
    call_order(session.limits, code, **options)  # type: ignore[arg-type]
    for callback, name in ((on_stdout, "on_stdout"), (on_stderr, "on_stderr")):
        check_output_callback(callback, name)
    check_output_callback(on_event, "on_event")
    loop = asyncio.get_running_loop()
    return await in_thread(
        lambda cancel: session.run(
            code,
            cancel=cancel,
            on_stdout=on_loop(on_stdout, "on_stdout", loop, cancel),
            on_stderr=on_loop(on_stderr, "on_stderr", loop, cancel),
            on_event=on_loop(on_event, "on_event", loop, cancel),
            **options,  # type: ignore[arg-type]
        )
    )
