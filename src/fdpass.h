/* SPDX-License-Identifier: MIT */
/*
 * fdpass.h: messages with fds over a unix socket (fdpass.c), shared by the
 * module's copies (copy.c, copy_request.c) and the copy client.  Plain C.
 */
#ifndef PYSANDBOX_FDPASS_H
#define PYSANDBOX_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* The most fds one message carries. */
#define SBX_FDPASS_MAX 64

/* What sbx_fd_recv received besides the bytes. */
struct sbx_fd_message {
    int fds[SBX_FDPASS_MAX];
    size_t n_fds;
    pid_t sender; /* the sender's pid here, when the socket passes credentials; 0 */
    int cut;      /* the bytes or the fds did not all fit */
};

int sbx_fd_send(int socket_fd, const void *data, size_t length, const int *fds, size_t n_fds);
ssize_t sbx_fd_recv(int socket_fd, void *data, size_t size, struct sbx_fd_message *message);

#endif
