# SPDX-License-Identifier: MIT
"""examples/agent_service, as a client sees it: a real HTTP client (httpx) against the
app in process (``ASGITransport``, with the app's lifespan run around it), and under
uvicorn on 127.0.0.1 for what only a real server shows (a client that disconnects).
Every call runs in a real sandbox; what is left running is read from ``/proc``."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import json
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.processes import children_of, pid_state
from support.runner import wait_until
from support.timing import PROMPTLY, slow

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

APP = Path(__file__).resolve().parents[2] / "examples" / "agent_service" / "app.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\n"


def service() -> ModuleType:
    """The example's module, loaded from its file as ``uvicorn`` would import it."""
    spec = importlib.util.spec_from_file_location("agent_service_app", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations there
    spec.loader.exec_module(module)
    return module


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (zombies included)."""
    found, todo = set(), [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def runs() -> dict[int, set[int]]:
    """This process's sandboxes that run a ``/run`` call's code (``run_python``'s
    ``/sandbox/main.py``, where a session runs its keeper), each bwrap with the
    processes below it."""
    found = {}
    for bwrap in sandboxes():
        below = descendants(bwrap)
        for pid in below:
            with contextlib.suppress(OSError):
                if b"/sandbox/main.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found[bwrap] = below | {bwrap}
    return found


def sandboxes() -> set[int]:
    """This process's bwrap children: one per running sandbox or session."""
    found = set()
    for pid in children_of(os.getpid()):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap":
                found.add(pid)
    return found


@contextlib.asynccontextmanager
async def client(**settings: Any) -> AsyncIterator[Any]:
    """An httpx client of the app, its lifespan (the Runner) open around it."""
    app = service().create_app(**settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            http.app = app
            yield http


def test_a_fresh_run_and_a_syntax_error() -> None:
    async def main() -> tuple[Any, Any]:
        async with client() as http:
            ran = await http.post("/run", json={"code": "print(6 * 7)"})
            bad = await http.post("/run", json={"code": "print(", "limits": {"wall_time": 2}})
            return ran, bad

    ran, bad = asyncio.run(main())
    assert ran.status_code == 200, ran.text
    body = ran.json()
    assert (body["status"], body["returncode"], body["stdout"]) == ("ok", 0, "42\n")
    assert body["wall_time"] > 0 and body["cpu_time"] >= 0 and body["images"] == []
    assert bad.json()["status"] == "nonzero_exit" and "SyntaxError" in bad.json()["stderr"]


def test_a_conversation_keeps_its_state_rolls_back_a_limit_and_ends() -> None:
    async def main() -> list[Any]:
        async with client() as http:

            async def say(code: str, **limits: float) -> Any:
                url = "/conversations/alice/run"
                return await http.post(url, json={"code": code, "limits": limits})

            replies = [
                await say("x = 6"),
                await say("x * 7"),
                await say("x = 0\nwhile True: pass", cpu_time=0.5),
                await say("x"),
                await http.delete("/conversations/alice"),
                await http.delete("/conversations/alice"),
                await say("x"),
            ]
            return replies

    first, second, looped, after, deleted, again, fresh = asyncio.run(main())
    assert first.json()["new_conversation"] and first.json()["outcome"] == "committed"
    assert second.json()["value"] == "42" and not second.json()["new_conversation"]
    assert looped.json()["outcome"] == "rolled_back"
    assert looped.json()["status"] == "cpu_time_exceeded"
    assert after.json()["value"] == "6"  # x = 0 was undone with the loop
    assert (deleted.status_code, again.status_code) == (204, 404)
    assert fresh.json()["new_conversation"] and fresh.json()["error"]["type"] == "NameError"


def test_limits_above_the_services_are_refused() -> None:
    async def main() -> list[Any]:
        async with client() as http:
            return [
                await http.post("/run", json={"code": "1", "limits": {"wall_time": 1000}}),
                await http.post("/run", json={"code": "1", "limits": {"memory": 2**40}}),
                await http.post("/run", json={"code": "1", "limits": {"cpu_time": 0}}),
                await http.post("/run", json={"code": "1", "limits": {"stdout": "a lot"}}),
                await http.post(
                    "/conversations/c/run", json={"code": "1", "limits": {"memory": 1}}
                ),
                await http.post(
                    "/conversations/c/run", json={"code": "1", "limits": {"cpu_time": 99}}
                ),
            ]

    refused = asyncio.run(main())
    assert [reply.status_code for reply in refused] == [422] * 6
    assert "wall_time" in refused[0].json()["detail"]


def test_a_plot_comes_back_as_an_image() -> None:
    pytest.importorskip("matplotlib")

    async def main() -> tuple[Any, Any]:
        async with client() as http:
            saved = await http.post("/run", json={"code": PLOT + "plt.savefig('plot.png')"})
            shown = await http.post("/conversations/p/run", json={"code": PLOT + "plt.show()"})
            return saved, shown

    saved, shown = asyncio.run(main())
    for reply in (saved, shown):
        assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
        (image,) = reply.json()["images"]
        assert base64.b64decode(image).startswith(PNG_SIGNATURE)


def test_shutdown_ends_every_sandbox_and_session() -> None:
    """A run sleeping and a conversation live when the app shuts down: the sleeping
    request gets a 503, and no sandbox of this process is left."""
    before = sandboxes()

    async def main() -> Any:
        async with client() as http:
            await http.post("/conversations/a/run", json={"code": "x = 1"})
            sleeping = asyncio.create_task(
                http.post("/run", json={"code": "import time; time.sleep(60)"})
            )
            while http.app.state.runner.running == 0:
                await asyncio.sleep(0.01)
            assert http.app.state.runner.sessions == 1
            # The lifespan's end closes the Runner; the sleeping call ends at once.
            return sleeping

    async def shut_down() -> Any:
        sleeping = await main()
        return await asyncio.wait_for(sleeping, PROMPTLY)

    reply = asyncio.run(shut_down())
    assert reply.status_code == 503, reply.text
    assert sandboxes() <= before


def post(path: str, code: str) -> bytes:
    """A raw HTTP/1.1 request that posts ``code``."""
    body = json.dumps({"code": code}).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n"
    return head.encode() + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


@contextlib.contextmanager
def uvicorn_server() -> Iterator[tuple[Any, int]]:
    """The app under uvicorn on 127.0.0.1 in a thread; its app and port."""
    uvicorn = pytest.importorskip("uvicorn")
    app = service().create_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        wait_until(lambda: server.started, "uvicorn to start")
        yield app, server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(slow(30))


def test_a_client_that_disconnects_has_its_sandbox_killed() -> None:
    """Under uvicorn, which lets a plain endpoint run on after its client has gone: the
    app sees the disconnect and cancels the call, so the sleeping sandbox (bwrap and
    every process below it) is gone long before its 60 s."""
    with uvicorn_server() as (app, port):
        wait_until(lambda: hasattr(app.state, "runner"), "the lifespan to start")
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.sendall(post("/run", "import time; time.sleep(60)"))
            wait_until(lambda: bool(runs()), "the sleeping program")
            ((_, below),) = runs().items()
            assert app.state.runner.running == 1
        started = time.monotonic()
        wait_until(lambda: app.state.runner.running == 0, "the call to end", PROMPTLY)
        wait_until(lambda: not any(map(pid_state, below)), "the sandbox to go", PROMPTLY)
        assert time.monotonic() - started < PROMPTLY


def test_a_conversations_call_whose_client_disconnects_is_rolled_back() -> None:
    """Under uvicorn: a conversation's call sleeping when its client goes away is ended
    and rolled back, and the next call finds the state as it was, at once (not after
    the 60 s the cancelled call would have held the session)."""
    url = "/conversations/u/run"
    with uvicorn_server() as (app, port):
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=slow(60))
        assert http.post(url, json={"code": "x = 1"}).json()["outcome"] == "committed"
        session = app.state.conversations.sessions["u"]
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.sendall(post(url, "x = 2\nimport time\ntime.sleep(60)"))
            wait_until(lambda: session._calls == 1, "the call to begin")
        started = time.monotonic()
        reply = http.post(url, json={"code": "x"}).json()
        assert time.monotonic() - started < PROMPTLY
        assert (reply["value"], reply["new_conversation"]) == ("1", False)
        http.close()
