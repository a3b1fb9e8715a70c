/* SPDX-License-Identifier: MIT */
/*
 * fdpass.c: one message of bytes and fds (SCM_RIGHTS) over a unix socket,
 * and the sender's credentials (SCM_CREDENTIALS) where the receiving socket
 * asks for them (SO_PASSCRED): the kernel gives the sender's pid as the
 * receiver's pid namespace sees it.  Async-signal-safe (sendmsg, recvmsg,
 * close and memory copies): a template's copies call them between fork and
 * exec.
 */
#define _GNU_SOURCE
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The control space of a message: every fd and one set of credentials. */
union fdpass_control {
    char space[CMSG_SPACE(sizeof(int) * SBX_FDPASS_MAX) + CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
};

/*
 * sbx_fd_send: send length bytes of data and n_fds fds (at most
 * SBX_FDPASS_MAX; none when 0) as one message, never raising SIGPIPE.
 * Returns 0, or -1 with errno.  The fds stay the caller's.
 */
int sbx_fd_send(int socket_fd, const void *data, size_t length, const int *fds, size_t n_fds)
{
    union fdpass_control control;
    struct iovec iov = {(void *)data, length};
    struct msghdr message;
    ssize_t n;
    if (n_fds > SBX_FDPASS_MAX) {
        errno = EINVAL;
        return -1;
    }
    memset(&message, 0, sizeof message);
    memset(&control, 0, sizeof control);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    if (n_fds > 0) {
        struct cmsghdr *header;
        message.msg_control = control.space;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(header), fds, sizeof(int) * n_fds);
    }
    do {
        n = sendmsg(socket_fd, &message, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -1 : 0;
}

/*
 * keep_fds: the fds of an SCM_RIGHTS part into *message, at most
 * SBX_FDPASS_MAX; those past it are closed and message->cut set.  The
 * control space holds more than SBX_FDPASS_MAX fds when no credentials take
 * their room (a socket without SO_PASSCRED), and the kernel fills it.
 */
static void keep_fds(const struct cmsghdr *part, struct sbx_fd_message *message)
{
    size_t count = (part->cmsg_len - CMSG_LEN(0)) / sizeof(int), i;
    for (i = SBX_FDPASS_MAX; i < count; i++) {
        int extra;
        memcpy(&extra, CMSG_DATA(part) + i * sizeof(int), sizeof extra);
        close(extra);
    }
    if (count > SBX_FDPASS_MAX) {
        count = SBX_FDPASS_MAX;
        message->cut = 1;
    }
    memcpy(message->fds, CMSG_DATA(part), count * sizeof(int));
    message->n_fds = count;
}

/*
 * sbx_fd_recv: block for one message: at most size bytes into data, its fds
 * (close-on-exec) and its sender into *message.  Returns the bytes' length
 * (0 when the peer closed), or -1 with errno.  Fds beyond SBX_FDPASS_MAX are
 * closed (message->cut says so, as for bytes beyond size).
 */
ssize_t sbx_fd_recv(int socket_fd, void *data, size_t size, struct sbx_fd_message *message)
{
    union fdpass_control control;
    struct iovec iov = {data, size};
    struct msghdr header;
    struct cmsghdr *part;
    ssize_t n;
    memset(&header, 0, sizeof header);
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control.space;
    header.msg_controllen = sizeof control.space;
    message->n_fds = 0;
    message->sender = 0;
    do {
        n = recvmsg(socket_fd, &header, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    message->cut = (header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    for (part = CMSG_FIRSTHDR(&header); part != NULL; part = CMSG_NXTHDR(&header, part)) {
        if (part->cmsg_level != SOL_SOCKET)
            continue;
        if (part->cmsg_type == SCM_RIGHTS) {
            keep_fds(part, message);
        } else if (part->cmsg_type == SCM_CREDENTIALS) {
            struct ucred cred;
            memcpy(&cred, CMSG_DATA(part), sizeof cred);
            message->sender = cred.pid;
        }
    }
    return n;
}
