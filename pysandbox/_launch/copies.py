# SPDX-License-Identifier: MIT
"""Copies of a template: a sandbox that ran a ``Template``'s set-up once (the
*template sandbox*), from which each warm sandbox of its kind starts as a fork.

The template sandbox is a warm plan's sandbox with three differences
(``bwrap.base_options(template=True)``): its interpreter keeps, in a user namespace of
its own, the capabilities to make namespaces and mounts (and, for a root caller,
identities: ``copies_user_namespace`` maps its ids to unprivileged host ids); its
syscall filter lets it unshare and mount (``_sandbox.seccomp_program(template=True)``);
and it is shown the C core at ``bwrap.EXTENSION_PATH``.  Its waiter runs the set-up and
then serves copies (``_sandbox.serve_copies`` on its end of a control socket) instead
of waiting for a call; it never runs a call's code.

A copy is started like any warm sandbox (``launcher.start``), from the kind's warm
plan, but the C core runs the copy client (``pysandbox/_copy``) in bwrap's place: in the
copy's cgroup, with its rlimits and its fds.  The client sends them to the template,
which forks; the fork makes its own mount, pid, network, IPC, UTS and cgroup
namespaces, its own ``/proc`` and working directory, drops to its own identity and
every capability, adds the sandbox's whole syscall filter and Landlock, and waits for
its call as a warm sandbox's waiter does (``src/copy.c`` says how).  The C core then
hands it its call and runs it as any warm sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .. import _sandbox
from .._host import programs, tokens
from .._model.errors import SandboxError
from .._model.record import record
from . import bwrap
from .lifeline import init_options as lifeline_options
from .plan import CLIENT_FDS, LIFELINE_FD, Plan

__all__ = [
    "AsCopy",
    "AsTemplate",
    "copies_user_namespace",
    "copy_command_line",
    "copy_fds",
    "template_command_line",
    "template_fds",
]

#: Ids a root caller's template namespace maps, to as many unprivileged host ids from a
#: random start ``first`` in the range of the sandboxes' own (``bwrap.SANDBOX_ID_BASE``):
#: its 0 is ``first``, the template's (bwrap's, which must be 0 there), and each other
#: is the same id as on the host, ``first + 1`` on: its copies', in turn (``Copier``),
#: which so see the uid they have on the host, as a fresh sandbox's code does.
ID_SPAN = 65536


@record
class AsTemplate:
    """Start a warm plan's sandbox as the template of its copies."""

    #: The template's end of the control socket (``layout.client[0]`` inside).
    control: int
    #: A root caller's user namespace for it (``copies_user_namespace``); -1: none.
    userns: int = -1


@record
class AsCopy:
    """Start a warm plan's sandbox as a copy of the template sandbox of its kind."""

    #: The host's end of the template's control socket.
    control: int
    #: A root caller's copy's uid and gid in the template's user namespace.
    identity: tuple[int, int] | None = None


def copies_user_namespace() -> tuple[int, int]:
    """For a root caller's template: a user namespace (an fd) whose ``ID_SPAN`` ids map
    to as many consecutive unprivileged host ids, from a random start in the sandboxes'
    own range, and that start.  Raises ``SandboxError`` when the kernel refuses one."""
    first = bwrap.SANDBOX_ID_BASE + tokens.randbelow(bwrap.SANDBOX_ID_SPAN - ID_SPAN)
    lines = f"0 {first} 1\n{first + 1} {first + 1} {ID_SPAN - 1}\n"
    try:
        return _sandbox.user_namespace(lines, lines), first
    except OSError as exc:
        raise SandboxError(
            f"cannot make a user namespace for a template's copies: {exc.strerror}; to fix: "
            "allow user namespaces (sysctl user.max_user_namespaces), or use Template("
            "copies=False)"
        ) from exc


def _open_null() -> int:
    """``/dev/null``, for a client slot that carries nothing."""
    return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


def _client_slots(control: int, joins: list[int]) -> list[int]:
    """New fds for the client slots: a copy of ``control``, then ``joins`` (taken
    over), then ``/dev/null`` up to ``CLIENT_FDS`` (opened once, then duplicated: a
    copy's hot path); on a failure, none is left."""
    fds = list(joins)
    try:
        if len(fds) >= CLIENT_FDS:
            raise SandboxError(f"a copy joins at most {CLIENT_FDS - 1} cgroups, not {len(fds)}")
        fds.insert(0, os.dup(control))
        if len(fds) < CLIENT_FDS:
            fds.append(_open_null())
        while len(fds) < CLIENT_FDS:
            fds.append(os.dup(fds[-1]))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def _reachable(path: str) -> bool:
    """Whether every directory above ``path`` lets any user through (``o+x``)."""
    parent = os.path.dirname(path)
    while parent not in ("/", ""):
        try:
            if not os.stat(parent).st_mode & 0o001:
                return False
        except OSError:
            return False
        parent = os.path.dirname(parent)
    return True


