# SPDX-License-Identifier: MIT
"""Objects pickled and serialised by an earlier version still load, and equal what this
version builds from the same values.

``tests/golden/`` holds, for each version recorded, a pickle and a JSON file of the same
public objects (``golden_objects``), written by that version with
``python tests/model/test_golden.py --write``.  A pickle names each class by the module it
was defined in; a move of the code (issue 19's layers) must keep those names loadable,
and this test is what proves it.  Pickles here are this project's own files, never a
sandbox's output (which is never unpickled).
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest

import pysandbox
from pysandbox import (
    Cancelled,
    Check,
    File,
    Job,
    Limits,
    Outcome,
    ProcessOutput,
    Result,
    SandboxError,
    SandboxFailure,
    SelftestReport,
    Status,
)
from pysandbox._model.result import FrozenFiles

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
VERSIONS = sorted(path.stem for path in GOLDEN.glob("*.pickle"))


def _result() -> Result:
    return Result(
        status=Status.NONZERO_EXIT,
        returncode=3,
        signal=None,
        stdout=b"out\xff",
        stderr=b"err",
        stdout_truncated=False,
        stderr_truncated=True,
        wall_time=0.25,
        cpu_time=0.125,
        max_rss=9 * 2**20,
        files=FrozenFiles({"a/b.txt": b"x", "run.sh": b"#!/bin/sh\n"}),
        files_truncated=False,
        executables=frozenset({"run.sh"}),
        queued_time=0.5,
    )


def golden_objects() -> dict[str, object]:
    """One of each public record, with values that exercise every field."""
    limits = Limits(wall_time=2.5, cpu_time=0.5, memory=2**28, disk=2**24, files_out_count=7)
    job = Job(
        id="job-1",
        code="print(1)",
        args=("a", "b"),
        stdin=b"in",
        files={"data.txt": b"d", "tool": File(b"#!/bin/sh\n", executable=True)},
        limits=limits,
        env={"K": "V"},
        readable=("/usr/share/dict",),
    )
    result = _result()
    return {
        "status": Status.DISK_EXCEEDED,
        "limits": limits,
        "file": File(b"\x00\x01", executable=True),
        "frozen_files": FrozenFiles({"x": b"1"}),
        "job": job,
        "argv_job": Job(id=None, argv=("/bin/echo", "hi")),
        "result": result,
        "outcome": Outcome(id="job-1", result=result),
        "failed_outcome": Outcome(id="job-2", error="no such file", error_type="ValueError"),
        "process_output": ProcessOutput(returncode=1, stdout="o", stderr="e"),
        "check": Check(name="bwrap", ok=True, detail="0.8.0", fix=""),
        "selftest_report": SelftestReport(checks=(Check(name="a", ok=False, detail="d", fix="f"),)),
    }


def golden_exceptions() -> dict[str, BaseException]:
    return {
        "sandbox_error": SandboxError("bwrap is missing: install bubblewrap"),
        "sandbox_failure": SandboxFailure("the program failed", _result()),
        "cancelled": Cancelled("cancelled by the caller"),
    }


def golden_json() -> dict[str, object]:
    objects = golden_objects()
    return {
        "job": objects["job"].to_dict(),  # type: ignore[attr-defined]
        "argv_job": objects["argv_job"].to_dict(),  # type: ignore[attr-defined]
        "result": objects["result"].to_dict(),  # type: ignore[attr-defined]
        "outcome": objects["outcome"].to_dict(),  # type: ignore[attr-defined]
        "failed_outcome": objects["failed_outcome"].to_dict(),  # type: ignore[attr-defined]
    }


def _same_exception(loaded: BaseException, fresh: BaseException) -> None:
    assert type(loaded) is type(fresh)
    assert loaded.args == fresh.args
    if isinstance(fresh, SandboxFailure):
        assert isinstance(loaded, SandboxFailure)
        assert loaded.result == fresh.result


def test_a_version_is_recorded() -> None:
    assert pysandbox.__version__ in VERSIONS, "run: python tests/model/test_golden.py --write"


@pytest.mark.parametrize("version", VERSIONS)
def test_pickles_of_a_version_load_and_equal_todays_objects(version: str) -> None:
    loaded = pickle.loads((GOLDEN / f"{version}.pickle").read_bytes())
    objects, exceptions = loaded["objects"], loaded["exceptions"]
    assert objects == golden_objects()
    fresh = golden_exceptions()
    assert exceptions.keys() == fresh.keys()
    for name, exception in exceptions.items():
        _same_exception(exception, fresh[name])


@pytest.mark.parametrize("version", VERSIONS)
def test_json_of_a_version_reads_back_into_todays_objects(version: str) -> None:
    stored = json.loads((GOLDEN / f"{version}.json").read_text())
    objects = golden_objects()
    assert Job.from_dict(stored["job"]) == objects["job"]
    assert Job.from_dict(stored["argv_job"]) == objects["argv_job"]
    assert Result.from_dict(stored["result"]) == objects["result"]
    assert Outcome.from_dict(stored["outcome"]) == objects["outcome"]
    assert Outcome.from_dict(stored["failed_outcome"]) == objects["failed_outcome"]


def test_todays_json_is_what_this_version_recorded() -> None:
    stored = json.loads((GOLDEN / f"{pysandbox.__version__}.json").read_text())
    assert golden_json() == stored


def _write() -> None:
    GOLDEN.mkdir(exist_ok=True)
    version = pysandbox.__version__
    payload = {"objects": golden_objects(), "exceptions": golden_exceptions()}
    (GOLDEN / f"{version}.pickle").write_bytes(pickle.dumps(payload, protocol=4))
    text = json.dumps(golden_json(), indent=1, sort_keys=True) + "\n"
    (GOLDEN / f"{version}.json").write_text(text)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/model/test_golden.py --write")
    _write()


@pytest.mark.no_bwrap
def test_public_names_live_in_pysandbox_and_their_type_hints_resolve() -> None:
    """Reprs, documentation and new pickles name ``pysandbox`` itself, never the internal
    layout, and tools that read a dataclass's types (``typing.get_type_hints``) still
    can."""
    import typing

    for name in pysandbox.__all__:
        if name == "__version__":
            continue
        value = getattr(pysandbox, name)
        assert value.__module__ == "pysandbox", name
        if isinstance(value, type) and sys.version_info >= (3, 10):
            # 3.9 cannot evaluate ``X | None`` at all (it never could, before the move).
            typing.get_type_hints(value)
    assert repr(Status.OK) == "<Status.OK: 'ok'>"
    assert pickle.dumps(Limits()).count(b"pysandbox._") == 0


@pytest.mark.no_bwrap
@pytest.mark.skipif(sys.version_info < (3, 10), reason="3.9 cannot evaluate X | None at all")
def test_the_type_hints_of_the_public_calls_resolve() -> None:
    """Tools that read a call's types (``typing.get_type_hints``) still can, though the
    command line loads no ``typing``: ``stdin``'s and the callbacks' aliases exist at run
    time."""
    import inspect
    import typing

    runner = inspect.getmembers(pysandbox.Runner, inspect.isfunction)
    calls = [pysandbox.run, pysandbox.run_python, pysandbox.run_async, pysandbox.eval_in_sandbox]
    for call in [pysandbox.run_python_async, *calls, *(f for n, f in runner if n[0] != "_")]:
        typing.get_type_hints(call)
