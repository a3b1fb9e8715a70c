/*
 * spawn.c: start one child (bubblewrap) with its stdio on pipes, its
 * resource limits applied and every other fd closed.
 *
 * The child is created with clone(CLONE_VM | CLONE_VFORK): it shares the
 * parent's memory until it calls execve, so the cost of a call does not grow
 * with the caller's heap (fork would copy the page tables of a 3 GB Jupyter
 * kernel).  The price is strict discipline in the child, see child_main.
 * With a cgroup v2 group to join, clone3(CLONE_INTO_CGROUP) creates the child
 * in it (see clone3_run), where the kernel and any seccomp filter allow.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
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
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* clone3 runs a function on a new stack only through the trampoline below,
 * written for these architectures; elsewhere a group is joined by a write. */
#if defined(__x86_64__) || defined(__aarch64__)
#define HAVE_CLONE3_RUN 1
#else
#define HAVE_CLONE3_RUN 0
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
    int procs_fd;                                      /* the v2 group's cgroup.procs; -1 */
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
    case SBX_STAGE_CGROUP_CLONE:
        return "joining the sandbox's cgroup at clone";
    case SBX_STAGE_CGROUP_OPEN:
        return "opening the sandbox's cgroup.procs";
    case SBX_STAGE_SIGNALS:
        return "resetting signals in the child";
    case SBX_STAGE_PDEATHSIG:
        return "prctl(PR_SET_PDEATHSIG) in the child";
    case SBX_STAGE_RLIMIT:
        return "setrlimit in the child";
    case SBX_STAGE_SCHED:
        return "leaving a real-time scheduling policy in the child";
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
    if (child_leave_real_time() != 0)
        child_fail(args, SBX_STAGE_SCHED);

    for (i = 0; i < spec->n_cgroup_fds; i++) {
        if (write(spec->cgroup_fds[i], "0", 1) != 1)
            child_fail(args, SBX_STAGE_CGROUP);
    }
    if (args->procs_fd >= 0 && write(args->procs_fd, "0", 1) != 1)
        child_fail(args, SBX_STAGE_CGROUP);

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

#if HAVE_CLONE3_RUN
/* struct clone_args of <linux/sched.h> up to its cgroup field (Linux 5.7,
 * CLONE_ARGS_SIZE_VER2), spelled out for older kernel headers. */
struct clone3_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
    uint64_t set_tid;
    uint64_t set_tid_size;
    uint64_t cgroup;
};
_Static_assert(sizeof(struct clone3_args) == 88, "struct clone_args, CLONE_ARGS_SIZE_VER2");

/*
 * clone3_run: the raw clone3 system call with *cl.  In the child, fn(arg)
 * on the stack *cl describes, then the exit system call with fn's result;
 * the child never returns from here.  In the parent, returns the child's pid
 * or -errno.
 *
 * Why not glibc's clone(): it cannot ask for CLONE_INTO_CGROUP (a flag above
 * bit 31 whose fd travels in struct clone_args), and glibc exports no clone3
 * that runs a function on a new stack.  This is the least such a wrapper
 * needs: the system call; in the child (it returned 0) a call of fn on the
 * new stack and the exit.  The child stays inside the asm statement, so it
 * never uses the caller's stack frame (the kernel has switched it to the new
 * stack; fn and arg are in registers the system call preserves) and never
 * hands the compiler a register it did not expect.
 *   x86_64: syscall returns in rax and clobbers rcx and r11; fn and arg ride
 *     in rdx and rbx (clone3 reads rdi and rsi only).  The kernel sets rsp
 *     to stack + stack_size; the and aligns it to the 16 bytes the call
 *     needs whatever that size; a zero rbp ends the child's backtrace.
 *   aarch64: svc returns in x0 and preserves every other register; fn and
 *     arg ride in x2 and x3.  sp is stack + stack_size, 16-byte aligned since
 *     the stack is whole pages; a zero x29 ends the backtrace.
 * Async-signal-safe when fn is (a system call and fn).  The caller blocks
 * every signal around it, as around clone.  With CLONE_VFORK in cl->flags
 * the parent resumes once the child has exec'd or exited.
 */
