/*
 * pump.c: the parent's loop around a running child.  Feeds stdin, captures
 * stdout and stderr under their caps, enforces the wall-clock deadline and
 * the CPU limit (and has the watchdog enforce them while a hook runs), and
 * kills and reaps.  Uses poll (never select: the caller may hold fds above
 * 1024) and runs without the GIL; the hooks take it when they need it.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_SIZE (64 * 1024)
/* Largest single read into an output buffer; pipes are enlarged to match. */
#define READ_SIZE (1024 * 1024)
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
 * The capture buffers.  Output starts in a small heap block that doubles up to
 * HEAP_MAX, so the common few lines cost one malloc.  Past HEAP_MAX the
 * buffer moves, once (a copy of at most HEAP_MAX bytes), into an anonymous
 * mapping that starts on a huge-page boundary and is advised for transparent
 * huge pages: 32 MiB of output then costs 16 page faults instead of 8192,
 * and the kernel clears each 2 MiB page in one go.  The mapping is as large
 * as the buffer may ever need (the caller's limit, e.g. the rest of the
 * cap) up to MAP_FIRST_MAX, so the reads go straight into it without
 * growing it; past that it doubles by mremap, which moves page tables and
 * never copies a byte.  Only the pages written are ever backed by memory
 * (RSS is the output rounded up to a huge page), the address space taken
 * is never more than the limit rounded up to a page, and sbx_buffer_free
 * unmaps it.
 */
#define HEAP_MAX (256 * 1024)
#define HUGE_PAGE_SIZE (2 * 1024 * 1024)
#define MAP_FIRST_MAX ((size_t)64 * 1024 * 1024)

/*
 * sbx_buffer_free: release a buffer's memory (heap block or mapping) and
 * reset it to empty.  Owner only; no GIL needed.
 */
void sbx_buffer_free(struct sbx_buffer *buf)
{
    if (buf->external)
        ; /* the owner's memory: forgotten, not released */
    else if (buf->mapped)
        munmap(buf->data, buf->alloc);
    else
        free(buf->data);
    buf->data = NULL;
    buf->len = buf->alloc = 0;
    buf->mapped = buf->external = 0;
}

/* round_up: n rounded up to a multiple of `to` (a power of two); 0 on overflow. */
static size_t round_up(size_t n, size_t to)
{
    return n > ((size_t)-1) - (to - 1) ? 0 : (n + to - 1) & ~(to - 1);
}

/*
 * map_region: a private anonymous read-write mapping of `size` bytes (a
 * multiple of the page size) that starts on a huge-page boundary when it
 * is at least a huge page, advised for transparent huge pages.  Returns
 * NULL on failure (errno set).
 */
