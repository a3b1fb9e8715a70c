/*
 * kill.c: ending the sandbox.  Whether bwrap is still our unreaped child,
 * one round of killing (for the pump's loop and for the watchdog, which
 * kills while a hook runs and leaves the reaping to the loop), killing and
 * reaping, and the reap itself.  No function here keeps state between calls,
 * so any thread may call them; none needs the GIL.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* After killing the sandbox's init, how long to wait for bwrap to exit by
 * itself before killing bwrap too. */
#define KILL_WAIT_SEC 2.0

/*
 * sbx_reap: wait for child->pid (blocking) and record its status and rusage.
 * The pid stays reserved until this wait, so a kill before it can never hit
 * a recycled pid.  Returns 1 when the status was collected, 0 when it was
 * lost (ECHILD: the host auto-reaps, SIGCHLD ignored, or another thread of
 * the host reaped it).  Sets child->pid to -1: the pump's thread only, never
 * while the watchdog is armed.  No GIL needed.
 */
int sbx_reap(struct sbx_child *child, int *wait_status, struct rusage *usage)
{
    pid_t got;
    do {
        got = wait4(child->pid, wait_status, __WALL, usage);
    } while (got < 0 && errno == EINTR);
    child->pid = -1;
    return got > 0;
}

/*
 * sbx_child_has_exited: whether the child is a zombie waiting to be reaped,
 * or already gone (auto-reaped), without reaping it.  The fallback for
 * kernels without pidfds.  Any thread.
 */
int sbx_child_has_exited(pid_t pid)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) != 0)
        return errno == ECHILD;
    return info.si_pid != 0;
}

/*
 * child_is_ours: whether child->pid is certainly still our unreaped child,
 * so that its /proc entries and pid name bwrap and nothing else.  With a
 * pidfd, signal 0 through it (a pidfd never names a recycled pid: ESRCH
 * means it was reaped, by the host's auto-reaping); without one, or on a
 * kernel without pidfd_send_signal, only while waitid shows it has not
 * exited.  Any thread; reads child only.
 */
static int child_is_ours(const struct sbx_child *child)
{
    if (child->pidfd >= 0) {
        if (syscall(SYS_pidfd_send_signal, child->pidfd, 0, NULL, 0) == 0 || errno == EPERM)
            return 1;
        if (errno != ENOSYS)
            return 0;
    }
    return !sbx_child_has_exited(child->pid);
}

/*
 * wait_for_exit: wait up to `seconds` (0: just look) for the child to exit,
 * without reaping it.  Returns 1 once it has exited (or is gone), 0 at the
 * timeout.  Polls the pidfd; without one, checks waitid every few
 * milliseconds.  Any thread; reads child only.
 */
static int wait_for_exit(const struct sbx_child *child, double seconds)
{
    double until = sbx_monotonic() + seconds;
    for (;;) {
        double left = until - sbx_monotonic();
        if (child->pidfd >= 0) {
            struct pollfd pidfd = {child->pidfd, POLLIN, 0};
            int n = poll(&pidfd, 1, left > 0 ? (int)(left * 1000.0) + 1 : 0);
            if (n > 0)
                return 1;
            if (n < 0 && errno != EINTR)
                return sbx_child_has_exited(child->pid);
        } else {
            struct timespec pause = {0, 2000000L};
            if (sbx_child_has_exited(child->pid))
                return 1;
            if (left > 0)
                nanosleep(&pause, NULL);
        }
        if (left <= 0)
            return 0;
    }
}

/*
 * sbx_child_gone: whether bwrap has exited (a zombie left to reap) or is no
 * longer ours to signal, without waiting.  Any thread; reads child only.
 */
int sbx_child_gone(const struct sbx_child *child)
{
    return child->pid < 0 || !child_is_ours(child) || wait_for_exit(child, 0.0);
}

/*
 * sbx_kill_step: one round of ending the sandbox that began at `since`
 * (sbx_monotonic): unless bwrap has exited or is no longer ours, SIGKILL
 * bwrap's children (the sandbox's init: the kernel then ends every process
 * of its pid namespace and bwrap's monitor exits by itself), and once
 * KILL_WAIT_SEC have passed since `since`, bwrap itself as a last resort.
 * Returns SBX_KILL_GONE (nothing left to signal), SBX_KILL_SENT or
 * SBX_KILL_LAST (bwrap was SIGKILLed).  Idempotent: repeating it is how the
 * kill reaches an init that did not exist yet (bwrap still building it).
 * Never reaps, so the pid stays bwrap's.  Any thread, with the caller
 * guaranteeing that child is not reaped meanwhile (the pump's thread reaps
 * only while the watchdog is disarmed); no GIL needed; allocates.
 *
 * bwrap's children are read from /proc and pinned with pidfds by
 * sbx_kill_children, and only while bwrap is certainly ours (child_is_ours):
 * after an auto-reap its pid may be another's.  bwrap itself is signalled
 * through its pidfd when there is one; without, only while it is our
 * unreaped child.
 */
int sbx_kill_step(const struct sbx_child *child, double since)
{
    if (sbx_child_gone(child))
        return SBX_KILL_GONE;
    sbx_kill_children(child->pid);
    if (sbx_monotonic() - since < KILL_WAIT_SEC)
        return SBX_KILL_SENT;
    if (child->pidfd >= 0) {
        if (syscall(SYS_pidfd_send_signal, child->pidfd, SIGKILL, NULL, 0) != 0 && errno == ENOSYS)
            kill(child->pid, SIGKILL);
    } else if (!sbx_child_has_exited(child->pid)) {
        kill(child->pid, SIGKILL);
    }
    return SBX_KILL_LAST;
}

/*
 * sbx_kill_and_reap: end the sandbox, wait until bwrap has exited, and reap
 * bwrap.  No-op once reaped.  Returns what sbx_reap returns.  The pump's
 * thread only, with the watchdog disarmed; no GIL needed.
 *
 * The sandbox's init (bwrap's child, pid 1 of the sandbox's pid namespace)
 * is killed, not bwrap: bwrap's monitor then reaps the init and exits by
 * itself.  The kernel ends every process of the namespace, and waits for
 * them to be reaped, before the init can be reaped; so once bwrap has
 * exited, nothing of the sandbox is left, not even a zombie, and this
 * returns only then.  Killing bwrap first would orphan the init, which
 * would then die (or linger as a zombie) under the host's pid 1 after the
 * call returned.  The kill is repeated every SBX_KILL_SLICE_SEC
 * (sbx_kill_step), and bwrap itself is SIGKILLed only as a last resort.
 * Safe after the watchdog already killed: the steps then find bwrap exited.
 */
int sbx_kill_and_reap(struct sbx_child *child, int *wait_status, struct rusage *usage)
{
    double since;
    if (child->pid < 0)
        return 0;
    since = sbx_monotonic();
    while (sbx_kill_step(child, since) == SBX_KILL_SENT &&
           !wait_for_exit(child, SBX_KILL_SLICE_SEC))
        continue;
    return sbx_reap(child, wait_status, usage);
}
