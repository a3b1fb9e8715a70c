# SPDX-License-Identifier: MIT
"""Clean-up no call waits for: the groups this process has finished with, removed by the
reaper thread, and the groups of callers that died without removing theirs."""

from __future__ import annotations

import contextlib
import os

from .._host import owners
from .._model.errors import SandboxError
from .files import (
    open_dir,
)
from .mounts import discover
from .node import (
    KILL_SECONDS,
    REMOVE_SECONDS,
    Node,
    close_all,
    kill_nodes,
    open_parent,
    remove_all,
    sweep_leftovers,
)
from .reaper import Reaper

__all__ = [
    "creator_of",
    "reaper",
    "sweep_dead_callers",
]


#: The digits of a group name's random part.
_HEX = frozenset("0123456789abcdef")


def creator_of(name: str) -> tuple[int, int] | None:
    """The creator's pid and pid namespace in a group's name, or None for a name of another
    form.  The form is ``pysandbox-PID-PIDNS-COUNTER-RANDOM``: PID of at most 9 digits
    and no leading zero, PIDNS and COUNTER decimal, RANDOM lower-case hex (the regular
    expression ``pysandbox-([1-9][0-9]{0,8})-([0-9]+)-[0-9]+-[0-9a-f]+``, read without
    ``re``, which would cost every run's start-up: the reaper sweeps on every run)."""
    parts = name.split("-")
    if len(parts) != 5 or parts[0] != "pysandbox":
        return None
    pid, namespace, counter, random = parts[1:]
    if not all(part.isascii() and part.isdigit() for part in (pid, namespace, counter)):
        return None
    if len(pid) > 9 or pid[0] == "0" or not random or not _HEX.issuperset(random):
        return None
    return int(pid), int(namespace)


def sweep_dead_callers() -> None:
    """Kill and remove the groups of callers that died without removing them (``kill -9``
    skips every clean-up): a group whose creator's pid is in this process's pid namespace
    and no longer alive.  Its processes should be gone already (the lifeline ends a
    sandbox whose caller died): whatever is left is killed first, by ``_teardown``.

    Groups of live callers are never touched, nor those of other pid namespaces, whose
    pids mean nothing here.  A pid that was reused keeps a dead caller's group until that
    process exits too.  Never raises."""
    namespace = owners.pid_namespace()
    if not namespace:
        return
    dead: dict[str, list[Node]] = {}
    for hierarchy in set(discover().values()):
        try:
            parent_fd = open_parent(hierarchy, frozenset(), create=False)
        except (OSError, SandboxError):
            continue
        try:
            names = os.listdir(parent_fd)
        except OSError:
            names = []
        for name in names:
            creator = creator_of(name)
            if creator is None or creator[1] != namespace or owners.alive(creator[0]):
                continue
            node = Node(hierarchy, frozenset())
            node.name = name
            try:
                node.parent_fd = os.dup(parent_fd)
                node.fd = open_dir(name, hierarchy.dev, dir_fd=parent_fd)
            except OSError:
                node.close()
                continue
            dead.setdefault(name, []).append(node)
        os.close(parent_fd)
    for nodes in dead.values():
        with contextlib.suppress(Exception):
            kill_nodes(nodes)
        remove_all(nodes)


#: Removes finished groups and sweeps dead callers' after the calls have returned.
reaper: Reaper[list[Node]] = Reaper(
    name="pysandbox-cgroup-reaper",
    remove=remove_all,
    forget=close_all,
    sweep=sweep_dead_callers,
    at_exit=sweep_leftovers,
    exit_seconds=KILL_SECONDS + REMOVE_SECONDS,
)