static long clone3_run(struct clone3_args *cl, int (*fn)(void *), void *arg)
{
#if defined(__x86_64__)
    long ret = SYS_clone3;
    __asm__ volatile("syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xorl %%ebp, %%ebp\n\t"
                     "andq $-16, %%rsp\n\t"
                     "movq %%rbx, %%rdi\n\t"
                     "callq *%%rdx\n\t"
                     "movl %%eax, %%edi\n\t"
                     "movl %[exit_nr], %%eax\n\t"
                     "syscall\n\t"
                     "hlt\n"
                     "1:"
                     : "+a"(ret)
                     : "D"(cl), "S"(sizeof *cl), "d"(fn), "b"(arg), [exit_nr] "i"(SYS_exit)
                     : "rcx", "r11", "memory", "cc");
    return ret;
#elif defined(__aarch64__)
    register long x0 __asm__("x0") = (long)cl;
    register long x1 __asm__("x1") = (long)sizeof *cl;
    register long x2 __asm__("x2") = (long)fn;
    register long x3 __asm__("x3") = (long)arg;
    register long x8 __asm__("x8") = SYS_clone3;
    __asm__ volatile("svc #0\n\t"
                     "cbnz x0, 1f\n\t"
                     "mov x29, xzr\n\t"
                     "mov x0, x3\n\t"
                     "blr x2\n\t"
                     "mov x8, %[exit_nr]\n\t"
                     "svc #0\n\t"
                     "brk #0\n"
                     "1:"
                     : "+r"(x0)
                     : "r"(x1), "r"(x2), "r"(x3), "r"(x8), [exit_nr] "i"(SYS_exit)
                     : "memory", "cc");
    return x0;
#endif
}

/*
 * clone3_child: clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD |
 * CLONE_INTO_CGROUP) with no exit signal (as clone_child, for the same
 * reason), the child born in the cgroup v2 group of the directory
 * cgroup_dir_fd, running child_main(args) on [stack, stack +
 * CHILD_STACK_SIZE).  Returns the pid, or -1 with errno set (and *pidfd
 * -1).  Parent only; the caller blocks every signal around it.
 */
static pid_t clone3_child(struct child_args *args, char *stack, int cgroup_dir_fd, int *pidfd)
{
    struct clone3_args cl;
    long rc;
    memset(&cl, 0, sizeof cl);
    *pidfd = -1;
    cl.flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP;
    cl.pidfd = (uint64_t)(uintptr_t)pidfd;
    cl.stack = (uint64_t)(uintptr_t)stack;
    cl.stack_size = CHILD_STACK_SIZE;
    cl.cgroup = (uint64_t)cgroup_dir_fd;
    rc = clone3_run(&cl, child_main, args);
    if (rc < 0) {
        *pidfd = -1;
        errno = (int)-rc;
        return -1;
    }
    return (pid_t)rc;
}

/* Set once clone3 with CLONE_INTO_CGROUP proved unavailable to this process
 * (a kernel without it, or a seccomp filter answering ENOSYS): neither
 * changes while the process lives, so later spawns go straight to the
 * write. */
static atomic_int clone3_unavailable;
#endif

/*
 * open_group_procs: the cgroup.procs file of the group whose directory is
 * dir_fd, opened for the child to write "0" to, after checking that the
 * directory is on cgroup v2 (what clone3 would have checked: EBADF, as it
 * answers, for a v1 group or anything else).  Parent only.  Returns an
 * O_CLOEXEC fd the caller owns, or -1 with errno set.
 */
