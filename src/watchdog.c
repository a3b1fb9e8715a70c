/* SPDX-License-Identifier: MIT */
/*
 * watchdog.c: the limits hold while a hook runs.
 *
 * The pump's thread calls hooks that take the GIL and run the caller's
 * Python code (the output and stdin callbacks, signal handlers in the tick),
 * which may take seconds or never return.  Meanwhile this thread keeps the
 * two limits the loop itself enforces: at the wall-clock deadline, or once
 * the tree's CPU time passes its limit, it kills the sandbox just as the loop
 * would have, within the same SBX_TICK_MS.  It only kills: the reaping stays
 * with the pump's thread, after the hook returned, so the pid stays bwrap's
 * all along and nothing is reaped behind the loop's back.
 *
 * One mutex guards the state; the thread holds it while it looks and kills,
 * so disarming (the hook returned) waits for a look in progress, and once
 * disarmed the thread touches the child no more until armed again.  The
 * thread starts with every signal blocked, so the host's signals still go to
 * its own threads; it never touches a Python object and never takes the GIL.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

/* The thread's stack: it reads /proc with heap buffers and small frames. */
#define WATCHDOG_STACK_SIZE (256 * 1024)

/*
 * to_timespec: seconds on CLOCK_MONOTONIC as the absolute time
 * pthread_cond_timedwait takes (the condition variable uses that clock).
 */
static struct timespec to_timespec(double seconds)
{
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/*
 * next_look: when the thread looks next after a look at `now`: every
 * SBX_TICK_MS like the loop's CPU watcher, and at the deadline itself while
 * it lies ahead; every SBX_KILL_SLICE_SEC once a limit passed, to repeat
 * the kill until bwrap has exited.  With w->lock held.
 */
static double next_look(const struct sbx_watchdog *w, double now)
{
    double next = now + (w->fired ? SBX_KILL_SLICE_SEC : SBX_TICK_MS / 1000.0);
    if (!w->fired && w->deadline > now && w->deadline < next)
        next = w->deadline;
    return next;
}

/*
 * look: one look while a hook runs, with w->lock held.  A sandbox that
 * ended by itself is left alone (the loop reaps it).  Otherwise the deadline,
 * then the CPU limit, then the inodes of the sandbox's tmpfs; once one
 * passed, a round of the kill, and the time bwrap was seen exited.  The
 * thread only (which may pin the init: the pump's thread leaves the child
 * alone while armed).
 */
static void look(struct sbx_watchdog *w, double now)
{
    if (!w->fired) {
        if (sbx_child_gone(w->child))
            return;
        if (now >= w->deadline) {
            w->fired = SBX_WATCH_DEADLINE;
        } else if (w->cpu_limit > 0) {
            long tasks;
            double used =
                sbx_sandbox_cpu_seconds(sbx_tree_root(w->child), w->cgroup_cpu_fd, &tasks);
            if (used > w->cpu_used)
                w->cpu_used = used;
            if (tasks > w->peak_tasks)
                w->peak_tasks = tasks;
            if (used >= w->cpu_limit)
                w->fired = SBX_WATCH_CPU;
        }
        if (!w->fired && w->disk_inodes > 0 &&
            sbx_sandbox_inodes(w->child, w->disk_dir) > w->disk_inodes)
            w->fired = SBX_WATCH_DISK;
        if (!w->fired)
            return;
        w->fired_at = now;
    }
    if (w->ended_at < 0 && sbx_kill_step(w->child, w->fired_at) == SBX_KILL_GONE)
        w->ended_at = sbx_monotonic();
}

/*
 * watch: the thread's body.  Sleeps on the condition variable until the
 * next look or until told to stop; looks only while armed.  Holds w->lock
 * except while it sleeps.  No GIL, no Python.
 */
static void *watch(void *opaque)
{
    struct sbx_watchdog *w = opaque;
    double next;

    pthread_mutex_lock(&w->lock);
    next = next_look(w, sbx_monotonic());
    while (!w->stopping) {
        double now = sbx_monotonic();
        if (now < next) {
            struct timespec until = to_timespec(next);
            pthread_cond_timedwait(&w->wake, &w->lock, &until);
            continue;
        }
        if (w->armed)
            look(w, now);
        next = next_look(w, now);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/*
 * sbx_watchdog_start: initialise w to watch child against `deadline`
 * (sbx_monotonic) and cpu_limit (0: not watched; cgroup_cpu_fd as for the
 * pump, -1: none) and start its thread, disarmed.  child must stay valid
 * (and not be reaped while armed) until sbx_watchdog_stop.  Returns 0, or
 * -1 with errno set (nothing to stop then).  The pump's thread; no GIL.
 */
int sbx_watchdog_start(struct sbx_watchdog *w, struct sbx_child *child,
                       const struct sbx_pump_config *config, double deadline)
{
    pthread_condattr_t cond_attr;
    pthread_attr_t attr;
    sigset_t all, saved;
    int rc;

    memset(w, 0, sizeof *w);
    w->child = child;
    w->deadline = deadline;
    w->cpu_limit = config->cpu_limit;
    w->cgroup_cpu_fd = config->cgroup_cpu_fd;
    w->disk_inodes = config->disk_inodes;
    w->disk_dir = config->disk_dir;
    w->ended_at = -1.0;
    w->cpu_used = -1.0;
    w->peak_tasks = 0;
    rc = pthread_mutex_init(&w->lock, NULL);
    if (rc != 0)
        goto fail;
    rc = pthread_condattr_init(&cond_attr);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&w->wake, &cond_attr);
        pthread_condattr_destroy(&cond_attr);
    }
    if (rc != 0)
        goto fail_mutex;
    rc = pthread_attr_init(&attr);
    if (rc != 0)
        goto fail_cond;
    rc = pthread_attr_setstacksize(&attr, WATCHDOG_STACK_SIZE);
    if (rc == 0) {
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        rc = pthread_create(&w->thread, &attr, watch, w);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
    }
    pthread_attr_destroy(&attr);
    if (rc == 0)
        return 0;
fail_cond:
    pthread_cond_destroy(&w->wake);
fail_mutex:
    pthread_mutex_destroy(&w->lock);
fail:
    errno = rc;
    return -1;
}

/*
 * sbx_watchdog_arm: a hook is about to run; watch from now on.  Does not
 * wake the thread: it looks at its next tick anyway.  The pump's thread.
 */
void sbx_watchdog_arm(struct sbx_watchdog *w)
{
    pthread_mutex_lock(&w->lock);
    w->armed = 1;
    pthread_mutex_unlock(&w->lock);
}

/*
 * sbx_watchdog_disarm: the hook returned; stop watching (waiting for a look
 * in progress to end) and fill report with what the watchdog saw so far:
 * which limit fired and when it killed, the largest CPU sample.  Afterwards the thread leaves the
 * child alone, so the pump's thread may reap it.  The pump's thread.
 */
void sbx_watchdog_disarm(struct sbx_watchdog *w, struct sbx_watch_report *report)
{
    pthread_mutex_lock(&w->lock);
    w->armed = 0;
    report->fired = w->fired;
    report->killed_at = w->fired_at;
    report->cpu_used = w->cpu_used;
    report->peak_tasks = w->peak_tasks;
    pthread_mutex_unlock(&w->lock);
}

/*
 * sbx_watchdog_stop: tell the thread to end, join it and release w.  The
 * pump's thread, once after a successful sbx_watchdog_start, before the
 * child is released.
 */
void sbx_watchdog_stop(struct sbx_watchdog *w)
{
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    w->armed = 0;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
}
