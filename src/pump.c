/* SPDX-License-Identifier: MIT */
/*
 * pump.c: the parent's loop around a running child.  Feeds stdin, captures
 * stdout and stderr under their caps (through streams.c), enforces the
 * wall-clock deadline and the CPU limit (and has the watchdog enforce them
 * while a hook runs), and kills and reaps.  Uses poll (never select: the
 * caller may hold fds above 1024) and runs without the GIL; the hooks take
 * it when they need it.
 */
#define _GNU_SOURCE
#include "pump.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    killed = sbx_hook_returned(p);
    return verdict != 0 ? TICK_ABORT : killed ? TICK_KILLED : TICK_GO;
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
 * bwrap, or its cgroup's counter when larger), keep the peak of its tasks,
 * and tell whether it passed config->cpu_limit (then cpu_exceeded is set).
 */
static int cpu_limit_passed(struct pump *p)
{
    double used;
    long tasks;
    if (p->config->cpu_limit <= 0 || p->child->pid < 0)
        return 0;
    used = sbx_sandbox_cpu_seconds(sbx_tree_root(p->child), p->config->cgroup_cpu_fd, &tasks);
    if (used > p->outcome->tree_cpu_time)
        p->outcome->tree_cpu_time = used;
    if (tasks > p->outcome->peak_tasks)
        p->outcome->peak_tasks = tasks;
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

/* Not an SBX_PUMP_* value: the loop goes on. */
#define KEEP_GOING 2

/* little_endian: the n-byte little-endian number at data. */
static unsigned long long little_endian(const unsigned char *data, int n)
{
    unsigned long long value = 0;
    while (n-- > 0)
        value = value << 8 | data[n];
    return value;
}

/*
 * stream_ended: whether the init's file record stream in capture s has
 * ended ('F' u8 mode u32le name_length name u64le data_length data ...
 * 'E' u8 flags, see init_files.c), walking on from p->stream_at, the first
 * record not yet whole when last looked.  A stream cut at its cap, or not
 * sound, never ends here: the run then waits for bwrap's exit as ever.
 */
static int stream_ended(struct pump *p, const struct stream *s)
{
    const unsigned char *data = (const unsigned char *)s->buf->data;
    size_t len = s->buf->len, at = p->stream_at;
    if (*s->truncated)
        return 0;
    while (at < len) {
        unsigned long long name_length, data_length;
        if (data[at] == 'E')
            return len - at == 2;
        if (data[at] != 'F' || len - at < 6)
            return 0;
        name_length = little_endian(data + at + 2, 4);
        if (len - at - 6 < name_length + 8)
            return 0;
        data_length = little_endian(data + at + 6 + name_length, 8);
        if (len - at - 14 - name_length < data_length)
            return 0;
        at += 14 + name_length + data_length;
        p->stream_at = at;
    }
    return 0;
}

/*
 * init_reported: with config->end_at_report, whether that capture holds
 * the init's whole report, an "exit ..." line, and, with
 * config->end_after_stream, the file records the init streams after it
 * have ended.  The init reports once the program has exited and every
 * other process of the sandbox is killed and reaped, so every byte the
 * program wrote is in the pipes by then.
 */
static int init_reported(struct pump *p)
{
    const struct sbx_buffer *report;
    int capture = p->config->end_at_report, stream = p->config->end_after_stream;
    if (capture < 0 || 2 + capture >= p->n_streams || 2 + stream >= p->n_streams)
        return 0;
    report = p->streams[2 + capture].buf;
    if (report->len <= 5 || memcmp(report->data, "exit ", 5) != 0 ||
        report->data[report->len - 1] != '\n')
        return 0;
    return stream < 0 || stream_ended(p, &p->streams[2 + stream]);
}

/*
 * every_tick: what the loop does once per SBX_TICK_MS: the tick hook with
 * the watchdog armed, then the CPU and disk limits.  Returns KEEP_GOING, or
 * the SBX_PUMP_* the loop ends with.
 */
static int every_tick(struct pump *p)
{
    if (p->config->hooks.tick != NULL) {
        int verdict = guarded_tick(p);
        if (verdict == TICK_ABORT)
            return SBX_PUMP_ABORTED;
        if (verdict == TICK_KILLED)
            return SBX_PUMP_DONE;
    }
    if (cpu_limit_passed(p) || disk_limit_passed(p))
        return SBX_PUMP_DONE;
    return KEEP_GOING;
}

/*
 * drain_ready: drain each stream poll found ready (fds[1 + i] for stream
 * i), its hook seeing what is kept.  Returns KEEP_GOING, or the SBX_PUMP_*
 * the loop ends with (SBX_PUMP_FAILED with errno set).
 */
static int drain_ready(struct pump *p, const struct pollfd *fds)
{
    for (int i = 0; i < p->n_streams; i++) {
        int stream;
        if (fds[i + 1].fd < 0 || fds[i + 1].revents == 0)
            continue;
        stream = sbx_drain_stream(p, &p->streams[i], 1);
        if (stream == STREAM_ERROR)
            return SBX_PUMP_FAILED;
        if (stream == STREAM_ABORT)
            return SBX_PUMP_ABORTED;
        if (stream == STREAM_KILLED)
            return SBX_PUMP_DONE;
    }
    return KEEP_GOING;
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
    double deadline = started + p->config->timeout_sec;
    double next_tick = sbx_monotonic() + SBX_TICK_MS / 1000.0;

    if (input->pending.len == 0 && input->close_when_done)
        sbx_close_fd(&child->in_fd);

    for (;;) {
        /* stdin, stdout, stderr, every capture, the child's pidfd. */
        struct pollfd fds[1 + 2 + SBX_MAX_CAPTURES + 1];
        int pid_slot = 1 + p->n_streams;
        double now = sbx_monotonic();
        int i, n, rc;

        if (now >= deadline) {
            outcome->timed_out = 1;
            return SBX_PUMP_DONE;
        }
        /* As soon as bwrap has cloned it (its status pipe wakes the loop). */
        sbx_pin_init(child);
        if (now >= next_tick) {
            next_tick = now + SBX_TICK_MS / 1000.0;
            if ((rc = every_tick(p)) != KEEP_GOING)
                return rc;
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
        if (fds[0].fd >= 0 && fds[0].revents && sbx_feed_stdin(&child->in_fd, input) != 0)
            return SBX_PUMP_FAILED;
        if ((rc = drain_ready(p, fds)) != KEEP_GOING)
            return rc;
        if (p->config->kill_on_cap && (outcome->stdout_truncated || outcome->stderr_truncated)) {
            outcome->killed_on_cap = 1;
            return SBX_PUMP_DONE;
        }
        if (init_reported(p)) {
            outcome->reported = 1;
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
 * With config->end_at_report, the run also ends once the init has reported
 * (init_reported): what is in the pipes then is taken without waiting for
 * their end, and bwrap, which ends by itself as soon as the init has, is
 * left to the caller (outcome->reported), with the fds it needs to be
 * killed and reaped (sbx_kill_and_reap, then sbx_child_close_fds).
 *
 * Contract: the child is always reaped (or found auto-reaped), but for
 * outcome->reported, and its pipes closed on return; outcome->out/err/
 * captures are owned by the caller (free with sbx_buffer_free) on every
 * path; no thread is left running.  Returns
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
    outcome->peak_tasks = 0;
    p.killed_at = -1.0;
    p.scratch = malloc(SBX_CHUNK_SIZE);
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
    /* No hook runs from here on but sbx_deliver_rest's, after the reap: nothing
     * left to watch. */
    if (watched)
        sbx_watchdog_stop(&p.watchdog);
    /* Until here the hooks saw every kept byte as it was read. */
    seen[0] = outcome->out.len;
    seen[1] = outcome->err.len;
    sbx_close_fd(&child->in_fd);
    if (!exited && !outcome->reported) {
        if (p.killed_at < 0)
            p.killed_at = sbx_monotonic();
        outcome->status_known = sbx_kill_and_reap(child, &outcome->wait_status, &outcome->usage);
    }
    /* The program's end: its exit, or the kill (by the watchdog while a hook
     * ran, or here), not the end of the kernel's teardown that the reap
     * waited for, nor when the hook returned. */
    outcome->wall_time = (p.killed_at >= 0 ? p.killed_at : sbx_monotonic()) - started;
    if (sbx_drain_after_exit(&p, exited || outcome->reported ? 0.0 : KILL_GRACE_SEC) != 0 &&
        result == SBX_PUMP_DONE) {
        saved_errno = errno;
        result = SBX_PUMP_FAILED;
    }
    if (result == SBX_PUMP_DONE && sbx_deliver_rest(&p, seen) != 0)
        result = SBX_PUMP_ABORTED;
    if (outcome->reported)
        sbx_child_close_pipes(child);
    else
        sbx_child_close_fds(child);
    free(p.scratch);
    errno = saved_errno;
    return result;
}
