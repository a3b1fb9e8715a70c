/* SPDX-License-Identifier: MIT */
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
 * itself before killing bwrap too, once that can no longer orphan the init. */
#define KILL_WAIT_SEC 2.0

/*
 * pidfd_has_exited: whether the process of pidfd has exited, without
 * waiting.  Any thread.
 */
static int pidfd_has_exited(int pidfd)
{
    struct pollfd fd = {pidfd, POLLIN, 0};
    return poll(&fd, 1, 0) > 0;
}

/*
 * await_init: wait, however long it takes, until the sandbox's init pinned
 * by sbx_pin_init has exited, then close its pidfd.  Its exit comes after
 * the end of every process of its pid namespace and after the teardown of
 * its mounts (the tmpfs's files are freed in the exit of the namespace's
 * last process, before the init's pidfd turns readable), so this is the
 * sandbox's real end.  Normally bwrap reaped the init before it exited
 * itself and this returns at once; it waits only when bwrap died first
 * (SIGKILLed by someone else) and left the init orphaned: it is SIGKILLed
 * here, since bwrap's --die-with-parent may not reach it (another uid) and
 * the lifeline that ends it closes only after the call.  The pump's thread
 * only; no GIL needed.
 */
static void await_init(struct sbx_child *child)
{
    struct pollfd init = {child->init_pidfd, POLLIN, 0};
    if (child->init_pidfd < 0)
        return;
    if (!pidfd_has_exited(child->init_pidfd))
        syscall(SYS_pidfd_send_signal, child->init_pidfd, SIGKILL, NULL, 0);
    while (poll(&init, 1, -1) < 0 && errno == EINTR)
        continue;
    close(child->init_pidfd);
    child->init_pidfd = -1;
    child->init_pid = -1;
}

/*
 * sbx_reap: wait for child->pid (blocking) and record its status and rusage,
 * then for the sandbox's init to be gone (await_init), then, if it left a
 * unix socket, for the kernel to free the socket cycles it left (unixgc.c).
 * The pid stays reserved until this wait, so a kill before it can never hit
 * a recycled pid.  Returns 1 when the status was collected, 0 when it was
 * lost (ECHILD: the host auto-reaps, SIGCHLD ignored, or another thread of
 * the host reaped it).  Sets child->pid to -1 and closes the init's fds: the
 * pump's thread only, never while the watchdog is armed.  No GIL needed.
 */
int sbx_reap(struct sbx_child *child, int *wait_status, struct rusage *usage)
{
    pid_t got;
    do {
        got = wait4(child->pid, wait_status, __WALL, usage);
    } while (got < 0 && errno == EINTR);
    child->pid = -1;
    await_init(child);
    if (sbx_unix_sockets_left(child->unix_list_fd))
        sbx_collect_unix_garbage(child->unix_list_fd);
    if (child->unix_list_fd >= 0)
        close(child->unix_list_fd);
    child->unix_list_fd = -1;
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
 * sbx_pin_init: pin the sandbox's init (bwrap's child, pid 1 of its pid
 * namespace; for a template's copy, the pidfd its copy client holds at
 * init_pidfd_at) with a pidfd in child->init_pidfd, its pid in child->init_pid,
 * and open its network namespace's list of unix sockets (unixgc.c), unless
 * done already.  Only while bwrap is certainly ours and has not exited, so
 * its child is the init and no recycled pid.  Returns whether
 * the init is pinned (0: bwrap has no child yet, or no fd was left).  The
 * thread that may touch child: the pump's, or the watchdog's while armed.
 * No GIL needed.
 */
int sbx_pin_init(struct sbx_child *child)
{
    if (child->init_pidfd >= 0)
        return 1;
    if (child->pid < 0 || !child_is_ours(child) || wait_for_exit(child, 0.0))
        return 0;
    if (child->init_pidfd_at >= 0)
        child->init_pidfd = sbx_pin_held(child->pidfd, child->init_pidfd_at, &child->init_pid);
    else
        child->init_pidfd = sbx_pin_child(child->pid, &child->init_pid);
    if (child->init_pidfd < 0)
        return 0;
    child->unix_list_fd = sbx_open_unix_list(child->init_pid, child->init_pidfd);
    return 1;
}

/*
 * sbx_tree_root: the process whose tree the CPU watcher sums: bwrap, or for
 * a template's copy (init_pidfd_at) the copy's init once pinned, as the copy
 * is not the copy client's child (before, the client alone).  Reads child
 * only; the thread that may touch child (see sbx_pin_init).
 */
pid_t sbx_tree_root(const struct sbx_child *child)
{
    if (child->init_pidfd_at >= 0 && child->init_pidfd >= 0)
        return child->init_pid;
    return child->pid;
}

/*
 * bwrap_may_be_killed: whether SIGKILLing bwrap can no longer orphan the
 * init: the pinned init has exited, or bwrap has no child at all.  While
 * the init lives, bwrap is left to reap it, however long the kernel takes
 * to tear the sandbox down: a bwrap killed first would leave the init
 * dying under the host's pid 1 (a zombie for good where that is a service
 * that never reaps) after the call returned.
 */
static int bwrap_may_be_killed(const struct sbx_child *child, size_t children)
{
    if (child->init_pidfd >= 0)
        return pidfd_has_exited(child->init_pidfd);
    return children == 0;
}

/*
 * sbx_kill_step: one round of ending the sandbox whose kill began at `since`
 * (sbx_monotonic): unless bwrap has exited or is no longer ours, SIGKILL the
 * sandbox's init (pinned with sbx_pin_init; the kernel then ends every
 * process of its pid namespace and bwrap's monitor exits by itself) and any
 * other child of bwrap.  Once KILL_WAIT_SEC have passed since `since` and
 * bwrap_may_be_killed, bwrap itself, as a last resort for a bwrap stuck
 * before its child existed or after it ended.  Returns SBX_KILL_GONE
 * (nothing left to signal), SBX_KILL_SENT or SBX_KILL_LAST (bwrap was
 * SIGKILLed).  Idempotent: repeating it is how the kill reaches an init that
 * did not exist yet (bwrap still building it).  Never reaps, so the pid
 * stays bwrap's.  The thread that may touch child (see sbx_pin_init); no
 * GIL needed; allocates.
 *
 * bwrap's children are read from /proc and signalled only while bwrap is
 * certainly ours (child_is_ours): after an auto-reap its pid may be
 * another's.  bwrap itself is signalled through its pidfd when there is
 * one; without, only while it is our unreaped child.
 */
int sbx_kill_step(struct sbx_child *child, double since)
{
    size_t children;
    if (sbx_child_gone(child))
        return SBX_KILL_GONE;
    if (sbx_pin_init(child) && !pidfd_has_exited(child->init_pidfd))
        syscall(SYS_pidfd_send_signal, child->init_pidfd, SIGKILL, NULL, 0);
    children = sbx_kill_children(child->pid);
    if (sbx_monotonic() - since < KILL_WAIT_SEC || !bwrap_may_be_killed(child, children))
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
