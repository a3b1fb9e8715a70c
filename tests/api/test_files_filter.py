# SPDX-License-Identifier: MIT
"""``files_include`` and ``files_exclude``: only the files asked for come back, through
``run_python``, ``run``, their async forms and a ``Session``; the files filtered out
count toward no cap, an excluded directory is not walked, and every bad pattern is
refused before anything runs, naming the argument.

Each sandbox writes ``out/a.png``, ``.cache/x/y.json`` and ``notes.txt``, and the host
checks exactly which come back.  The Runner's warm sandboxes and template copies are in
``tests/runner/test_runner_files_filter.py``, the command line, the magic and ``Job``
beside their own tests.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from support.filtered import ALL, WRITE, WRITE_SH

import pysandbox
from pysandbox import Limits, Session, Status, run, run_python

#: (files_include, files_exclude, the files that come back)
CASES = [
    (None, None, ALL),
    (["out"], None, {"out/a.png"}),
    (None, [".cache"], {"out/a.png", "notes.txt"}),
    (["*.png", "*.txt"], ["out"], {"notes.txt"}),
    (["*"], ["*.json"], {"out/a.png", "notes.txt"}),
    (["out/*.png"], None, {"out/a.png"}),
    ([".cache/x"], [], {".cache/x/y.json"}),
    (("o?t",), iter(["nothing"]), {"out/a.png"}),
    (["[!.]*"], None, {"out/a.png", "notes.txt"}),
    (["missing"], None, set()),
]


@pytest.mark.parametrize(("include", "exclude", "expected"), CASES)
def test_run_python_returns_exactly_what_the_patterns_ask(
    include: Any, exclude: Any, expected: set[str]
) -> None:
    result = run_python(WRITE, files_include=include, files_exclude=exclude)
    assert result.status is Status.OK, result
    assert set(result.files) == expected
    assert not result.files_truncated


def test_run_filters_a_programs_files() -> None:
    result = run(["sh", "-c", WRITE_SH], files_include=["out", "notes.txt"])
    assert result.status is Status.OK, result
    assert set(result.files) == {"out/a.png", "notes.txt"}
    assert result.files["out/a.png"] == b"png\n"


def test_the_async_forms_filter_too() -> None:
    async def both() -> tuple[pysandbox.Result, pysandbox.Result]:
        return await asyncio.gather(
            pysandbox.run_python_async(WRITE, files_exclude=[".cache", "out"]),
            pysandbox.run_async(["sh", "-c", WRITE_SH], files_include=[".cache"]),
        )

    python, program = asyncio.run(both())
    assert set(python.files) == {"notes.txt"}
    assert set(program.files) == {".cache/x/y.json"}


def test_files_filtered_out_count_toward_no_cap() -> None:
    """A cap of one file with three left, two excluded: the one comes back, whole."""
    result = run_python(
        WRITE, limits=Limits(files_out_count=1), files_exclude=[".cache", "notes.txt"]
    )
    assert set(result.files) == {"out/a.png"}
    assert not result.files_truncated
    unfiltered = run_python(WRITE, limits=Limits(files_out_count=1))
    assert len(unfiltered.files) == 1 and unfiltered.files_truncated
    byte_cap = run_python(WRITE, limits=Limits(files_out=3), files_include=["out"])
    assert set(byte_cap.files) == {"out/a.png"} and not byte_cap.files_truncated


#: 20,000 files in ``junk/``, and a directory nested deeper than the init walks (which
#: it would note as left out) in ``.cache``.
MANY = """
import os
os.mkdir("junk")
for i in range(20000):
    os.close(os.open(f"junk/{i}", os.O_CREAT | os.O_WRONLY))
os.makedirs(".cache/" + "/".join(["d"] * 40))
with open("keep.txt", "w") as file:
    file.write("kept")
