# SPDX-License-Identifier: MIT
"""The one launch path under both APIs: one caller of the C core, one fd layout, and the
safety defaults every sandbox gets whichever API asked for it."""

from __future__ import annotations

import ast
import errno
import json
import os
from pathlib import Path

import pytest
from support.callers import run_unprivileged

import pysandbox
from pysandbox import Status, _sandbox, eval_in_sandbox, run_python
from pysandbox._launch.failures import bwrap_exited, bwrap_report, spawn_failure
from pysandbox._launch.plan import FdLayout

PACKAGE = Path(pysandbox.__file__).parent
LIMITS_INSIDE = """
import json
limits = {}
for line in open("/proc/self/limits").read().splitlines()[1:]:
    name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
    limits[name] = [soft, hard]
print(json.dumps(limits))
"""


def test_only_the_launch_module_calls_the_c_core() -> None:
    """``_sandbox.run`` and ``_sandbox.start`` (a warm sandbox) are called in one module
    only, so a default added there reaches every API."""
    callers = []
    for source in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("run", "start")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "_sandbox"
            ):
                callers.append(source.relative_to(PACKAGE).as_posix())
    assert set(callers) == {"_launch/launcher.py"}


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    ("stage", "blamed"),
    [
        (_sandbox.STAGE_CGROUP_CLONE, "cgroup v2 puts no process in such a group"),
        (_sandbox.STAGE_CGROUP_OPEN, "cgroup v2 puts no process in such a group"),
        (_sandbox.STAGE_CGROUP_JOIN, "cgroup v2 puts no process in such a group"),
        (_sandbox.STAGE_EXEC, "see the error above"),
        (None, "see the error above"),
    ],
)
def test_a_spawn_failure_is_explained_by_its_stage_not_its_words(
    stage: int | None, blamed: str
) -> None:
    """The C core's ``OSError`` says where it failed in ``stage``: EBUSY there means the
    group's fault only at a cgroup stage, whatever its strerror says."""
    exc = OSError(errno.EBUSY, "words that name no stage")
    if stage is not None:
        exc.stage = stage  # type: ignore[attr-defined]
    message = str(spawn_failure(exc))
    assert message.startswith("could not start bubblewrap: words that name no stage (EBUSY); ")
    assert message.endswith(blamed)


@pytest.mark.no_bwrap
@pytest.mark.parametrize(
    "report",
    [
        b'{ "child-pid": 12 }\n{ "exit-code": 0 }\n',
        b'{ "child-pid": 12, "cgroup-namespace": 4026531835 }\n{ "exit-code": -1 }\n',
        b'{ "child-pid": 12 }\n',
        b"",
        b'{"exit-code":3}',
        b'{ "child-pid": 12 }{ "exit-code": 1 }',
        b'{ "exit-code": x }\n',
        b'{ "exit-code": }\n',
        b'[{ "exit-code": 1 }]\n',
    ],
)
def test_bwrap_exited_reads_the_exit_as_the_json_documents_say(report: bytes) -> None:
    """bwrap's own line is read without json; any other form as the JSON documents."""
    assert bwrap_exited(report) == ("exit-code" in bwrap_report(report))


def test_fd_layout_numbers_payloads_then_captures() -> None:
    layout = FdLayout.of(payloads=2, captures=1)
    # 3 is the syscall filter, 4 the lifeline; the payloads follow, then the code file
    # if any, bwrap's status, the init's report and the API's own capture pipes.
    assert layout == FdLayout(payloads=(5, 6), code=None, status=7, report=8, captures=(9,))
    assert FdLayout.of() == FdLayout(payloads=(), code=None, status=5, report=6, captures=())
    with_code = FdLayout.of(payloads=1, code=True)
    assert with_code == FdLayout(payloads=(5,), code=6, status=7, report=8, captures=())
    # The readable paths' fds come after the code file, before the captures.
    with_binds = FdLayout.of(payloads=1, captures=1, code=True, binds=2)
    assert with_binds == FdLayout(
        payloads=(5,), code=6, status=9, report=10, captures=(11,), binds=(7, 8)
    )


