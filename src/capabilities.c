/* SPDX-License-Identifier: MIT */
/*
 * capabilities.c: the two halves of a drop to an unprivileged identity, the
 * init's and a template's copy's (each changes its ids in between, in its
 * own way: the init through the C library, a copy through raw system calls,
 * since it runs in memory it shares with the template's threads).
 *
 * Both functions are raw system calls only: async-signal-safe, no
 * allocation, for a single-threaded process (the init) or a copy's first
 * process before it has any other thread.
 */
#define _GNU_SOURCE
#include "capabilities.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's capset structures (linux/capability.h), written out: the init
 * may be built with a C library that ships no kernel headers (musl). */
#define CAPABILITY_VERSION_3 0x20080522
struct capability_header {
    uint32_t version;
    int pid;
};
struct capability_data {
    uint32_t effective, permitted, inheritable;
};

/* The highest capability number any kernel may know; higher ones are EINVAL. */
#define LAST_CAPABILITY 63

/*
 * sbx_empty_bounding_set: drop every capability from the bounding set, so
 * that no later execve can grant one back.  Needs CAP_SETPCAP, so it comes
 * before the change of ids.  Numbers the kernel does not know are skipped.
 * Returns 0, or -1 with errno.
 */
int sbx_empty_bounding_set(void)
{
    int cap;
    for (cap = 0; cap <= LAST_CAPABILITY; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            return -1;
    }
    return 0;
}

/*
 * sbx_clear_capabilities: empty the permitted, effective and inheritable
 * sets (capset of zeros) and the ambient set (a kernel without ambient
 * capabilities, EINVAL, has none to clear).  Returns 0, or -1 with errno.
 */
int sbx_clear_capabilities(void)
{
    struct capability_header header = {CAPABILITY_VERSION_3, 0};
    struct capability_data data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0)
        return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return -1;
    return 0;
}
