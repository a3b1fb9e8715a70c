/* SPDX-License-Identifier: MIT */
/*
 * file_filter.c: the include and exclude patterns that choose which of the
 * working directory's files the init returns (files_include and
 * files_exclude, checked by pysandbox/_model/file_patterns.py).  A file
 * comes back iff there are no include patterns or one matches it, and no
 * exclude pattern matches it; a pattern matches a path when fnmatch(3) with
 * flags 0 (so `*` also matches `/`) matches the path or one of its parent
 * directories.  A directory an exclude pattern matches is not entered.
 *
 * A fresh sandbox's init is given the patterns as options (--files-include,
 * --files-exclude); a warm sandbox's, whose call comes after the init
 * started, reads them from the call's hand-over in the payload memfd
 * (--files-filter-fd, sbx_filter_read_payload) once the program has ended.
 * Part of the init, not of the extension module; nothing here exits, so the
 * C unit tests link it alone.  None of it is async-signal-safe (fnmatch,
 * malloc): the init calls it from its main flow, after the program ended.
 */
#define _GNU_SOURCE
#include "file_filter.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The hand-over's record tags (pysandbox/_launch/waiter.py, Handover.encode). */
#define TAG_INCLUDE '+'
#define TAG_EXCLUDE '-'
/* A record's header: the tag, then the body's length, 8 bytes big-endian. */
#define HEADER_SIZE 9

/*
 * add: pattern (not copied) added to the include patterns, or to the
 * exclude patterns when exclude is set; 0, or -1 (nothing added) when that
 * kind already has SBX_FILTER_MAX patterns, or the pattern is empty or
 * longer than SBX_FILTER_PATTERN_MAX.  Pure but for the filter.
 */
static int add(struct sbx_file_filter *filter, int exclude, const char *pattern)
{
    unsigned *count = exclude ? &filter->n_exclude : &filter->n_include;
    size_t len = strlen(pattern);
    if (*count >= SBX_FILTER_MAX || len == 0 || len > SBX_FILTER_PATTERN_MAX)
        return -1;
    (exclude ? filter->exclude : filter->include)[(*count)++] = pattern;
    return 0;
}

/*
 * sbx_filter_add: add pattern (not copied: the caller's, the init's argv,
 * must outlive the filter) to the include patterns, or to the exclude
 * patterns when exclude is set.  Returns 0, or -1 (and adds nothing) when
 * that kind already has SBX_FILTER_MAX patterns, the pattern is empty or
 * longer than SBX_FILTER_PATTERN_MAX, or the filter owns its patterns
 * (sbx_filter_read_payload).  Pure but for the filter.
 */
int sbx_filter_add(struct sbx_file_filter *filter, int exclude, const char *pattern)
{
    return filter->owned ? -1 : add(filter, exclude, pattern);
}

/*
 * read_record: the record at *offset of fd: its tag and body length, and
 * *offset moved past its header.  1 for a record, 0 at the end of the data,
 * -1 for a header cut short or a read error.
 */
static int read_record(int fd, uint64_t *offset, unsigned char *tag, uint64_t *size)
{
    unsigned char header[HEADER_SIZE];
    ssize_t n = pread(fd, header, sizeof header, (off_t)*offset);
    if (n == 0)
        return 0;
    if (n != (ssize_t)sizeof header)
        return -1;
    *tag = header[0];
    *size = 0;
    for (int i = 1; i < HEADER_SIZE; i++)
        *size = *size << 8 | header[i];
    *offset += HEADER_SIZE;
    return 1;
}

/*
 * read_pattern: the body of a pattern record (size bytes at offset of fd)
 * added to the filter, in memory of its own.  0, or -1 for a body that is
 * not a pattern (empty, too long, holding a NUL), cut short, or one too
 * many; nothing is left allocated then.
 */
static int read_pattern(struct sbx_file_filter *filter, int exclude, int fd, uint64_t offset,
                        uint64_t size)
{
    char *pattern;
    if (size == 0 || size > SBX_FILTER_PATTERN_MAX)
        return -1;
    pattern = malloc((size_t)size + 1);
    if (pattern == NULL)
        return -1;
    if (pread(fd, pattern, (size_t)size, (off_t)offset) != (ssize_t)size ||
        memchr(pattern, '\0', (size_t)size) != NULL) {
        free(pattern);
        return -1;
    }
    pattern[size] = '\0';
    if (add(filter, exclude, pattern) != 0) {
        free(pattern);
        return -1;
    }
    return 0;
}