def test_no_core_dumps_in_either_api() -> None:
    """RLIMIT_CORE = 0 is added by the launch for every sandbox, not by each API."""
    evaluated = json.loads(eval_in_sandbox(LIMITS_INSIDE).stdout)
    ran = run_python(LIMITS_INSIDE)
    assert ran.status is Status.OK, ran
    assert evaluated["Max core file size"] == ["0", "0"]
    assert json.loads(ran.stdout)["Max core file size"] == ["0", "0"]


def test_eval_sets_open_files_and_file_size_instead_of_the_callers() -> None:
    limits = json.loads(eval_in_sandbox(LIMITS_INSIDE, mem_max_mb=100).stdout)
    assert limits["Max open files"] == ["256", "256"]
    assert limits["Max file size"] == [str(100 * 2**20)] * 2


NON_ROOT_CALLER = """
import json, resource, sys
sys.path.insert(0, SHARED)
import pysandbox
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
out = pysandbox.eval_in_sandbox("import resource; print(resource.getrlimit(7))")
res = pysandbox.run_python("import resource; print(resource.getrlimit(7))",
                           limits=pysandbox.Limits(open_files=256))
print(json.dumps([out.returncode, out.stdout, res.status.name, res.stdout.decode().strip()]))
"""


def test_a_non_root_callers_low_hard_limit_is_clamped_in_both_apis(
    unprivileged_pysandbox: tuple[str, Path],
) -> None:
    """A non-root caller cannot raise a hard limit: both APIs clamp to the caller's own
    (they used to disagree: run clamped, eval_in_sandbox failed)."""
    python, shared = unprivileged_pysandbox
    out = run_unprivileged(python, f"SHARED = {str(shared)!r}\n" + NON_ROOT_CALLER)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, "(64, 64)", "OK", "(64, 64)"]


BUDGETS_BELOW_OURS = """
import json, resource, sys
sys.path.insert(0, SHARED)
import pysandbox
resource.setrlimit(resource.RLIMIT_SIGPENDING, (100, 100))
resource.setrlimit(resource.RLIMIT_MEMLOCK, (4096, 4096))
code = "import resource; print(resource.getrlimit(11), resource.getrlimit(8))"
out = pysandbox.eval_in_sandbox(code)
res = pysandbox.run_python(code)
print(json.dumps([out.stdout, res.status.name, res.stdout.decode().strip()]))
"""


def test_a_non_root_callers_budgets_below_the_bounds_stay_its_own(
    unprivileged_pysandbox: tuple[str, Path],
) -> None:
    """The kernel-budget rlimits every sandbox gets (``ALWAYS_RLIMITS``) only ever lower
    a non-root caller's: a caller whose own hard limits are below them keeps its own."""
    python, shared = unprivileged_pysandbox
    out = run_unprivileged(python, f"SHARED = {str(shared)!r}\n" + BUDGETS_BELOW_OURS)
    assert out.returncode == 0, out.stderr[-3000:]
    inside = "(100, 100) (4096, 4096)"
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [inside, "OK", inside]


def test_no_cgroup_is_left_once_the_reaper_drains() -> None:
    """The groups of finished sandboxes are removed after the call returns, by the
    reaper thread: once it drains, none of this process's groups is left, whichever API
    made them; the counters were read before the call returned."""
    from pysandbox._cgroups.ahead import drain
    from pysandbox._cgroups.mounts import discover
    from pysandbox._cgroups.node import PARENT

    def ours() -> set[Path]:
        prefix = f"{PARENT}-{os.getpid()}-"
        found: set[Path] = set()
        for home in {hierarchy.home for hierarchy in discover().values()}:
            parent = Path(home, PARENT)
            if parent.is_dir():
                found |= {entry for entry in parent.iterdir() if entry.name.startswith(prefix)}
        return found

    assert drain(30)
    before = ours()
    for _ in range(5):
        assert eval_in_sandbox("print(1)").stdout == "1"
        result = run_python("print(2)")
        assert result.status is Status.OK and result.stdout == b"2\n"
    assert drain(30)
    assert ours() - before == set()