static int open_group_procs(int dir_fd)
{
    struct statfs fs;
    if (fstatfs(dir_fd, &fs) != 0)
        return -1;
    if (fs.f_type != CGROUP2_SUPER_MAGIC) {
        errno = EBADF;
        return -1;
    }
    return openat(dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
}

/*
 * start_child: clone the child on `stack`; with spec->cgroup_dir_fd >= 0,
 * in that cgroup v2 group.  clone3 creates it there where it can; where it
 * cannot (ENOSYS: a kernel before 5.3 or a seccomp filter such as Docker's;
 * E2BIG or EINVAL: a kernel before 5.7), the group's cgroup.procs goes to
 * args->procs_fd for the child to write to, and clone_child clones.  Any
 * other clone3 failure (EBADF, EACCES, EBUSY, EAGAIN from pids.max...) is
 * the spawn's failure: the child never runs outside its group.
 * Returns the pid and sets child->pidfd and child->cgroup_joined_at_clone,
 * or returns -1 with errno set and *stage saying which step failed.
 * Parent only; the caller blocks every signal around it and closes
 * args->procs_fd.
 */
static pid_t start_child(const struct sbx_spec *spec, struct child_args *args, char *stack,
                         struct sbx_child *child, int *stage)
{
    pid_t pid;
    if (spec->cgroup_dir_fd >= 0) {
#if HAVE_CLONE3_RUN
        if (!atomic_load_explicit(&clone3_unavailable, memory_order_relaxed)) {
            pid = clone3_child(args, stack, spec->cgroup_dir_fd, &child->pidfd);
            if (pid >= 0) {
                child->cgroup_joined_at_clone = 1;
                return pid;
            }
            if (errno != ENOSYS && errno != E2BIG && errno != EINVAL) {
                *stage = SBX_STAGE_CGROUP_CLONE;
                return -1;
            }
            atomic_store_explicit(&clone3_unavailable, 1, memory_order_relaxed);
        }
#endif
        args->procs_fd = open_group_procs(spec->cgroup_dir_fd);
        if (args->procs_fd < 0) {
            *stage = SBX_STAGE_CGROUP_OPEN;
            return -1;
        }
    }
    pid = clone_child(args, stack + CHILD_STACK_SIZE, &child->pidfd);
    if (pid < 0)
        *stage = SBX_STAGE_CLONE;
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
 * With spec->cgroup_dir_fd >= 0 the child is in that group before it runs
 * any program (see start_child); child->cgroup_joined_at_clone says whether
 * it was born there.  Thread-safe; may run without the GIL (touches no
 * Python object); blocks every signal of the calling thread for the few
 * microseconds of the clone.
 */
int sbx_spawn(const struct sbx_spec *spec, struct sbx_child *child, struct sbx_spawn_error *error)
{
    struct child_args args;
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int captures[SBX_MAX_CAPTURES][2];
    int floor = MIN_SOURCE_FD, n_targets, stage = SBX_STAGE_NONE;
    char *stack = MAP_FAILED;
    sigset_t all, saved_mask;
    size_t i;
    int rc = -1;

    memset(&args, 0, sizeof args);
    args.procs_fd = -1;
    for (i = 0; i < SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1; i++)
        args.pass[i] = -1;
    for (i = 0; i < SBX_MAX_CAPTURES; i++) {
        captures[i][0] = captures[i][1] = -1;
        child->capture_fds[i] = -1;
    }
    child->pid = -1;
    child->pidfd = child->in_fd = child->out_fd = child->err_fd = -1;
    child->init_pidfd = -1;
    child->init_pid = -1;
    child->unix_list_fd = -1;
    child->cgroup_joined_at_clone = 0;
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
    child->pid = start_child(spec, &args, stack, child, &stage);
    if (child->pid < 0)
        error->err = errno;
    pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);

    if (child->pid < 0) {
        error->stage = stage;
        errno = error->err;
        goto fail;
    }
    if (args.stage != SBX_STAGE_NONE) {
        int status;
        while (waitpid(child->pid, &status, __WALL) < 0 && errno == EINTR)
            ;
        child->pid = -1;
        child->cgroup_joined_at_clone = 0;
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
    close_if_open(&args.procs_fd);
    return rc;
}
