# SPDX-License-Identifier: MIT
"""``pysandbox mcp``, driven by the protocol SDK's own client, as an agent drives it: over
stdio (the server a child of the client) and over streamable HTTP (the server in a
process of its own on 127.0.0.1, its URL read from its stderr).

Every server is given an environment marker for its sandboxes (``--env``), which lands
in each bwrap's command line (and the server's own), so the host can tell which
processes are left; a call's own busy process carries a marker of its own.  Skipped
without the SDK (``pysandbox[mcp]``, Python 3.10+).
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from support.processes import pids_with_marker, survivors, unique_marker
from support.timing import PROMPTLY, slow

mcp = pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.types import CallToolResult, EmbeddedResource, ImageContent  # noqa: E402

from pysandbox import Cancelled, SandboxError  # noqa: E402

T = TypeVar("T")

#: ``-I``: the installed package, whatever the working directory (a module fixture runs
#: before the tests' own, in the checkout, whose ``pysandbox`` has no C extension).
SERVER = [sys.executable, "-I", "-m", "pysandbox", "mcp"]
#: The most a call may ask for: room for ``import matplotlib`` on a busy 2-core machine.
LIMITS = ["--wall-time", "120", "--cpu-time", "60", "--memory", "1G"]
#: The longest a whole test's client may wait for its server.
CLIENT_TIMEOUT = slow(40)
#: A call that runs until it is stopped, in a process the host finds by ``{child}``.
BUSY = (
    "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass', {child!r}])"
)


def run(body: Awaitable[T]) -> T:
    """``body`` run to its end on a new event loop, bounded by ``CLIENT_TIMEOUT``."""

    async def bounded() -> T:
        return await asyncio.wait_for(body, CLIENT_TIMEOUT)

    return asyncio.run(bounded())


def marker_env(marker: str) -> list[str]:
    return ["--env", f"PYSANDBOX_TEST_MARKER={marker}"]


def stdio(marker: str, *options: str) -> StdioServerParameters:
    """The stdio server's parameters, its sandboxes marked with ``marker``."""
    return StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], *LIMITS, *marker_env(marker), *options]
    )


def sandboxes(marker: str) -> list[int]:
    """The bwrap processes of the sandboxes marked ``marker`` (not the server)."""
    return sorted(set(pids_with_marker(marker)) - set(pids_with_marker(marker, bwrap=False)))


def wait_for(found: Any, within: float = PROMPTLY) -> bool:
    """Poll ``found()`` until it is truthy (True) or ``within`` seconds pass (False)."""
    deadline = time.monotonic() + within
    while not found():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def text(result: CallToolResult) -> str:
    first = result.content[0]
    assert first.type == "text", result
    return first.text


async def call(client: Client, tool: str, **arguments: object) -> CallToolResult:
    return await client.call_tool(tool, arguments)


class HttpServer:
    """``pysandbox mcp --http 127.0.0.1:0`` in a process of its own."""

    def __init__(self, marker: str, *options: str) -> None:
        self.marker = marker
        command = [*SERVER, "--http", "0", *LIMITS, *marker_env(marker), *options]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        listening = threading.Event()

        def drain() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                self.lines.append(line)
                if "listening on" in line:
                    listening.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        found = None
        if listening.wait(slow(20)):
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+/mcp)", "".join(self.lines))
        if found is None:  # reaped here: no zombie for the next tests to see
            self.process.kill()
            self.process.wait()
            raise AssertionError(self.lines)
        self.url = found[1]

    def stop(self) -> int:
        """SIGTERM, and the server's exit status."""
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(slow(10))
        self._drain.join(slow(10))
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    """One HTTP server for the tests that need no server of their own, without warm
    sandboxes (so every sandbox seen is a call's or a session's)."""
    server = HttpServer(unique_marker(), "--warm-sessions", "0")
    try:
        yield server
    finally:
        assert server.stop() == 0, server.lines
        assert survivors(server.marker, within=PROMPTLY) == []


