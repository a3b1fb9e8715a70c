/* SPDX-License-Identifier: MIT */
/*
 * buffer.c: the growable byte buffer the pump captures into and queues
 * stdin in.  Plain C with no other file of the core behind it, so
 * tests/c/test_buffer.c links it alone.  No GIL needed anywhere; not
 * async-signal-safe (malloc, mmap).
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * The capture buffers.  Output starts in a small heap block that doubles up to
 * HEAP_MAX, so the common few lines cost one malloc.  Past HEAP_MAX the
 * buffer moves, once (a copy of at most HEAP_MAX bytes), into an anonymous
 * mapping that starts on a huge-page boundary and is advised for transparent
 * huge pages: 32 MiB of output then costs 16 page faults instead of 8192,
 * and the kernel clears each 2 MiB page in one go.  The mapping is as large
 * as the buffer may ever need (the caller's limit, e.g. the rest of the
 * cap) up to MAP_FIRST_MAX, so the reads go straight into it without
 * growing it; past that it doubles by mremap, which moves page tables and
 * never copies a byte.  Only the pages written are ever backed by memory
 * (RSS is the output rounded up to a huge page), the address space taken
 * is never more than the limit rounded up to a page, and sbx_buffer_free
 * unmaps it.
 */
#define HEAP_MAX (256 * 1024)
#define HUGE_PAGE_SIZE (2 * 1024 * 1024)
#define MAP_FIRST_MAX ((size_t)64 * 1024 * 1024)

/*
 * sbx_buffer_free: release a buffer's memory (heap block or mapping) and
 * reset it to empty.  Owner only; no GIL needed.
 */
void sbx_buffer_free(struct sbx_buffer *buf)
{
    if (buf->external)
        ; /* the owner's memory: forgotten, not released */
    else if (buf->mapped)
        munmap(buf->data, buf->alloc);
    else
        free(buf->data);
    buf->data = NULL;
    buf->len = buf->alloc = 0;
    buf->mapped = buf->external = 0;
}

/* round_up: n rounded up to a multiple of `to` (a power of two); 0 on overflow. */
static size_t round_up(size_t n, size_t to)
{
    return n > ((size_t)-1) - (to - 1) ? 0 : (n + to - 1) & ~(to - 1);
}

/*
 * map_region: a private anonymous read-write mapping of `size` bytes (a
 * multiple of the page size) that starts on a huge-page boundary when it
 * is at least a huge page, advised for transparent huge pages.  Returns
 * NULL on failure (errno set).
 */
static char *map_region(size_t size)
{
    size_t slack = size >= HUGE_PAGE_SIZE ? HUGE_PAGE_SIZE : 0, head;
    char *raw, *start;
    if (size + slack < size) {
        errno = ENOMEM;
        return NULL;
    }
    raw = mmap(NULL, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    if (slack == 0)
        return raw;
    start = (char *)round_up((size_t)(uintptr_t)raw, HUGE_PAGE_SIZE);
    head = (size_t)(start - raw);
    if (head > 0)
        munmap(raw, head);
    if (slack > head)
        munmap(start + size, slack - head);
    /* A hint: where the kernel has no transparent huge pages it fails and
     * the buffer works with small pages. */
    madvise(start, size, MADV_HUGEPAGE);
    return start;
}

/*
 * buffer_resize: make buf's block `size` bytes (> buf->len), keeping its
 * bytes: realloc up to HEAP_MAX, then a mapping (see above).  Returns 0, or
 * -1 with errno = ENOMEM (buf unchanged).
 */
static int buffer_resize(struct sbx_buffer *buf, size_t size)
{
    char *moved;
    if (!buf->mapped && size <= HEAP_MAX) {
        moved = realloc(buf->data, size);
    } else {
        size = round_up(size, (size_t)sysconf(_SC_PAGESIZE));
        if (size == 0) {
            errno = ENOMEM;
            return -1;
        }
        if (buf->mapped) {
            moved = mremap(buf->data, buf->alloc, size, MREMAP_MAYMOVE);
            moved = moved == MAP_FAILED ? NULL : moved;
        } else {
            moved = map_region(size);
            if (moved != NULL && buf->len > 0)
                memcpy(moved, buf->data, buf->len);
            if (moved != NULL)
                free(buf->data);
        }
    }
    if (moved == NULL) {
        errno = ENOMEM;
        return -1;
    }
    buf->data = moved;
    buf->alloc = size;
    buf->mapped = buf->mapped || size > HEAP_MAX;
    return 0;
}

/*
 * sbx_buffer_reserve: make room for at least `extra` more bytes of a buffer
 * that will never hold more than len + limit bytes in all (limit >= extra;
 * SIZE_MAX: no bound).  The block doubles from SBX_CHUNK_SIZE, never past the
 * bound; the move to a mapping takes the whole bound at once, up to
 * MAP_FIRST_MAX, or where that much address space is refused, just the
 * doubled size.  An external buffer never grows: past its alloc bytes this
 * fails.  Returns 0, or -1 with errno = ENOMEM (buf unchanged).  No GIL
 * needed; not async-signal-safe (malloc, mmap).
 */
int sbx_buffer_reserve(struct sbx_buffer *buf, size_t extra, size_t limit)
{
    size_t want = buf->alloc ? buf->alloc : SBX_CHUNK_SIZE, bound;
    if (buf->alloc - buf->len >= extra)
        return 0;
    if (buf->external) {
        errno = ENOMEM;
        return -1;
    }
    bound = limit > ((size_t)-1) - buf->len ? (size_t)-1 : buf->len + limit;
    while (want - buf->len < extra) {
        if (want > ((size_t)-1) / 2) {
            errno = ENOMEM;
            return -1;
        }
        want *= 2;
    }
    if (want > bound)
        want = bound;
    if (!buf->mapped && want > HEAP_MAX && bound > want) {
        size_t whole = bound < MAP_FIRST_MAX ? bound : MAP_FIRST_MAX;
        if (whole > want && buffer_resize(buf, whole) == 0)
            return 0;
    }
    return buffer_resize(buf, want);
}

/*
 * sbx_buffer_append: copy len bytes to the end of buf.  Returns 0, or -1
 * with errno = ENOMEM (buf unchanged).  No GIL needed; not
 * async-signal-safe (malloc).
 */
int sbx_buffer_append(struct sbx_buffer *buf, const char *data, size_t len)
{
    if (len == 0)
        return 0;
    if (sbx_buffer_reserve(buf, len, (size_t)-1) != 0)
        return -1;
    memcpy(buf->data + buf->len, data, len);
    buf->len += len;
    return 0;
}
