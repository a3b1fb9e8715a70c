/* SPDX-License-Identifier: MIT */
/*
 * copy_memory.c: what a template's copy (copy.c) must not inherit of the
 * template's memory.  A fork keeps a MAP_SHARED mapping shared: one the
 * set-up made writable (mmap.mmap(-1, n), multiprocessing's heap, a
 * numpy.memmap) would be memory every copy and the template write to, a
 * channel between calls.  A copy's init that finds one refuses to go on.
 */
#define _GNU_SOURCE
#include "copy.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * sbx_shared_writable: whether this process has a writable shared mapping
 * ("rw?s" in /proc/self/maps, the copy's own /proc), its line (cut to size)
 * in what.  Returns 1 when it has one, 0 when none, -1 when the maps cannot
 * be read.  P1, whose memory is the template's, once the copy's /proc is
 * mounted; malloc-free (one static buffer, in the template's memory, which
 * the template never reads).
 */
int sbx_shared_writable(char *what, size_t size)
{
    static char buffer[1 << 16];
    size_t kept = 0;
    ssize_t n;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while ((n = read(fd, buffer + kept, sizeof buffer - 1 - kept)) > 0) {
        char *line = buffer, *end;
        buffer[kept + (size_t)n] = '\0';
        while ((end = strchr(line, '\n')) != NULL) {
            char *perms = strchr(line, ' ');
            *end = '\0';
            if (perms != NULL && perms[1] == 'r' && perms[2] == 'w' && perms[4] == 's') {
                snprintf(what, size, "%s", line);
                close(fd);
                return 1;
            }
            line = end + 1;
        }
        kept = strlen(line);
        memmove(buffer, line, kept);
        if (kept == sizeof buffer - 1)
            kept = 0;
    }
    close(fd);
    return n < 0 ? -1 : 0;
}
