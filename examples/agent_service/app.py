# SPDX-License-Identifier: MIT
"""An agent's code-execution service on one pysandbox ``Runner``: fresh runs, and a live
session per conversation.  Run it with ``uvicorn examples.agent_service.app:app``.

``POST /run``                      runs code in a fresh sandbox
``POST /conversations/{id}/run``   runs code in the conversation's session
``DELETE /conversations/{id}``     ends the conversation's session

A request may tighten the service's limits, never loosen them.  A ``/run`` whose wall
time is at most ``SHORT_WALL_TIME`` runs in the Runner's short slots, so cheap calls do
not queue behind slow ones.  A client that disconnects cancels its call: the sandbox is
killed (uvicorn and Starlette let a plain endpoint run on after a disconnect, so the
service watches for it itself).  Shutting down closes the Runner and every session.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, Optional, TypeVar

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from pysandbox import Bundle, Cancelled, CellResult, Limits, Result, Runner, SandboxError, Session

#: The most a request may use; a request's own limits may only be lower.  Importing
#: matplotlib takes seconds of CPU on a busy machine, hence the generous clocks.
SERVICE_LIMITS = Limits(wall_time=90, cpu_time=30, memory=768 * 2**20, stdout=2**20)
#: A ``/run`` whose wall time is at most this many seconds is short: it may take one of
#: the ``SHORT_SLOTS`` slots kept for short runs.
SHORT_WALL_TIME = 5.0
MAX_CONCURRENT = 4
SHORT_SLOTS = 1
#: The most live conversations; at the cap, the one idle the longest is evicted.
MAX_CONVERSATIONS = 32
#: Seconds without a call after which a conversation's session ends.  The Runner's warm
#: session has ``Session``'s default, 600: with another value each session starts fresh.
IDLE_TIMEOUT = 600.0

T = TypeVar("T")


class AskedLimits(BaseModel):
    """Limits a request asks for, each at most the service's (``memory``: ``/run``
    only, a conversation's memory is its session's).  ``Optional``: pydantic reads
    these annotations at run time, where Python 3.9 has no ``float | None``."""

    wall_time: Optional[float] = Field(default=None, gt=0)  # noqa: UP045
    cpu_time: Optional[float] = Field(default=None, gt=0)  # noqa: UP045
    memory: Optional[int] = Field(default=None, gt=0)  # noqa: UP045
    stdout: Optional[int] = Field(default=None, gt=0)  # noqa: UP045


class RunRequest(BaseModel):
    code: str = Field(max_length=1_000_000)
    limits: AskedLimits = Field(default_factory=AskedLimits)


def tightened(limits: Limits, asked: AskedLimits) -> Limits:
    """``limits`` lowered to what the request asks; 422 for anything above them."""
    changes = asked.model_dump(exclude_none=True)
    for name, value in changes.items():
        if value > getattr(limits, name):
            raise HTTPException(422, f"limits.{name} may be at most {getattr(limits, name)}")
    return dataclasses.replace(limits, **changes)


def png_images(bundles: Iterable[Bundle]) -> list[str]:
    """The PNG images of ``bundles`` (each checked whole when it was made), in base64."""
    return [
        base64.b64encode(bundle["image/png"]).decode("ascii")  # type: ignore[arg-type]
        for bundle in bundles
        if "image/png" in bundle
    ]


def run_json(result: Result) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "returncode": result.returncode,
        "stdout": result.stdout_text(),
        "stderr": result.stderr_text(),
        "wall_time": result.wall_time,
        "cpu_time": result.cpu_time,
        "queued_time": result.queued_time,
        # The PNG files the code saved, each checked as a display is.
        "images": png_images(Bundle({"image/png": data}) for data in result.files.values()),
    }


def cell_json(cell: CellResult, new: bool) -> dict[str, Any]:
    return {
        "new_conversation": new,
        "outcome": cell.outcome,
        "status": cell.status.value,
        "reason": cell.reason,
        "stdout": cell.stdout.decode(errors="replace"),
        "stderr": cell.stderr.decode(errors="replace"),
        "value": cell.value,
        "error": None if cell.error is None else dataclasses.asdict(cell.error),
        "wall_time": cell.wall_time,
        "cpu_time": cell.cpu_time,
        "images": png_images(cell.displays),  # plt.show(), and the figures left open
    }


async def _disconnected(request: Request) -> None:
    """Return once the client has gone away (the body is read already, so the next
    message the server has for this request is ``http.disconnect``)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result; cancelled (its sandbox killed, or its call rolled back) when
    the client disconnects first, or when this request's task is cancelled."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        task.cancel()  # nothing if it is done
        await asyncio.gather(task, watch, return_exceptions=True)
    if task.cancelled():
        raise HTTPException(499, "the client closed the request")  # nobody reads it
    return task.result()


