/* SPDX-License-Identifier: MIT */
/*
 * disk.c: how many inodes the sandbox's writable tmpfs (or tmpfs: the working
 * directory and the cache directory) hold, seen from the host through its
 * init's root.
 *
 * A file with no content costs the tmpfs no page, so its size limit does
 * not see a million empty files or hard links; yet each costs the kernel an
 * inode or a dentry (about 1 KiB, in no process's memory), and the teardown
 * of the sandbox frees them one by one, which for millions takes seconds.
 * The pump samples the count every tick and kills the sandbox once it
 * passes the cap that Limits.disk gives (1 KiB an inode), so both stay
 * bounded by the sandbox's own limit.  tmpfs counts a hard link as an
 * inode (it reserves one for each), so statfs's used inodes count both.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/*
 * tmpfs_inodes: the inodes (hard links included) in use on the tmpfs at the
 * `length` bytes of `dir` (absolute) in the sandbox of the pinned init
 * `init_pid`, read with statfs through /proc/<init>/root; -1 while that is
 * not a tmpfs.
 */
static long long tmpfs_inodes(pid_t init_pid, const char *dir, size_t length)
{
    char path[4096];
    struct statfs fs;
    if (length > 2048 || snprintf(path, sizeof path, "/proc/%d/root%.*s", (int)init_pid,
                                  (int)length, dir) >= (int)sizeof path)
        return -1;
    if (statfs(path, &fs) != 0 || fs.f_type != TMPFS_MAGIC || fs.f_files < fs.f_ffree)
        return -1;
    return (long long)(fs.f_files - fs.f_ffree);
}

/*
 * sbx_sandbox_inodes: the inodes (hard links included) in use on the tmpfs
 * mounted at `dir` in the sandbox, or the sum over several: `dir` is one or
 * more absolute paths separated by ':' (the working directory and the cache
 * directory, each a tmpfs of its own), read with statfs through
 * /proc/<init>/root.  The init is pinned first (sbx_pin_init), and the
 * figure is kept only if the init is still alive after the read, so its
 * pid named the init throughout and no recycled pid's files were counted.
 * Returns -1 while it cannot be read: bwrap has not built the sandbox yet
 * (the init's root is still the host's, or dir is not a tmpfs yet), or the
 * sandbox has ended.  The pump's thread; no GIL needed.
 */
long long sbx_sandbox_inodes(struct sbx_child *child, const char *dir)
{
    struct pollfd init;
    long long total = 0, one;
    const char *next;
    if (!sbx_pin_init(child) || sbx_same_as_ours(child->init_pid, "root", "/") != 0)
        return -1;
    for (;; dir = next + 1) {
        next = strchr(dir, ':');
        one = tmpfs_inodes(child->init_pid, dir, next ? (size_t)(next - dir) : strlen(dir));
        if (one < 0)
            return -1;
        total += one;
        if (next == NULL)
            break;
    }
    init.fd = child->init_pidfd;
    init.events = POLLIN;
    init.revents = 0;
    if (poll(&init, 1, 0) != 0)
        return -1;
    return total;
}
