/* SPDX-License-Identifier: MIT */
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
 * another process, and the terminal-injection ioctls).  The calls that would
 * spend a kernel budget counted for the whole host or per user fail as on a
 * kernel without them, and file locks succeed without being taken (see
 * unbuilt and faked_lock_commands).  socket and socketpair are allowed only
 * for AF_UNIX, AF_INET and AF_INET6 and fail with EAFNOSUPPORT for every
 * other family (see socket_families); of AF_UNIX, only connected stream and
 * seqpacket pairs from socketpair (see refuse_unix_addressing).  Everything
 * else is allowed, so ordinary programs (Python, compilers, coreutils, numpy)
 * keep working.  A syscall of another ABI (i386 through int 0x80, and with it
 * i386's socketcall; x32) is refused as well.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
 * The socket families socket and socketpair may create, in increasing order;
 * every other family fails with EAFNOSUPPORT.  A network namespace isolates
 * only the families that are namespace-aware: AF_VSOCK binds ports in the
 * host's own vsock space (and reaches the hypervisor when the host is a
 * virtual machine), and the rest (packet, Bluetooth, AF_ALG crypto, AF_KEY,
 * XDP, CAN, TIPC, RDS, ...) only widen the kernel surface the program can
 * reach, down to loading the module of a family on its first socket.
 * AF_NETLINK is left out too: in a namespace whose only interface is lo,
 * nothing a program needs depends on it.  glibc's getaddrinfo asks
 * NETLINK_ROUTE which addresses are configured (for AI_ADDRCONFIG and to sort
 * its answers) and assumes both IPv4 and IPv6 when it cannot open the socket;
 * if_nametoindex and if_indextoname use ioctls on an AF_INET or AF_UNIX
 * socket.  What is lost is listing interfaces (if_nameindex, getifaddrs, ip),
 * which could only ever show lo here; what is gained is that rtnetlink and
 * every other netlink protocol are out of reach (a root caller's sandbox,
 * whose network namespace belongs to the initial user namespace, would even
 * receive the host's device uevents).
 *
 * EAFNOSUPPORT, not EPERM: it is what a kernel built without the family says,
 * so programs take the path they already have for a missing family (glibc's
 * getaddrinfo above; Python's socket module raises OSError as for any socket
 * failure) instead of reporting a permission problem.
 */
static const uint32_t socket_families[] = {AF_UNIX, AF_INET, AF_INET6};

/*
 * Kernel budgets counted host-wide or per user rather than per sandbox, which
 * a sandbox could otherwise exhaust for everyone: legacy AIO contexts
 * (fs.aio-max-nr, one for the whole host), inotify instances and watches and
 * POSIX message queues (counted per uid: a non-root caller's sandbox runs as
 * the caller's uid and would spend the caller's own), secret memory (locked
 * memory of the uid).  ENOSYS, what a kernel built without the feature says:
 * programs take the path they already have for it (glibc's POSIX aio is user
 * space and keeps working; tail -f and file watchers fall back to polling).
 * EMFILE would read as "this process has too many open files" and send the
 * user raising Limits.open_files in vain.  inotify (like dnotify below) would
 * also let two sandboxes signal each other through the access events of a
 * shared read-only file.  SysV IPC too: its segments, semaphores and messages
 * live in the sandbox's own IPC namespace, but the kernel frees them in a work
 * item after the namespace is gone (640 MiB of segments were still allocated
 * when the call returned), and a non-root caller without a memory cgroup has
 * no total cap on them; POSIX shared memory (a file) and pipes do the same
 * jobs within the sandbox's limits.
 */
static const char *const unbuilt[] = {"io_setup",
                                      "io_destroy",
                                      "io_submit",
                                      "io_cancel",
                                      "io_getevents",
                                      "io_pgetevents",
                                      "inotify_init",
                                      "inotify_init1",
                                      "mq_open",
                                      "mq_unlink",
                                      "mq_timedsend",
                                      "mq_timedreceive",
                                      "mq_notify",
                                      "mq_getsetattr",
                                      "memfd_secret",
                                      "shmget",
                                      "shmat",
                                      "shmdt",
                                      "shmctl",
                                      "semget",
                                      "semop",
                                      "semtimedop",
                                      "semctl",
                                      "msgget",
                                      "msgsnd",
                                      "msgrcv",
                                      "msgctl",
                                      "ipc",
                                      NULL};

/*
 * File locks: a lock a sandbox takes on a host file it may read (a SQLite
 * database under a readable path, a shared library) stalls or fails the
 * host's writers, and flock on a file two sandboxes share is a channel
 * between them.  A filter cannot tell a host file from the sandbox's own
 * tmpfs, so every lock request succeeds without being made: SCMP_ACT_ERRNO(0)
 * returns 0 and skips the call.  Programs that lock their own files (SQLite in
 * the working directory) keep working; F_GETLK and F_OFD_GETLK stay allowed
 * and see only the host's locks.  The cost: processes of one sandbox do not
 * exclude each other through locks.  ENOLCK would be worse: SQLite maps it to
 * SQLITE_BUSY, and no database could be read at all.
 */
static const uint32_t faked_lock_commands[] = {F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW};
/* A native 32-bit build's fcntl64 also takes the kernel's F_SETLK64 and
 * F_SETLKW64 (13 and 14 there; the C library's names depend on its offset
 * size, so the kernel's numbers are spelt out). */
static const uint32_t faked_lock64_commands[] = {13, 14};

/*
 * fcntl commands refused outright: a lease (F_SETLEASE) on a file of the
 * caller's (a non-root caller's sandbox owns them) stalls the host's writers
 * for fs.lease-break-time; EACCES, what the kernel says to a process that does
 * not own the file.  dnotify (F_NOTIFY) watches a directory, and its access
 * events are the same channel as inotify's; EINVAL, what a kernel without
 * dnotify says.
 */
static const struct {
    uint32_t command;
    int error;
} refused_fcntl[] = {{F_SETLEASE, EACCES}, {F_NOTIFY, EINVAL}};

/*
 * refuse_range: add rules that make syscall nr fail with action when the low
 * 32 bits of its first argument lie in [first, last] (last < 2^32).  The
 * argument is an int: the kernel reads only the low 32 bits of the register,
 * so only they may decide.  libseccomp's ordered comparisons read all 64 bits
 * and take no mask, so the range is cut into aligned power-of-two blocks, each
 * matched by one masked comparison of its fixed high bits (the way a CIDR list
 * covers an address range): at most 62 rules.  Returns 0 or a negative errno
 * from libseccomp.  Like add_rules: no GIL needed, never in the vfork child.
 */
static int refuse_range(scmp_filter_ctx ctx, uint32_t action, int nr, uint64_t first, uint64_t last)
{
    const uint64_t all = UINT64_C(1) << 32;
    int rc;
    while (first <= last) {
        uint64_t size = 1;
        while (size < all && first % (2 * size) == 0 && first + 2 * size - 1 <= last)
            size *= 2;
        rc = seccomp_rule_add(ctx, action, nr, 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, (all - 1) & ~(size - 1), first));
        if (rc < 0)
            return rc;
        first += size;
    }
    return 0;
}