def blocked_sources(argv: list[str], readable: Sequence[str]) -> list[str]:
    """The sources of ``--ro-bind`` options in a root caller's template command line
    ``argv``, and the ``readable`` paths (bound from fds, which bwrap resolves by path),
    that its bwrap could not reach: it runs as an unprivileged host id
    (``copies_user_namespace``), and an interpreter below ``/root`` (pyenv) lies behind
    a directory only root may enter.  Each is made reachable before bwrap starts
    (``template_command_line``)."""
    blocked = [path for path in readable if not _reachable(path)]
    for at, word in enumerate(argv[:-2]):
        if word == "--ro-bind" and not _reachable(argv[at + 1]):
            blocked.append(argv[at + 1])
    return blocked


def template_command_line(argv: list[str], slots: tuple[int, ...], blocked: list[str]) -> list[str]:
    """A root caller's template's command line around bwrap's ``argv``: the copy
    client's ``--template`` mode (``src/copy_template.c``), told the user namespace
    (``slots[1]``) and each ``blocked`` source, which it makes reachable at the same
    path before it executes bwrap in that namespace."""
    stages = []
    for path in blocked:
        stages += ["--stage", path]
    return [
        programs.find_copy_client(),
        "--template",
        "--userns-fd",
        str(slots[1]),
        *stages,
        "--",
        *argv,
    ]


def template_fds(role: AsTemplate) -> list[int]:
    """New fds for a template sandbox's client slots: its end of the control socket,
    then, for a root caller's, its user namespace (``template_command_line``)."""
    return _client_slots(role.control, [os.dup(role.userns)] if role.userns >= 0 else [])


def copy_fds(role: AsCopy, cgroup_dir_fd: int, v1_join_fds: list[int]) -> list[int]:
    """New fds for a copy's client slots: the host's end of the control socket, then
    what joins the copy's cgroup: its v2 group's ``cgroup.procs``, or a copy of each v1
    ``tasks`` fd (a copy's first process is one thread)."""
    joins: list[int] = []
    try:
        if cgroup_dir_fd >= 0:
            flags = os.O_WRONLY | os.O_CLOEXEC
            joins.append(os.open("cgroup.procs", flags, dir_fd=cgroup_dir_fd))
        for fd in v1_join_fds:
            joins.append(os.dup(fd))
    except BaseException:
        for fd in joins:
            os.close(fd)
        raise
    return _client_slots(role.control, joins)


def _landlock_words(plan: Plan, abi: int) -> list[str]:
    """The copy's Landlock paths, as a fresh sandbox's init is given them."""
    if abi < 1:
        return []
    words = []
    for path in (*plan.writable, *bwrap.DEVICES, "/proc"):
        words += ["--landlock-write", path]
    return words


def _init_words(plan: Plan) -> list[str]:
    """The copy's init's command line: a fresh sandbox's, but the input files (the
    template's were placed in the template) and the program (it adopts the copy's)."""
    options = list(plan.init_options)
    if "--files-in-fd" in options:
        at = options.index("--files-in-fd")
        del options[at : at + 2]
    layout = plan.layout
    return [
        bwrap.INIT_PATH,
        *lifeline_options(LIFELINE_FD),
        "--report-fd",
        str(layout.report),
        *options,
        "--",
    ]


def copy_command_line(plan: Plan, role: AsCopy, landlock_abi: int) -> list[str]:
    """The copy client's command line for a copy of ``plan``'s kind (see the top of
    ``src/copy_client.c`` and ``src/copy.c``): the fds it forwards are the standard
    streams and every fd a fresh sandbox's init and program get, not the code file's
    (the copy makes its own, and its waiter writes the code in it: ``Handover.code``),
    the readable paths' (the template shows them) nor its own."""
    layout = plan.layout
    if plan.code_path is None or bwrap.WORKDIR not in plan.writable:
        raise ValueError("only a run_python plan can be a template's copy")
    forwarded = [0, 1, 2, bwrap.SECCOMP_FD, LIFELINE_FD, *layout.payloads, *layout.channels]
    forwarded += [*layout.waiter, layout.report, *layout.captures]
    keep = [0, 1, 2, *layout.channels, *layout.waiter, layout.code]
    words = ["--keep", ",".join(map(str, keep))]
    if role.identity is not None:
        uid, gid = role.identity
        words += ["--id", f"{uid}:{gid}"]
    words += ["--workdir", bwrap.WORKDIR, "--seccomp-fd", str(bwrap.SECCOMP_FD)]
    if bwrap.CACHE_DIR in plan.writable:
        words += ["--cache", bwrap.CACHE_DIR]
    words += ["--code", f"{layout.code}:{plan.code_path}"]
    words += _landlock_words(plan, landlock_abi)
    control, *joins = layout.client
    join_options = []
    for fd in joins:
        join_options += ["--cgroup-procs-fd", str(fd)]
    return [
        programs.find_copy_client(),
        "--control-fd",
        str(control),
        "--status-fd",
        str(layout.status),
        *join_options,
        "--forward",
        ",".join(map(str, forwarded)),
        "--",
        *words,
        "--",
        *_init_words(plan),
    ]