/*
 * sbx_filter_read_payload: add the patterns of a call's hand-over, the
 * '+' (include) and '-' (exclude) records among the records of the memfd
 * fd (read with pread from its start: its offset is the waiter's), to a
 * filter that has none yet; the filter owns them (sbx_filter_free).  Other
 * records are skipped unread.  Returns 0, or -1 with the filter broken (it
 * then wants no file) when the records are malformed, a pattern is not one,
 * there are too many, or memory ran out: a filter that could not be read
 * must never let every file through.
 */
int sbx_filter_read_payload(struct sbx_file_filter *filter, int fd)
{
    uint64_t offset = 0, size = 0;
    unsigned char tag = 0;
    int found;
    if (filter->n_include != 0 || filter->n_exclude != 0) {
        filter->broken = 1;
        return -1;
    }
    filter->owned = 1;
    while ((found = read_record(fd, &offset, &tag, &size)) == 1) {
        if ((tag == TAG_INCLUDE || tag == TAG_EXCLUDE) &&
            read_pattern(filter, tag == TAG_EXCLUDE, fd, offset, size) != 0)
            break;
        if (size > (uint64_t)INT64_MAX - offset) {
            found = -1;
            break;
        }
        offset += size;
    }
    if (found != 0)
        filter->broken = 1;
    return found == 0 ? 0 : -1;
}

/*
 * any_matches: 1 when one of the n patterns matches path or one of its
 * parent directories (each prefix of path that ends before a '/'), else 0;
 * -1 for a path longer than PATH_MAX, which the collector never makes
 * (its names end at SBX_MAX_NAME).  Pure, but for a copy on the stack.
 */
static int any_matches(const char *const *patterns, unsigned n, const char *path)
{
    char prefix[PATH_MAX + 1];
    size_t len = strlen(path);
    if (n == 0)
        return 0;
    if (len > PATH_MAX)
        return -1;
    memcpy(prefix, path, len + 1);
    for (size_t end = 0; end <= len; end++) {
        if (prefix[end] != '/' && prefix[end] != '\0')
            continue;
        prefix[end] = '\0';
        for (unsigned i = 0; i < n; i++) {
            if (fnmatch(patterns[i], prefix, 0) == 0)
                return 1;
        }
        prefix[end] = path[end];
    }
    return 0;
}

/*
 * sbx_filter_wants_file: whether the file at path (relative to the working
 * directory) is returned: the filter is not broken, no include pattern or
 * one matches it, and no exclude pattern does.  Pure (a NULL filter wants
 * every file).
 */
int sbx_filter_wants_file(const struct sbx_file_filter *filter, const char *path)
{
    if (filter == NULL)
        return 1;
    if (filter->broken)
        return 0;
    if (filter->n_include != 0 && any_matches(filter->include, filter->n_include, path) != 1)
        return 0;
    return any_matches(filter->exclude, filter->n_exclude, path) == 0;
}

/*
 * sbx_filter_enters_dir: whether the directory at path (relative to the
 * working directory) is worth entering: the filter is not broken and no
 * exclude pattern matches it, so a file below it may be wanted.  Include
 * patterns never keep a directory closed (with `*` matching `/`, telling
 * which directories no include pattern reaches is not worth its cost).
 * Pure (a NULL filter enters every directory).  Also true of a file an
 * exclude pattern does not match, which lets the collector skip an
 * excluded entry before it opens it.
 */
int sbx_filter_enters_dir(const struct sbx_file_filter *filter, const char *path)
{
    if (filter == NULL)
        return 1;
    return !filter->broken && any_matches(filter->exclude, filter->n_exclude, path) == 0;
}

/*
 * sbx_filter_free: release the patterns the filter owns
 * (sbx_filter_read_payload) and empty it; the broken mark stays.
 * Idempotent.
 */
void sbx_filter_free(struct sbx_file_filter *filter)
{
    if (filter->owned) {
        for (unsigned i = 0; i < filter->n_include; i++)
            free((char *)filter->include[i]);
        for (unsigned i = 0; i < filter->n_exclude; i++)
            free((char *)filter->exclude[i]);
    }
    filter->n_include = filter->n_exclude = 0;
    filter->owned = 0;
}
