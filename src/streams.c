/* SPDX-License-Identifier: MIT */
/*
 * streams.c: the bytes through the child's pipes, for the pump's loop
 * (pump.c): stdout, stderr and the captures read under their caps (past a
 * cap drained and dropped, so the child never blocks on a full pipe), each
 * kept chunk shown to its hook with the watchdog armed, stdin written
 * without SIGPIPE, and what is left in the pipes collected once the child
 * is gone.  Runs without the GIL; the hooks take it when they need it.
 */
#define _GNU_SOURCE
#include "pump.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

/* Largest single read into an output buffer; pipes are enlarged to match. */
#define READ_SIZE (1024 * 1024)
/* Reads per stream per wake-up, so one busy stream cannot starve the rest. */
#define READS_PER_WAKE 16

/*
 * sbx_hook_returned: disarm the watchdog armed around a hook call and take what
 * it saw into the outcome: its CPU sample, its peak of tasks, and the limit it killed the
 * sandbox for (timed_out or cpu_exceeded, as the loop would have set them).
 * Returns 1 when it killed the sandbox: the loop must end, and the sandbox
 * is reaped as after any kill.
 */
int sbx_hook_returned(struct pump *p)
{
    struct sbx_watch_report seen;
    sbx_watchdog_disarm(&p->watchdog, &seen);
    if (seen.cpu_used > p->outcome->tree_cpu_time)
        p->outcome->tree_cpu_time = seen.cpu_used;
    if (seen.peak_tasks > p->outcome->peak_tasks)
        p->outcome->peak_tasks = seen.peak_tasks;
    if (seen.fired == SBX_WATCH_NONE)
        return 0;
    if (seen.fired == SBX_WATCH_DEADLINE)
        p->outcome->timed_out = 1;
    else if (seen.fired == SBX_WATCH_DISK)
        p->outcome->disk_exceeded = 1;
    else
        p->outcome->cpu_exceeded = 1;
    p->killed_at = seen.killed_at;
    return 1;
}

/*
 * has_hook: whether stream s has a hook and the caller set it.
 */
static int has_hook(const struct pump *p, const struct stream *s)
{
    const struct sbx_hooks *hooks = &p->config->hooks;
    return (s->hook == HOOK_STDOUT && hooks->on_stdout != NULL) ||
           (s->hook == HOOK_STDERR && hooks->on_stderr != NULL);
}

/*
 * call_hook: pass len kept bytes of stream s to its hook (on_stdout with
 * `input`, which is NULL once no reply can be written; on_stderr), if the
 * stream has one and the caller set it.  Returns the hook's verdict: 0, or
 * non-zero to abort the run.  No GIL held; the hook takes it.
 */
static int call_hook(struct pump *p, const struct stream *s, const char *data, size_t len,
                     struct sbx_input *input)
{
    const struct sbx_hooks *hooks = &p->config->hooks;
    if (s->hook == HOOK_STDOUT && hooks->on_stdout != NULL)
        return hooks->on_stdout(hooks->ctx, data, len, input);
    if (s->hook == HOOK_STDERR && hooks->on_stderr != NULL)
        return hooks->on_stderr(hooks->ctx, data, len);
    return 0;
}

/*
 * sbx_drain_stream: read what is available on the stream (non-blocking), at
 * most READS_PER_WAKE reads.  Bytes under the cap are read straight into the
 * stream's buffer; once it is full, reads go to the scratch buffer and are
 * dropped, and any such byte marks the stream truncated (so exactly `cap`
 * bytes is not truncation, one more is).  Closes the fd at EOF.  With
 * with_hooks (only while the child is unreaped), passes each kept chunk to
 * the stream's hook as it is read, with the watchdog armed.  Returns a
 * STREAM_* value (errno set for STREAM_ERROR; STREAM_KILLED when the
 * watchdog killed the sandbox during the hook).
 */