static char *map_region(size_t size)
{
    size_t slack = size >= HUGE_PAGE_SIZE ? HUGE_PAGE_SIZE : 0, head;
    char *raw, *start;
    if (size + slack < size) {
        errno = ENOMEM;
        return NULL;
    }
    raw = mmap(NULL, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    if (slack == 0)
        return raw;
    start = (char *)round_up((size_t)(uintptr_t)raw, HUGE_PAGE_SIZE);
    head = (size_t)(start - raw);
    if (head > 0)
        munmap(raw, head);
    if (slack > head)
        munmap(start + size, slack - head);
    /* A hint: where the kernel has no transparent huge pages it fails and
     * the buffer works with small pages. */
    madvise(start, size, MADV_HUGEPAGE);
    return start;
}

/*
 * buffer_resize: make buf's block `size` bytes (> buf->len), keeping its
 * bytes: realloc up to HEAP_MAX, then a mapping (see above).  Returns 0, or
 * -1 with errno = ENOMEM (buf unchanged).
 */
static int buffer_resize(struct sbx_buffer *buf, size_t size)
{
    char *moved;
    if (!buf->mapped && size <= HEAP_MAX) {
        moved = realloc(buf->data, size);
    } else {
        size = round_up(size, (size_t)sysconf(_SC_PAGESIZE));
        if (size == 0) {
            errno = ENOMEM;
            return -1;
        }
        if (buf->mapped) {
            moved = mremap(buf->data, buf->alloc, size, MREMAP_MAYMOVE);
            moved = moved == MAP_FAILED ? NULL : moved;
        } else {
            moved = map_region(size);
            if (moved != NULL && buf->len > 0)
                memcpy(moved, buf->data, buf->len);
            if (moved != NULL)
                free(buf->data);
        }
    }
    if (moved == NULL) {
        errno = ENOMEM;
        return -1;
    }
    buf->data = moved;
    buf->alloc = size;
    buf->mapped = buf->mapped || size > HEAP_MAX;
    return 0;
}

/*
 * sbx_buffer_reserve: make room for at least `extra` more bytes of a buffer
 * that will never hold more than len + limit bytes in all (limit >= extra;
 * SIZE_MAX: no bound).  The block doubles from CHUNK_SIZE, never past the
 * bound; the move to a mapping takes the whole bound at once, up to
 * MAP_FIRST_MAX, or where that much address space is refused, just the
 * doubled size.  An external buffer never grows: past its alloc bytes this
 * fails.  Returns 0, or -1 with errno = ENOMEM (buf unchanged).  No GIL
 * needed; not async-signal-safe (malloc, mmap).
 */
int sbx_buffer_reserve(struct sbx_buffer *buf, size_t extra, size_t limit)
{
    size_t want = buf->alloc ? buf->alloc : CHUNK_SIZE, bound;
    if (buf->alloc - buf->len >= extra)
        return 0;
    if (buf->external) {
        errno = ENOMEM;
        return -1;
    }
    bound = limit > ((size_t)-1) - buf->len ? (size_t)-1 : buf->len + limit;
    while (want - buf->len < extra) {
        if (want > ((size_t)-1) / 2) {
            errno = ENOMEM;
            return -1;
        }
        want *= 2;
    }
    if (want > bound)
        want = bound;
    if (!buf->mapped && want > HEAP_MAX && bound > want) {
        size_t whole = bound < MAP_FIRST_MAX ? bound : MAP_FIRST_MAX;
        if (whole > want && buffer_resize(buf, whole) == 0)
            return 0;
    }
    return buffer_resize(buf, want);
}

/*
 * sbx_buffer_append: copy len bytes to the end of buf.  Returns 0, or -1
 * with errno = ENOMEM (buf unchanged).  No GIL needed; not
 * async-signal-safe (malloc).
 */
int sbx_buffer_append(struct sbx_buffer *buf, const char *data, size_t len)
{
    if (len == 0)
        return 0;
    if (sbx_buffer_reserve(buf, len, (size_t)-1) != 0)
        return -1;
    memcpy(buf->data + buf->len, data, len);
    buf->len += len;
    return 0;
}

/* Which hook sees a stream's kept bytes. */
enum { HOOK_NONE = 0, HOOK_STDOUT, HOOK_STDERR };

/* One pipe the parent reads: where its bytes go, how many it may keep, which hook. */
struct stream {
    int *fd;
    struct sbx_buffer *buf;
    size_t cap;
    int *truncated;
    int hook;
};

/* The state of one sbx_pump call. */
struct pump {
    struct sbx_child *child;
    struct sbx_input *input;
    const struct sbx_pump_config *config;
    struct sbx_outcome *outcome;
    struct stream streams[2 + SBX_MAX_CAPTURES]; /* stdout, stderr, the captures */
    int n_streams;
    char *scratch;                /* CHUNK_SIZE bytes, on the heap: threads may have small stacks */
    struct sbx_watchdog watchdog; /* keeps the limits while a hook runs */
    double killed_at;             /* when the sandbox was killed on a limit or an abort; -1: not */
};

enum { STREAM_OPEN = 0, STREAM_EOF = 1, STREAM_ERROR = -1, STREAM_ABORT = -2, STREAM_KILLED = -3 };

/*
 * hook_returned: disarm the watchdog armed around a hook call and take what
 * it saw into the outcome: its CPU sample, and the limit it killed the
 * sandbox for (timed_out or cpu_exceeded, as the loop would have set them).
 * Returns 1 when it killed the sandbox: the loop must end, and the sandbox
 * is reaped as after any kill.
 */
static int hook_returned(struct pump *p)
{
    struct sbx_watch_report seen;
    sbx_watchdog_disarm(&p->watchdog, &seen);
    if (seen.cpu_used > p->outcome->tree_cpu_time)
        p->outcome->tree_cpu_time = seen.cpu_used;
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

enum { TICK_GO = 0, TICK_ABORT, TICK_KILLED };

/*
 * guarded_tick: the tick hook, with the watchdog armed around it: it waits
 * for the GIL, and the signal handlers it runs are the caller's Python
 * code.  Returns TICK_ABORT when the hook asked to abort, else TICK_KILLED
 * when the watchdog killed the sandbox meanwhile, else TICK_GO.
 */
static int guarded_tick(struct pump *p)
{
    const struct sbx_hooks *hooks = &p->config->hooks;
    int verdict, killed;
    sbx_watchdog_arm(&p->watchdog);
    verdict = hooks->tick(hooks->ctx);
    killed = hook_returned(p);
    return verdict != 0 ? TICK_ABORT : killed ? TICK_KILLED : TICK_GO;
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
 * drain_stream: read what is available on the stream (non-blocking), at
 * most READS_PER_WAKE reads.  Bytes under the cap are read straight into the
 * stream's buffer; once it is full, reads go to the scratch buffer and are
 * dropped, and any such byte marks the stream truncated (so exactly `cap`
 * bytes is not truncation, one more is).  Closes the fd at EOF.  With
 * with_hooks (only while the child is unreaped), passes each kept chunk to
 * the stream's hook as it is read, with the watchdog armed.  Returns a
 * STREAM_* value (errno set for STREAM_ERROR; STREAM_KILLED when the
 * watchdog killed the sandbox during the hook).
 */
static int drain_stream(struct pump *p, struct stream *s, int with_hooks)
{
    int i;
    for (i = 0; i < READS_PER_WAKE; i++) {
        size_t room = s->cap > s->buf->len ? s->cap - s->buf->len : 0;
        size_t want = CHUNK_SIZE;
        char *into = p->scratch;
        ssize_t n;
        if (room > 0) {
            /* Grown only when full, so a few bytes of output never take more
             * than the first block; the rest of the cap bounds the growth. */
            if (s->buf->alloc == s->buf->len &&
                sbx_buffer_reserve(s->buf, room < CHUNK_SIZE ? room : CHUNK_SIZE, room) != 0)
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
            killed = hook_returned(p);
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
 * feed_stdin: write pending input without blocking; close stdin when all of
 * it is written and close_when_done is set, or when the child closed its
 * end (EPIPE: the rest is discarded, as a shell pipeline would).
 * Returns 0, or -1 on an unexpected write error.
 */
static int feed_stdin(int *fd, struct sbx_input *input)
{
    while (input->offset < input->pending.len) {
        size_t left = input->pending.len - input->offset;
        ssize_t n = write_without_sigpipe(*fd, input->pending.data + input->offset,
                                          left < CHUNK_SIZE ? left : CHUNK_SIZE);
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
 * drain_after_exit: once the child is gone, collect what is left in the
 * pipes.  After a normal exit bwrap's pid namespace is already empty, so
 * every writer is gone and EOF is immediate; after a kill the sandbox may
 * still be dying, so wait for EOF up to `grace` seconds.  Never much longer:
 * a writer outside the sandbox (a fork of the host) may hold a pipe forever.
 * Returns 0, or -1 with errno set.
 */
static int drain_after_exit(struct pump *p, double grace)
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
                drain_stream(p, &p->streams[i], 0) == STREAM_ERROR)
                return -1;
        }
    }
}

/*
 * deliver_rest: pass the bytes drain_after_exit kept (stdout and stderr
 * past seen[0] and seen[1], what the hooks already saw) to the hooks, one
 * chunk per stream, with no input: stdin is closed for good.  The drain
 * itself calls no hook, so a slow hook cannot stop it collecting what the
 * program wrote before it ended.  Returns 0, or non-zero when a hook asked
 * to abort.
 */
static int deliver_rest(struct pump *p, const size_t seen[2])
{
    for (int i = 0; i < 2; i++) {
        const struct stream *s = &p->streams[i];
        if (s->buf->len > seen[i] &&
            call_hook(p, s, s->buf->data + seen[i], s->buf->len - seen[i], NULL) != 0)
            return 1;
    }
    return 0;
}

/*
 * poll_timeout_ms: milliseconds until the earlier of the deadline and the
 * next tick, rounded up so the loop never spins; at most 5 ms when there is
 * no pidfd and exit must be noticed by polling waitid.
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
 * cpu_limit_passed: sample the CPU time of the sandbox (the tree under
 * bwrap, or its cgroup's counter when larger) and tell whether it passed
 * config->cpu_limit (then cpu_exceeded is set).
 */
static int cpu_limit_passed(struct pump *p)
{
    double used;
    if (p->config->cpu_limit <= 0 || p->child->pid < 0)
        return 0;
    used = sbx_sandbox_cpu_seconds(p->child->pid, p->config->cgroup_cpu_fd);
    if (used > p->outcome->tree_cpu_time)
        p->outcome->tree_cpu_time = used;
    if (used < p->config->cpu_limit)
        return 0;
    p->outcome->cpu_exceeded = 1;
    return 1;
}

/*
 * disk_limit_passed: pin the sandbox's init if it is not yet (so the reap
 * can wait for it whatever becomes of bwrap), and tell whether the tmpfs
 * at config->disk_dir holds more than config->disk_inodes inodes (then
 * disk_exceeded is set).
 */
static int disk_limit_passed(struct pump *p)
{
    if (p->child->pid < 0 || !sbx_pin_init(p->child) || p->config->disk_inodes <= 0)
        return 0;
    if (sbx_sandbox_inodes(p->child, p->config->disk_dir) <= p->config->disk_inodes)
        return 0;
    p->outcome->disk_exceeded = 1;
    return 1;
}

/*
 * pump_loop: the body of sbx_pump, up to the child's exit or the reason to
 * kill it.  Returns SBX_PUMP_* with *exited telling whether the child was
 * reaped (or found gone) here.
 */
static int pump_loop(struct pump *p, double started, int *exited)
{
    struct sbx_child *child = p->child;
    struct sbx_input *input = p->input;
    struct sbx_outcome *outcome = p->outcome;
    const struct sbx_hooks *hooks = &p->config->hooks;
    double deadline = started + p->config->timeout_sec;
    double next_tick = sbx_monotonic() + SBX_TICK_MS / 1000.0;

    if (input->pending.len == 0 && input->close_when_done)
        sbx_close_fd(&child->in_fd);

    for (;;) {
        struct pollfd fds[3 + SBX_MAX_CAPTURES];
        int pid_slot = 1 + p->n_streams;
        double now = sbx_monotonic();
        int i, n, stream;

        if (now >= deadline) {
            outcome->timed_out = 1;
            return SBX_PUMP_DONE;
        }
        /* As soon as bwrap has cloned it (its status pipe wakes the loop). */
        sbx_pin_init(child);
        if (now >= next_tick) {
            next_tick = now + SBX_TICK_MS / 1000.0;
            if (hooks->tick != NULL) {
                int verdict = guarded_tick(p);
                if (verdict == TICK_ABORT)
                    return SBX_PUMP_ABORTED;
                if (verdict == TICK_KILLED)
                    return SBX_PUMP_DONE;
            }
            if (cpu_limit_passed(p) || disk_limit_passed(p))
                return SBX_PUMP_DONE;
        }
        fds[0].fd = child->in_fd >= 0 && input->pending.len > 0 ? child->in_fd : -1;
        fds[0].events = POLLOUT;
        for (i = 0; i < p->n_streams; i++) {
            fds[i + 1].fd = *p->streams[i].fd;
            fds[i + 1].events = POLLIN;
        }
        fds[pid_slot].fd = child->pidfd;
        fds[pid_slot].events = POLLIN;
        n = poll(fds, (nfds_t)pid_slot + 1,
                 poll_timeout_ms(now, deadline, next_tick, child->pidfd >= 0));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return SBX_PUMP_FAILED;
        if (fds[0].fd >= 0 && fds[0].revents && feed_stdin(&child->in_fd, input) != 0)
            return SBX_PUMP_FAILED;
        for (i = 0; i < p->n_streams; i++) {
            if (fds[i + 1].fd < 0 || fds[i + 1].revents == 0)
                continue;
            stream = drain_stream(p, &p->streams[i], 1);
            if (stream == STREAM_ERROR)
                return SBX_PUMP_FAILED;
            if (stream == STREAM_ABORT)
                return SBX_PUMP_ABORTED;
            if (stream == STREAM_KILLED)
                return SBX_PUMP_DONE;
        }
        if (p->config->kill_on_cap && (outcome->stdout_truncated || outcome->stderr_truncated)) {
            outcome->killed_on_cap = 1;
            return SBX_PUMP_DONE;
        }
        /* The hook may have queued input or asked to close stdin. */
        if (child->in_fd < 0)
            input->pending.len = 0;
        else if (input->pending.len == 0 && input->close_when_done)
            sbx_close_fd(&child->in_fd);
        if (child->pidfd >= 0 ? fds[pid_slot].revents != 0 : sbx_child_has_exited(child->pid)) {
            outcome->status_known = sbx_reap(child, &outcome->wait_status, &outcome->usage);
            *exited = 1;
            return SBX_PUMP_DONE;
        }
    }
}

/*
 * sbx_pump: run the loop until the child exits, the deadline passes, an
 * output cap is passed with kill_on_cap, or a hook aborts.  Unless the run
 * was aborted, the output hooks see every byte that ends up in
 * outcome->out and outcome->err, in order, once each.
 *
 * While a hook runs in the loop, a watchdog thread (started here when there
 * are hooks, joined before the reap) kills the sandbox at the deadline or
 * past the CPU limit; the run then ends when the hook returns, with the
 * verdict the loop would have given, and wall_time says when the sandbox
 * ended, not when the hook returned.
 *
 * Contract: the child is always reaped (or found auto-reaped) and its fds
 * closed on return; outcome->out/err/captures are owned by the caller (free
 * with sbx_buffer_free) on every path; no thread is left running.  Returns
 * SBX_PUMP_DONE, SBX_PUMP_ABORTED (a hook returned non-zero; the hook has
 * recorded why) or SBX_PUMP_FAILED (errno set; also when the watchdog could
 * not be started).  Runs without the GIL; thread-safe.
 */
int sbx_pump(struct sbx_child *child, struct sbx_input *input, const struct sbx_pump_config *config,
             struct sbx_outcome *outcome, double started)
{
    struct pump p;
    int result, saved_errno = 0, exited = 0;
    int watched = config->hooks.tick != NULL || config->hooks.on_stdout != NULL ||
                  config->hooks.on_stderr != NULL;
    size_t i, seen[2];

    memset(&p, 0, sizeof p);
    p.child = child;
    p.input = input;
    p.config = config;
    p.outcome = outcome;
    p.streams[0] = (struct stream){&child->out_fd, &outcome->out, config->stdout_cap,
                                   &outcome->stdout_truncated, HOOK_STDOUT};
    p.streams[1] = (struct stream){&child->err_fd, &outcome->err, config->stderr_cap,
                                   &outcome->stderr_truncated, HOOK_STDERR};
    p.n_streams = 2;
    for (i = 0; i < SBX_MAX_CAPTURES && child->capture_fds[i] >= 0; i++)
        p.streams[p.n_streams++] =
            (struct stream){&child->capture_fds[i], &outcome->captures[i], config->capture_caps[i],
                            &outcome->captures_truncated[i], HOOK_NONE};
    outcome->tree_cpu_time = -1.0;
    p.killed_at = -1.0;
    p.scratch = malloc(CHUNK_SIZE);
    if (p.scratch == NULL)
        saved_errno = ENOMEM;
    else if (watched &&
             sbx_watchdog_start(&p.watchdog, child, config, started + config->timeout_sec) != 0)
        saved_errno = errno;
    if (saved_errno != 0) {
        /* Never run a hook unwatched: fail before the first. */
        sbx_kill_and_reap(child, &outcome->wait_status, &outcome->usage);
        sbx_child_close_fds(child);
        free(p.scratch);
        errno = saved_errno;
        return SBX_PUMP_FAILED;
    }

    result = pump_loop(&p, started, &exited);
    if (result == SBX_PUMP_FAILED)
        saved_errno = errno;
    /* No hook runs from here on but deliver_rest's, after the reap: nothing
     * left to watch. */
    if (watched)
        sbx_watchdog_stop(&p.watchdog);
    /* Until here the hooks saw every kept byte as it was read. */
    seen[0] = outcome->out.len;
    seen[1] = outcome->err.len;
    sbx_close_fd(&child->in_fd);
    if (!exited) {
        if (p.killed_at < 0)
            p.killed_at = sbx_monotonic();
        outcome->status_known = sbx_kill_and_reap(child, &outcome->wait_status, &outcome->usage);
    }
    /* The program's end: its exit, or the kill (by the watchdog while a hook
     * ran, or here), not the end of the kernel's teardown that the reap
     * waited for, nor when the hook returned. */
    outcome->wall_time = (p.killed_at >= 0 ? p.killed_at : sbx_monotonic()) - started;
    if (drain_after_exit(&p, exited ? 0.0 : KILL_GRACE_SEC) != 0 && result == SBX_PUMP_DONE) {
        saved_errno = errno;
        result = SBX_PUMP_FAILED;
    }
    if (result == SBX_PUMP_DONE && deliver_rest(&p, seen) != 0)
        result = SBX_PUMP_ABORTED;
    sbx_child_close_fds(child);
    free(p.scratch);
    errno = saved_errno;
    return result;
}
