"""``run_async`` and ``run_python_async``: the same runs, awaited without blocking the
event loop, and cancellable."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence

from ._errors import Cancelled
from ._file import File
from ._limits import Limits
from ._run import Stdin, run, run_python
from ._types import Result

__all__ = ["run_async", "run_python_async"]


async def _in_thread(call: Callable[[threading.Event], Result]) -> Result:
    """Run ``call(cancel_event)`` in a thread of its own and await its result.

    One thread per run (the C core releases the GIL while it waits), so any number of
    runs overlap, unlike a bounded executor.  Cancelling the awaiting task sets the
    event: the C core kills the sandbox at its next tick (50 ms), reaps it, and only
    then does the cancellation propagate, so no process outlives the task.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Result] = loop.create_future()
    cancel = threading.Event()

    def settle(outcome: Result | BaseException) -> None:
        if done.cancelled():
            return
        if isinstance(outcome, BaseException):
            done.set_exception(outcome)
        else:
            done.set_result(outcome)

    def worker() -> None:
        try:
            outcome: Result | BaseException = call(cancel)
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
        with contextlib.suppress(Cancelled, Exception):
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
) -> Result:
    """``run`` for asyncio: awaits the result without blocking the event loop; cancelling
    the task kills the sandbox and leaves no process.  A ``stdin`` callback runs in the
    run's own thread, not in the event loop."""
    return await _in_thread(
        lambda cancel: run(
            argv,
            stdin=stdin,
            limits=limits,
            files=files,
            readable=readable,
            env=env,
            cancel=cancel,
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
) -> Result:
    """``run_python`` for asyncio, as ``run_async``."""
    return await _in_thread(
        lambda cancel: run_python(
            code,
            args=args,
            stdin=stdin,
            limits=limits,
            files=files,
            readable=readable,
            env=env,
            cancel=cancel,
        )
    )
