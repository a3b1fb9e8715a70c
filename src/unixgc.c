/* SPDX-License-Identifier: MIT */
/*
 * unixgc.c: having the kernel's unix garbage collector free what a sandbox
 * left in flight, before the call returns.
 *
 * A unix socket sent over a unix socket (SCM_RIGHTS) in a cycle keeps
 * itself and everything queued with it (memfds: any amount of memory)
 * alive after every process of the sandbox is gone, charged to no live
 * limit.  Only the collector frees such cycles, and it runs only when some
 * unix socket is released, on a kernel worker, later.  So after the reap a
 * cycle of our own is made, a canary: a socket pair whose one end is in
 * flight to itself along with the write end of a pipe.  Releasing the other
 * end runs the collector; the pass that frees the canary (its pipe end
 * closes: the read end hangs up) began after the sandbox's cycles were
 * already unreachable, so it freed them too.  The files it frees are put on
 * a kernel worker's list in one batch; a second canary's pass, whose batch
 * can only run after the first's, makes sure that batch (the sandbox's
 * memfds among it) is done.  Files queued on a socket the collector frees
 * are put one batch later: after the sandbox's list is seen empty, two
 * more passes.
 *
 * That costs a few milliseconds (the worker puts files a jiffy later), so it
 * is done only when the sandbox left a unix socket: when it ends, every
 * socket its processes held is released, and what is still listed in the
 * /proc/net/unix of its network namespace (held open since the init was
 * pinned) is in flight.
 *
 * A sandbox can also have the collector run by itself (it releases the last
 * end of its own cycle before it ends): nothing is listed at the reap, yet
 * the worker may still be freeing its files.  Where a memory cgroup counts
 * the sandbox, _cgroup.py sees that memory in the group and waits with
 * sbx_unix_gc_pass (the module's unix_gc_pass) until it is gone; without
 * one, nothing tells, and docs/security.rst says so.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long to wait for one pass of the collector; it takes milliseconds
 * even for a large cycle, but its worker may have to wait for a CPU. */
#define UNIX_GC_WAIT_MS 2000
/* Passes at most while the sandbox's sockets are still listed. */
#define UNIX_GC_PASSES 64

/*
 * send_fds: send one byte on sock with fds[0..n) attached.  Returns 0 or -1.
 */
static int send_fds(int sock, const int *fds, size_t n)
{
    char byte = 0, control[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr msg;
    struct cmsghdr *cmsg;
    memset(&msg, 0, sizeof msg);
    memset(control, 0, sizeof control);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
    cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(cmsg), fds, n * sizeof(int));
    while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

/*
 * sbx_unix_gc_pass: release one canary cycle and wait (up to
 * UNIX_GC_WAIT_MS) for the collector to free it: every file put on the
 * kernel's deferred list before it was put there is freed by then.  Returns
 * 1 when it was freed, 0 when it was not in time or the canary could not be
 * made (no fds left: nothing to wait for).  Any thread; no GIL needed.
 */
int sbx_unix_gc_pass(void)
{
    int pair[2], pipe_fds[2], cargo[2], freed = 0;
    struct pollfd hangup;
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        return 0;
    }
    /* pair[0] and the pipe's write end wait in pair[0]'s own queue. */
    cargo[0] = pair[0];
    cargo[1] = pipe_fds[1];
    if (send_fds(pair[1], cargo, 2) != 0) {
        close(pair[0]);
        close(pair[1]);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        return 0;
    }
    close(pipe_fds[1]);
    close(pair[0]);
    close(pair[1]); /* a release with sockets in flight: the collector runs */
    hangup.fd = pipe_fds[0];
    hangup.events = POLLIN;
    for (;;) {
        int n = poll(&hangup, 1, UNIX_GC_WAIT_MS);
        if (n < 0 && errno == EINTR)
            continue;
        freed = n > 0;
        break;
    }
    close(pipe_fds[0]);
    return freed;
}

/*
 * sbx_collect_unix_garbage: have the kernel free the unix socket cycles no
 * process can reach any more, and the files queued on them, and wait until
 * it has.  With the sandbox's list open on list_fd (sbx_open_unix_list; -1:
 * none), passes until that list names no socket, up to UNIX_GC_PASSES (a
 * busy host may run a pass before the sandbox's sockets were all put); then
 * two more: a socket leaves the list as its release begins, and the files
 * queued on it are put in the batch after the one that releases it, which
 * only the second pass after is sure to follow (see the file's comment).
 * Returns 1 when the end was seen, else 0.  Any thread; no GIL needed.
 */
int sbx_collect_unix_garbage(int list_fd)
{
    int passes = 0;
    while (list_fd >= 0 && sbx_unix_sockets_left(list_fd)) {
        if (passes++ == UNIX_GC_PASSES || !sbx_unix_gc_pass())
            return 0;
    }
    return sbx_unix_gc_pass() && sbx_unix_gc_pass();
}

/*
 * sbx_open_unix_list: open the list of unix sockets of the network
 * namespace of the init pinned on init_pidfd (/proc/<pid>/net/unix, which
 * names that namespace for as long as it is open).  Returns the fd
 * (O_CLOEXEC), or -1 when the init is gone, still in this process's
 * namespace, or the file cannot be opened: then every reap collects.  Any
 * thread; no GIL needed.
 */
int sbx_open_unix_list(pid_t init_pid, int init_pidfd)
{
    char path[64];
    struct pollfd init = {init_pidfd, POLLIN, 0};
    int fd;
    if (sbx_same_as_ours(init_pid, "ns/net", "/proc/self/ns/net") != 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/net/unix", (int)init_pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && (poll(&init, 1, 0) != 0 ||
                    sbx_same_as_ours(init_pid, "ns/net", "/proc/self/ns/net") != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * sbx_unix_sockets_left: whether the list open on fd (sbx_open_unix_list)
 * names any socket, read from its start; 1 also when fd < 0 or it cannot
 * be read.  Any thread; no GIL needed.
 */
int sbx_unix_sockets_left(int fd)
{
    char buf[512];
    ssize_t n;
    if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0)
        return 1;
    do {
        n = read(fd, buf, sizeof buf - 1);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    /* The header line, then one line per socket. */
    return strchr(buf, '\n') == NULL || strchr(buf, '\n')[1] != '\0';
}
