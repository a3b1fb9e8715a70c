# SPDX-License-Identifier: MIT
"""A session's displays: what a notebook would show (figures, ``display()``, a rich final
value) comes back as ``CellResult.displays`` and as ``OutputEvent``s in order with the
output around them, within ``Limits.displays`` and ``displays_count``, checked and
sanitized; what the code writes on the display pipe itself cannot harm the host.

Code that imports matplotlib or pandas gets a CPU budget far above what it needs: an
interpreter loading them on a busy 2-core machine (and 3.13) takes seconds."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Iterator

import pytest
from support.sessions import watched_session

from pysandbox import Limits, OutputEvent, Session, Status

MiB = 2**20
HEAVY = {"cpu_time": 60.0, "wall_time": 120.0}
LIMITS = Limits(memory=1024 * MiB, wall_time=20, cpu_time=5)

#: Objects with every kind of rich representation, made in the sandbox.
RICH = """
class Rich:
    def __init__(self, kind, data):
        self.kind, self.data = kind, data
    def __repr__(self):
        return f"Rich({self.kind})"
    def _repr_html_(self):
        return self.data if self.kind == "html" else None
    def _repr_markdown_(self):
        return self.data if self.kind == "markdown" else None
    def _repr_json_(self):
        return self.data if self.kind == "json" else None
    def _repr_latex_(self):
        return self.data if self.kind == "latex" else None