/*
 * refuse_other_families: rules that make syscall nr (socket or socketpair)
 * fail with EAFNOSUPPORT for every family outside socket_families, by refusing
 * each gap between them.  libseccomp's filter allows by default; this turns
 * the allow-list into the ranges it denies.  Returns 0, -EINVAL if
 * socket_families is out of order (so a bad edit builds no filter at all), or a
 * negative errno from libseccomp.  Like add_rules: no GIL needed, never in the
 * vfork child.
 */
static int refuse_other_families(scmp_filter_ctx ctx, int nr)
{
    const uint32_t action = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    uint64_t next = 0; /* the lowest family not yet allowed or refused */
    size_t i;
    int rc;
    for (i = 0; i < sizeof socket_families / sizeof *socket_families; i++) {
        if (socket_families[i] < next)
            return -EINVAL;
        if (socket_families[i] > next &&
            (rc = refuse_range(ctx, action, nr, next, socket_families[i] - 1)) < 0)
            return rc;
        next = (uint64_t)socket_families[i] + 1;
    }
    return refuse_range(ctx, action, nr, next, UINT32_MAX);
}

/*
 * refuse_unix_addressing: rules that leave the sandbox no unix socket that can
 * name an address: socket(AF_UNIX, ...) fails with EACCES whatever the type,
 * and socketpair(AF_UNIX, ...) with EACCES unless the type is SOCK_STREAM or
 * SOCK_SEQPACKET.  A pathname unix socket of the host below a readable path
 * (a tmux or D-Bus socket, whatever the mount's read-only flag) is reached by
 * connect() or, for a datagram socket, by sendto()/sendmsg() with an address,
 * and no filter can read the address those calls take from memory; only the
 * socket that makes them can be kept out.  A stream or seqpacket socketpair is
 * born connected, so connect() on it fails with EISCONN and an address given
 * to sendto()/sendmsg() is refused (stream: EISCONN) or ignored (seqpacket):
 * socket.socketpair(), multiprocessing.Pipe and asyncio keep working.  A
 * datagram pair (SOCK_DGRAM, and SOCK_RAW, which AF_UNIX makes a datagram
 * socket) is not: a connected datagram socket still sends to any address it is
 * given.  The kernel reads the type's low 4 bits as the type (the rest are
 * flags, SOCK_CLOEXEC and SOCK_NONBLOCK, or EINVAL), so only they are compared,
 * and the family's low 32 bits as the family, as in refuse_range.
 *
 * EACCES, not EAFNOSUPPORT: the family exists (a socketpair of it works), and
 * EACCES is what the kernel's own security modules answer for a socket their
 * policy refuses; a program reports "Permission denied", which names the cause.
 * Returns 0 or a negative errno from libseccomp.  Like add_rules: no GIL needed,
 * never in the vfork child.
 */
