# SPDX-License-Identifier: MIT
from collections.abc import Callable, Sequence
from typing import Protocol, TypedDict

# Where start(), run() or pump() failed: the ``stage`` attribute of the OSError they raise
# (src/sandbox.h, SBX_STAGES).  Its strerror still begins with the stage's words.
STAGE_NONE: int
STAGE_PIPE: int
STAGE_PASS_FDS: int
STAGE_STACK: int
STAGE_CLONE: int
STAGE_CGROUP_CLONE: int
STAGE_CGROUP_OPEN: int
STAGE_SIGNALS: int
STAGE_PDEATHSIG: int
STAGE_RLIMIT: int
STAGE_SCHED: int
STAGE_CGROUP_JOIN: int
STAGE_DUP2: int
STAGE_EXEC: int
STAGE_RELEASE: int
STAGE_PGROUP: int

class _Cancel(Protocol):
    def is_set(self) -> bool: ...

class RawResult(TypedDict):
    status_known: bool
    wait_status: int
    stdout: bytes | str | None
    stderr: bytes | str | None
    captures: list[bytes]
    captures_truncated: list[bool]
    cpu_exceeded: bool
    disk_exceeded: bool
    reported: bool
    tree_cpu_time: float
    peak_tasks: int
    cancelled: bool
    cgroup_joined_at_clone: bool
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
    killed_on_cap: bool
    wall_time: float
    user_time: float
    system_time: float
    max_rss: int

def run(
    argv: Sequence[str | bytes],
    env: Sequence[str | bytes],
    *,
    rlimits: Sequence[tuple[int, int, int]] = ...,
    pass_fds: Sequence[int] = ...,
    captures: Sequence[int] = ...,
    stdin: bytes = ...,
    stdin_callback: Callable[[bytes], bytes | None] | None = ...,
    on_stdout: Callable[[bytes], object] | None = ...,
    on_stderr: Callable[[bytes], object] | None = ...,
    stdout_cap: int = ...,
    stderr_cap: int = ...,
    kill_on_cap: bool = ...,
    timeout: float,
    cpu_limit: float = ...,
    cancel: _Cancel | None = ...,
    text: bool = ...,
    cgroup_procs: Sequence[int] = ...,
    cgroup_cpu_fd: int = ...,
    cgroup_dir_fd: int = ...,
    disk_inodes: int = ...,
    disk_dir: str | None = ...,
) -> RawResult: ...
def start(
    argv: Sequence[str | bytes],
    env: Sequence[str | bytes],
    *,
    rlimits: Sequence[tuple[int, int, int]] = ...,
    pass_fds: Sequence[int] = ...,
    captures: Sequence[int] = ...,
    cgroup_procs: Sequence[int] = ...,
    cgroup_dir_fd: int = ...,
    init_pidfd_at: int = ...,
) -> Sandbox: ...
def user_namespace(uid_map: str, gid_map: str, /) -> int: ...
def serve_copies(control_fd: int, /) -> bool: ...

class Sandbox:
    @property
    def pid(self) -> int: ...
    def pump(
        self,
        *,
        stdin: bytes = ...,
        stdin_callback: Callable[[bytes], bytes | None] | None = ...,
        on_stdout: Callable[[bytes], object] | None = ...,
        on_stderr: Callable[[bytes], object] | None = ...,
        stdout_cap: int = ...,
        stderr_cap: int = ...,
        kill_on_cap: bool = ...,
        timeout: float,
        cpu_limit: float = ...,
        cancel: _Cancel | None = ...,
        text: bool = ...,
        cgroup_cpu_fd: int = ...,
        since: float = ...,
        release_fd: int = ...,
        disk_inodes: int = ...,
        disk_dir: str | None = ...,
        end_at_report: int = ...,
        end_after_stream: int = ...,
    ) -> RawResult: ...
    def cpu_time(self, cgroup_cpu_fd: int = ...) -> float: ...
    def kill(self) -> None: ...
    def exited(self) -> bool: ...

def seccomp_program(*, template: bool = False) -> bytes: ...
def landlock_abi() -> int: ...
def unix_gc_pass() -> bool: ...