"""


def test_an_excluded_directory_is_not_walked() -> None:
    """Unfiltered, 20,000 files exceed the count and the deep directory is noted: the
    result is truncated.  With both directories excluded, it is not: the init never
    went in."""
    limits = Limits(files_out_count=100, cpu_time=10, wall_time=60)
    filtered = run_python(MANY, limits=limits, files_exclude=["junk", ".cache"])
    assert filtered.status is Status.OK, filtered
    assert set(filtered.files) == {"keep.txt"}
    assert not filtered.files_truncated
    deep = run_python(MANY, limits=limits, files_exclude=["junk"])
    assert deep.files_truncated, "the deep directory is noted when it is walked"
    many = run_python(MANY, limits=limits, files_exclude=[".cache"])
    assert many.files_truncated and len(many.files) == 100


def test_a_session_filters_every_calls_files() -> None:
    """Session-wide patterns: over two calls, only the changed files they let through."""
    with Session(files_include=["out", "*.txt"], files_exclude=["*.tmp"]) as session:
        first = session.run(WRITE)
        assert first.error is None, first
        assert set(first.files) == {"out/a.png", "notes.txt"}
        second = session.run(
            "open('out/a.png', 'w').write('again')\n"
            "open('out/b.tmp', 'w').write('t')\n"
            "open('.cache/x/z.json', 'w').write('z')\n"
            "open('other', 'w').write('o')\n"
        )
        assert second.error is None, second
        assert second.files == {"out/a.png": b"again"}
        assert not second.files_truncated


def test_a_sessions_excluded_files_count_toward_no_cap() -> None:
    with Session(limits=Limits(files_out_count=1), files_exclude=[".cache", "out"]) as session:
        cell = session.run(WRITE)
    assert set(cell.files) == {"notes.txt"}
    assert not cell.files_truncated


#: Bad patterns, the error and what its message says.
BAD = [
    ("files_include", "out", TypeError, "files_include must be an iterable of str patterns"),
    ("files_exclude", b".cache", TypeError, "files_exclude must be an iterable of str"),
    ("files_include", 3, TypeError, "files_include must be an iterable of str patterns, not int"),
    ("files_exclude", [b"x"], TypeError, "files_exclude items must be str, not bytes"),
    ("files_include", ["x"] * 65, ValueError, "files_include has more than 64 patterns"),
    ("files_exclude", [""], ValueError, "files_exclude has an empty pattern"),
    ("files_include", ["x" * 1025], ValueError, "longer than 1024 characters"),
    ("files_exclude", ["a\0b"], ValueError, "files_exclude has a pattern holding NUL"),
    ("files_include", ["a\\*"], ValueError, "files_include has a pattern holding '\\\\'"),
    ("files_exclude", ["[^a]*"], ValueError, "files_exclude has a pattern holding '[^'"),
    ("files_include", ["[[:digit:]]"], ValueError, "holding '[:'"),
    ("files_exclude", ["[[=a=]]"], ValueError, "holding '[='"),
    ("files_include", ["[[.a.]]"], ValueError, "holding '[.'"),
    ("files_include", ["\udcff"], ValueError, "files_include has a pattern not encodable"),
]


@pytest.mark.parametrize(("name", "value", "error", "message"), BAD)
def test_bad_patterns_are_refused_before_anything_runs(
    name: str, value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        run_python("open('ran', 'w')", **{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call",
    [
        lambda bad: run(["true"], files_include=bad),
        lambda bad: asyncio.run(pysandbox.run_python_async("", files_exclude=bad)),
        lambda bad: Session(files_include=bad),
        lambda bad: pysandbox.Job(code="", files_exclude=bad),
    ],
    ids=["run", "run_python_async", "Session", "Job"],
)
def test_every_entry_refuses_a_bare_str(call: Any) -> None:
    with pytest.raises(TypeError, match="not a bare str"):
        call(".cache")


def test_the_largest_filter_allowed_runs() -> None:
    """64 patterns of 1024 characters each way reach the init and the keeper."""
    long = ["*" + "y" * 1023] * 63
    include, exclude = [*long, "out"], [*long, "out/*.tmp"]
    result = run_python(WRITE, files_include=include, files_exclude=exclude)
    assert set(result.files) == {"out/a.png"}
    with Session(files_include=include, files_exclude=exclude) as session:
        assert set(session.run(WRITE).files) == {"out/a.png"}