static int refuse_unix_addressing(scmp_filter_ctx ctx)
{
    const uint32_t action = SCMP_ACT_ERRNO(EACCES);
    const struct scmp_arg_cmp unix_family = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, AF_UNIX);
    unsigned type;
    int rc = seccomp_rule_add(ctx, action, SCMP_SYS(socket), 1, unix_family);
    for (type = 0; rc == 0 && type <= 0xF; type++) {
        if (type == SOCK_STREAM || type == SOCK_SEQPACKET)
            continue;
        rc = seccomp_rule_add(ctx, action, SCMP_SYS(socketpair), 2, unix_family,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFu, type));
    }
    return rc;
}

/*
 * add_fcntl_rules: faked_lock_commands and refused_fcntl for syscall nr
 * (fcntl, or a 32-bit build's fcntl64).  fcntl's command is an int: only the
 * low 32 bits of its register decide, as the kernel reads them.  Returns 0
 * or a negative errno from libseccomp.  Like add_rules: no GIL needed, never
 * in the vfork child.
 */
static int add_fcntl_rules(scmp_filter_ctx ctx, int nr)
{
    size_t i;
    int rc;
    for (i = 0; i < sizeof faked_lock_commands / sizeof *faked_lock_commands; i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), nr, 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, faked_lock_commands[i]));
        if (rc < 0)
            return rc;
    }
    for (i = 0; i < sizeof refused_fcntl / sizeof *refused_fcntl; i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(refused_fcntl[i].error), nr, 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, refused_fcntl[i].command));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/*
 * add_budget_rules: the rules that keep the kernel budgets above out of the
 * sandbox's reach (unbuilt, flock, add_fcntl_rules for fcntl and, where it
 * exists, fcntl64 with its own lock commands).  Returns 0 or a negative errno
 * from libseccomp.  Like add_rules: no GIL needed, never in the vfork child.
 */
