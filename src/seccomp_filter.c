/*
 * seccomp_filter.c: the syscall filter every sandbox runs under, built with
 * libseccomp for the machine's own architecture and exported as a classic
 * BPF program for bwrap's --seccomp.
 *
 * Namespaces and rlimits leave the kernel's whole attack surface open to the
 * sandboxed code; this refuses, with EPERM, the calls a sandboxed program has
 * no business making (debugging other processes, the keyring, BPF, perf,
 * userfaultfd, io_uring, every mount and namespace call, module loading,
 * kexec, reboot, swap, accounting, dangerous personality flags, prlimit on
 * another process, and the terminal-injection ioctls).  Everything else is allowed, so ordinary
 * programs (Python, compilers, coreutils, numpy) keep working.  A syscall of
 * another ABI (i386 through int 0x80, x32) is refused as well.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Refused outright with EPERM.  Names unknown to this architecture are skipped. */
static const char *const denied[] = {
    /* other processes' memory and fds */
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    /* kernel keyring */
    "keyctl", "add_key", "request_key",
    /* large kernel attack surface */
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "fanotify_init", "lookup_dcookie", "name_to_handle_at",
    "open_by_handle_at",
    /* mounts and namespaces */
    "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "chroot", "unshare", "setns",
    /* the machine itself */
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "nfsservctl", "uselib", "_sysctl", NULL};

/* clone flags that would make a namespace. */
static const unsigned long namespace_flags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* personality() flags that weaken the process's own protections. */
static const unsigned long personality_flags[] = {ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC,
                                                  ADDR_COMPAT_LAYOUT, MMAP_PAGE_ZERO};

/* The terminal ioctls that type into, or take over, a terminal. */
static const unsigned long tty_ioctls[] = {TIOCSTI, TIOCLINUX};

/*
 * add_rules: every rule of the filter into ctx.  Returns 0 or a negative
 * errno from libseccomp.
 */
static int add_rules(scmp_filter_ctx ctx)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    size_t i;
    int rc;
    for (i = 0; denied[i] != NULL; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue;
        if ((rc = seccomp_rule_add(ctx, eperm, nr, 0)) < 0)
            return rc;
    }
    for (i = 0; i < sizeof namespace_flags / sizeof *namespace_flags; i++) {
        rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i]));
        if (rc < 0)
            return rc;
    }
    /* clone3 passes its flags in memory a filter cannot read: ENOSYS makes
     * libc fall back to clone, whose flags are checked above. */
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
        return rc;
    for (i = 0; i < sizeof personality_flags / sizeof *personality_flags; i++) {
        rc = seccomp_rule_add(
            ctx, eperm, SCMP_SYS(personality), 1,
            SCMP_A0(SCMP_CMP_MASKED_EQ, personality_flags[i], personality_flags[i]));
        if (rc < 0)
            return rc;
    }
    /* prlimit on another process: the program could lower the limits of the
     * init (same uid) and lose its report.  glibc's own setrlimit passes 0. */
    rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_NE, 0));
    if (rc < 0)
        return rc;
    for (i = 0; i < sizeof tty_ioctls / sizeof *tty_ioctls; i++) {
        rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, tty_ioctls[i]));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/*
 * sbx_seccomp_program: build the filter and return its BPF program in
 * *program (malloc'd, owned by the caller) and *length.  Returns 0, or a
 * negative errno.  Any thread; no GIL needed; not for the vfork child.
 */
int sbx_seccomp_program(char **program, size_t *length)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc, fd = -1;
    off_t size;
    *program = NULL;
    *length = 0;
    if (ctx == NULL)
        return -ENOMEM;
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
    if (rc == 0)
        rc = add_rules(ctx);
    if (rc == 0) {
        fd = memfd_create("pysandbox-seccomp", MFD_CLOEXEC);
        rc = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
    }
    if (rc == 0) {
        size = lseek(fd, 0, SEEK_END);
        *program = size > 0 ? malloc((size_t)size) : NULL;
        if (*program == NULL)
            rc = -ENOMEM;
        else if (pread(fd, *program, (size_t)size, 0) != size)
            rc = -EIO;
        else
            *length = (size_t)size;
    }
    if (rc != 0) {
        free(*program);
        *program = NULL;
    }
    if (fd >= 0)
        close(fd);
    seccomp_release(ctx);
    return rc;
}
