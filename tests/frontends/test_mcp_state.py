# SPDX-License-Identifier: MIT
"""What ``pysandbox mcp`` decides without the SDK (so these run on every Python): the
limits a tool call may ask for, a session's files within their cap, the session table's
cap and ids, and the text an agent is shown."""

from __future__ import annotations

import pytest

from pysandbox import Limits
from pysandbox._frontends.cli_mcp import http_address, is_loopback
from pysandbox._frontends.mcp_state import (
    FileStore,
    SessionTable,
    asked_limits,
    capped_text,
    file_text,
)

pytestmark = pytest.mark.no_bwrap

SERVER = Limits(wall_time=20, cpu_time=5, memory=2**30)


def test_a_call_may_tighten_the_limits_with_or_without_units() -> None:
    assert asked_limits(SERVER) is SERVER
    tightened = asked_limits(SERVER, wall_time="1.5s", cpu_time=500e-3, memory="512M")
    assert (tightened.wall_time, tightened.cpu_time, tightened.memory) == (1.5, 0.5, 2**29)
    assert asked_limits(SERVER, wall_time=20, memory=2**30) == SERVER


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ({"wall_time": 21}, "wall_time 21 is more than this server allows (20 s)"),
        ({"cpu_time": "6s"}, "cpu_time '6s' is more than this server allows (5 s)"),
        ({"memory": "2G"}, "memory '2G' is more than this server allows (1 GiB)"),
        ({"wall_time": 0}, "must be more than 0 seconds"),
        ({"wall_time": float("nan")}, "must be more than 0 seconds"),
        ({"memory": -1}, "must be more than 0 bytes"),
        ({"wall_time": True}, "must be a number of seconds"),
        ({"memory": 1.5}, "must be a number of bytes"),
        ({"cpu_time": "soon"}, "expected seconds"),
    ],
)
def test_more_than_the_server_allows_or_no_limit_at_all_is_refused(
    asked: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        asked_limits(SERVER, **asked)  # type: ignore[arg-type]
    assert message in str(refused.value)


def test_a_sessions_files_keep_their_latest_versions_within_the_cap() -> None:
    store = FileStore(10)
    store.update({"a": b"1234", "b": b"12"})
    store.update({"a": b"123"})  # a is now the latest updated
    assert store.listing() == [("a", 3), ("b", 2)] and store.dropped == 0
    store.update({"c": b"123456"})  # 11 bytes: b, the oldest, goes
    assert store.listing() == [("a", 3), ("c", 6)] and store.dropped == 1
    assert store.read("c") == b"123456"
    with pytest.raises(KeyError):
        store.read("b")


def test_the_table_caps_live_sessions_and_names_them_unguessably() -> None:
    class Alive:
        alive = True

    table = SessionTable(2, idle_timeout=600)
    table.reserve()
    table.reserve()
    with pytest.raises(ValueError, match="already has 2 live sessions"):
        table.reserve()
    first = table.add(Alive(), SERVER)  # type: ignore[arg-type]
    second = table.add(Alive(), SERVER)  # type: ignore[arg-type]
    assert len(first.session_id) >= 22 and first.session_id != second.session_id
    assert table.get(first.session_id) is first
    table.pop(first.session_id, "it was closed")
    with pytest.raises(ValueError, match="has ended: it was closed; create a new one"):
        table.get(first.session_id)
    with pytest.raises(ValueError, match="no session has the id 'x'"):
        table.get("x")
    table.reserve()  # room again
    assert table.take_all() == [second] and len(table) == 0


def test_text_for_an_agent_is_escaped_and_capped_and_files_are_text_only_when_plain() -> None:
    assert capped_text(b"ok\n\x1b[31mred\xff", 100) == "ok\n\\x1b[31mred\ufffd"
    assert capped_text("x" * 10, 4) == "xxxx\n[... 6 more characters not shown]"
    assert file_text(b"a,b\r\n1,2\n") == "a,b\r\n1,2\n"
    assert file_text(b"\x89PNG\r\n\x1a\n") is None
    assert file_text(b"bell\x07") is None


@pytest.mark.parametrize(
    ("text", "address"),
    [("8000", ("127.0.0.1", 8000)), ("localhost:0", ("localhost", 0)), ("[::1]:9", ("::1", 9))],
)
def test_http_addresses(text: str, address: tuple[str, int]) -> None:
    assert http_address(text) == address
    assert is_loopback(address[0])
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
