/* SPDX-License-Identifier: MIT */
/*
 * copy_words.h: what the copy request tests (test_copy_request.c,
 * test_copy_parse.c) share: a well-formed request's words as the copy
 * client and copy_command_line make them, helpers that change an option's
 * value, drop or add one and join the words with their NULs, and the
 * request they fill as sbx_copy_receive does (load).  Under
 * AddressSanitizer the bytes past the NUL after a request's words are
 * poisoned (fence), so a parser reading past them is caught.  The functions
 * are static inline: a program may leave some unused.
 */
#ifndef PYSANDBOX_COPY_WORDS_H
#define PYSANDBOX_COPY_WORDS_H

#include "copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

/* The well-formed request's fds: the link, then one for each of its --fds. */
#define WELL_FORMED_FDS 6

/* A request as the copy client (copy_client.c) and copy_command_line make it. */
static const char *const WELL_FORMED[] = {
    "--fds",
    "0,1,2,4,5",
    "--rlimit",
    "7:1024:4096",
    "--rlimit",
    "0:-1:-1",
    "--keep",
    "0,1,2,7",
    "--id",
    "1000:1001",
    "--workdir",
    "/tmp/w",
    "--cache",
    "/tmp/c",
    "--seccomp-fd",
    "4",
    "--code",
    "7:/tmp/w/code.py",
    "--landlock-write",
    "/tmp/w",
    "--landlock-write",
    "/dev/null",
    "--",
    "/init",
    "--report-fd",
    "5",
    "--",
};

static struct sbx_copy_request *request;
static char message[2 * SBX_COPY_MAX_REQUEST];

/* Words of a request being built, joined with their NULs by join. */
struct words {
    const char *word[256];
    size_t n;
};

/* fence: poison the request's bytes past the NUL after its words (no-op without ASan). */
static inline void fence(void)
{
    size_t used = request->length + 1;
    if (used < sizeof request->text)
        ASAN_POISON_MEMORY_REGION(request->text + used, sizeof request->text - used);
}

/* unfence: the whole text addressable again, before anything writes it. */
static inline void unfence(void)
{
    ASAN_UNPOISON_MEMORY_REGION(request->text, sizeof request->text);
}

/*
 * load: the length bytes at data put in request as sbx_copy_receive puts a
 * message's (a NUL after them), with n_fds fds of -1, without a socket.
 */
static inline void load(const char *data, size_t length, size_t n_fds)
{
    unfence();
    memcpy(request->text, data, length);
    request->text[length] = '\0';
    request->length = length;
    memset(request->fds, 0xff, sizeof request->fds);
    request->n_fds = n_fds;
    fence();
}

/* well_formed: the words of WELL_FORMED. */
static inline struct words well_formed(void)
{
    struct words w;
    w.n = sizeof WELL_FORMED / sizeof *WELL_FORMED;
    memcpy(w.word, WELL_FORMED, sizeof WELL_FORMED);
    return w;
}

/* find: the index of the first word name, up to the first "--"; aborts when absent. */
static inline size_t find(const struct words *w, const char *name)
{
    size_t i;
    for (i = 0; i < w->n && strcmp(w->word[i], "--") != 0; i++) {
        if (strcmp(w->word[i], name) == 0)
            return i;
    }
    if (strcmp(name, "--") == 0 && i < w->n)
        return i;
    abort();
}

/* set: the value after the first option name replaced by value. */
static inline void set(struct words *w, const char *name, const char *value)
{
    w->word[find(w, name) + 1] = value;
}

/* drop: the first option name and its value removed. */
static inline void drop(struct words *w, const char *name)
{
    size_t at = find(w, name);
    memmove(w->word + at, w->word + at + 2, (w->n - at - 2) * sizeof *w->word);
    w->n -= 2;
}

/* add: option name and value inserted before the first "--" (value NULL: name alone). */
static inline void add(struct words *w, const char *name, const char *value)
{
    size_t at = find(w, "--"), n = value != NULL ? 2 : 1;
    if (w->n + n > sizeof w->word / sizeof *w->word)
        abort();
    memmove(w->word + at + n, w->word + at, (w->n - at) * sizeof *w->word);
    w->word[at] = name;
    if (value != NULL)
        w->word[at + 1] = value;
    w->n += n;
}

/* join: the words into message, each followed by its NUL; returns the length. */
static inline size_t join(const struct words *w)
{
    size_t length = 0, i;
    for (i = 0; i < w->n; i++) {
        size_t size = strlen(w->word[i]) + 1;
        if (size > sizeof message - length)
            abort();
        memcpy(message + length, w->word[i], size);
        length += size;
    }
    return length;
}

/* numbers: "first,first+1,..." of count numbers into out (room for 6 bytes each). */
static inline const char *numbers(char *out, int first, size_t count)
{
    size_t i, at = 0;
    out[0] = '\0';
    for (i = 0; i < count; i++)
        at += (size_t)sprintf(out + at, "%s%d", i ? "," : "", first + (int)i);
    return out;
}

/* within: whether p points into the request's words or at the NUL after them. */
static inline int within(const char *p)
{
    return p >= request->text && p <= request->text + request->length;
}

#endif
