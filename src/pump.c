/*
 * pump.c: the parent's loop around a running child.  Feeds stdin, captures
 * stdout and stderr under their caps, enforces the wall-clock deadline, and
 * kills and reaps.  Uses poll (never select: the caller may hold fds above
 * 1024) and runs without the GIL; the hooks take it when they need it.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_SIZE (64 * 1024)
/* Reads per stream per wake-up, so one busy stream cannot starve the rest. */
#define READS_PER_WAKE 16
/* After a kill, how long to wait for the sandbox's last writers to vanish. */
#define KILL_GRACE_SEC 0.5

/*
 * sbx_monotonic: seconds on CLOCK_MONOTONIC.  Any thread, no GIL needed,
 * async-signal-safe.
 */
double sbx_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * sbx_buffer_free: release a buffer's memory and reset it to empty.
 * Owner only; no GIL needed.
 */
void sbx_buffer_free(struct sbx_buffer *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->alloc = 0;
}

/*
 * sbx_buffer_append: copy len bytes to the end of buf, growing it by
 * doubling.  Returns 0, or -1 with errno = ENOMEM (buf unchanged).
 * No GIL needed; not async-signal-safe (malloc).
 */
int sbx_buffer_append(struct sbx_buffer *buf, const char *data, size_t len)
{
    if (len == 0)
        return 0;
    if (buf->alloc - buf->len < len) {
        size_t want = buf->alloc ? buf->alloc : CHUNK_SIZE;
        char *grown;
        while (want - buf->len < len) {
            if (want > ((size_t)-1) / 2) {
                errno = ENOMEM;
                return -1;
            }
            want *= 2;
        }
        grown = realloc(buf->data, want);
        if (grown == NULL) {
            errno = ENOMEM;
            return -1;
        }
        buf->data = grown;
        buf->alloc = want;
    }
    memcpy(buf->data + buf->len, data, len);
    buf->len += len;
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/*
 * sbx_child_close_fds: close every parent-side fd of a child.  Idempotent.
 * No GIL needed.
 */
void sbx_child_close_fds(struct sbx_child *child)
{
    close_fd(&child->in_fd);
    close_fd(&child->out_fd);
    close_fd(&child->err_fd);
    close_fd(&child->pidfd);
}

/*
 * reap: wait for child->pid (blocking) and record its status and rusage.
 * The pid stays reserved until this wait, so a kill before it can never hit
 * a recycled pid.  No GIL needed.
 */
static void reap(struct sbx_child *child, int *wait_status, struct rusage *usage)
{
    while (wait4(child->pid, wait_status, __WALL, usage) < 0 && errno == EINTR)
        ;
    child->pid = -1;
}

/*
 * sbx_kill_and_reap: SIGKILL the child (bwrap; --die-with-parent takes the
 * rest of the sandbox down with it) and reap it.  No-op once reaped.
 * No GIL needed.
 */
void sbx_kill_and_reap(struct sbx_child *child, int *wait_status, struct rusage *usage)
{
    if (child->pid < 0)
        return;
    if (child->pidfd < 0 || syscall(SYS_pidfd_send_signal, child->pidfd, SIGKILL, NULL, 0) != 0)
        kill(child->pid, SIGKILL);
    reap(child, wait_status, usage);
}

/*
 * keep_output: append what fits of a chunk under the cap.  Returns the
 * number of bytes kept, or -1 on allocation failure; sets *truncated when
 * any byte did not fit.
 */
static long keep_output(struct sbx_buffer *buf, size_t cap, const char *data, size_t len,
                        int *truncated)
{
    size_t room = cap > buf->len ? cap - buf->len : 0;
    size_t kept = len < room ? len : room;
    if (kept < len)
        *truncated = 1;
    if (sbx_buffer_append(buf, data, kept) != 0)
        return -1;
    return (long)kept;
}

enum { STREAM_OPEN = 0, STREAM_EOF = 1, STREAM_ERROR = -1, STREAM_ABORT = -2 };

/*
 * drain_stream: read what is available on *fd (non-blocking) into buf, at
 * most READS_PER_WAKE chunks.  Closes *fd at EOF.  For stdout, passes each
 * kept chunk to the on_stdout hook.  Returns a STREAM_* value.
 */
static int drain_stream(int *fd, struct sbx_buffer *buf, size_t cap, int *truncated,
                        const struct sbx_hooks *hooks, struct sbx_input *input, int is_stdout)
{
    char chunk[CHUNK_SIZE];
    int i;
    for (i = 0; i < READS_PER_WAKE; i++) {
        ssize_t n = read(*fd, chunk, sizeof chunk);
        long kept;
        if (n == 0) {
            close_fd(fd);
            return STREAM_EOF;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return STREAM_OPEN;
            return STREAM_ERROR;
        }
        kept = keep_output(buf, cap, chunk, (size_t)n, truncated);
        if (kept < 0)
            return STREAM_ERROR;
        if (is_stdout && kept > 0 && hooks != NULL && hooks->on_stdout != NULL &&
            hooks->on_stdout(hooks->ctx, chunk, (size_t)kept, input) != 0)
            return STREAM_ABORT;
    }
    return STREAM_OPEN;
}

/*
 * feed_stdin: write pending input without blocking; close stdin when all of
 * it is written and close_when_done is set, or when the child closed its
 * end (EPIPE: the rest is discarded, as a shell pipeline would).
 * Returns 0, or -1 on an unexpected write error.
 */
static int feed_stdin(int *fd, struct sbx_input *input)
{
    while (input->offset < input->pending.len) {
        size_t left = input->pending.len - input->offset;
        ssize_t n =
            write(*fd, input->pending.data + input->offset, left < CHUNK_SIZE ? left : CHUNK_SIZE);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EPIPE) {
                close_fd(fd);
                return 0;
            }
            return -1;
        }
        input->offset += (size_t)n;
    }
    input->offset = 0;
    input->pending.len = 0;
    if (input->close_when_done)
        close_fd(fd);
    return 0;
}