def test_tools_are_listed_with_schemas_and_a_fresh_run_reports_its_verdict() -> None:
    """Over stdio: the six tools, a fresh run's output and verdict, limits over the
    server's refused, and the server's end (its stdin closed) ends every session."""
    marker = unique_marker()

    async def body() -> None:
        async with Client(stdio(marker)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {
                "run_python",
                "create_session",
                "run_in_session",
                "list_session_files",
                "read_session_file",
                "close_session",
            }
            run_python = tools["run_python"]
            assert run_python.input_schema["required"] == ["code"]
            assert {"wall_time", "cpu_time", "memory"} <= set(run_python.input_schema["properties"])
            assert run_python.output_schema is not None
            assert {"verdict", "stdout", "stderr", "status"} <= set(
                run_python.output_schema["properties"]
            )
            assert "wall_time 120 s" in (run_python.description or "")
            assert tools["run_in_session"].input_schema["required"] == ["session_id", "code"]

            code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7"
            result = await call(client, "run_python", code=code, wall_time="30s")
            assert not result.is_error, result
            assert text(result).startswith("pysandbox: committed in session 'fresh'; cpu ")
            assert "--- stdout ---\nout" in text(result) and "--- stderr ---\nerr" in text(result)
            output = result.structured_content
            assert output is not None
            assert (output["stdout"], output["stderr"], output["value"]) == ("out\n", "err\n", "42")
            assert (output["outcome"], output["status"]) == ("committed", "ok")

            for asked, refusal in [
                ({"wall_time": 1000}, "more than this server allows (120 s)"),
                ({"cpu_time": "61s"}, "more than this server allows (60 s)"),
                ({"memory": "2G"}, "more than this server allows (1 GiB)"),
                ({"wall_time": "soon"}, "expected seconds"),
            ]:
                refused = await call(client, "run_python", code="1", **asked)
                assert refused.is_error and refusal in text(refused), (asked, refused)

            session = await call(client, "create_session")
            assert session.structured_content is not None
            assert sandboxes(marker)

    run(body())
    assert survivors(marker, within=PROMPTLY) == []


def test_a_session_keeps_its_state_and_rolls_back_a_call_past_its_wall_time(
    http_server: HttpServer,
) -> None:
    async def body() -> None:
        async with Client(http_server.url) as client:
            created = await call(client, "create_session", wall_time=20, cpu_time="5s")
            assert created.structured_content is not None
            session_id = created.structured_content["session_id"]
            assert created.structured_content["wall_time"] == 20

            shown = "x = 40\ndisplay({'text/markdown': '**forty**'}, raw=True)"
            first = await call(client, "run_in_session", session_id=session_id, code=shown)
            assert [block.text for block in first.content[1:]] == ["**forty**"]  # type: ignore[union-attr]
            assert (
                first.structured_content is not None
                and first.structured_content["outcome"] == "committed"
            )
            second = await call(client, "run_in_session", session_id=session_id, code="x += 1\nx")
            assert (
                second.structured_content is not None and second.structured_content["value"] == "41"
            )

            slow_call = "x += 100\nimport time\ntime.sleep(60)"
            ended = await call(
                client, "run_in_session", session_id=session_id, code=slow_call, wall_time="1s"
            )
            output = ended.structured_content
            assert output is not None and not ended.is_error
            assert (output["outcome"], output["status"]) == ("rolled_back", "wall_time_exceeded")
            assert "wall_time_exceeded (limit 1 s)" in text(ended)
            assert "its state is as before this call" in text(ended)

            after = await call(client, "run_in_session", session_id=session_id, code="x")
            assert (
                after.structured_content is not None and after.structured_content["value"] == "41"
            )

            over = await call(
                client, "run_in_session", session_id=session_id, code="x", wall_time=30
            )
            assert over.is_error and "more than this server allows (20 s)" in text(over)

            await files_are_listed_and_read(client, session_id)

            closed = await call(client, "close_session", session_id=session_id)
            assert closed.structured_content == {"session_id": session_id, "closed": True}
            gone = await call(client, "run_in_session", session_id=session_id, code="x")
            assert gone.is_error and "has ended: it was closed" in text(gone)
            unknown = await call(client, "run_in_session", session_id="nope", code="x")
            assert unknown.is_error and "no session has the id 'nope'" in text(unknown)

    run(body())
    assert wait_for(lambda: not sandboxes(http_server.marker))


async def files_are_listed_and_read(client: Client, session_id: str) -> None:
    """The files the session's calls wrote: listed with sizes (latest versions), text
    read as text, anything else as a base64 blob."""
    code = "open('notes.txt', 'w').write('draft')\nopen('data.bin', 'wb').write(bytes(range(256)))"
    await call(client, "run_in_session", session_id=session_id, code=code)
    await call(
        client,
        "run_in_session",
        session_id=session_id,
        code="open('notes.txt', 'w').write('final')",
    )
    listing = await call(client, "list_session_files", session_id=session_id)
    assert listing.structured_content == {
        "files": [{"path": "data.bin", "size": 256}, {"path": "notes.txt", "size": 5}],
        "dropped": 0,
    }
    notes = await call(client, "read_session_file", session_id=session_id, path="notes.txt")
    assert text(notes) == "notes.txt: 5 bytes\nfinal"
    binary = await call(client, "read_session_file", session_id=session_id, path="data.bin")
    blob = binary.content[1]
    assert isinstance(blob, EmbeddedResource), binary
    assert base64.b64decode(blob.resource.blob) == bytes(range(256))  # type: ignore[union-attr]
    missing = await call(client, "read_session_file", session_id=session_id, path="../etc/passwd")
    assert missing.is_error and "returned no file" in text(missing)


def test_a_figure_comes_back_as_an_image(http_server: HttpServer) -> None:
    """A fresh run is a session used once: ``plt.show()`` gives the protocol's image
    content.  ``import matplotlib`` gets the CPU a loaded CI machine needs."""
    pytest.importorskip("matplotlib")
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint('drawn')"

    async def body() -> CallToolResult:
        async with Client(http_server.url) as client:
            return await call(client, "run_python", code=code, cpu_time=60, wall_time=120)

    result = run(body())
    assert result.structured_content is not None, result
    assert result.structured_content["status"] == "ok", text(result)
    assert result.structured_content["images"] == 1
    (image,) = [block for block in result.content if isinstance(block, ImageContent)]
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_dropped_request_kills_its_sandbox_and_a_session_goes_on(
    http_server: HttpServer, mode: str
) -> None:
    """A client that stops waiting (the 2026 protocol closes the response stream, the
    handshake era sends a cancel): a fresh run's sandbox is killed and reaped, a
    session's call is rolled back and the session still answers."""

    async def busy_then_dropped(client: Client, tool: str, child: str, **arguments: object) -> None:
        task = asyncio.ensure_future(call(client, tool, code=BUSY.format(child=child), **arguments))
        assert await asyncio.to_thread(wait_for, lambda: pids_with_marker(child), slow(10))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(survivors, child, PROMPTLY) == []

    async def body() -> None:
        async with Client(http_server.url, mode=mode) as client:
            await busy_then_dropped(client, "run_python", unique_marker(), wall_time=100)
            assert await asyncio.to_thread(wait_for, lambda: not sandboxes(http_server.marker))

            created = await call(client, "create_session")
            assert created.structured_content is not None
            session_id = created.structured_content["session_id"]
            await call(client, "run_in_session", session_id=session_id, code="kept = 'yes'")
            await busy_then_dropped(
                client, "run_in_session", unique_marker(), session_id=session_id
            )
            after = await call(client, "run_in_session", session_id=session_id, code="kept")
            assert (
                after.structured_content is not None
                and after.structured_content["value"] == "'yes'"
            )
            await call(client, "close_session", session_id=session_id)

    run(body())


#: A client in a process of its own, to be killed: it starts a session and a busy fresh
#: run, on an HTTP server (``URL MODE``) or on a stdio server it starts (its command).
DYING_CLIENT = """
import asyncio, os, sys
from mcp import Client, StdioServerParameters

async def main():
    if sys.argv[1].startswith("http://"):
        client = Client(sys.argv[1], mode=sys.argv[2])
    else:
        client = Client(StdioServerParameters(command=sys.executable, args=sys.argv[1:]))
    async with client:
        await client.call_tool("create_session", {})
        await client.call_tool("run_python", {"code": os.environ["BUSY"]})

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_http_client_that_dies_mid_call_leaves_no_process_of_its_run(
    http_server: HttpServer, mode: str
) -> None:
    """The client is SIGKILLed while its fresh run is busy: the dropped request ends the
    run, whose sandbox is killed and reaped; the server and its session live on."""
    child = unique_marker()
    env = {**os.environ, "BUSY": BUSY.format(child=child)}
    before = len(sandboxes(http_server.marker))
    client = subprocess.Popen([sys.executable, "-c", DYING_CLIENT, http_server.url, mode], env=env)
    try:
        assert wait_for(lambda: pids_with_marker(child), slow(20))
        assert len(sandboxes(http_server.marker)) == before + 2  # the busy run's, the session's
    finally:
        client.kill()
        client.wait()
    assert survivors(child, within=PROMPTLY) == []
    assert wait_for(lambda: len(sandboxes(http_server.marker)) == before + 1)
    assert http_server.process.poll() is None


def test_a_stdio_client_that_dies_mid_call_leaves_no_process() -> None:
    """The client is SIGKILLed while a call runs: the server reads the end of its stdin,
    kills and reaps every sandbox (the busy one, the session's) and exits."""
    marker, child = unique_marker(), unique_marker()
    arguments = [*SERVER[1:], *LIMITS, *marker_env(marker)]
    env = {**os.environ, "BUSY": BUSY.format(child=child)}
    client = subprocess.Popen([sys.executable, "-c", DYING_CLIENT, *arguments], env=env)
    try:
        assert wait_for(lambda: pids_with_marker(child), slow(20))
        assert len(sandboxes(marker)) >= 2  # the busy run's and the session's
    finally:
        client.kill()
        client.wait()
    assert survivors(child, within=PROMPTLY) == []
    assert survivors(marker, within=PROMPTLY) == []


def test_sessions_are_capped_and_expire_when_idle() -> None:
    marker = unique_marker()
    options = ["--session-idle-timeout", "1", "--warm-sessions", "0", "--max-sessions", "1"]

    async def body() -> tuple[CallToolResult, CallToolResult]:
        async with Client(stdio(marker, *options)) as client:
            created = await call(client, "create_session")
            assert created.structured_content is not None
            assert created.structured_content["idle_timeout"] == 1
            session_id = created.structured_content["session_id"]
            full = await call(client, "create_session")
            assert full.is_error and "already has 1 live sessions" in text(full), full
            assert sandboxes(marker)
            assert await asyncio.to_thread(wait_for, lambda: not sandboxes(marker), slow(5))
            expired = await call(client, "run_in_session", session_id=session_id, code="1")
            return expired, await call(client, "create_session")

    expired, again = run(body())
    assert expired.is_error and "no call for 1 s (the server's idle timeout)" in text(expired)
    assert not again.is_error, again
    assert survivors(marker, within=PROMPTLY) == []


def test_sigterm_ends_the_http_server_and_every_session() -> None:
    server = HttpServer(unique_marker())

    async def body() -> None:
        async with Client(server.url) as client:
            for _ in range(2):
                assert not (await call(client, "create_session")).is_error

    try:
        run(body())
        assert len(sandboxes(server.marker)) >= 2
    finally:
        status = server.stop()
    assert status == 0, server.lines
    assert survivors(server.marker, within=PROMPTLY) == []


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("0.0.0.0:0", "is not a loopback address"),
        ("example.org:80", "is not a loopback address"),
        ("70000", "expected [HOST:]PORT"),
    ],
)
def test_an_http_address_that_is_not_loopback_is_refused(address: str, message: str) -> None:
    done = subprocess.run(
        [*SERVER, "--http", address], capture_output=True, text=True, timeout=slow(20)
    )
    assert done.returncode == 2 and message in done.stderr, done


@pytest.mark.parametrize("error", [SandboxError("no sandbox"), Cancelled("client gone")])
def test_a_failure_of_the_call_reaches_the_tools_as_itself(error: Exception) -> None:
    """What the worker raises comes out of ``in_thread`` as it is, not wrapped in the
    exception group of its task group, so the tools' handlers turn it into a tool error
    with its reason."""
    import anyio

    from pysandbox._frontends.mcp_tools import in_thread

    def fail(cancel: threading.Event) -> None:
        raise error

    async def never_gone() -> bool:
        return False

    with pytest.raises(type(error), match=str(error)):
        anyio.run(in_thread, fail, never_gone)
