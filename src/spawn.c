/*
 * spawn.c: start one child (bubblewrap) with its stdio on pipes, its
 * resource limits applied and every other fd closed.
 *
 * The child is created with clone(CLONE_VM | CLONE_VFORK): it shares the
 * parent's memory until it calls execve, so the cost of a call does not grow
 * with the caller's heap (fork would copy the page tables of a 3 GB Jupyter
 * kernel).  The price is strict discipline in the child, see child_main.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__GLIBC__) && (__GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 24))
/* Older glibc's clone(CLONE_VM) overwrites the parent thread's cached tid. */
#error "pysandbox needs glibc 2.24 or later"
#endif

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

#define CHILD_STACK_SIZE (128 * 1024)

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
/* Source fds are moved at least this high so no dup2 target collides. */
#define MIN_SOURCE_FD 10
/* The pipe size an unprivileged process may set (fs.pipe-max-size default). */
#define PIPE_SIZE (1024 * 1024)

/*
 * Shared between parent and child (CLONE_VM).  The parent fills in every
 * field but stage/err before the clone; the child writes stage/err only when
 * it fails, and the parent reads them after the clone returns (CLONE_VFORK
 * guarantees the child has exec'd or exited by then).
 */
struct child_args {
    const struct sbx_spec *spec;
    pid_t parent;
    int stdio[3];                                      /* sources for fds 0, 1, 2 */
    int pass[SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1]; /* sources for fds 3...; -1 ends */
    volatile int stage;
    volatile int err;
};

/*
 * sbx_stage_name: a short human name for an enum sbx_stage value.
 * Pure, thread-safe, any context.
 */
const char *sbx_stage_name(int stage)
{
    switch (stage) {
    case SBX_STAGE_PIPE:
        return "creating pipes";
    case SBX_STAGE_PASS_FDS:
        return "duplicating pass_fds";
    case SBX_STAGE_STACK:
        return "allocating the child stack";
    case SBX_STAGE_CLONE:
        return "clone";
    case SBX_STAGE_SIGNALS:
        return "resetting signals in the child";
    case SBX_STAGE_PDEATHSIG:
        return "prctl(PR_SET_PDEATHSIG) in the child";
    case SBX_STAGE_RLIMIT:
        return "setrlimit in the child";
    case SBX_STAGE_CGROUP:
        return "joining the sandbox's cgroup in the child";
    case SBX_STAGE_DUP2:
        return "dup2 in the child";
    case SBX_STAGE_EXEC:
        return "execve";
    default:
        return "spawn";
    }
}

/*
 * child_fail: record why the child failed and exit without running any
 * atexit handler or flushing any stdio buffer of the parent.
 * Runs in the vfork child: async-signal-safe (writes to shared memory and
 * _exit only).
 */