/*
 * drain_after_exit: once the child is gone, collect what is left in the
 * pipes.  After a normal exit bwrap's pid namespace is already empty, so
 * every writer is gone and EOF is immediate; after a kill the sandbox may
 * still be dying, so wait for EOF up to KILL_GRACE_SEC.  Never waits longer:
 * a writer outside the sandbox (a fork of the host) may hold a pipe forever.
 */
static int drain_after_exit(struct sbx_child *child, const struct sbx_pump_config *config,
                            struct sbx_outcome *outcome, double grace)
{
    double until = sbx_monotonic() + grace;
    while (child->out_fd >= 0 || child->err_fd >= 0) {
        struct pollfd fds[2];
        double left = until - sbx_monotonic();
        int i, n;
        /* A writer that never stops cannot keep us here past a second. */
        if (left < -1.0)
            break;
        fds[0].fd = child->out_fd;
        fds[1].fd = child->err_fd;
        fds[0].events = fds[1].events = POLLIN;
        n = poll(fds, 2, left > 0 ? (int)(left * 1000.0) + 1 : 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        for (i = 0; i < 2; i++) {
            int *fd = i == 0 ? &child->out_fd : &child->err_fd;
            struct sbx_buffer *buf = i == 0 ? &outcome->out : &outcome->err;
            int *trunc = i == 0 ? &outcome->stdout_truncated : &outcome->stderr_truncated;
            size_t cap = i == 0 ? config->stdout_cap : config->stderr_cap;
            if (*fd >= 0 && fds[i].revents != 0 &&
                drain_stream(fd, buf, cap, trunc, NULL, NULL, 0) == STREAM_ERROR)
                return -1;
        }
    }
    return 0;
}

/*
 * child_has_exited: whether pid is a zombie waiting to be reaped, without
 * reaping it (the fallback for kernels without pidfds).
 */
static int child_has_exited(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0)
        return 0;
    return info.si_pid != 0;
}

/*
 * poll_timeout_ms: milliseconds until the earlier of the deadline and the
 * next tick, rounded up so the loop never spins; at most 5 ms when there is
 * no pidfd and exit must be noticed by polling wait4.
 */
static int poll_timeout_ms(double now, double deadline, double next_tick, int have_pidfd)
{
    double until = deadline < next_tick ? deadline : next_tick;
    double ms = (until - now) * 1000.0 + 1.0;
    if (ms < 0)
        ms = 0;
    if (!have_pidfd && ms > 5)
        ms = 5;
    return (int)ms;
}

