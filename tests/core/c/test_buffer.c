/* SPDX-License-Identifier: MIT */
/*
 * test_buffer.c: the capture buffer (src/buffer.c), linked alone: its first
 * heap block and doubling, the move to a huge-page mapping past the heap's
 * largest block, growth by mremap without loss, the bound a limit sets, a
 * request that would overflow, an external buffer that must never grow or
 * be freed, and the release of both kinds.  TAP on stdout (tap.h).
 */
#define _GNU_SOURCE
#include "sandbox.h"
#include "tap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The sizes buffer.c works with (HEAP_MAX, MAP_FIRST_MAX, the huge page). */
#define HEAP_MAX (256 * 1024)
#define MAP_FIRST_MAX ((size_t)64 * 1024 * 1024)
#define HUGE_PAGE ((size_t)2 * 1024 * 1024)

static size_t page;

static size_t round_to_page(size_t n)
{
    return (n + page - 1) / page * page;
}

/* fill: append n bytes of a pattern that tells every offset apart. */
static int fill(struct sbx_buffer *buf, size_t n)
{
    char chunk[4096];
    while (n > 0) {
        size_t len = n < sizeof chunk ? n : sizeof chunk;
        for (size_t i = 0; i < len; i++)
            chunk[i] = (char)((buf->len + i) * 7 % 251);
        if (sbx_buffer_append(buf, chunk, len) != 0)
            return -1;
        n -= len;
    }
    return 0;
}

/* intact: whether every byte fill wrote is still there. */
static int intact(const struct sbx_buffer *buf)
{
    for (size_t i = 0; i < buf->len; i++) {
        if (buf->data[i] != (char)(i * 7 % 251))
            return 0;
    }
    return 1;
}

/* unmapped: whether no page of [p, p + n) is mapped any more. */
static int unmapped(void *p, size_t n)
{
    for (size_t at = 0; at < n; at += page) {
        if (msync((char *)p + at, page, MS_ASYNC) == 0 || errno != ENOMEM)
            return 0;
    }
    return 1;
}

static void test_heap_blocks(void)
{
    struct sbx_buffer buf;
    memset(&buf, 0, sizeof buf);
    check(sbx_buffer_append(&buf, "", 0) == 0 && buf.data == NULL && buf.alloc == 0,
          "appending nothing allocates nothing");
    check(fill(&buf, 10) == 0 && buf.alloc == SBX_CHUNK_SIZE && !buf.mapped,
          "the first bytes take one block of SBX_CHUNK_SIZE");
    check(fill(&buf, SBX_CHUNK_SIZE) == 0 && buf.alloc == 2 * SBX_CHUNK_SIZE && !buf.mapped,
          "a full block doubles");
    check(fill(&buf, HEAP_MAX - buf.len) == 0 && buf.alloc == HEAP_MAX && !buf.mapped &&
              intact(&buf),
          "up to HEAP_MAX the buffer stays a heap block, its bytes kept");
    sbx_buffer_free(&buf);
    check(buf.data == NULL && buf.len == 0 && buf.alloc == 0 && !buf.mapped,
          "a freed heap buffer is empty");
    sbx_buffer_free(&buf);
    check(buf.data == NULL, "freeing it again is harmless");
}

static void test_mapping(void)
{
    struct sbx_buffer buf;
    char *old;
    size_t old_alloc;
    memset(&buf, 0, sizeof buf);
    check(fill(&buf, HEAP_MAX + 1) == 0 && buf.mapped && buf.alloc == MAP_FIRST_MAX &&
              (uintptr_t)buf.data % HUGE_PAGE == 0 && intact(&buf),
          "past HEAP_MAX, unbounded, it moves once into a huge-page-aligned mapping of "
          "MAP_FIRST_MAX, its bytes kept");
    old = buf.data;
    check(fill(&buf, MAP_FIRST_MAX - buf.len) == 0 && buf.data == old && buf.alloc == MAP_FIRST_MAX,
          "it fills that mapping without moving");
    check(fill(&buf, 1) == 0 && buf.alloc == 2 * MAP_FIRST_MAX && buf.mapped && intact(&buf),
          "past it the mapping doubles by mremap, every byte kept");
    old = buf.data;
    old_alloc = buf.alloc;
    sbx_buffer_free(&buf);
    check(buf.data == NULL && buf.alloc == 0 && !buf.mapped && unmapped(old, old_alloc),
          "a freed mapped buffer is empty and its mapping gone");
    check(fill(&buf, 10) == 0 && buf.alloc == SBX_CHUNK_SIZE && !buf.mapped,
          "a freed buffer starts again from a heap block");
    sbx_buffer_free(&buf);
}

static void test_limits(void)
{
    struct sbx_buffer buf;
    size_t len;
    char *data;
    memset(&buf, 0, sizeof buf);
    check(sbx_buffer_reserve(&buf, 10, 100) == 0 && buf.alloc == 100 && !buf.mapped,
          "a limit under one block bounds the first block");
    sbx_buffer_free(&buf);
    fill(&buf, HEAP_MAX);
    check(sbx_buffer_reserve(&buf, 1, 1000 * 1000) == 0 && buf.mapped &&
              buf.alloc == round_to_page(HEAP_MAX + 1000 * 1000) && intact(&buf),
          "with a limit the mapping takes the whole bound at once, rounded to a page");
    check(sbx_buffer_reserve(&buf, 1000 * 1000, 1000 * 1000) == 0 &&
              buf.alloc == round_to_page(HEAP_MAX + 1000 * 1000),
          "room already there costs nothing");
    len = buf.len;
    data = buf.data;
    errno = 0;
    check(sbx_buffer_reserve(&buf, SIZE_MAX, SIZE_MAX) == -1 && errno == ENOMEM &&
              buf.data == data && buf.len == len && intact(&buf),
          "a request that would overflow fails with ENOMEM, the buffer unchanged");
    errno = 0;
    check(sbx_buffer_reserve(&buf, SIZE_MAX - buf.len + 1, SIZE_MAX) == -1 && errno == ENOMEM &&
              buf.data == data,
          "so does one that overflows only with what the buffer holds");
    sbx_buffer_free(&buf);
}

static void test_external(void)
{
    char memory[100], kept[100];
    struct sbx_buffer buf;
    memset(memory, 'm', sizeof memory);
    memset(&buf, 0, sizeof buf);
    buf.data = memory;
    buf.alloc = sizeof memory;
    buf.external = 1;
    check(fill(&buf, 100) == 0 && buf.data == memory && intact(&buf),
          "an external buffer is filled in place");
    errno = 0;
    check(sbx_buffer_append(&buf, "x", 1) == -1 && errno == ENOMEM && buf.data == memory &&
              buf.len == 100,
          "an external buffer never grows: one byte past it is ENOMEM");
    memcpy(kept, memory, sizeof kept);
    sbx_buffer_free(&buf);
    check(buf.data == NULL && buf.alloc == 0 && !buf.external &&
              memcmp(kept, memory, sizeof kept) == 0,
          "freeing an external buffer forgets its memory and releases nothing");
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    test_heap_blocks();
    test_mapping();
    test_limits();
    test_external();
    return done();
}
