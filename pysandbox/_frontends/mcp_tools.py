# SPDX-License-Identifier: MIT
"""The tools of ``pysandbox mcp``, as the protocol's SDK (``mcp``, imported here at the
top: this module loads only when the server runs) calls them.

``run_python`` runs code in a fresh session used once and closed (a warm one when the
Runner has one ready), so its figures come back as a session's do; the session tools
keep one ``Session`` per id (``mcp_state.SessionTable``).  A result is one text block
(the verdict line, stdout, stderr, the value, the exception) followed by each display:
a PNG or JPEG as the protocol's image content, text as text; its structured form
(``RunOutput``) holds the same.  What a call asks of the limits is checked against the
server's (``asked_limits``); a refusal, an unknown session or a full table is a tool
error the agent reads.  A call whose request is cancelled (the client went away) is
interrupted: a session's call is rolled back, a fresh run's session closed, and the
handler returns only once its processes are gone.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar, Union
from urllib.parse import quote

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
)
from pydantic import BaseModel, Field
from starlette.requests import Request

from .._api.session import Session
from .._model.cancel import Cancelled
from .._model.errors import SandboxError
from .._model.escape import escape_controls
from .._model.limits import Limits
from .._model.record import replace
from .._model.session_result import CellResult
from .._model.verdict import size_text
from .._runner.runner import Runner
from .mcp_state import (
    LiveSession,
    ServerOptions,
    SessionTable,
    asked_limits,
    capped_text,
    file_text,
)
from .session_cell import Wording, cell_verdict_text

__all__ = ["RunOutput", "SandboxTools"]

T = TypeVar("T")
#: Whether the client of a call went away, when the transport can tell (None: it
#: cancels the call itself).
Gone = Union[Callable[[], Awaitable[bool]], None]
#: Seconds between two looks at whether an HTTP client went away.
WATCH_PERIOD = 0.2

#: Characters of one text display shown (a figure's ``text/plain`` is left out).
DISPLAY_TEXT_MAX = 16_384
#: Bytes of a file ``read_session_file`` returns at once.
READ_MAX = 1 << 20
#: How the verdict line speaks of a call and of a lost session.
MCP_WORDS = Wording(unit="call", after_loss="create a new session to go on")
#: The images an agent is shown, in the order a bundle prefers them.
IMAGE_TYPES = ("image/png", "image/jpeg")
#: The text of a display without an image, in order of preference.
TEXT_TYPES = ("text/markdown", "text/plain")

Code = Annotated[str, Field(description="Python code, run as a notebook cell runs it")]
SessionId = Annotated[str, Field(description="a session's id, from create_session")]
Seconds = Annotated[
    Union[float, str, None],
    Field(description="seconds (a number, or text like '2s', '500ms'); at most the server's"),
]
Bytes = Annotated[
    Union[int, str, None],
    Field(description="bytes (a number, or text like '512M', '1G'); at most the server's"),
]


class CallError(BaseModel):
    """The exception the code raised."""

    type: str
    message: str
    traceback: str


class RunOutput(BaseModel):
    """What one run did: how it ended, what it printed, its value and exception, the
    files it made or changed (path to size) and the images it showed."""

    session_id: str | None
    outcome: str = Field(description="committed, rolled_back (a limit ended it) or lost")
    status: str = Field(description="ok, or the limit or crash that ended the code")
    verdict: str
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    value: str | None = Field(description="repr() of the final expression's value")
    error: CallError | None
    files: dict[str, int]
    images: int
    wall_time: float
    cpu_time: float
    max_rss: int


class SessionInfo(BaseModel):
    """A new session: its id and the limits of its calls."""

    session_id: str
    wall_time: float
    cpu_time: float
    memory: int
    idle_timeout: float


class FileEntry(BaseModel):
    path: str
    size: int


class FileListing(BaseModel):
    """The files a session's calls returned, latest versions."""

    files: list[FileEntry]
    dropped: int = Field(description="older files dropped to stay within the server's cap")


class Closed(BaseModel):
    session_id: str
    closed: bool


async def run_cell(
    session: Session, code: str, limits: Limits, ctx: Context, stopped: str, failed: str
) -> CellResult:
    """``session.run(code)`` under ``limits``' wall and CPU time, in a worker thread,
    stopped when the client goes away; that, or a ``SandboxError``, as a ``ToolError``
    saying ``stopped`` or starting with ``failed``."""
    try:
        return await in_thread(
            lambda cancel: session.run(
                code, wall_time=limits.wall_time, cpu_time=limits.cpu_time, cancel=cancel
            ),
            departure(ctx),
        )
    except Cancelled:
        raise ToolError(f"the client went away: {stopped}") from None
    except SandboxError as exc:
        raise ToolError(f"{failed}: {exc}") from None


