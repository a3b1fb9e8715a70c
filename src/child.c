/* SPDX-License-Identifier: MIT */
/*
 * child.c: the child of the spawn, from the clone to the execve of bwrap.
 *
 * It runs in the parent's address space (CLONE_VM | CLONE_VFORK, see
 * spawn.c), on a stack of its own, with every signal blocked.  Everything
 * in this file is held to the rules of sbx_child_main below: async-signal-safe
 * calls only (raw system calls where the C library's wrapper is not), no
 * allocation, no locks, no writes to the parent's memory but the failure
 * record in struct sbx_child_args.
 */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The child runs on a stack of its own in the parent's address space: ASan's
 * shadow of the parent's stacks does not describe it (google/sanitizers#189),
 * so the child's functions are not instrumented. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define CHILD_CODE __attribute__((no_sanitize("address", "undefined")))
#endif
#endif
#ifndef CHILD_CODE
#define CHILD_CODE
#endif

/*
 * child_fail: record why the child failed and exit without running any
 * atexit handler or flushing any stdio buffer of the parent.
 * Runs in the vfork child: async-signal-safe (writes to shared memory and
 * _exit only).
 */
CHILD_CODE static _Noreturn void child_fail(struct sbx_child_args *args, int stage)
{
    args->err = errno;
    args->stage = stage;
    _exit(127);
}

/*
 * child_set_rlimit: setrlimit through the raw prlimit64 system call.  The C
 * library's setrlimit is not safe in a vfork child everywhere (musl
 * synchronises every thread of the process for it, and the threads of the
 * parent share this address space); the system call touches nothing but
 * its arguments.  Async-signal-safe.  Returns 0, or -1 with errno set.
 */
CHILD_CODE static int child_set_rlimit(const struct sbx_rlimit *limit)
{
    struct {
        unsigned long long cur, max;
    } value = {(unsigned long long)limit->soft, (unsigned long long)limit->hard};
    return (int)syscall(SYS_prlimit64, 0, limit->resource, &value, NULL);
}

/*
 * child_leave_real_time: a real-time policy (SCHED_FIFO, SCHED_RR) the
 * caller runs under becomes SCHED_OTHER, with the caller's nice value.  The
 * kernel keeps a policy across fork and exec, and RLIMIT_RTPRIO 0 only stops
 * a task from raising it: a sandbox of a real-time caller would otherwise
 * run real-time, ahead of every normal task of the host.  Lowering needs no
 * privilege.  Raw system calls (no libc state): async-signal-safe.  Returns
 * 0, or -1 with errno set.
 */
CHILD_CODE static int child_leave_real_time(void)
{
    struct sched_param normal;
    long policy = syscall(SYS_sched_getscheduler, 0);
    if (policy < 0)
        return -1;
    if ((policy & ~SCHED_RESET_ON_FORK) != SCHED_FIFO &&
        (policy & ~SCHED_RESET_ON_FORK) != SCHED_RR)
        return 0;
    memset(&normal, 0, sizeof normal);
    return (int)syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &normal);
}

/* The layout of the records getdents64 returns. */
struct child_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/*
 * child_close_fds_from_proc: close every fd >= lowest listed in
 * /proc/self/fd, read with the raw getdents64 system call into a stack
 * buffer (no opendir: it allocates).  For kernels without close_range
 * (before 5.9): a process with RLIMIT_NOFILE of 2^20 would otherwise make
 * 2^20 close() calls.  Async-signal-safe, no allocation.  Returns 0, or -1
 * when /proc/self/fd cannot be read (nothing is closed then).
 */
CHILD_CODE static int child_close_fds_from_proc(int lowest)
{
    char buf[4096];
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long n;
    if (dir < 0)
        return -1;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        long offset = 0;
        while (offset < n) {
            struct child_dirent64 *entry = (struct child_dirent64 *)(buf + offset);
            const char *name = entry->d_name;
            int fd = 0;
            offset += entry->d_reclen;
            if (*name < '0' || *name > '9')
                continue;
            for (; *name >= '0' && *name <= '9'; name++)
                fd = fd * 10 + (*name - '0');
            if (fd >= lowest && fd != dir)
                close(fd);
        }
    }
    close(dir);
    return n < 0 ? -1 : 0;
}

