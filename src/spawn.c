/* SPDX-License-Identifier: MIT */
/*
 * spawn.c: start one child (bubblewrap) with its stdio on pipes, its
 * resource limits applied and every other fd closed.  The parent's side:
 * the pipes and fds, the choice of clone, the failure or success.
 *
 * The child is created with clone(CLONE_VM | CLONE_VFORK) (clone.c): it
 * shares the parent's memory until it calls execve, so the cost of a call
 * does not grow with the caller's heap (fork would copy the page tables of
 * a 3 GB Jupyter kernel).  The price is strict discipline in the child, see
 * child.c.  With a cgroup v2 group to join, clone3(CLONE_INTO_CGROUP)
 * creates the child in it (see start_child), where the kernel and any
 * seccomp filter allow.
 */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* Source fds are moved at least this high so no dup2 target collides. */
#define MIN_SOURCE_FD 10
/* The pipe size an unprivileged process may set (fs.pipe-max-size default). */
#define PIPE_SIZE (1024 * 1024)

/*
 * sbx_stage_name: the words of an enum sbx_stage value (SBX_STAGES), or
 * NONE's ("spawn") for any other number.  Pure, thread-safe, any context.
 */
const char *sbx_stage_name(int stage)
{
    static const char *const words[SBX_STAGE_COUNT] = {
#define STAGE_WORDS(name, text) text,
        SBX_STAGES(STAGE_WORDS)
#undef STAGE_WORDS
    };
    return stage > SBX_STAGE_NONE && stage < SBX_STAGE_COUNT ? words[stage] : words[SBX_STAGE_NONE];
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

/*
 * sbx_close_fd: close *fd unless it is -1, and make it -1, so that a second
 * call (a clean-up after a partial hand-over) closes nothing.  Any thread;
 * async-signal-safe.
 */
void sbx_close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/*
 * sbx_child_close_pipes: close the parent's ends of a child's pipes, and
 * keep what killing and reaping it needs.  Idempotent.  No GIL needed.
 */
void sbx_child_close_pipes(struct sbx_child *child)
{
    sbx_close_fd(&child->in_fd);
    sbx_close_fd(&child->out_fd);
    sbx_close_fd(&child->err_fd);
    for (int i = 0; i < SBX_MAX_CAPTURES; i++)
        sbx_close_fd(&child->capture_fds[i]);
}

/*
 * sbx_child_close_fds: close every parent-side fd of a child.  Idempotent.
 * No GIL needed.
 */
void sbx_child_close_fds(struct sbx_child *child)
{
    sbx_child_close_pipes(child);
    sbx_close_fd(&child->pidfd);
    sbx_close_fd(&child->init_pidfd);
    sbx_close_fd(&child->unix_list_fd);
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
    sbx_close_fd(&ends[0]);
    sbx_close_fd(&ends[1]);
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

/* Set once clone3 with CLONE_INTO_CGROUP proved unavailable to this process
 * (a kernel without it, a seccomp filter answering ENOSYS, or no trampoline for
 * this architecture in clone.c): neither
 * changes while the process lives, so later spawns go straight to the
 * write. */
static atomic_int clone3_unavailable;
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
 * args->procs_fd for the child to write to, and sbx_clone_child clones.  Any
 * other clone3 failure (EBADF, EACCES, EBUSY, EAGAIN from pids.max...) is
 * the spawn's failure: the child never runs outside its group.
 * Returns the pid and sets child->pidfd and child->cgroup_joined_at_clone,
 * or returns -1 with errno set and *stage saying which step failed.
 * Parent only; the caller blocks every signal around it and closes
 * args->procs_fd.
 */
static pid_t start_child(const struct sbx_spec *spec, struct sbx_child_args *args, char *stack,
                         struct sbx_child *child, int *stage)
{
    pid_t pid;
    if (spec->cgroup_dir_fd >= 0) {
        if (!atomic_load_explicit(&clone3_unavailable, memory_order_relaxed)) {
            pid = sbx_clone3_child(args, stack, spec->cgroup_dir_fd, &child->pidfd);
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
        args->procs_fd = open_group_procs(spec->cgroup_dir_fd);
        if (args->procs_fd < 0) {
            *stage = SBX_STAGE_CGROUP_OPEN;
            return -1;
        }
    }
    pid = sbx_clone_child(args, stack + SBX_CHILD_STACK_SIZE, &child->pidfd);
    if (pid < 0)
        *stage = SBX_STAGE_CLONE;
    return pid;
}

/* The pipes of one spawn, until their ends go to the child and to the parent. */
struct pipes {
    int in[2];
    int out[2];
    int err[2];
    int captures[SBX_MAX_CAPTURES][2];
};

/*
 * reset: every fd of args, p and child -1 (nothing to close), child's pids
 * -1, no error yet.  Parent only.
 */
static void reset(struct sbx_child_args *args, struct pipes *p, struct sbx_child *child,
                  struct sbx_spawn_error *error)
{
    size_t i;
    memset(args, 0, sizeof *args);
    args->procs_fd = -1;
    for (i = 0; i < SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1; i++)
        args->pass[i] = -1;
    p->in[0] = p->in[1] = p->out[0] = p->out[1] = p->err[0] = p->err[1] = -1;
    for (i = 0; i < SBX_MAX_CAPTURES; i++) {
        p->captures[i][0] = p->captures[i][1] = -1;
        child->capture_fds[i] = -1;
    }
    child->pid = -1;
    child->pidfd = child->in_fd = child->out_fd = child->err_fd = -1;
    child->init_pidfd = -1;
    child->init_pidfd_at = -1;
    child->init_pid = -1;
    child->unix_list_fd = -1;
    child->cgroup_joined_at_clone = 0;
    error->stage = SBX_STAGE_NONE;
    error->err = 0;
}

/*
 * open_fds: the pipes of p (the captures' too) and duplicates of
 * spec->pass_fds, all CLOEXEC and numbered >= floor, put where the child
 * takes them from (args->stdio, args->pass; the capture pipes' write ends
 * move there from p).  Parent only.  Returns 0, or -1 with errno set and
 * *stage naming the step; what was opened is the caller's to close.
 */
static int open_fds(const struct sbx_spec *spec, struct sbx_child_args *args, struct pipes *p,
                    int floor, int *stage)
{
    size_t i;
    *stage = SBX_STAGE_PIPE;
    if (make_pipe(p->in, floor) || make_pipe(p->out, floor) || make_pipe(p->err, floor))
        return -1;
    for (i = 0; i < spec->n_captures; i++) {
        if (make_pipe(p->captures[i], floor))
            return -1;
    }
    *stage = SBX_STAGE_PASS_FDS;
    for (i = 0; i < spec->n_pass_fds; i++) {
        args->pass[i] = fcntl(spec->pass_fds[i], F_DUPFD_CLOEXEC, floor);
        if (args->pass[i] < 0)
            return -1;
    }
    for (i = 0; i < spec->n_captures; i++) {
        args->pass[spec->n_pass_fds + i] = p->captures[i][1];
        p->captures[i][1] = -1;
    }
    args->stdio[0] = p->in[0];
    args->stdio[1] = p->out[1];
    args->stdio[2] = p->err[1];
    return 0;
}

/*
 * clone_blocked: start_child with every signal of this thread blocked, so
 * that no handler of the parent runs in the child (which shares its memory
 * until execve), the mask restored after.  Parent only.  Returns the pid, or
 * -1 with errno set and *stage naming the step.
 */
static pid_t clone_blocked(const struct sbx_spec *spec, struct sbx_child_args *args, char *stack,
                           struct sbx_child *child, int *stage)
{
    sigset_t all, saved_mask;
    pid_t pid;
    int saved_errno;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_mask);
    pid = start_child(spec, args, stack, child, stage);
    saved_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);
    errno = saved_errno;
    return pid;
}

/*
 * reap_failed_child: reap a child that failed before execve (it exits at
 * once; CLONE_VFORK returned only then) and forget it and its pidfd.
 * Parent only.
 */
static void reap_failed_child(struct sbx_child *child)
{
    int status;
    while (waitpid(child->pid, &status, __WALL) < 0 && errno == EINTR)
        ;
    child->pid = -1;
    child->cgroup_joined_at_clone = 0;
    sbx_close_fd(&child->pidfd);
}

/*
 * keep_parent_ends: move the parent's ends of the pipes from p into child,
 * non-blocking (the child's ends stay blocking), stdout's and stderr's
 * enlarged.  Parent only.
 */
static void keep_parent_ends(const struct sbx_spec *spec, struct pipes *p, struct sbx_child *child)
{
    /* Fewer wake-ups for a flood of output; refused (and harmless) past the
     * user's pipe quota. */
    fcntl(p->out[0], F_SETPIPE_SZ, PIPE_SIZE);
    fcntl(p->err[0], F_SETPIPE_SZ, PIPE_SIZE);
    child->in_fd = p->in[1];
    child->out_fd = p->out[0];
    child->err_fd = p->err[0];
    p->in[1] = p->out[0] = p->err[0] = -1;
    for (size_t i = 0; i < spec->n_captures; i++) {
        child->capture_fds[i] = p->captures[i][0];
        p->captures[i][0] = -1;
        set_nonblocking(child->capture_fds[i]);
    }
    set_nonblocking(child->in_fd);
    set_nonblocking(child->out_fd);
    set_nonblocking(child->err_fd);
}

/* close_left: close what neither the child nor the parent kept.  Parent only. */
static void close_left(struct pipes *p, struct sbx_child_args *args)
{
    size_t i;
    for (i = 0; i < 2; i++) {
        sbx_close_fd(&p->in[i]);
        sbx_close_fd(&p->out[i]);
        sbx_close_fd(&p->err[i]);
    }
    for (i = 0; i < SBX_MAX_CAPTURES; i++) {
        sbx_close_fd(&p->captures[i][0]);
        sbx_close_fd(&p->captures[i][1]);
    }
    for (i = 0; i < SBX_MAX_PASS_FDS + SBX_MAX_CAPTURES + 1; i++)
        sbx_close_fd(&args->pass[i]);
    sbx_close_fd(&args->procs_fd);
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
    struct sbx_child_args args;
    struct pipes p;
    int floor = MIN_SOURCE_FD, n_targets, stage = SBX_STAGE_NONE, rc = -1;
    char *stack = MAP_FAILED;

    reset(&args, &p, child, error);
    if (spec->n_pass_fds > SBX_MAX_PASS_FDS || spec->n_captures > SBX_MAX_CAPTURES) {
        error->stage = SBX_STAGE_PASS_FDS;
        error->err = EINVAL;
        return -1;
    }
    n_targets = 3 + (int)spec->n_pass_fds + (int)spec->n_captures;
    if (floor < n_targets)
        floor = n_targets;
    if (open_fds(spec, &args, &p, floor, &stage) != 0)
        goto fail;
    args.spec = spec;
    args.parent = getpid();

    stage = SBX_STAGE_STACK;
    stack = mmap(NULL, SBX_CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        goto fail;
    child->pid = clone_blocked(spec, &args, stack, child, &stage);
    if (child->pid < 0)
        goto fail;
    if (args.stage != SBX_STAGE_NONE) {
        reap_failed_child(child);
        error->stage = args.stage;
        error->err = args.err;
        goto cleanup;
    }
    keep_parent_ends(spec, &p, child);
    child->init_pidfd_at = spec->init_pidfd_at;
    rc = 0;
    goto cleanup;

fail:
    error->stage = stage;
    error->err = errno;
cleanup:
    if (stack != MAP_FAILED)
        munmap(stack, SBX_CHILD_STACK_SIZE);
    close_left(&p, &args);
    return rc;
}