"""


@pytest.fixture
def session() -> Iterator[Session]:
    with watched_session(LIMITS) as opened:
        yield opened


def _kinds(events: list[OutputEvent]) -> list[object]:
    """The stdout and display events as text (stdout joined while no display comes
    between) and sorted MIME types."""
    seen: list[object] = []
    for event in events:
        if event.kind == "stderr":
            continue
        if event.kind == "display":
            seen.append(sorted(event.data))  # type: ignore[arg-type]
        elif seen and isinstance(seen[-1], str):
            seen[-1] += event.data.decode()  # type: ignore[union-attr]
        else:
            seen.append(event.data.decode())  # type: ignore[union-attr]
    return seen


def test_a_figure_shown_comes_between_the_output_around_it(session: Session) -> None:
    pytest.importorskip("matplotlib")
    events: list[OutputEvent] = []
    code = (
        "import matplotlib.pyplot as plt\nprint('before', flush=True)\n"
        "plt.plot([1, 3, 2])\nplt.show()\nprint('after')"
    )
    result = session.run(code, on_event=events.append, **HEAVY)
    assert result, result
    assert _kinds(events) == ["before\n", ["image/png", "text/plain"], "after\n"]
    (figure,) = result.displays
    assert figure["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert figure["text/plain"].startswith("<Figure size")
    assert result.files == {} or not any(name.endswith(".png") for name in result.files)


def test_figures_still_open_at_the_end_are_shown_once(session: Session) -> None:
    pytest.importorskip("matplotlib")
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.figure()\nplt.plot([1])\nplt.figure()\nplt.bar([1], [2])"
    )
    result = session.run(code, **HEAVY)
    assert [sorted(shown) for shown in result.displays] == [["image/png", "text/plain"]] * 2
    assert result.value_displayed is False
    # They were closed: the next call shows nothing of them.
    assert session.run("plt.get_fignums()", **HEAVY).value == "[]"


def test_a_rich_final_value_is_shown_as_out_and_its_repr_kept(session: Session) -> None:
    pytest.importorskip("pandas")
    code = "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['<script>x</script>', 'y']})"
    result = session.run(code, **HEAVY)
    assert result and result.value_displayed, result
    (table,) = result.displays
    assert "<table" in table["text/html"] and "<script" not in table["text/html"]
    assert result.value is not None and "a" in result.value
    assert session.run("1 + 1").value_displayed is False


def test_display_sends_every_kind_of_representation(session: Session) -> None:
    session.run(RICH)
    code = (
        "display(Rich('html', '<b>bold</b>'), Rich('markdown', '# title'))\n"
        "display(Rich('json', {'k': [1, 2]}), Rich('latex', '$x^2$'))\n"
        "display({'text/plain': 'raw', 'text/html': '<i>raw</i>'}, raw=True)\n"
        "display(42)"
    )
    result = session.run(code)
    assert result, result
    shown = [dict(bundle) for bundle in result.displays]
    assert [sorted(bundle) for bundle in shown] == [
        ["text/html", "text/plain"],
        ["text/markdown", "text/plain"],
        ["application/json", "text/plain"],
        ["text/latex", "text/plain"],
        ["text/html", "text/plain"],
        ["text/plain"],
    ]
    assert "<b>bold</b>" in shown[0]["text/html"] and shown[0]["text/plain"] == "Rich(html)"
    assert shown[3]["text/latex"] == "$x^2$" and shown[5]["text/plain"] == "42"


def test_html_from_the_sandbox_is_sanitized(session: Session) -> None:
    session.run(RICH)
    html = '<img src=x onerror="alert(1)"><script>alert(2)</script><a href="javascript:x">y</a>'
    result = session.run(f"display(Rich('html', {html!r}))")
    (bundle,) = result.displays
    text = bundle["text/html"]
    assert "onerror" not in text and "<script" not in text and "javascript:" not in text


def test_displays_past_the_count_are_left_out_and_the_call_goes_on(session: Session) -> None:
    limits = Limits(memory=1024 * MiB, wall_time=20, cpu_time=5, displays_count=5)
    with Session(limits=limits) as small:
        result = small.run("for i in range(300):\n    display(i)\nprint('done')")
        assert result and result.stdout == b"done\n", result
        assert [bundle["text/plain"] for bundle in result.displays] == ["0", "1", "2", "3", "4"]
        assert result.displays_truncated
        again = small.run("display('next')")
        assert [b["text/plain"] for b in again.displays] == ["'next'"]
        assert not again.displays_truncated


def test_a_display_past_the_bytes_is_left_out_whole(session: Session) -> None:
    limits = Limits(memory=1024 * MiB, wall_time=20, cpu_time=5, displays=MiB)
    with Session(limits=limits) as small:
        small.run(RICH)
        code = "display(Rich('html', 'a' * 2**20))\ndisplay('small')\nprint('done')"
        result = small.run(code)
        assert result and result.stdout == b"done\n", result
        assert [b["text/plain"] for b in result.displays] == ["'small'"]
        assert result.displays_truncated


HOSTILE_WRITES = {
    "garbage": "os.write(fd, b'\\xff' * 100000)",
    "a frame of another kind": "os.write(fd, struct.pack('>BI', ord('O'), 5) + b'hello')",
    "a frame that claims 4 GiB": (
        "os.write(fd, struct.pack('>BI', ord('P'), 2**32 - 1) + b'x' * 1000)"
    ),
    "a malformed header": (
        "os.write(fd, struct.pack('>BI', ord('P'), 8) + b'\\x00\\x00\\x00\\x04{{{{')"
    ),
    "parts that do not add up": (
        "h = json.dumps({'parts': [['text/plain', 100]]}).encode()\n"
        "p = struct.pack('>I', len(h)) + h + b'short'\n"
        "os.write(fd, struct.pack('>BI', ord('P'), len(p)) + p)"
    ),
    "half a frame, then the end": "os.write(fd, struct.pack('>BI', ord('P'), 1000) + b'x' * 10)",
}


@pytest.mark.parametrize("write", HOSTILE_WRITES.values(), ids=list(HOSTILE_WRITES))
def test_what_the_code_writes_on_the_display_pipe_cannot_harm_the_host(
    session: Session, write: str
) -> None:
    """The code owns the display pipe's write end: whatever it writes there, the call
    ends with the keeper's answer, the host keeps no more than the caps, and the session
    goes on."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = f"import os, json, struct\nfd = display.__self__.fd\n{write}\nprint('wrote')"
    result = session.run(code)
    assert result.committed and result.stdout == b"wrote\n", result
    assert all(sorted(bundle) for bundle in result.displays)
    after = session.run("display('fine')")
    assert after and [b["text/plain"] for b in after.displays] == ["'fine'"], after
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 64 * 1024, f"the host grew by {grown} KiB"


