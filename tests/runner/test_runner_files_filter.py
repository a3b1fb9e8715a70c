# SPDX-License-Identifier: MIT
"""``files_include`` and ``files_exclude`` through a ``Runner``: per call, so they travel
with the call at the hand-over of a warm sandbox and of a template's copy (the init
reads them from the hand-over) and never make a kind of their own: each call here is
asserted to have been taken warm.  Also a fresh Runner call, ``run_job``, and
``Runner.session``'s session-wide patterns."""

from __future__ import annotations

import asyncio

from support.filtered import WRITE
from support.warm import wait_ready

from pysandbox import Job, Limits, Runner, Status, Template


def _taken(runner: Runner) -> int:
    pool = runner._pool
    assert pool is not None
    return pool.taken


def _warm_calls(runner: Runner) -> None:
    """Three calls of the default kind with other patterns each, every one taken warm;
    a call without patterns after them gets every file (nothing stayed behind)."""
    cases = [
        ({"files_include": ["out"]}, {"out/a.png"}),
        ({"files_exclude": [".cache", "out"]}, {"notes.txt"}),
        ({"files_include": ["*.json"], "files_exclude": ["out"]}, {".cache/x/y.json"}),
        ({}, {"out/a.png", ".cache/x/y.json", "notes.txt"}),
    ]
    for keywords, expected in cases:
        wait_ready(runner)
        taken = _taken(runner)
        result = runner.run_python(WRITE, **keywords)  # type: ignore[arg-type]
        assert _taken(runner) == taken + 1, "the call was not taken warm"
        assert result.status is Status.OK, result
        assert set(result.files) == expected, keywords
        assert not result.files_truncated


def test_a_warm_sandbox_takes_its_calls_patterns_at_the_hand_over() -> None:
    with Runner(warm=1) as runner:
        _warm_calls(runner)


def test_a_warm_calls_excluded_files_count_toward_no_cap() -> None:
    limits = Limits(files_out_count=1)
    with Runner(warm=1, limits=limits) as runner:
        wait_ready(runner)
        taken = _taken(runner)
        result = runner.run_python(WRITE, files_exclude=[".cache", "notes.txt"])
        assert _taken(runner) == taken + 1
    assert set(result.files) == {"out/a.png"} and not result.files_truncated


def test_a_templates_copy_takes_its_calls_patterns_at_the_hand_over() -> None:
    template = Template(files={"model/w.txt": b"w"}, copies=True)
    with Runner(warm=1, template=template) as runner:
        wait_ready(runner)
        taken = _taken(runner)
        result = runner.run_python(WRITE, files_exclude=[".cache", "model"])
        assert _taken(runner) == taken + 1, "the call was not taken from a copy"
        assert set(result.files) == {"out/a.png", "notes.txt"}
        wait_ready(runner)
        result = runner.run_python(WRITE, files_include=["model"])
        assert set(result.files) == {"model/w.txt"}


def test_a_template_without_copies_takes_them_too() -> None:
    with Runner(warm=1, template=Template(files={"model/w.txt": b"w"})) as runner:
        wait_ready(runner)
        taken = _taken(runner)
        result = runner.run_python(WRITE, files_include=["out", "model"])
        assert _taken(runner) == taken + 1
    assert set(result.files) == {"out/a.png", "model/w.txt"}


def test_fresh_runner_calls_run_job_and_the_async_forms_filter() -> None:
    with Runner() as runner:
        ran = runner.run(["sh", "-c", "mkdir d && echo x > d/x && echo y > y"], files_include=["d"])
        assert set(ran.files) == {"d/x"}
        outcome = runner.run_job(Job(code=WRITE, files_exclude=[".cache"], files_include=["*"]))
        assert outcome.result is not None
        assert set(outcome.result.files) == {"out/a.png", "notes.txt"}
        python = asyncio.run(runner.run_python_async(WRITE, files_include=["notes.txt"]))
        assert set(python.files) == {"notes.txt"}


def test_runner_sessions_filter_session_wide() -> None:
    with Runner() as runner:
        session = runner.session(files_include=["out"])
        first = session.run(WRITE)
        second = session.run("open('out/b.png', 'w').write('b'); open('c', 'w').write('c')")
        session.close()
    assert set(first.files) == {"out/a.png"}
    assert set(second.files) == {"out/b.png"}


def test_a_runners_warm_session_is_not_given_to_a_filtered_one() -> None:
    with Runner(warm_sessions=1) as runner:
        filtered = runner.session(files_exclude=[".cache"])
        plain = runner.session()
        try:
            assert set(filtered.run(WRITE).files) == {"out/a.png", "notes.txt"}
            assert len(plain.run(WRITE).files) == 3
        finally:
            filtered.close()
            plain.close()
