/* SPDX-License-Identifier: MIT */
/*
 * spawn.h: the spawn's own interface between spawn.c (the parent's side),
 * child.c (the child, between clone and execve) and clone.c (the clone and
 * clone3 calls).  Plain C, like sandbox.h.
 */
#ifndef PYSANDBOX_SPAWN_H
#define PYSANDBOX_SPAWN_H

#include "sandbox.h"

#define SBX_CHILD_STACK_SIZE (128 * 1024)

/*
 * Shared between parent and child (CLONE_VM).  The parent fills in every
 * field but stage/err before the clone; the child writes stage/err only when
 * it fails, and the parent reads them after the clone returns (CLONE_VFORK
 * guarantees the child has exec'd or exited by then).
 */
struct sbx_child_args {
    const struct sbx_spec *spec;
    pid_t parent;
    int procs_fd;                                      /* the v2 group's cgroup.procs; -1 */
    int stdio[3];                                      /* sources for fds 0, 1, 2 */
    int pass[SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1]; /* sources for fds 3...; -1 ends */
    volatile int stage;
    volatile int err;
};

/* child.c: the child's whole life; never returns (execve or _exit). */
int sbx_child_main(void *args);

/* clone.c: sbx_child_main(args) in a new child; the pid, or -1 with errno set. */
pid_t sbx_clone_child(struct sbx_child_args *args, char *stack_top, int *pidfd);
pid_t sbx_clone3_child(struct sbx_child_args *args, char *stack, int cgroup_dir_fd, int *pidfd);

#endif
