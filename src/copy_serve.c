/* SPDX-License-Identifier: MIT */
/*
 * copy_serve.c: the template's interpreter serving copies (copy.c), the loop
 * behind the module's serve_copies().
 *
 * For each request on the control socket it starts the copy's init (P1),
 * pid 1 of a new pid namespace, with vfork: the template unshares
 * CLONE_NEWPID, which applies to its next child only, and returns to its
 * own pid namespace for the next.  P1 runs in the template's memory, on its
 * stack, until it executes the init (copy.c says what it may do there).  It keeps each served
 * init's pidfd and its client's link: when an init exits, it reaps it and tells the client the
 * init's exit code ("x" and the code: 128 + the signal if killed), as bwrap
 * tells its exit; when a client hangs up its link first (the C core killed
 * it), it kills that init, which ends the copy.
 *
 * Plain C: the GIL and Python's fork hooks are the caller's, through
 * struct sbx_copy_hooks.  The template's serving thread only.
 */
#define _GNU_SOURCE
#include "copy.h"

#include "fdpass.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The most copies served at once; a request past them is refused. */
#define MAX_SERVED 256

/* A copy being served: its init, a pidfd of it, the link to its client. */
struct served {
    pid_t pid;
    int pidfd;
    int link;
    int killed; /* its client hung up and its init was killed: the link is not watched */
};

struct server {
    int control;
    int own_pidns;
    struct served copies[MAX_SERVED];
    size_t n;
};

/* refuse: tell the client of a request that cannot be served why ("E"). */
static void refuse(struct sbx_copy_request *request, const char *why)
{
    char message[256];
    snprintf(message, sizeof message, "E%s: %s", why, strerror(errno));
    sbx_fd_send(request->fds[0], message, strlen(message), NULL, 0);
}

/*
 * end_served: copy i's init has exited (or cannot be watched): reap it, tell
 * its client its exit code, and forget it.
 */
static void end_served(struct server *server, size_t i)
{
    struct served *copy = &server->copies[i];
    char message[32];
    int status = 0;
    while (waitpid(copy->pid, &status, 0) < 0 && errno == EINTR)
        continue;
    snprintf(message, sizeof message, "x%d",
             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    sbx_fd_send(copy->link, message, strlen(message), NULL, 0);
    close(copy->link);
    close(copy->pidfd);
    server->copies[i] = server->copies[--server->n];
}

/*
 * watch: wait (the GIL released) until the control socket or a served copy
 * needs attention; end the copies whose init exited, kill the inits whose
 * client hung up.  Returns whether a request is there (1), 0 when not yet,
 * -1 with errno on a failure of poll.
 */
static int watch(struct server *server, const struct sbx_copy_hooks *hooks)
{
    struct pollfd fds[1 + 2 * MAX_SERVED];
    size_t i, n = 1 + 2 * server->n;
    int rc;
    fds[0] = (struct pollfd){server->control, POLLIN, 0};
    for (i = 0; i < server->n; i++) {
        fds[1 + 2 * i] = (struct pollfd){server->copies[i].pidfd, POLLIN, 0};
        fds[2 + 2 * i] =
            (struct pollfd){server->copies[i].killed ? -1 : server->copies[i].link, 0, 0};
    }
    hooks->release(hooks->state);
    do {
        rc = poll(fds, (nfds_t)n, -1);
    } while (rc < 0 && errno == EINTR);
    hooks->acquire(hooks->state);
    if (rc < 0)
        return -1;
    for (i = server->n; i-- > 0;) {
        if (fds[2 + 2 * i].revents & (POLLHUP | POLLERR)) {
            kill(server->copies[i].pid, SIGKILL);
            server->copies[i].killed = 1;
        }
        if (fds[1 + 2 * i].revents != 0)
            end_served(server, i);
    }
    return fds[0].revents != 0;
}

/*
 * serve_one: start the init of the request's copy in a new pid namespace.
 * Returns 1 in the copy's program (sbx_copy_become returned there, in P1's
 * fork), 0 in the template, which now watches the init; a request it
 * cannot serve is refused.  The request's fds are released in the template
 * either way.
 */
static int serve_one(struct server *server, struct sbx_copy_request *request,
                     const struct sbx_copy_hooks *hooks)
{
    struct served copy;
    pid_t pid;
    sigset_t all;
    if (server->n == MAX_SERVED || unshare(CLONE_NEWPID) != 0) {
        if (server->n == MAX_SERVED)
            errno = EAGAIN;
        refuse(request, "making the copy's pid namespace");
        sbx_copy_release(request);
        return 0;
    }
    /* P1 shares the template's memory (no copy of its page tables) and runs
     * while the template waits, until it executes the init: only P2 is a copy
     * of the interpreter.  Python's fork hooks run here, in the template, the
     * child's in P2; no signal handler of the template may run in P1. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &request->mask);
    request->clean = 0;
    hooks->before_fork(hooks->state);
    pid = vfork();
    if (pid == 0)
        return sbx_copy_become(request, hooks) == 0;
    hooks->after_fork_parent(hooks->state);
    pthread_sigmask(SIG_SETMASK, &request->mask, NULL);
    /* P1 killed half-way (in its fork of P2, by the OOM killer say) may have left
     * the C library's locks taken in this memory: this template cannot go on. */
    if (pid > 0 && !request->clean)
        _exit(127);
    if (setns(server->own_pidns, CLONE_NEWPID) != 0)
        _exit(127); /* every later copy would be a child of this one's namespace */
    copy.pid = pid;
    copy.killed = 0;
    copy.pidfd = pid < 0 ? -1 : (int)syscall(SYS_pidfd_open, pid, 0);
    copy.link = pid < 0 ? -1 : fcntl(request->fds[0], F_DUPFD_CLOEXEC, 3);
    if (pid < 0 || copy.pidfd < 0 || copy.link < 0) {
        refuse(request, "starting the copy");
        if (pid > 0)
            kill(pid, SIGKILL);
        if (copy.pidfd >= 0)
            close(copy.pidfd);
        if (copy.link >= 0)
            close(copy.link);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    } else {
        server->copies[server->n++] = copy;
    }
    sbx_copy_release(request);
    return 0;
}

/*
 * sbx_copy_serve: serve copies on control_fd until the host closes it, with
 * request as the buffer of each request.  Returns 1 in a copy's program
 * (confined, supervised, its fds in place), 0 once the host closed the
 * socket (the template then ends, and with it every copy it still serves:
 * they are in its pid namespace), -1 with errno on a failure.  The hooks release and retake the
 * GIL around each wait and run Python's fork hooks around each fork.
 */
int sbx_copy_serve(int control_fd, struct sbx_copy_request *request,
                   const struct sbx_copy_hooks *hooks)
{
    static struct server server;
    int rc;
    server.control = control_fd;
    server.n = 0;
    server.own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (server.own_pidns < 0)
        return -1;
    sbx_copy_rseq_find();
    for (;;) {
        rc = watch(&server, hooks);
        if (rc < 0)
            break;
        if (rc == 0)
            continue;
        rc = sbx_copy_receive(control_fd, request);
        if (rc == 0 || (rc < 0 && errno != EBADMSG))
            break;
        if (rc > 0 && serve_one(&server, request, hooks))
            return 1;
    }
    close(server.own_pidns);
    return rc;
}
