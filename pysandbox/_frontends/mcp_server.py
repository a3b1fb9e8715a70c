# SPDX-License-Identifier: MIT
"""``pysandbox mcp``'s server: the tools of ``mcp_tools`` on the protocol SDK's
``MCPServer``, served over stdio or streamable HTTP, and everything closed at the end.

Imported only when ``pysandbox mcp`` runs (it imports the SDK, ``pip install
pysandbox[mcp]``).  Every sandbox belongs to one ``Runner``; however the server ends
(stdin closed, SIGTERM, Ctrl-C, a crash), ``serve`` closes that Runner last, and so
kills and reaps every session and every fresh run's sandbox before it returns.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.abc
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from .._model.verdict import size_text
from .._runner.runner import Runner
from .._version import __version__
from .mcp_state import ServerOptions
from .mcp_tools import SandboxTools
from .terminal import say

__all__ = ["build_server", "serve"]

#: What the server tells an agent about itself.
INSTRUCTIONS = (
    "Runs Python code in pysandbox sandboxes (bubblewrap: no network, no host files, "
    "hard limits).  run_python runs code in a fresh interpreter; create_session starts a "
    "live interpreter whose variables, imports and files persist between run_in_session "
    "calls, and a call that a limit ends is rolled back (the state is as before it).  "
    "Figures (matplotlib plt.show(), display()) come back as images."
)

#: Each tool's description, before the server's limits.
DESCRIPTIONS = {
    "run_python": "Run Python code in a fresh sandboxed interpreter, used once.  Returns "
    "stdout, stderr, the value of a final expression, the exception raised, a verdict "
    "line, and each figure shown (plt.show() or still open at the end) as an image.",
    "create_session": "Start a live sandboxed Python interpreter that keeps its state "
    "(variables, imports, files in its working directory) between run_in_session calls; "
    "returns its session_id.  The limits given are the defaults of its calls.",
    "run_in_session": "Run Python code in a session, as a notebook cell: the session's "
    "state persists to the next call.  A call that a limit ends (wall_time, cpu_time, "
    "memory, output) is rolled back: the session is as it was before the call.",
    "list_session_files": "List the files a session's calls wrote (latest versions, with "
    "their sizes).",
    "read_session_file": "Read one file a session's calls wrote: text as text, other "
    "files as base64.",
    "close_session": "Close a session and free its sandbox.",
}


def _limits_note(options: ServerOptions) -> str:
    limits = options.limits
    return (
        f"  This server's limits (a call may ask for less): wall_time {limits.wall_time:g} s, "
        f"cpu_time {limits.cpu_time:g} s, memory {size_text(limits.memory)}."
    )


def build_server(tools: SandboxTools) -> MCPServer[Any]:
    """The ``MCPServer`` with the tools, each described with the server's limits."""
    server: MCPServer[Any] = MCPServer(
        "pysandbox", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    note = _limits_note(tools.options)
    read_only = {"list_session_files", "read_session_file"}
    for name, description in DESCRIPTIONS.items():
        server.add_tool(
            getattr(tools, name),
            name=name,
            description=description + (note if "run" in name or "create" in name else ""),
            annotations=ToolAnnotations(
                read_only_hint=name in read_only,
                destructive_hint=False,
                open_world_hint=False,
            ),
        )
    return server


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: a free port) and listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/mcp"


async def _on_signal(stop: Callable[[], None]) -> None:
    """Call ``stop`` on each SIGTERM or SIGINT (Ctrl-C): the server ends as it does when
    its client leaves, with status 0."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop()


async def _serve_http(
    server: MCPServer[Any], sock: socket.socket, host: str, group: anyio.abc.TaskGroup
) -> None:
    """Streamable HTTP on ``sock`` (its DNS-rebinding protection on for a loopback
    ``host``), until SIGTERM or Ctrl-C; a call still running then is cancelled after
    two seconds."""
    import uvicorn

    class Quiet(uvicorn.Server):
        """uvicorn without its own signal handlers (``_on_signal`` stops it)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    http = Quiet(config)

    def stop() -> None:
        http.force_exit = http.should_exit
        http.should_exit = True

    group.start_soon(_on_signal, stop)
    say(f"pysandbox mcp: listening on {_url(sock)}")
    await http.serve(sockets=[sock])


def _exit_now(runner: Runner) -> None:
    """Close every sandbox, then end the process: a stdio server's reader of stdin
    blocks in a thread that nothing interrupts, so a signal cannot wait for it."""
    runner.close()
    sys.stderr.flush()
    os._exit(0)


async def _serve(tools: SandboxTools, http: tuple[str, int] | None) -> None:
    server = build_server(tools)
    async with anyio.create_task_group() as group:
        group.start_soon(tools.expire_idle)
        if http is None:
            group.start_soon(_on_signal, functools.partial(_exit_now, tools.runner))
            await server.run_stdio_async()
        else:
            sock = listening_socket(*http)
            try:
                await _serve_http(server, sock, http[0], group)
            finally:
                sock.close()
        group.cancel_scope.cancel()


def serve(options: ServerOptions, http: tuple[str, int] | None) -> None:
    """Serve the tools over stdio (``http`` None) or streamable HTTP on ``(host,
    port)`` until the client or a signal ends it; every sandbox is gone on return."""
    runner = Runner(
        limits=options.limits,
        env=options.env,
        readable=options.readable,
        max_sessions=options.max_sessions + options.max_fresh,
        warm_sessions=options.warm_sessions,
    )
    try:
        anyio.run(_serve, SandboxTools(options, runner), http)
    except Exception as exc:
        if not _client_gone(exc):
            raise
    finally:
        runner.close()


def _client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (a group of them, maybe nested) says only that the client went
    away while the server wrote to it: the server's normal end."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, tuple):
        return all(_client_gone(each) for each in inner)
    return isinstance(exc, (BrokenPipeError, ConnectionResetError))
