# SPDX-License-Identifier: MIT
"""``run_python(..., displays=True)``: what a notebook would show of a one-shot run
comes back as ``Result.displays`` (and in ``to_dict``, ``--json``), checked and within
the caps; the code sees the same ``argv``, ``__main__``, path, exit code and traceback
as without it; and without it nothing changes."""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys

import pytest

import pysandbox
from pysandbox import Limits, Result, Status

MiB = 2**20
#: matplotlib takes seconds of CPU to import on a busy machine (and on 3.13).
HEAVY = Limits(cpu_time=60, wall_time=120, memory=1024 * MiB)

PROBE = """
import sys, os
print(sys.argv, __name__, sys.path[0], __file__, os.getcwd())
print(sorted(k for k in globals() if not k.startswith('__')))
if sys.argv[1:] == ['raise']:
    def inner():
        raise KeyError('boom')
    inner()
sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
"""


def test_figures_and_displays_come_back_in_order_and_round_trip() -> None:
    pytest.importorskip("matplotlib")
    code = (
        "import matplotlib.pyplot as plt\nprint('before')\nplt.plot([1, 3, 2])\nplt.show()\n"
        "display({'text/html': '<b>x</b><script>alert(1)</script>'}, raw=True)\n"
        "plt.bar([1], [2])\n"
    )
    result = pysandbox.run_python(code, displays=True, limits=HEAVY)
    assert result and result.stdout == b"before\n", result
    kinds = [sorted(bundle) for bundle in result.displays]
    assert kinds == [["image/png", "text/plain"], ["text/html"], ["image/png", "text/plain"]]
    assert result.displays[0]["image/png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert "<script" not in result.displays[1]["text/html"]
    data = json.loads(json.dumps(result.to_dict()))
    assert [sorted(shown) for shown in data["displays"]] == kinds
    assert Result.from_dict(data) == result
    assert result.files == {}


def test_without_displays_nothing_changes() -> None:
    result = pysandbox.run_python("print('display' in dir(__builtins__))\ndisplay(1)")
    assert result.status is Status.NONZERO_EXIT and result.stdout == b"False\n", result
    assert b"NameError" in result.stderr and result.displays == ()
    assert "displays" not in result.to_dict()  # what 0.1.0 wrote, to the key


@pytest.mark.parametrize("args", [[], ["3"], ["raise"]], ids=["ok", "exit-3", "raise"])
def test_the_code_sees_what_it_sees_without_displays(args: list[str]) -> None:
    """The program that runs the code under the display hook is invisible to it: the
    same argv, module name, path, globals, exit code and traceback text."""
    plain = pysandbox.run_python(PROBE, args=args)
    shown = pysandbox.run_python(PROBE, args=args, displays=True)
    assert (shown.status, shown.returncode) == (plain.status, plain.returncode)
    assert shown.stdout == plain.stdout and shown.stderr == plain.stderr, shown


def test_displays_past_the_caps_are_left_out() -> None:
    limits = Limits(displays_count=3, displays=64 * 1024, cpu_time=5)
    code = "for i in range(10):\n    display(i)\ndisplay({'text/html': 'x' * 100000}, raw=True)"
    result = pysandbox.run_python(code, displays=True, limits=limits)
    assert result, result
    assert [bundle["text/plain"] for bundle in result.displays] == ["0", "1", "2"]
    assert result.displays_truncated


@pytest.mark.parametrize(
    "write",
    [
        "os.write(fd, b'\\xff' * 10_000_000)",
        "os.write(fd, struct.pack('>BI', ord('P'), 2**32 - 1) + b'x' * 100)",
        "os.write(fd, struct.pack('>BI', ord('P'), 9) + b'\\x00\\x00\\x00\\x05{{{{{')",
    ],
    ids=["a flood", "a frame that claims 4 GiB", "a malformed header"],
)
def test_what_the_code_writes_on_its_display_pipe_cannot_harm_the_host(write: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = f"import os, struct\ndisplay('first')\nfd = display.__self__.fd\n{write}\nprint('ok')"
    limits = Limits(displays=MiB, cpu_time=5)
    result = pysandbox.run_python(code, displays=True, limits=limits)
    assert result and result.stdout == b"ok\n", result
    assert [bundle["text/plain"] for bundle in result.displays] == ["'first'"]
    assert result.displays_truncated
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 8 * 1024, f"the host grew by {grown} KiB"


def test_displays_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="displays"):
        pysandbox.run_python("pass", displays="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="displays"):
        asyncio.run(pysandbox.run_python_async("pass", displays=1))  # type: ignore[arg-type]


def test_the_async_form_gives_displays_too() -> None:
    result = asyncio.run(pysandbox.run_python_async("display(42)", displays=True))
    assert [bundle["text/plain"] for bundle in result.displays] == ["42"]


def test_the_command_line_gives_displays_in_json_and_names_them_otherwise() -> None:
    command = [sys.executable, "-m", "pysandbox", "python", "--capture-displays"]
    shown = subprocess.run(
        [*command, "--json", "-c", "display({'text/markdown': '# hi'}, raw=True)"],
        capture_output=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    assert json.loads(shown.stdout)["displays"] == [{"text/markdown": "# hi"}]
    said = subprocess.run(
        [*command, "-c", "display(1)"], capture_output=True, check=True, stdin=subprocess.DEVNULL
    )
    assert b"1 displays (text/plain)" in said.stderr


def test_the_display_pipe_needs_a_descriptor_to_spare() -> None:
    """At the smallest ``open_files`` bwrap has no descriptor to spare for the display
    pipe: refused before anything runs, naming what works; one more is enough."""
    from pysandbox._model.limits import MIN_OPEN_FILES

    with pytest.raises(ValueError, match=f"displays: .* at least {MIN_OPEN_FILES + 1}"):
        pysandbox.run_python("pass", displays=True, limits=Limits(open_files=MIN_OPEN_FILES))
    result = pysandbox.run_python(
        "display(1)", displays=True, limits=Limits(open_files=MIN_OPEN_FILES + 1)
    )
    assert result and [bundle["text/plain"] for bundle in result.displays] == ["1"], result


AT_THE_END = """
import atexit, threading, time
atexit.register(print, 'atexit ran')
out = open('out.txt', 'w')
out.write('buffered, not flushed')
threading.Thread(target=lambda: (time.sleep(0.2), print('thread joined'))).start()
raise ValueError('the end')
"""


def test_an_uncaught_exception_ends_the_run_as_python_ends_it() -> None:
    """atexit handlers run, threads are joined, buffered files are flushed, and the
    status and traceback are the interpreter's own, with displays as without."""
    plain = pysandbox.run_python(AT_THE_END)
    shown = pysandbox.run_python(AT_THE_END, displays=True)
    assert plain.stdout == b"thread joined\natexit ran\n", plain
    assert (shown.returncode, shown.stdout, shown.stderr) == (
        plain.returncode,
        plain.stdout,
        plain.stderr,
    )
    assert shown.files == plain.files == {"out.txt": b"buffered, not flushed"}


def test_a_display_that_grows_once_made_safe_is_left_out_of_a_one_shot_run() -> None:
    limits = Limits(displays=64 * 1024, cpu_time=5)
    code = "display({'text/plain': b'\\xff' * 40_000}, raw=True)\ndisplay('kept')"
    result = pysandbox.run_python(code, displays=True, limits=limits)
    assert result and [bundle["text/plain"] for bundle in result.displays] == ["'kept'"]
    assert result.displays_truncated
