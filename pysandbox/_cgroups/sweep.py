# SPDX-License-Identifier: MIT
"""Clean-up no call waits for: the groups this process has finished with, removed by the
reaper thread, and the groups of callers that died without removing theirs."""

from __future__ import annotations

import contextlib
import os
import re

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
    "drain",
    "reaper",
    "sweep_dead_callers",
]


#: A group's name: the creator's pid, its pid namespace, a counter and a random part.
_GROUP_NAME = re.compile(r"pysandbox-([1-9][0-9]{0,8})-([0-9]+)-[0-9]+-[0-9a-f]+")


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
            match = _GROUP_NAME.fullmatch(name)
            if match is None or int(match[2]) != namespace or owners.alive(int(match[1])):
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


def drain(timeout: float | None = None) -> bool:
    """Wait until the groups this process has finished with are removed (or, if they
    could not be yet, left for the retry before the next group and at exit), and the
    sweep of dead callers' groups asked for so far has run; False when ``timeout``
    seconds passed first.  Only tests and tools need it: the groups are removed soon
    anyway, and at exit."""
    return reaper.drain(timeout)


#: Removes finished groups and sweeps dead callers' after the calls have returned.
reaper: Reaper[list[Node]] = Reaper(
    name="pysandbox-cgroup-reaper",
    remove=remove_all,
    forget=close_all,
    sweep=sweep_dead_callers,
    at_exit=sweep_leftovers,
    exit_seconds=KILL_SECONDS + REMOVE_SECONDS,
)
