# SPDX-License-Identifier: MIT
"""Layer 3, the control groups: one group per sandbox, on cgroup v1 and v2.

``RLIMIT_NPROC`` is per uid (shared by every sandbox of that uid, and not enforced for
root) and ``RLIMIT_AS`` is per process (ten processes get ten times the memory, and no
rlimit counts tmpfs pages).  A control group counts the whole sandbox, and only it:

* the ``pids`` controller caps the tasks (processes and threads) alive in the group at
  once; a ``fork``/``clone`` past ``pids.max`` fails with ``EAGAIN``;
* the ``memory`` controller caps the memory charged to the group: anonymous memory of
  every process, page cache, and the tmpfs pages its processes write; past the limit
  the kernel reclaims, then OOM-kills a process of the group (never one outside it).
  Socket buffers count too: v2 in the same limit; v1 on a counter of their own, capped
  at the same size (so a v1 group may hold twice the limit: memory plus sockets).
  Past it a TCP send waits (``EAGAIN`` when non-blocking) and a datagram is dropped.

Where the groups live
    cgroup v2 (one hierarchy, most hosts): under the caller's own group C, as
    ``/proc/self/cgroup`` names it (a systemd service's group, a delegated user scope, a
    container's root): ``C/pysandbox/<group>``.  The controllers are enabled in the
    ``cgroup.subtree_control`` of C and of ``pysandbox``; as v2 allows that only for a
    group without processes, the processes of C are first moved into ``C/pysandbox-callers``
    (``_cgroup_base``).  A non-root caller can do all this in a group delegated to it.
    cgroup v1 (this project's CI host): one directory per hierarchy,
    ``<pids mount>/pysandbox/<group>`` and ``<memory mount>/pysandbox/<group>``, and the
    ``cpuacct`` hierarchy too when it is mounted (for the group's CPU time).  A host
    with both (hybrid) uses, for each controller, v2 when C offers it, else v1.
    The hierarchies are found in ``/proc/self/mountinfo``, not by guessing paths.

Safety
    Every path is built here from the mount points and fixed names; nothing from outside
    input is ever a path.  Directories are opened with ``O_NOFOLLOW|O_DIRECTORY`` (and
    the mount point checked to be the very mount ``mountinfo`` names, by device number)
    and every control file, ``mkdir`` and ``rmdir`` is relative to such a directory
    descriptor, so no symlink is ever followed.

Failing closed
    A limit that was asked for and cannot be set raises ``SandboxError`` naming the file
    and the fix: the caller must then refuse to run, never run with less.  ``probe()``
    tells beforehand whether the host can do it at all, so a caller can choose another
    mechanism (and say which one enforced the cap).


Glossary: a *hierarchy* is one mounted cgroup tree (v2 has one, v1 one per controller);
its *base* is where the sandboxes' shared parent group ``pysandbox`` goes (the caller's
own group on v2); a *node* is one sandbox's group in one hierarchy, and a
``SandboxCgroup`` is the nodes of one sandbox.  ``mounts`` finds the hierarchies,
``files`` names their control files, ``base`` readies the base, ``node`` makes, limits,
kills and removes one node, ``usage`` reads what it counted, ``group`` is the lifecycle
of a sandbox's nodes, ``ahead`` makes the next call's group between calls,
``sweep`` and ``reaper`` remove what no call waits for, and ``probe`` tells what the
host allows.

Imports: ``_model``, ``_host`` and this package.
"""