static int add_budget_rules(scmp_filter_ctx ctx)
{
    const uint32_t faked = SCMP_ACT_ERRNO(0);
    size_t i;
    int rc, fcntl64;
    for (i = 0; unbuilt[i] != NULL; i++) {
        int nr = seccomp_syscall_resolve_name(unbuilt[i]);
        if (nr == __NR_SCMP_ERROR)
            continue;
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) < 0)
            return rc;
    }
    if ((rc = seccomp_rule_add(ctx, faked, SCMP_SYS(flock), 0)) < 0)
        return rc;
    fcntl64 = seccomp_syscall_resolve_name("fcntl64");
    if ((rc = add_fcntl_rules(ctx, SCMP_SYS(fcntl))) < 0)
        return rc;
    if (fcntl64 == __NR_SCMP_ERROR)
        return 0;
    if ((rc = add_fcntl_rules(ctx, fcntl64)) < 0)
        return rc;
    for (i = 0; i < sizeof faked_lock64_commands / sizeof *faked_lock64_commands; i++) {
        rc = seccomp_rule_add(ctx, faked, fcntl64, 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, faked_lock64_commands[i]));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/*
 * Allowed to a template's interpreter (SBX_FILTER_TEMPLATE), which builds
 * each copy's sandbox (copy.c) from within its own user namespace: a new
 * mount, pid, network, IPC, UTS and cgroup namespace, the mounts of the
 * copy's /proc and working directory, and (copy_serve.c) the way back to its
 * own pid namespace for its next child.  A new user namespace stays refused,
 * and setns enters nothing but a pid namespace.
 * Every copy then adds the whole filter on top, before it runs anything.
 */
static const char *const template_allowed[] = {"mount", "unshare", "setns", NULL};

/* in_list: whether name is one of the NULL-terminated names. */
static int in_list(const char *const *names, const char *name)
{
    for (; *names != NULL; names++) {
        if (strcmp(*names, name) == 0)
            return 1;
    }
    return 0;
}

/*
 * add_denied: the outright refusals into ctx, but for a template the calls
 * that build a copy (unshare only without CLONE_NEWUSER, setns only into a
 * pid namespace).  Returns 0 or a
 * negative errno from libseccomp.
 */
static int add_denied(scmp_filter_ctx ctx, int kind)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    size_t i;
    int rc;
    for (i = 0; denied[i] != NULL; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR ||
            (kind == SBX_FILTER_TEMPLATE && in_list(template_allowed, denied[i])))
            continue;
        if ((rc = seccomp_rule_add(ctx, eperm, nr, 0)) < 0)
            return rc;
    }
    if (kind != SBX_FILTER_TEMPLATE)
        return 0;
    rc = seccomp_rule_add(ctx, eperm, SCMP_SYS(unshare), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
    if (rc < 0)
        return rc;
    return seccomp_rule_add(ctx, eperm, SCMP_SYS(setns), 1,
                            SCMP_A1(SCMP_CMP_NE, (scmp_datum_t)CLONE_NEWPID));
}

/*
 * add_rules: every rule of the filter of `kind` (SBX_FILTER_SANDBOX or
 * SBX_FILTER_TEMPLATE) into ctx.  Returns 0 or a negative errno from
 * libseccomp.
 */
static int add_rules(scmp_filter_ctx ctx, int kind)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    size_t i;
    int rc;
    if ((rc = add_denied(ctx, kind)) < 0)
        return rc;
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
    if ((rc = add_budget_rules(ctx)) < 0)
        return rc;
    /* Where socket and socketpair also exist as calls of socketcall (i386,
     * s390), libseccomp adds each rule to socketcall's SYS_SOCKET or
     * SYS_SOCKETPAIR without the family test, which cannot read arguments in
     * memory: there every socket comes from the direct syscalls (Linux 4.3+),
     * and a libc that still goes through socketcall gets none. */
    if ((rc = refuse_other_families(ctx, SCMP_SYS(socket))) < 0)
        return rc;
    if ((rc = refuse_other_families(ctx, SCMP_SYS(socketpair))) < 0)
        return rc;
    return refuse_unix_addressing(ctx);
}

/*
 * sbx_seccomp_program: build the filter of `kind` (SBX_FILTER_SANDBOX, or
 * SBX_FILTER_TEMPLATE for a template's interpreter, see template_allowed)
 * and return its BPF program in *program (malloc'd, owned by the caller)
 * and *length.  Returns 0, or a negative errno.  Any thread; no GIL needed;
 * not for the vfork child.
 */
int sbx_seccomp_program(int kind, char **program, size_t *length)
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
        rc = add_rules(ctx, kind);
    if (rc == 0) {
        /* The raw call: glibc wraps memfd_create only from 2.27, and the wheels
         * are built against glibc 2.24 (the floor clone.c sets). */
        fd = (int)syscall(SYS_memfd_create, "pysandbox-seccomp", MFD_CLOEXEC);
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