CHILD_CODE static _Noreturn void child_fail(struct child_args *args, int stage)
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
 * child_main: runs between clone and execve, on its own stack but in the
 * parent's address space, with every signal blocked (the parent blocked them
 * before the clone so that no handler of the parent can run here).
 *
 * Only async-signal-safe calls, no allocation, no locks, no writes to memory
 * the parent owns except args->stage/err.  Everything it uses (argv, envp,
 * limits, fd numbers) was built by the parent.  Order:
 *   1. every signal back to SIG_DFL: exec keeps ignored dispositions, and
 *      Python ignores SIGPIPE and SIGXFSZ, which the sandboxed program must
 *      see at their defaults;
 *   2. the resource limits (what prlimit(1) would do), and the sandbox's
 *      cgroups (writing "0" to their cgroup.procs moves this process), so
 *      that every process of the sandbox is born inside them;
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
CHILD_CODE static int child_main(void *opaque)
{
    struct child_args *args = opaque;
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

    for (i = 0; i < spec->n_rlimits; i++) {
        if (child_set_rlimit(&spec->rlimits[i]) != 0)
            child_fail(args, SBX_STAGE_RLIMIT);
    }

    for (i = 0; i < spec->n_cgroup_fds; i++) {
        if (write(spec->cgroup_fds[i], "0", 1) != 1)
            child_fail(args, SBX_STAGE_CGROUP);
    }

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

/*
 * move_fd_up: replace *fd by a CLOEXEC duplicate numbered >= MIN_SOURCE_FD
 * and at least `floor`, closing the original.  Parent only.
 * Returns 0, or -1 with errno set (and *fd unchanged and still open).
 */
static int move_fd_up(int *fd, int floor)
{
    int moved;
    if (*fd >= floor)
        return 0;
    moved = fcntl(*fd, F_DUPFD_CLOEXEC, floor);
    if (moved < 0)
        return -1;
    close(*fd);
    *fd = moved;
    return 0;
}

static void close_if_open(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/*
 * make_pipe: a CLOEXEC pipe whose both ends are numbered >= floor.
 * Parent only.  On failure returns -1 with errno set and nothing open.
 */
static int make_pipe(int ends[2], int floor)
{
    int saved;
    if (pipe2(ends, O_CLOEXEC) != 0)
        return -1;
    if (move_fd_up(&ends[0], floor) == 0 && move_fd_up(&ends[1], floor) == 0)
        return 0;
    saved = errno;
    close_if_open(&ends[0]);
    close_if_open(&ends[1]);
    errno = saved;
    return -1;
}

static int set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/*
 * clone_child: clone with CLONE_VM | CLONE_VFORK and no exit signal, so a
 * child that fails before execve is never auto-reaped and its failure can be
 * collected (it is reaped with __WALL).  execve resets the exit signal to
 * SIGCHLD, so a running bwrap is auto-reaped in a host that ignores SIGCHLD:
 * sbx_pump reports that as status_known = 0.  Asks for a pidfd, and retries
 * without one on kernels older than 5.2.  Returns the pid, or -1 with errno
 * set.
 */
static pid_t clone_child(struct child_args *args, char *stack_top, int *pidfd)
{
    pid_t pid;
    *pidfd = -1;
    pid = clone(child_main, stack_top, CLONE_VM | CLONE_VFORK | CLONE_PIDFD, args, pidfd);
    if (pid < 0 && errno == EINVAL) {
        *pidfd = -1;
        pid = clone(child_main, stack_top, CLONE_VM | CLONE_VFORK, args);
    }
    return pid;
}

/*
 * sbx_spawn: start spec->path with stdin/stdout/stderr and the capture pipes
 * on fresh pipes.
 *
 * Contract: on success returns 0 and fills *child; the caller owns every fd
 * in it and must reap child->pid (sbx_pump does both).  On
 * failure returns -1, fills *error with the stage and errno, and leaves no
 * fd open and no child unreaped.  spec->pass_fds stay owned by the caller.
 * Thread-safe; may run without the GIL (touches no Python object); blocks
 * every signal of the calling thread for the few microseconds of the clone.
 */
int sbx_spawn(const struct sbx_spec *spec, struct sbx_child *child, struct sbx_spawn_error *error)
{
    struct child_args args;
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int captures[SBX_MAX_CAPTURES][2];
    int floor = MIN_SOURCE_FD, n_targets;
    char *stack = MAP_FAILED;
    sigset_t all, saved_mask;
    size_t i;
    int rc = -1;

    memset(&args, 0, sizeof args);
    for (i = 0; i < SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1; i++)
        args.pass[i] = -1;
    for (i = 0; i < SBX_MAX_CAPTURES; i++) {
        captures[i][0] = captures[i][1] = -1;
        child->capture_fds[i] = -1;
    }
    child->pid = -1;
    child->pidfd = child->in_fd = child->out_fd = child->err_fd = -1;
    error->stage = SBX_STAGE_NONE;
    error->err = 0;

    if (spec->n_pass_fds > SBX_MAX_PASS_FDS || spec->n_captures > SBX_MAX_CAPTURES) {
        error->stage = SBX_STAGE_PASS_FDS;
        error->err = EINVAL;
        return -1;
    }
    n_targets = 3 + (int)spec->n_pass_fds + (int)spec->n_captures;
    if (floor < n_targets)
        floor = n_targets;

    if (make_pipe(in_pipe, floor) || make_pipe(out_pipe, floor) || make_pipe(err_pipe, floor)) {
        error->stage = SBX_STAGE_PIPE;
        goto fail;
    }
    for (i = 0; i < spec->n_captures; i++) {
        if (make_pipe(captures[i], floor)) {
            error->stage = SBX_STAGE_PIPE;
            goto fail;
        }
    }
    for (i = 0; i < spec->n_pass_fds; i++) {
        args.pass[i] = fcntl(spec->pass_fds[i], F_DUPFD_CLOEXEC, floor);
        if (args.pass[i] < 0) {
            error->stage = SBX_STAGE_PASS_FDS;
            goto fail;
        }
    }
    for (i = 0; i < spec->n_captures; i++) {
        args.pass[spec->n_pass_fds + i] = captures[i][1];
        captures[i][1] = -1;
    }
    args.spec = spec;
    args.parent = getpid();
    args.stdio[0] = in_pipe[0];
    args.stdio[1] = out_pipe[1];
    args.stdio[2] = err_pipe[1];

    stack = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        error->stage = SBX_STAGE_STACK;
        goto fail;
    }

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_mask);
    child->pid = clone_child(&args, stack + CHILD_STACK_SIZE, &child->pidfd);
    if (child->pid < 0)
        error->err = errno;
    pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);

    if (child->pid < 0) {
        error->stage = SBX_STAGE_CLONE;
        errno = error->err;
        goto fail;
    }
    if (args.stage != SBX_STAGE_NONE) {
        int status;
        while (waitpid(child->pid, &status, __WALL) < 0 && errno == EINTR)
            ;
        child->pid = -1;
        close_if_open(&child->pidfd);
        error->stage = args.stage;
        error->err = args.err;
        goto cleanup;
    }

    /* Fewer wake-ups for a flood of output; refused (and harmless) past the
     * user's pipe quota. */
    fcntl(out_pipe[0], F_SETPIPE_SZ, PIPE_SIZE);
    fcntl(err_pipe[0], F_SETPIPE_SZ, PIPE_SIZE);
    child->in_fd = in_pipe[1];
    child->out_fd = out_pipe[0];
    child->err_fd = err_pipe[0];
    in_pipe[1] = out_pipe[0] = err_pipe[0] = -1;
    for (i = 0; i < spec->n_captures; i++) {
        child->capture_fds[i] = captures[i][0];
        captures[i][0] = -1;
        set_nonblocking(child->capture_fds[i]);
    }
    /* The parent's own ends only; the child's stay blocking. */
    set_nonblocking(child->in_fd);
    set_nonblocking(child->out_fd);
    set_nonblocking(child->err_fd);
    rc = 0;
    goto cleanup;

fail:
    error->err = errno;
cleanup:
    if (stack != MAP_FAILED)
        munmap(stack, CHILD_STACK_SIZE);
    for (i = 0; i < 2; i++) {
        close_if_open(&in_pipe[i]);
        close_if_open(&out_pipe[i]);
        close_if_open(&err_pipe[i]);
    }
    for (i = 0; i < SBX_MAX_CAPTURES; i++) {
        close_if_open(&captures[i][0]);
        close_if_open(&captures[i][1]);
    }
    for (i = 0; i < SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1; i++)
        close_if_open(&args.pass[i]);
    return rc;
}
