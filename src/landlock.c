/* SPDX-License-Identifier: MIT */
/*
 * landlock.c: make every host file the sandbox can see inert for the program.
 *
 * bwrap binds the host's files read-only, but a read-only mount refuses
 * writes only to regular files, directories and symlinks: open(O_WRONLY) of
 * a FIFO, or of a device, below a readable path still reaches the host's
 * reader.  Just before the init execs the program, sbx_landlock_restrict
 * puts the program (and all it will ever run) in a Landlock domain that
 * handles every write-side filesystem right the kernel knows and grants them
 * only beneath the sandbox's own writable places, named by the init's
 * --landlock-write options (run's working directory tmpfs, the device nodes
 * it binds, its own /proc).  Reading stays allowed everywhere.  Where the
 * kernel has the ABI 6 scopes, the domain also may not signal a process
 * outside it (the init) nor reach an abstract unix socket made outside it.
 *
 * The structures and constants are the kernel's UAPI, written out here
 * because the C library's headers may predate the ABI of the running kernel;
 * the kernel accepts the larger ruleset structure when the fields it does not
 * know are zero.  Nothing here allocates; the functions are for the init's
 * single thread (sbx_landlock_abi also for any thread of the extension).
 */
#define _GNU_SOURCE
#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#define RULESET_VERSION (1u << 0)
#define RULE_PATH_BENEATH 1

#define FS_WRITE_FILE (UINT64_C(1) << 1)
#define FS_REMOVE_DIR (UINT64_C(1) << 4)
#define FS_REMOVE_FILE (UINT64_C(1) << 5)
#define FS_MAKE_CHAR (UINT64_C(1) << 6)
#define FS_MAKE_DIR (UINT64_C(1) << 7)
#define FS_MAKE_REG (UINT64_C(1) << 8)
#define FS_MAKE_SOCK (UINT64_C(1) << 9)
#define FS_MAKE_FIFO (UINT64_C(1) << 10)
#define FS_MAKE_BLOCK (UINT64_C(1) << 11)
#define FS_MAKE_SYM (UINT64_C(1) << 12)
#define FS_REFER (UINT64_C(1) << 13)     /* ABI 2 */
#define FS_TRUNCATE (UINT64_C(1) << 14)  /* ABI 3 */
#define FS_IOCTL_DEV (UINT64_C(1) << 15) /* ABI 5 */
/* The rights Landlock accepts on a rule for a file that is not a directory. */
#define FS_FILE_RIGHTS (FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV)

#define SCOPE_ABSTRACT_UNIX_SOCKET (UINT64_C(1) << 0) /* ABI 6 */
#define SCOPE_SIGNAL (UINT64_C(1) << 1)               /* ABI 6 */

/* The most --landlock-write paths one init takes (pysandbox passes 7). */
#define MAX_WRITABLE 32

struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static const char *writable[MAX_WRITABLE];
static int writable_count;

/*
 * sbx_landlock_abi: the Landlock ABI version of the running kernel, or 0 when
 * it has none (a kernel before 5.13, or Landlock left out of lsm=: ENOSYS or
 * EOPNOTSUPP).  Any thread; no GIL needed; async-signal-safe (one syscall).
 */
int sbx_landlock_abi(void)
{
    long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

/*
 * sbx_landlock_allow: note path (not copied: argv outlives the restriction)
 * as one beneath which the program may write, and so that Landlock is
 * expected.  Returns 0, or -1 with errno E2BIG past MAX_WRITABLE paths.
 */
int sbx_landlock_allow(const char *path)
{
    if (writable_count == MAX_WRITABLE) {
        errno = E2BIG;
        return -1;
    }
    writable[writable_count++] = path;
    return 0;
}

/* sbx_landlock_requested: whether any path was given to sbx_landlock_allow. */
int sbx_landlock_requested(void)
{
    return writable_count > 0;
}

/*
 * handled_rights: every write-side filesystem right the kernel's ABI has:
 * writing, truncating, creating, removing, linking or renaming any file, and
 * (ABI 5) ioctls on devices.
 */
static uint64_t handled_rights(int abi)
{
    uint64_t rights = FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR |
                      FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM;
    if (abi >= 2)
        rights |= FS_REFER;
    if (abi >= 3)
        rights |= FS_TRUNCATE;
    if (abi >= 5)
        rights |= FS_IOCTL_DEV;
    return rights;
}

/*
 * allow_beneath: a rule of ruleset_fd that grants the handled rights beneath
 * path (those of a file when it is not a directory).  Returns 0 or -1 with
 * errno.
 */
static int allow_beneath(int ruleset_fd, const char *path, uint64_t handled)
{
    struct path_beneath_attr rule;
    struct stat st;
    int rc = -1, saved;
    rule.parent_fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (rule.parent_fd < 0)
        return -1;
    if (fstat(rule.parent_fd, &st) == 0) {
        rule.allowed_access = S_ISDIR(st.st_mode) ? handled : handled & FS_FILE_RIGHTS;
        rc = (int)syscall(__NR_landlock_add_rule, ruleset_fd, RULE_PATH_BENEATH, &rule, 0);
    }
    saved = errno;
    close(rule.parent_fd);
    errno = saved;
    return rc;
}

/*
 * sbx_landlock_restrict: when any path was allowed, restrict the calling
 * process (it must have no_new_privs set) and everything it will exec or fork
 * to writing only beneath those paths, with the scopes when the ABI has them.
 * Returns 0 (also when no path was given: Landlock is not expected), or -1
 * with errno when it was expected and could not be applied (EOPNOTSUPP: the
 * kernel has no Landlock); the caller must then not run the program.  For the
 * init's forked child, before its exec.
 */
int sbx_landlock_restrict(void)
{
    struct ruleset_attr attr = {0, 0, 0};
    int abi, ruleset_fd, i, rc = 0, saved;
    if (writable_count == 0)
        return 0;
    abi = sbx_landlock_abi();
    if (abi < 1) {
        errno = EOPNOTSUPP;
        return -1;
    }
    attr.handled_access_fs = handled_rights(abi);
    if (abi >= 6)
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
    ruleset_fd = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset_fd < 0)
        return -1;
    for (i = 0; rc == 0 && i < writable_count; i++)
        rc = allow_beneath(ruleset_fd, writable[i], attr.handled_access_fs);
    if (rc == 0)
        rc = (int)syscall(__NR_landlock_restrict_self, ruleset_fd, 0);
    saved = errno;
    close(ruleset_fd);
    errno = saved;
    return rc;
}