int sbx_drain_stream(struct pump *p, struct stream *s, int with_hooks)
{
    int i;
    for (i = 0; i < READS_PER_WAKE; i++) {
        size_t room = s->cap > s->buf->len ? s->cap - s->buf->len : 0;
        size_t want = SBX_CHUNK_SIZE;
        char *into = p->scratch;
        ssize_t n;
        if (room > 0) {
            /* Grown only when full, so a few bytes of output never take more
             * than the first block; the rest of the cap bounds the growth. */
            if (s->buf->alloc == s->buf->len &&
                sbx_buffer_reserve(s->buf, room < SBX_CHUNK_SIZE ? room : SBX_CHUNK_SIZE, room) !=
                    0)
                return STREAM_ERROR;
            want = s->buf->alloc - s->buf->len;
            want = want < room ? want : room;
            want = want < READ_SIZE ? want : READ_SIZE;
            into = s->buf->data + s->buf->len;
        }
        n = read(*s->fd, into, want);
        if (n == 0) {
            sbx_close_fd(s->fd);
            return STREAM_EOF;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return STREAM_OPEN;
            return STREAM_ERROR;
        }
        if (into == p->scratch) {
            *s->truncated = 1;
            continue;
        }
        s->buf->len += (size_t)n;
        if (with_hooks && has_hook(p, s)) {
            int verdict, killed;
            sbx_watchdog_arm(&p->watchdog);
            verdict = call_hook(p, s, into, (size_t)n, p->input);
            killed = sbx_hook_returned(p);
            if (verdict != 0)
                return STREAM_ABORT;
            if (killed)
                return STREAM_KILLED;
        }
    }
    return STREAM_OPEN;
}

/*
 * write_without_sigpipe: write(2) with SIGPIPE blocked in this thread, so a
 * child that closed its stdin gives EPIPE instead of killing a host that
 * does not ignore SIGPIPE.  A SIGPIPE this write raised is consumed.
 */
static ssize_t write_without_sigpipe(int fd, const char *data, size_t len)
{
    sigset_t pipe_set, saved, pending;
    int was_pending, saved_errno;
    ssize_t n;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &saved);
    n = write(fd, data, len);
    saved_errno = errno;
    if (n < 0 && errno == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    errno = saved_errno;
    return n;
}

/*
 * sbx_feed_stdin: write pending input without blocking; close stdin when all of
 * it is written and close_when_done is set, or when the child closed its
 * end (EPIPE: the rest is discarded, as a shell pipeline would).
 * Returns 0, or -1 on an unexpected write error.
 */
int sbx_feed_stdin(int *fd, struct sbx_input *input)
{
    while (input->offset < input->pending.len) {
        size_t left = input->pending.len - input->offset;
        ssize_t n = write_without_sigpipe(*fd, input->pending.data + input->offset,
                                          left < SBX_CHUNK_SIZE ? left : SBX_CHUNK_SIZE);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EPIPE) {
                sbx_close_fd(fd);
                return 0;
            }
            return -1;
        }
        input->offset += (size_t)n;
    }
    input->offset = 0;
    input->pending.len = 0;
    if (input->close_when_done)
        sbx_close_fd(fd);
    return 0;
}

/*
 * sbx_drain_after_exit: once the child is gone, collect what is left in the
 * pipes.  After a normal exit bwrap's pid namespace is already empty, so
 * every writer is gone and EOF is immediate; after a kill the sandbox may
 * still be dying, so wait for EOF up to `grace` seconds.  Never much longer:
 * a writer outside the sandbox (a fork of the host) may hold a pipe forever.
 * Returns 0, or -1 with errno set.
 */
int sbx_drain_after_exit(struct pump *p, double grace)
{
    double until = sbx_monotonic() + grace;
    for (;;) {
        struct pollfd fds[2 + SBX_MAX_CAPTURES];
        double left = until - sbx_monotonic();
        int i, n, open_streams = 0;
        for (i = 0; i < p->n_streams; i++) {
            fds[i].fd = *p->streams[i].fd;
            fds[i].events = POLLIN;
            open_streams += fds[i].fd >= 0;
        }
        /* A writer that never stops cannot keep us here past a second. */
        if (open_streams == 0 || left < -1.0)
            return 0;
        n = poll(fds, (nfds_t)p->n_streams, left > 0 ? (int)(left * 1000.0) + 1 : 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        for (i = 0; i < p->n_streams; i++) {
            if (fds[i].fd >= 0 && fds[i].revents != 0 &&
                sbx_drain_stream(p, &p->streams[i], 0) == STREAM_ERROR)
                return -1;
        }
    }
}

/*
 * sbx_deliver_rest: pass the bytes sbx_drain_after_exit kept (stdout and stderr
 * past seen[0] and seen[1], what the hooks already saw) to the hooks, one
 * chunk per stream, with no input: stdin is closed for good.  The drain
 * itself calls no hook, so a slow hook cannot stop it collecting what the
 * program wrote before it ended.  Returns 0, or non-zero when a hook asked
 * to abort.
 */
int sbx_deliver_rest(struct pump *p, const size_t seen[2])
{
    for (int i = 0; i < 2; i++) {
        const struct stream *s = &p->streams[i];
        if (s->buf->len > seen[i] &&
            call_hook(p, s, s->buf->data + seen[i], s->buf->len - seen[i], NULL) != 0)
            return 1;
    }
    return 0;
}