def test_a_call_a_limit_ends_keeps_the_displays_shown_before(session: Session) -> None:
    events: list[OutputEvent] = []
    result = session.run(
        "display('first')\nwhile True:\n    pass", cpu_time=0.5, on_event=events.append
    )
    assert result.rolled_back and result.status is Status.CPU_TIME_EXCEEDED, result
    assert [b["text/plain"] for b in result.displays] == ["'first'"]
    assert [event.kind for event in events] == ["display"]


def test_an_event_callback_that_raises_rolls_the_call_back(session: Session) -> None:
    session.run("x = 1")

    def refuse(event: OutputEvent) -> None:
        raise LookupError("no thanks")

    with pytest.raises(LookupError, match="no thanks"):
        session.run("x = 2\ndisplay(x)\nimport time\ntime.sleep(30)", on_event=refuse)
    assert session.run("x").value == "1"


def test_run_async_hands_events_to_a_coroutine_on_the_loop(session: Session) -> None:
    seen: list[str] = []

    async def record(event: OutputEvent) -> None:
        await asyncio.sleep(0)
        if not seen or seen[-1] != event.kind:
            seen.append(event.kind)

    async def main() -> None:
        result = await session.run_async("print('a', flush=True)\ndisplay(1)", on_event=record)
        assert result and len(result.displays) == 1

    asyncio.run(main())
    assert seen == ["stdout", "display"]


def test_on_event_must_be_callable(session: Session) -> None:
    with pytest.raises(TypeError, match="on_event"):
        session.run("1", on_event="print")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "grows",
    ["{'text/plain': b'\\xff' * 40_000}", "{'text/markdown': '<' * 30_000}"],
    ids=["invalid UTF-8", "markdown to escape"],
)
def test_a_display_that_grows_once_made_safe_is_left_out_and_the_session_goes_on(
    grows: str,
) -> None:
    """A display within the cap as sent may pass it once made safe (each invalid byte
    becomes three, each ``<`` four): it is left out, and the call and the next keep
    their own answers."""
    with watched_session(Limits(memory=1024 * MiB, cpu_time=5, displays=64 * 1024)) as small:
        result = small.run(f"display({grows}, raw=True)\ndisplay('kept')\nprint('done')")
        assert result and result.stdout == b"done\n", result
        assert [bundle["text/plain"] for bundle in result.displays] == ["'kept'"]
        assert result.displays_truncated
        assert small.run("print('next')").stdout == b"next\n"


def test_a_stream_broken_by_a_frame_of_another_kind_says_displays_were_left_out(
    session: Session,
) -> None:
    code = (
        "import os, struct\nfd = display.__self__.fd\n"
        "os.write(fd, struct.pack('>BI', ord('O'), 5) + b'hello')\ndisplay('lost')"
    )
    result = session.run(code)
    assert result and result.displays == () and result.displays_truncated, result


def test_variables_a_call_did_not_ask_for_are_never_read_by_the_host(session: Session) -> None:
    """Only a pull's call may send variables: a frame of them forged in any other call
    is skipped in the sandbox, however large, and the host never parses it."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    forged = "b'{\"values\": [' + b'{},' * 3_000_000 + b'{}]}'"
    result = session.run(f"display.__self__.send_frame(ord('V'), {forged})\nprint('sent')")
    assert result and result.stdout == b"sent\n", result
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 32 * 1024, f"the host grew by {grown} KiB"
    assert session.run("1").value == "1"
