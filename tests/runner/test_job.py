# SPDX-License-Identifier: MIT
"""``Job`` and ``Outcome`` as data: checked when made, equal after a pickle or a JSON
round trip, and a malformed dict is refused naming its key (what a batch reports per
line).  No sandbox runs here but the one whose result an outcome carries."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from pysandbox import File, Job, Limits, Outcome

pytestmark = pytest.mark.no_bwrap

FULL = Job(
    id="j1",
    code="import sys; print(sys.argv[1:], sys.stdin.read())",
    args=("a", "b"),
    stdin=b"\xff\x00in",
    files={"data/in.bin": b"\x00\xfe", "run.sh": File(b"#!/bin/sh\n", executable=True)},
    limits=Limits(wall_time=2.5, memory=128 * 2**20, truncate_output=True, files_out_count=9),
    env={"LANG": "C.UTF-8"},
    readable=("/usr/share",),
    files_include=("out", "*.png"),
    files_exclude=[".cache"],  # type: ignore[arg-type]
)


def test_a_job_keeps_normalised_fields() -> None:
    job = Job(argv=["/bin/echo", "hi"], stdin="héllo", files={"a": bytearray(b"1")})
    assert job.argv == ("/bin/echo", "hi")
    assert job.stdin == "héllo".encode()
    assert job.files == {"a": File(b"1")}
    assert job.id is None and job.code is None and job.limits is None
    assert FULL.files["run.sh"] == File(b"#!/bin/sh\n", executable=True)
    assert FULL.files_exclude == (".cache",) and job.files_include is None


def test_a_job_pickles_and_copies() -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(FULL, protocol=protocol)) == FULL
    assert copy.deepcopy(FULL) == FULL


def test_json_round_trip_of_every_field() -> None:
    data = json.loads(json.dumps(FULL.to_dict()))
    assert data == {
        "id": "j1",
        "python": FULL.code,
        "args": ["a", "b"],
        "stdin": {"data": "/wBpbg==", "encoding": "base64"},
        "files": {
            "data/in.bin": {"data": "AP4=", "encoding": "base64", "executable": False},
            "run.sh": {"data": "#!/bin/sh\n", "encoding": "utf-8", "executable": True},
        },
        "limits": {
            "wall_time": 2.5,
            "memory": 128 * 2**20,
            "truncate_output": True,
            "files_out_count": 9,
        },
        "env": {"LANG": "C.UTF-8"},
        "readable": ["/usr/share"],
        "files_include": ["out", "*.png"],
        "files_exclude": [".cache"],
    }
    assert Job.from_dict(data) == FULL
    empty = Job(code="1", files_include=())
    assert empty.to_dict()["files_include"] == [] and Job.from_dict(empty.to_dict()) == empty


def test_a_minimal_job_writes_only_what_it_has() -> None:
    job = Job(id=7, argv=["/bin/true"], stdin="text")
    assert job.to_dict() == {"id": 7, "argv": ["/bin/true"], "stdin": "text"}
    assert Job.from_dict(job.to_dict()) == job
    assert Job.from_dict({"python": "print(1)"}) == Job(code="print(1)")


def test_limits_take_units_as_the_command_line_does() -> None:
    job = Job.from_dict(
        {
            "python": "print(1)",
            "limits": {"memory": "256M", "wall_time": "500ms", "disk": 4096, "processes": "8"},
        }
    )
    assert job.limits == Limits(memory=256 * 2**20, wall_time=0.5, disk=4096, processes=8)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"python": "1", "colour": "red"}, "colour"),
        ({"argv": ["/bin/true"], "python": "1"}, "argv/python"),
        ({"id": 1}, "argv/python"),
        ({"argv": ["/bin/true"], "args": ["x"]}, "args"),
        ({"argv": "/bin/true"}, "argv"),
        ({"argv": []}, "argv"),
        ({"python": 3}, "python"),
        ({"python": "a\0b"}, "python"),
        ({"python": "1", "args": [1]}, "args"),
        ({"python": "1", "id": True}, "id"),
        ({"python": "1", "id": 1.5}, "id"),
        ({"python": "1", "stdin": 5}, "stdin"),
        ({"python": "1", "stdin": {"data": "!!", "encoding": "base64"}}, "stdin.data"),
        ({"python": "1", "stdin": {"data": "x", "encoding": "rot13"}}, "stdin.encoding"),
        ({"python": "1", "files": []}, "files"),
        ({"python": "1", "files": {"a": "text"}}, "files['a']"),
        ({"python": "1", "files": {"a": {"data": "x"}}}, "files['a']"),
        ({"python": "1", "files": {"../a": {"data": "x", "encoding": "utf-8"}}}, "files"),
        (
            {"python": "1", "files": {"a": {"data": "x", "encoding": "utf-8", "executable": 1}}},
            "files['a'].executable",
        ),
        ({"python": "1", "limits": {"memory": 0}}, "limits.memory"),
        ({"python": "1", "limits": {"files_out_count": 0}}, "limits.files_out_count"),
        ({"python": "1", "limits": {"files_out_count": "1K"}}, "limits.files_out_count"),
        ({"python": "1", "limits": {"memory": "256MB"}}, "limits.memory"),
        ({"python": "1", "limits": {"wall_time": "-1"}}, "limits.wall_time"),
        ({"python": "1", "limits": {"speed": 3}}, "limits.speed"),
        ({"python": "1", "limits": {"truncate_output": "yes"}}, "limits.truncate_output"),
        ({"python": "1", "limits": [1]}, "limits"),
        ({"python": "1", "env": {"A": 1}}, "env"),
        ({"python": "1", "env": ["A"]}, "env"),
        ({"python": "1", "readable": ["relative"]}, "readable"),
        ({"python": "1", "readable": "/usr"}, "readable"),
        ({"python": "1", "files_include": "out"}, "files_include"),
        ({"python": "1", "files_include": [1]}, "files_include"),
        ({"python": "1", "files_exclude": ["[^x]"]}, "files_exclude"),
        ({"python": "1", "files_exclude": [""]}, "files_exclude"),
    ],
)
def test_from_dict_names_the_bad_key(data: dict[str, object], key: str) -> None:
    with pytest.raises(ValueError) as caught:
        Job.from_dict(data)
    assert str(caught.value).startswith(key), str(caught.value)


@pytest.mark.parametrize(
    ("fields", "error", "named"),
    [
        ({}, ValueError, "exactly one of argv"),
        ({"argv": ["/bin/true"], "code": "1"}, ValueError, "exactly one of argv"),
        ({"argv": ["/bin/true"], "args": ("x",)}, ValueError, "args"),
        ({"argv": "/bin/true"}, TypeError, "argv"),
        ({"code": b"1"}, TypeError, "code"),
        ({"code": "1", "id": False}, TypeError, "id"),
        ({"code": "1", "stdin": print}, TypeError, "stdin"),
        ({"code": "1", "files": {"/abs": b""}}, ValueError, "files"),
        ({"code": "1", "files": {"a": "text"}}, TypeError, "content"),
        ({"code": "1", "limits": {"memory": 1}}, TypeError, "limits"),
        ({"code": "1", "env": {"A": None}}, TypeError, "env"),
        ({"code": "1", "readable": ["x"]}, ValueError, "readable"),
        ({"code": "1", "files_include": "out"}, TypeError, "files_include"),
        ({"code": "1", "files_exclude": ["a\\b"]}, ValueError, "files_exclude"),
        ({"code": "1", "files_exclude": ["x"] * 65}, ValueError, "files_exclude"),
    ],
)
def test_a_job_is_checked_when_made(
    fields: dict[str, object], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        Job(**fields)  # type: ignore[arg-type]


def test_an_outcome_has_a_result_or_an_error() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Outcome(1)
    failed = Outcome.of_error("x", ValueError("files: bad"))
    assert (failed.error, failed.error_type, failed.verdict) == (
        "files: bad",
        "ValueError",
        "ERROR",
    )
    assert not failed
    data = json.loads(json.dumps(failed.to_dict()))
    assert data == {"id": "x", "error": "files: bad", "error_type": "ValueError"}
    assert Outcome.from_dict(data) == failed
    with pytest.raises(ValueError, match=r"^error_type"):
        Outcome.from_dict({"id": "x", "error": "e"})
    with pytest.raises(ValueError, match=r"^id"):
        Outcome.from_dict({"id": [1], "error": "e", "error_type": "E"})