def departure(ctx: Context) -> Gone:
    """How to ask whether the client of this tool call went away: the handshake era's
    streamable HTTP runs a call apart from its HTTP request, so the request's own end is
    watched (the 2026 protocol's HTTP and stdio cancel the call themselves)."""
    request = ctx.request_context.request
    return request.is_disconnected if isinstance(request, Request) else None


async def _watch(gone: Callable[[], Awaitable[bool]], cancel: threading.Event) -> None:
    while not await gone():
        await anyio.sleep(WATCH_PERIOD)
    cancel.set()


async def in_thread(call: Callable[[threading.Event], T], gone: Gone = None) -> T:
    """``call(cancel)`` in a worker thread.  When the awaiting task is cancelled,
    ``cancel`` is set and the task waits (shielded) for ``call`` to return before the
    cancellation goes on, so whatever it ran is gone by then; when ``gone()`` says the
    client went away, ``cancel`` is set too (``call`` then raises ``Cancelled``)."""
    cancel = threading.Event()
    finished = threading.Event()

    def work() -> T:
        try:
            return call(cancel)
        finally:
            finished.set()

    # What ``call`` returned or raised, kept to be handed on outside the task group:
    # anyio wraps what escapes a group's body in an exception group, which would hide a
    # ``SandboxError`` or ``Cancelled`` from the tools' handlers.
    outcome: list[T] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as group:
        if gone is not None:
            group.start_soon(_watch, gone, cancel)
        try:
            outcome.append(await anyio.to_thread.run_sync(work, abandon_on_cancel=True))
        except anyio.get_cancelled_exc_class():
            cancel.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(finished.wait)
            raise
        except Exception as exc:
            failure.append(exc)
        group.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0]


def _display_blocks(result: CellResult) -> list[ContentBlock]:
    """Each display: its image (already checked by pysandbox) or its text, capped."""
    blocks: list[ContentBlock] = []
    for bundle in result.displays:
        image = next((kind for kind in IMAGE_TYPES if kind in bundle), None)
        data = bundle[image] if image is not None else None
        if image is not None and isinstance(data, bytes):
            encoded = base64.b64encode(data).decode("ascii")
            blocks.append(ImageContent(type="image", data=encoded, mime_type=image))
            continue
        kind = next((kind for kind in TEXT_TYPES if kind in bundle), None)
        if kind is not None:
            text = capped_text(bundle[kind], DISPLAY_TEXT_MAX)
            blocks.append(TextContent(type="text", text=text))
    return blocks


def _report(result: CellResult, verdict: str, limits: Limits) -> str:
    """The text block: the verdict, then each part the call has."""
    sections = [
        ("stdout", result.stdout, limits.stdout),
        ("stderr", result.stderr, limits.stderr),
        ("value", result.value, limits.stdout),
        ("error", None if result.error is None else result.error.traceback, limits.stderr),
    ]
    parts = [verdict]
    for name, data, most in sections:
        if data:
            parts.append(f"--- {name} ---\n{capped_text(data, most).rstrip(chr(10))}")
    return "\n".join(parts)


def call_result(
    result: CellResult, limits: Limits, name: str, session_id: str | None
) -> CallToolResult:
    """A call's ``CellResult`` as the tool's result, its content and structured form."""
    verdict = cell_verdict_text(result, limits, name, MCP_WORDS)
    blocks = _display_blocks(result)
    error = result.error
    output = RunOutput(
        session_id=session_id,
        outcome=result.outcome,
        status=result.status.value,
        verdict=verdict,
        stdout=capped_text(result.stdout, limits.stdout),
        stderr=capped_text(result.stderr, limits.stderr),
        stdout_truncated=result.stdout_truncated,
        stderr_truncated=result.stderr_truncated,
        value=None if result.value is None else capped_text(result.value, limits.stdout),
        error=None
        if error is None
        else CallError(
            type=capped_text(error.type, 200),
            message=capped_text(error.message, limits.stderr),
            traceback=capped_text(error.traceback, limits.stderr),
        ),
        files={escape_controls(path): len(data) for path, data in result.files.items()},
        images=sum(isinstance(block, ImageContent) for block in blocks),
        wall_time=result.wall_time,
        cpu_time=result.cpu_time,
        max_rss=result.max_rss,
    )
    text = TextContent(type="text", text=_report(result, verdict, limits))
    return CallToolResult(
        content=[text, *blocks], structured_content=output.model_dump(mode="json")
    )


def _refused(exc: Exception) -> ToolError:
    return ToolError(str(exc))


