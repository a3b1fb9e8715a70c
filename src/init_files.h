/* SPDX-License-Identifier: MIT */
/*
 * init_files.h: the init's file record streams (init_files.c), shared by
 * init.c and the C unit tests.  Plain C; part of the init, not of the
 * extension module.
 */
#ifndef PYSANDBOX_INIT_FILES_H
#define PYSANDBOX_INIT_FILES_H

#include <stddef.h>

struct sbx_file_filter;

#define SBX_MAX_NAME 4096     /* the longest name a record may carry, in bytes */
#define SBX_MODE_EXECUTABLE 1 /* the one bit a record's mode byte may have */

/* Why sbx_unpack_files failed: die(what, detail, or NULL when "") with errno = err. */
struct sbx_unpack_failure {
    const char *what;
    int err;
    char detail[SBX_MAX_NAME + 1]; /* the file's name, or "" */
};

int sbx_unpack_files(int in_fd, int dir_fd, struct sbx_unpack_failure *failure);
void sbx_collect_files(int out_fd, const char *dir, const char *skip, unsigned long long max_bytes,
                       unsigned long long max_files, const struct sbx_file_filter *filter);
int sbx_write_all(int fd, const void *buf, size_t len);

#endif