class Conversations:
    """A session per conversation id, started on first use, started again when the one
    it had ended (idle too long, or evicted at the Runner's ``max_sessions``)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.sessions: dict[str, Session] = {}
        self.lock = asyncio.Lock()

    async def session(self, conversation: str) -> tuple[Session, bool]:
        """The conversation's live session, and whether it is new."""
        async with self.lock:
            session = self.sessions.get(conversation)
            if session is not None and session.alive:
                return session, False
            self.sessions = {key: s for key, s in self.sessions.items() if s.alive}
            try:
                session = await self.runner.session_async(idle_timeout=IDLE_TIMEOUT)
            except SandboxError as error:  # every live session is running a call
                raise HTTPException(503, str(error)) from error
            self.sessions[conversation] = session
            return session, True

    async def run(self, conversation: str, code: str, limits: Limits) -> dict[str, Any]:
        session, new = await self.session(conversation)
        try:
            cell = await session.run_async(
                code, wall_time=limits.wall_time, cpu_time=limits.cpu_time, stdout=limits.stdout
            )
        except SandboxError:
            if session.alive:
                raise
            # Evicted between the look-up and the call: start the conversation over.
            session, new = await self.session(conversation)
            cell = await session.run_async(
                code, wall_time=limits.wall_time, cpu_time=limits.cpu_time, stdout=limits.stdout
            )
        return cell_json(cell, new)

    async def end(self, conversation: str) -> bool:
        async with self.lock:
            session = self.sessions.pop(conversation, None)
        if session is None:
            return False
        await asyncio.get_running_loop().run_in_executor(None, session.close)
        return True


def create_app(
    *,
    limits: Limits = SERVICE_LIMITS,
    max_concurrent: int = MAX_CONCURRENT,
    short_slots: int = SHORT_SLOTS,
    short_wall_time: float | None = SHORT_WALL_TIME,
    max_conversations: int = MAX_CONVERSATIONS,
) -> FastAPI:
    """The service; ``short_slots=0`` (and ``short_wall_time=None``) for one queue."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Runner(
            limits=limits,
            max_concurrent=max_concurrent,
            short_slots=short_slots,
            short_wall_time=short_wall_time,
            max_sessions=max_conversations,
            warm_sessions=1,
        ) as runner:  # leaving it closes every sandbox and session
            app.state.runner = runner
            app.state.conversations = Conversations(runner)
            yield

    app = FastAPI(title="pysandbox agent service", lifespan=lifespan)

    @app.exception_handler(Cancelled)
    async def shutting_down(request: Request, error: Cancelled) -> JSONResponse:
        """A call the Runner's ``close()`` ended: the service is shutting down."""
        return JSONResponse({"detail": "the service is shutting down"}, status_code=503)

    @app.post("/run")
    async def run(body: RunRequest, request: Request) -> dict[str, Any]:
        runner: Runner = request.app.state.runner
        asked = tightened(runner.limits, body.limits)
        result = await unless_disconnected(
            request, runner.run_python_async(body.code, limits=asked, files_include=["*.png"])
        )
        return run_json(result)

    @app.post("/conversations/{conversation}/run")
    async def converse(conversation: str, body: RunRequest, request: Request) -> dict[str, Any]:
        if body.limits.memory is not None:
            raise HTTPException(422, "limits.memory is the conversation's: the service's")
        conversations: Conversations = request.app.state.conversations
        asked = tightened(conversations.runner.limits, body.limits)
        return await unless_disconnected(request, conversations.run(conversation, body.code, asked))

    @app.delete("/conversations/{conversation}", status_code=204)
    async def end(conversation: str, request: Request) -> Response:
        if not await request.app.state.conversations.end(conversation):
            raise HTTPException(404, "no such conversation")
        return Response(status_code=204)

    return app


app = create_app()
