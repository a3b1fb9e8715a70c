# SPDX-License-Identifier: MIT
"""Issue 18, item 6: the files a sandbox returns are bounded in number, not only in bytes.

A file costs the caller an entry however small it is: a million hard links of one empty
file cost no byte of ``Limits.files_out``, yet came back as a million entries (+92 MiB of
the caller's memory and a 62 MiB batch JSON line).  ``Limits.files_out_count`` caps the
count: the init stops sending at the cap, the host keeps no more than the cap whatever
the stream says, and ``files_truncated`` tells.  Each attack runs as root and as a
non-root caller; the host side counts what came back and how much memory the calling
process grew by.
"""

from __future__ import annotations

import pytest
from support.callers import Caller

from pysandbox import Limits, Status
from pysandbox._api import run as _run
from pysandbox._launch import launcher as _launch
from pysandbox._model.filestream import decode_files, stream_cap
from pysandbox._model.verdict import describe

#: Files past the cap that each attack makes.
EXTRA = 200

#: Makes as many files as its second argument says: hard links of one empty file
#: (``links``) or one-byte files in a directory (``small``).
MAKE_FILES = """
import os, sys
kind, count = sys.argv[1], int(sys.argv[2])
if kind == "links":
    open("empty", "w").close()
    for i in range(count - 1):
        os.link("empty", "l%x" % i)
else:
    os.mkdir("small")
    for i in range(count):
        with open("small/%x" % i, "w") as file:
            file.write("x")
"""


@pytest.mark.parametrize("kind", ["links", "small"])
def test_no_more_files_come_back_than_the_count(caller: Caller, kind: str) -> None:
    cap = 300
    limits = Limits(wall_time=120, cpu_time=60, files_out_count=cap)
    result = caller.run_python(MAKE_FILES, args=[kind, str(cap + EXTRA)], limits=limits)
    assert result.status is Status.OK, result.stderr
    assert len(result.files) == cap and result.files_truncated
    assert set(result.files.values()) == ({b""} if kind == "links" else {b"x"})
    assert describe(result, limits).endswith(f"output files left out (limit {cap} files)")


def test_exactly_the_count_is_not_truncated(caller: Caller) -> None:
    cap = 300
    limits = Limits(wall_time=120, cpu_time=60, files_out_count=cap)
    result = caller.run_python(MAKE_FILES, args=["small", str(cap)], limits=limits)
    assert result.status is Status.OK, result.stderr
    assert len(result.files) == cap and not result.files_truncated


def test_the_init_stops_sending_at_the_count() -> None:
    """What crosses the pipe, before the host decodes it: exactly ``cap`` records and an
    end record that says files were left out, far below the stream's cap in bytes."""
    cap = 300
    limits = Limits(wall_time=120, cpu_time=60, files_out_count=cap)
    program, code = _run.python_program(MAKE_FILES, ["links", str(20 * cap)])
    plan, _ = _run.build_plan(_run.Call(program, limits=limits, code=code))
    facts = _launch.launch(plan)
    stream = facts.captures[0]
    assert not facts.captures_truncated[0]
    files, _, lost = decode_files(stream, 100 * cap)
    assert len(files) == cap and lost
    assert stream[-2:] == b"E\x01"
    assert len(stream) <= cap * 64 < stream_cap(limits.files_out, cap)


#: Run by the caller's own interpreter, as the caller: how far its resident memory peaks
#: above where it was during one call whose program made ``LINKS`` hard links, the result
#: turned into the batch's JSON line included, once the same call with a few files has
#: warmed everything up.  Writing 5 to ``clear_refs`` resets the peak (``VmHWM``).
MEASURE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pysandbox import Limits, Outcome, run_python
CODE = %r
LIMITS = Limits(wall_time=300, cpu_time=120, memory=2**30, disk=2**30)


def kib(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def call(links):
    result = run_python(CODE, args=["links", str(links)], limits=LIMITS)
    return result, json.dumps(Outcome("job", result).to_dict())


call(100)
with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
before = kib("VmRSS")
result, line = call(%d)
peak = kib("VmHWM")
print(json.dumps({
    "status": result.status.name,
    "stderr": result.stderr.decode(errors="replace")[-2000:],
    "files": len(result.files),
    "truncated": result.files_truncated,
    "growth": (peak - before) * 1024,
    "line": len(line),
}))
"""


@pytest.mark.slow
def test_a_flood_of_hard_links_costs_the_caller_little(caller: Caller) -> None:
    """150 000 hard links of one empty file, with the default caps on returned files
    (and room for the links whatever counts them): the caller gets ``files_out_count``
    files and its memory peaks a few hundred bytes per file of the cap above where it
    was (measured as root: +2.3 MiB for the result of 16384 files, +10 MiB with its
    1 MiB JSON line; before the cap, 300 000 links came back as 300 000 files, +132 MiB
    and a 19 MiB line)."""
    cap = Limits().files_out_count
    answer = caller.run_script(MEASURE % (MAKE_FILES, 150_000), timeout=600)
    assert answer["status"] == "OK", answer["stderr"]
    assert answer["files"] == cap and answer["truncated"]
    assert answer["growth"] < cap * 2048, answer
    assert answer["line"] < cap * 128, answer
