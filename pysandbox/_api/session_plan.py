# SPDX-License-Identifier: MIT
"""The ``Plan`` of a session's sandbox: a ``run_python``-like sandbox whose program is
the keeper (``session_keeper.py``, shown read-only at ``KEEPER_PATH``), with the three
pipes to the host open in it, the session's lifetime as its wall time and its CPU
budget as its CPU limit (and ``RLIMIT_CPU``, which otherwise would be one call's)."""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Callable, Sequence

from .._cgroups.group import SandboxCgroup
from .._host import programs
from .._launch import bwrap
from .._launch.plan import FdLayout, Plan
from .._model.cancel import CancelEvent
from .._model.limits import Limits
from .run import python_fontlist
from .sandbox_programs import keeper_program

__all__ = ["CHANNELS", "KEEPER_PATH", "session_plan"]

#: Where the keeper's code is shown, read-only, inside the sandbox (not below
#: ``/.pysandbox``, which only the init may read).
KEEPER_PATH = "/.pysandbox-session/keeper.py"
#: Pipes a session passes into its sandbox: requests in, replies out, calls' code in.
CHANNELS = 3
#: Bytes the keeper itself may write to its stdout and stderr (a traceback of its own).
_KEEPER_OUTPUT_CAP = 64 * 1024


def session_plan(
    limits: Limits,
    *,
    lifetime: float,
    cpu_budget: float,
    files_stream: bytes | None,
    readable: Sequence[str],
    env_options: Sequence[str],
    patterns: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
    channels: tuple[int, int, int],
    cancel: CancelEvent,
    on_cgroup: Callable[[SandboxCgroup | None], object] | None = None,
) -> Plan:
    """The plan of a session with ``limits``, its checked ``readable`` paths, ``env``
    as bwrap options, its first files as a stream, its checked ``files_include`` and
    ``files_exclude`` ``patterns`` (the keeper's arguments after the pipes: ``+PATTERN``,
    ``-PATTERN``), and ``channels`` (the sandbox's ends of the request, reply and call
    pipes); ``cancel`` kills it; ``on_cgroup`` is shown its group once made."""
    payloads = [] if files_stream is None else [files_stream]
    fonts = python_fontlist(b"")
    if fonts is not None:
        payloads.append(fonts[1])
    layout = FdLayout.of(payloads=len(payloads), code=True, binds=len(readable), channels=CHANNELS)
    init_options = ["--files-dir", bwrap.WORKDIR]
    if files_stream is not None:
        init_options += ["--files-in-fd", str(layout.payloads[0])]
    budget = math.ceil(cpu_budget) + 1
    rlimits = [item for item in limits.rlimits() if item[0] != resource.RLIMIT_CPU]
    rlimits.append((resource.RLIMIT_CPU, budget, budget + 1))
    python = programs.find_python()
    return Plan(
        layout=layout,
        python=python,
        options=[
            *("--perms", "0755", "--dir", os.path.dirname(KEEPER_PATH)),
            *bwrap.run_options(
                disk=limits.disk,
                readable=list(zip(layout.binds, readable)),
                env=env_options,
                fontlist=None if fonts is None else (layout.payloads[-1], fonts[0]),
            ),
        ],
        readable=readable,
        writable=[bwrap.WORKDIR, bwrap.CACHE_DIR],
        init_options=init_options,
        program=[
            *(python, "-u", KEEPER_PATH, *(str(fd) for fd in layout.channels)),
            *("+" + pattern for pattern in patterns[0]),
            *("-" + pattern for pattern in patterns[1]),
        ],
        code=keeper_program(),
        code_path=KEEPER_PATH,
        code_mode=bwrap.MAIN_MODE,
        payloads=payloads,
        capture_caps=[],
        rlimits=rlimits,
        processes=limits.processes,
        memory_total=limits.memory + limits.disk + bwrap.CACHE_SIZE,
        disk_inodes=limits.disk_inodes(),
        stdout_cap=_KEEPER_OUTPUT_CAP,
        stderr_cap=_KEEPER_OUTPUT_CAP,
        kill_on_cap=False,
        timeout=lifetime,
        cpu_limit=cpu_budget,
        cancel=cancel,
        channels=channels,
        on_cgroup=on_cgroup,
    )
