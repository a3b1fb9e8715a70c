/* SPDX-License-Identifier: MIT */
/*
 * userns.c: a user namespace made for a root caller's template (copy.c).
 *
 * A template builds its copies' namespaces and mounts itself, so it needs
 * CAP_SYS_ADMIN, which it may hold only in a user namespace whose ids map
 * to unprivileged host ids: root's bwrap would otherwise run it with
 * capabilities over the host.  This makes such a namespace with the maps
 * given (uid 0 of it is the template, the others its copies' identities)
 * and returns an fd of it; the C core's spawn enters it (spawn option
 * userns_fd) before it executes bwrap, as its uid 0.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* write_file: write text to path (opened for writing only).  0 or -1. */
static int write_file(const char *path, const char *text)
{
    size_t length = strlen(text);
    int fd = open(path, O_WRONLY | O_CLOEXEC), rc = -1;
    if (fd < 0)
        return -1;
    if (write(fd, text, length) == (ssize_t)length)
        rc = 0;
    close(fd);
    return rc;
}

/*
 * hold_namespace: the helper child: no supplementary group (so none of the
 * caller's leaks into the namespace), a new user namespace, one byte on
 * `said`, then wait for the parent to close `told`.  Never returns.
 * Async-signal-safe (a fork of a threaded process).
 */
static _Noreturn void hold_namespace(int said, int told)
{
    char byte = 'u';
    if (syscall(SYS_setgroups, 0, NULL) != 0 || unshare(CLONE_NEWUSER) != 0 ||
        write(said, &byte, 1) != 1)
        _exit(1);
    while (read(told, &byte, 1) < 0 && errno == EINTR)
        continue;
    _exit(0);
}

/*
 * sbx_user_namespace: a new user namespace with uid_map and gid_map (the
 * lines of /proc/PID/uid_map; setgroups denied), owned by the caller (who
 * must be able to write such maps: root), as an fd (O_CLOEXEC) in *fd.
 * Returns 0, or -1 with errno.  Any thread; no GIL needed.
 */
int sbx_user_namespace(const char *uid_map, const char *gid_map, int *fd)
{
    char path[64];
    int said[2], told[2], status, err = 0;
    pid_t helper;
    char byte;
    *fd = -1;
    if (pipe2(said, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(told, O_CLOEXEC) != 0) {
        err = errno;
        close(said[0]);
        close(said[1]);
        errno = err;
        return -1;
    }
    helper = fork();
    if (helper == 0) {
        close(said[0]);
        close(told[1]);
        hold_namespace(said[1], told[0]);
    }
    close(said[1]);
    close(told[0]);
    if (helper < 0 || read(said[0], &byte, 1) != 1)
        err = helper < 0 ? errno : ECHILD;
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)helper);
    if (err == 0 && write_file(path, uid_map) != 0)
        err = errno;
    snprintf(path, sizeof path, "/proc/%d/setgroups", (int)helper);
    if (err == 0 && write_file(path, "deny") != 0)
        err = errno;
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)helper);
    if (err == 0 && write_file(path, gid_map) != 0)
        err = errno;
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)helper);
    if (err == 0 && (*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        err = errno;
    close(said[0]);
    close(told[1]);
    if (helper > 0) {
        while (waitpid(helper, &status, 0) < 0 && errno == EINTR)
            continue;
    }
    errno = err;
    return err == 0 ? 0 : -1;
}