/*
 * sbx_pump: run the loop until the child exits, the deadline passes, an
 * output cap is passed with kill_on_cap, or a hook aborts.
 *
 * Contract: the child is always reaped and its fds closed on return;
 * outcome->out/err are owned by the caller (free with sbx_buffer_free) on
 * every path.  Returns SBX_PUMP_DONE, SBX_PUMP_ABORTED (a hook returned
 * non-zero; the hook has recorded why) or SBX_PUMP_FAILED (errno set).
 * Runs without the GIL; thread-safe; keeps SIGPIPE blocked in the calling
 * thread while it runs so a write to a closed stdin fails with EPIPE even
 * in a host that does not ignore SIGPIPE.
 */
int sbx_pump(struct sbx_child *child, struct sbx_input *input, const struct sbx_pump_config *config,
             struct sbx_outcome *outcome, double started)
{
    const struct sbx_hooks *hooks = &config->hooks;
    double deadline = started + config->timeout_sec;
    double next_tick = sbx_monotonic() + SBX_TICK_MS / 1000.0;
    int result = SBX_PUMP_DONE, saved_errno = 0, exited = 0;
    sigset_t pipe_set, saved_mask, pending_before, pending_after;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending_before);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &saved_mask);

    if (input->pending.len == 0 && input->close_when_done)
        close_fd(&child->in_fd);

    while (!exited) {
        struct pollfd fds[4];
        double now = sbx_monotonic();
        int i, n, stream;

        if (now >= deadline) {
            outcome->timed_out = 1;
            break;
        }
        if (now >= next_tick) {
            next_tick = now + SBX_TICK_MS / 1000.0;
            if (hooks->tick != NULL && hooks->tick(hooks->ctx) != 0) {
                result = SBX_PUMP_ABORTED;
                break;
            }
        }
        fds[0].fd = child->in_fd >= 0 && input->pending.len > 0 ? child->in_fd : -1;
        fds[0].events = POLLOUT;
        fds[1].fd = child->out_fd;
        fds[2].fd = child->err_fd;
        fds[1].events = fds[2].events = POLLIN;
        fds[3].fd = child->pidfd;
        fds[3].events = POLLIN;
        n = poll(fds, 4, poll_timeout_ms(now, deadline, next_tick, child->pidfd >= 0));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            saved_errno = errno;
            result = SBX_PUMP_FAILED;
            break;
        }
        if (fds[0].fd >= 0 && fds[0].revents && feed_stdin(&child->in_fd, input) != 0) {
            saved_errno = errno;
            result = SBX_PUMP_FAILED;
            break;
        }
        for (i = 1; i <= 2 && result == SBX_PUMP_DONE; i++) {
            int *fd = i == 1 ? &child->out_fd : &child->err_fd;
            struct sbx_buffer *buf = i == 1 ? &outcome->out : &outcome->err;
            int *trunc = i == 1 ? &outcome->stdout_truncated : &outcome->stderr_truncated;
            size_t cap = i == 1 ? config->stdout_cap : config->stderr_cap;
            if (*fd < 0 || fds[i].revents == 0)
                continue;
            stream = drain_stream(fd, buf, cap, trunc, hooks, input, i == 1);
            if (stream == STREAM_ERROR) {
                saved_errno = errno;
                result = SBX_PUMP_FAILED;
            } else if (stream == STREAM_ABORT) {
                result = SBX_PUMP_ABORTED;
            }
        }
        if (result != SBX_PUMP_DONE)
            break;
        if (config->kill_on_cap && (outcome->stdout_truncated || outcome->stderr_truncated)) {
            outcome->killed_on_cap = 1;
            break;
        }
        /* The hook may have queued input or asked to close stdin. */
        if (child->in_fd < 0)
            input->pending.len = 0;
        else if (input->pending.len == 0 && input->close_when_done)
            close_fd(&child->in_fd);
        if (child->pidfd >= 0 ? fds[3].revents != 0 : child_has_exited(child->pid)) {
            reap(child, &outcome->wait_status, &outcome->usage);
            exited = 1;
        }
    }

    close_fd(&child->in_fd);
    if (!exited)
        sbx_kill_and_reap(child, &outcome->wait_status, &outcome->usage);
    outcome->wall_time = sbx_monotonic() - started;
    if (drain_after_exit(child, config, outcome, exited ? 0.0 : KILL_GRACE_SEC) != 0 &&
        result == SBX_PUMP_DONE) {
        saved_errno = errno;
        result = SBX_PUMP_FAILED;
    }
    sbx_child_close_fds(child);

    sigpending(&pending_after);
    if (sigismember(&pending_after, SIGPIPE) && !sigismember(&pending_before, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &saved_mask, NULL);
    errno = saved_errno;
    return result;
}