/*
 * sbx_child_main: runs between clone and execve, on its own stack but in the
 * parent's address space, with every signal blocked (the parent blocked them
 * before the clone so that no handler of the parent can run here).
 *
 * Only async-signal-safe calls, no allocation, no locks, no writes to memory
 * the parent owns except args->stage/err.  Everything it uses (argv, envp,
 * limits, fd numbers) was built by the parent.  Order:
 *   1. every signal back to SIG_DFL: exec keeps ignored dispositions, and
 *      Python ignores SIGPIPE and SIGXFSZ, which the sandboxed program must
 *      see at their defaults; then a process group of its own, so that what
 *      a terminal or a notebook sends to the caller's group (Ctrl-C, the
 *      stop button: SIGINT to every process of it) reaches the caller alone,
 *      which decides what the sandbox gets (a run is killed and reaped, a
 *      session's call rolled back), rather than killing bwrap under it;
 *   2. the resource limits (what prlimit(1) would do), a real-time
 *      scheduling policy of the caller's left for SCHED_OTHER, and the
 *      sandbox's cgroups (writing "0" to their cgroup.procs moves this process, also
 *      into the v2 group clone3 could not create it in), so that every
 *      process of the sandbox is born inside them;
 *   3. die with the spawning thread (PR_SET_PDEATHSIG), and at once if the
 *      parent is already gone;
 *   4. the pipes, passed fds and capture pipes onto 0, 1, 2, 3...: every
 *      source is >= 10 and above every target, so no dup2 overwrites a
 *      source;
 *   5. close every other fd, so nothing of the host leaks into the child
 *      (close_range; on any failure of it, e.g. ENOSYS or a seccomp EPERM,
 *      the fds listed in /proc/self/fd, and without /proc one close() per
 *      fd up to the limit the parent computed);
 *   6. unblock signals and execve with the explicit environment.
 * Any failure stores {stage, errno} and exits 127.
 */
CHILD_CODE int sbx_child_main(void *opaque)
{
    struct sbx_child_args *args = opaque;
    const struct sbx_spec *spec = args->spec;
    struct sigaction dfl;
    sigset_t empty;
    int sig, fd;
    size_t i;

    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        /* glibc reserves a few real-time signals and refuses them: EINVAL. */
        if (sigaction(sig, &dfl, NULL) != 0 && errno != EINVAL)
            child_fail(args, SBX_STAGE_SIGNALS);
    }
    if (setpgid(0, 0) != 0)
        child_fail(args, SBX_STAGE_PGROUP);

    for (i = 0; i < spec->n_rlimits; i++) {
        if (child_set_rlimit(&spec->rlimits[i]) != 0)
            child_fail(args, SBX_STAGE_RLIMIT);
    }
    if (child_leave_real_time() != 0)
        child_fail(args, SBX_STAGE_SCHED);

    for (i = 0; i < spec->n_cgroup_fds; i++) {
        if (write(spec->cgroup_fds[i], "0", 1) != 1)
            child_fail(args, SBX_STAGE_CGROUP_JOIN);
    }
    if (args->procs_fd >= 0 && write(args->procs_fd, "0", 1) != 1)
        child_fail(args, SBX_STAGE_CGROUP_JOIN);

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(args, SBX_STAGE_PDEATHSIG);
    if (getppid() != args->parent)
        _exit(127);

    for (i = 0; i < 3; i++) {
        if (dup2(args->stdio[i], (int)i) < 0)
            child_fail(args, SBX_STAGE_DUP2);
    }
    for (fd = 3; args->pass[fd - 3] >= 0; fd++) {
        if (dup2(args->pass[fd - 3], fd) < 0)
            child_fail(args, SBX_STAGE_DUP2);
    }

    if (syscall(SYS_close_range, (unsigned int)fd, ~0U, 0) != 0 &&
        child_close_fds_from_proc(fd) != 0) {
        for (; fd <= spec->close_fds_above; fd++)
            close(fd);
    }

    sigemptyset(&empty);
    if (sigprocmask(SIG_SETMASK, &empty, NULL) != 0)
        child_fail(args, SBX_STAGE_SIGNALS);

    execve(spec->path, spec->argv, spec->envp);
    child_fail(args, SBX_STAGE_EXEC);
    return 127;
}