class SandboxTools:
    """The server's tools over one ``Runner`` (made with the server's limits, ``env``,
    ``readable`` and warm sessions) and one ``SessionTable``."""

    def __init__(self, options: ServerOptions, runner: Runner) -> None:
        self.options = options
        self.runner = runner
        self.table = SessionTable(options.max_sessions, options.idle_timeout)
        self._fresh = anyio.Semaphore(options.max_fresh)

    def _start(self, limits: Limits) -> Session:
        """A session with ``limits``' memory (its calls pass their own times): a warm
        one when that is the server's, and the server's idle timeout fits a Session's
        own default."""
        server = self.options.limits
        idle = max(self.options.idle_timeout + 60.0, 600.0)
        if limits.memory == server.memory and idle == 600.0:
            return self.runner.session()
        return self.runner.session(limits=replace(server, memory=limits.memory), idle_timeout=idle)

    async def run_python(
        self,
        ctx: Context,
        code: Code,
        wall_time: Seconds = None,
        cpu_time: Seconds = None,
        memory: Bytes = None,
    ) -> Annotated[CallToolResult, RunOutput]:
        try:
            limits = asked_limits(self.options.limits, wall_time, cpu_time, memory)
        except ValueError as exc:
            raise _refused(exc) from None
        async with self._fresh:
            session = await self._started(limits)
            try:
                result = await run_cell(
                    session, code, limits, ctx, "the run was stopped", "the code could not run"
                )
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(session.close)
        return call_result(result, limits, "fresh", None)

    async def _started(self, limits: Limits) -> Session:
        """``_start`` in a worker thread; a session that cannot start is a tool error."""
        try:
            return await anyio.to_thread.run_sync(self._start, limits)
        except SandboxError as exc:
            raise ToolError(f"no sandbox could start: {exc}") from None

    async def create_session(
        self, wall_time: Seconds = None, cpu_time: Seconds = None, memory: Bytes = None
    ) -> SessionInfo:
        try:
            limits = asked_limits(self.options.limits, wall_time, cpu_time, memory)
            self.table.reserve()
        except ValueError as exc:
            raise _refused(exc) from None
        try:
            session = await self._started(limits)
        except BaseException:
            self.table.unreserve()
            raise
        live = self.table.add(session, limits)
        return SessionInfo(
            session_id=live.session_id,
            wall_time=limits.wall_time,
            cpu_time=limits.cpu_time,
            memory=limits.memory,
            idle_timeout=self.options.idle_timeout,
        )

    def _live(self, session_id: str) -> LiveSession:
        try:
            return self.table.get(session_id)
        except ValueError as exc:
            raise _refused(exc) from None

    async def run_in_session(
        self,
        ctx: Context,
        session_id: SessionId,
        code: Code,
        wall_time: Seconds = None,
        cpu_time: Seconds = None,
    ) -> Annotated[CallToolResult, RunOutput]:
        live = self._live(session_id)
        try:
            limits = asked_limits(live.limits, wall_time, cpu_time)
        except ValueError as exc:
            raise _refused(exc) from None
        live.calls += 1
        try:
            result = await run_cell(
                live.session,
                code,
                limits,
                ctx,
                "the call was rolled back",
                f"session {session_id!r}",
            )
        finally:
            live.calls -= 1
            live.last_used = time.monotonic()
        live.files.update(result.files)
        if result.lost:
            self.table.discard(session_id, f"it was lost: {result.reason}")
            await anyio.to_thread.run_sync(live.session.close)
        return call_result(result, limits, session_id, session_id)

    async def list_session_files(self, session_id: SessionId) -> FileListing:
        live = self._live(session_id)
        listing = live.files.listing()
        return FileListing(
            files=[FileEntry(path=escape_controls(path), size=size) for path, size in listing],
            dropped=live.files.dropped,
        )

    async def read_session_file(
        self,
        session_id: SessionId,
        path: Annotated[str, Field(description="a path from list_session_files")],
    ) -> CallToolResult:
        live = self._live(session_id)
        try:
            data = live.files.read(path)
        except KeyError:
            raise ToolError(f"session {session_id!r} returned no file {path!r}") from None
        shown = data[:READ_MAX]
        note = f"{escape_controls(path)}: {size_text(len(data))}"
        if len(data) > READ_MAX:
            note += f", the first {size_text(READ_MAX)} shown"
        text = file_text(shown)
        if text is not None:
            return CallToolResult(content=[TextContent(type="text", text=f"{note}\n{text}")])
        uri = f"sandbox://sessions/{quote(session_id)}/files/{quote(path)}"
        blob = BlobResourceContents(
            uri=uri,
            mime_type="application/octet-stream",
            blob=base64.b64encode(shown).decode("ascii"),
        )
        return CallToolResult(
            content=[
                TextContent(type="text", text=f"{note} (binary, as base64)"),
                EmbeddedResource(type="resource", resource=blob),
            ]
        )

    async def close_session(self, session_id: SessionId) -> Closed:
        try:
            live = self.table.pop(session_id, "it was closed")
        except ValueError as exc:
            raise _refused(exc) from None
        await anyio.to_thread.run_sync(live.session.close)
        return Closed(session_id=session_id, closed=True)

    async def expire_idle(self) -> None:
        """Close the sessions idle past the server's idle timeout, until cancelled."""
        period = min(1.0, self.options.idle_timeout / 4)
        while True:
            await anyio.sleep(period)
            for live in self.table.expired():
                await anyio.to_thread.run_sync(live.session.close)
