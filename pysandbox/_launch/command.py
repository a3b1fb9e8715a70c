# SPDX-License-Identifier: MIT
"""bwrap's whole command line for a ``Plan``, and the fds passed to it: what every
sandbox gets around its API's part (``launcher`` runs it)."""

from __future__ import annotations

import os

from .._host import mountinfo, programs
from .._model.errors import SandboxError, process_wide_fix
from . import bwrap
from .lifeline import init_options as lifeline_options
from .plan import LIFELINE_FD, Plan
from .readable import landlock_abi, open_readable

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .codefile import CodeFile
    from .copies import AsCopy, AsTemplate
    from .waiter import WaiterEnds

__all__ = ["command_line", "open_pass_fds"]


def _write_memfd(data: bytes) -> int:
    """A memfd holding ``data``, positioned at its start.

    Payloads never touch the host's filesystem, so the sandbox cannot be pointed at a
    host path the caller would later trust.
    """
    try:
        fd = os.memfd_create("pysandbox-data", os.MFD_CLOEXEC)
    except OSError as exc:
        if process_wide_fix(exc) is not None:
            raise  # out of descriptors: the launch names it as at any other step
        raise SandboxError(f"cannot create a memfd for the sandbox: {exc.strerror}") from exc
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as exc:
        os.close(fd)
        raise SandboxError(f"cannot write to the sandbox memfd: {exc.strerror}") from exc
    return fd


def _unused_slots(count: int) -> list[int]:
    """``count`` fds of ``/dev/null`` (opened once), for slots a copy's client ignores."""
    if count == 0:
        return []
    fds = [os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)]
    try:
        while len(fds) < count:
            fds.append(os.dup(fds[0]))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def open_pass_fds(
    plan: Plan,
    lifeline_read: int,
    code_file: CodeFile | None,
    waiter: WaiterEnds | None = None,
    client: list[int] | None = None,
    template: bool = False,
) -> list[int]:
    """The fds for the C core's ``pass_fds`` (the launch closes them once bwrap has its own): the
    syscall filter in a memfd (a template's, with ``template``), the read end of the
    lifeline, each payload in a memfd, a copy of each channel, the waiter's fds, the code
    file's ``O_PATH`` fd, each readable path's, opened and checked once
    (``open_readable``), then the copy client's (``client``, taken over: closed on a
    failure).  A copy (``client`` of no ``template``) gets ``/dev/null`` in the code
    file's and the readable paths' slots: it makes its own code file, its template shows
    the paths, and neither fd is forwarded (``copies.copy_command_line``)."""
    fds: list[int] = []
    try:
        fds.append(_write_memfd(bwrap.seccomp_program(template)))
        fds.append(lifeline_read)
        for data in plan.payloads:
            fds.append(_write_memfd(data))
        for channel in plan.channels:
            fds.append(os.dup(channel))
        if waiter is not None:
            fds += waiter.sandbox_fds()
        if client is not None and not template:
            fds += _unused_slots(int(plan.layout.code is not None) + len(plan.readable))
        else:
            if code_file is not None:
                fds.append(code_file.path_fd())
            if plan.readable:
                kernel_mounts = mountinfo.kernel_mount_points()
                for path in plan.readable:
                    fds.append(open_readable(path, kernel_mounts))
    except BaseException:
        for fd in [*fds, *(client or [])]:
            if fd != lifeline_read:
                os.close(fd)
        raise
    return fds + (client or [])


def _code_options(plan: Plan) -> list[str]:
    """bwrap's options that show the code file at ``plan.code_path``, read-only."""
    if plan.code_path is None:
        return []
    return ["--ro-bind-fd", str(plan.layout.code), plan.code_path]


def _landlock_options(plan: Plan) -> list[str]:
    """The init's options that confine the program's writes to the sandbox's own places
    (the API's, the device nodes, ``/proc``) with Landlock, when the kernel has it: then
    no host file the sandbox shows, a FIFO below a readable path included, can be opened
    for writing.  Without Landlock, ``check_readable`` refuses readable directories."""
    if landlock_abi() < 1:
        return []
    options = []
    for path in (*plan.writable, *bwrap.DEVICES, "/proc"):
        options += ["--landlock-write", path]
    return options


def command_line(plan: Plan, role: AsTemplate | AsCopy | None = None) -> list[str]:
    """bwrap's whole command line for ``plan``: the common part around the API's; as a
    template (``copies.AsTemplate``: no identity to drop to, no Landlock, which would
    forbid its mounts), or the copy client's for a copy (``copies.AsCopy``)."""
    if role is not None:
        from .copies import AsCopy as Copy  # only where templates are copied
        from .copies import blocked_sources, copy_command_line, template_command_line

        if isinstance(role, Copy):
            return copy_command_line(plan, role, landlock_abi())
        if role.userns >= 0:
            argv = _bwrap_command_line(plan, True)
            blocked = blocked_sources(argv, plan.readable)
            return template_command_line(argv, plan.layout.client, blocked)
    return _bwrap_command_line(plan, role is not None)


def _bwrap_command_line(plan: Plan, template: bool) -> list[str]:
    """bwrap's whole command line for ``plan``, a template's with ``template`` (no code
    file: a template never runs code, each copy binds its own)."""
    layout = plan.layout
    return [
        programs.find_bwrap(),
        *bwrap.base_options(plan.python, os.geteuid(), plan.moved, template),
        "--json-status-fd",
        str(layout.status),
        *plan.options,
        *([] if template else _code_options(plan)),
        "--remount-ro",
        "/",
        *bwrap.init_prefix(None if template else bwrap.sandbox_identity()),
        *lifeline_options(LIFELINE_FD),
        "--report-fd",
        str(layout.report),
        *plan.init_options,
        *([] if template else _landlock_options(plan)),
        "--",
        *plan.program,
    ]
