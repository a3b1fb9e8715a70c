/* SPDX-License-Identifier: MIT */
/*
 * test_file_filter.c: the init's file filter (src/file_filter.c) alone and
 * in the collector (src/init_files.c): the matching rules (a pattern also
 * matches a parent directory, `*` matches `/`), the bounds on patterns, a
 * warm call's patterns read from hostile hand-overs (cut, too long, holding
 * NUL, too many: each fails closed, wanting no file), and the collector's
 * stream: files filtered out neither counted nor said to be left out, an
 * excluded directory never entered.  TAP on stdout (tap.h).
 */
#define _GNU_SOURCE
#include "file_filter.h"
#include "init_files.h"
#include "tap.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* filter_of: a filter of the NULL-ended include and exclude lists. */
static struct sbx_file_filter filter_of(const char *const *include, const char *const *exclude)
{
    struct sbx_file_filter f;
    memset(&f, 0, sizeof f);
    for (; include != NULL && *include != NULL; include++)
        sbx_filter_add(&f, 0, *include);
    for (; exclude != NULL && *exclude != NULL; exclude++)
        sbx_filter_add(&f, 1, *exclude);
    return f;
}

static void test_matching(void)
{
    const char *out[] = {"out", NULL}, *png[] = {"*.png", NULL}, *cache[] = {".cache", NULL};
    const char *bracket[] = {"[!n]*", NULL}, *deep[] = {"*/x", NULL};
    struct sbx_file_filter none = filter_of(NULL, NULL), f;
    check(sbx_filter_wants_file(&none, "a/b/c") && sbx_filter_wants_file(NULL, "x") &&
              sbx_filter_enters_dir(&none, ".cache"),
          "no pattern wants every file and enters every directory");
    f = filter_of(out, NULL);
    check(sbx_filter_wants_file(&f, "out/a.png") && sbx_filter_wants_file(&f, "out/d/e") &&
              !sbx_filter_wants_file(&f, "notes.txt") && !sbx_filter_wants_file(&f, "outer") &&
              !sbx_filter_wants_file(&f, "x/out"),
          "an include pattern takes what is below the directory it names");
    check(sbx_filter_enters_dir(&f, "elsewhere"), "include patterns close no directory");
    f = filter_of(png, NULL);
    check(sbx_filter_wants_file(&f, "out/a.png") && sbx_filter_wants_file(&f, "a.png") &&
              !sbx_filter_wants_file(&f, "a.pngx"),
          "* matches / too");
    f = filter_of(NULL, cache);
    check(!sbx_filter_wants_file(&f, ".cache/x/y.json") && !sbx_filter_wants_file(&f, ".cache") &&
              sbx_filter_wants_file(&f, "notes.txt") && sbx_filter_wants_file(&f, "a/.cache"),
          "an exclude pattern drops what is below the directory it names");
    check(!sbx_filter_enters_dir(&f, ".cache") && !sbx_filter_enters_dir(&f, ".cache/x") &&
              sbx_filter_enters_dir(&f, "out"),
          "an excluded directory is not entered");
    f = filter_of(png, cache);
    check(!sbx_filter_wants_file(&f, ".cache/a.png") && sbx_filter_wants_file(&f, "b/a.png"),
          "exclude wins over include");
    f = filter_of(bracket, deep);
    check(sbx_filter_wants_file(&f, "out") && !sbx_filter_wants_file(&f, "notes") &&
              !sbx_filter_wants_file(&f, "a/x/y") && sbx_filter_wants_file(&f, "a/xy"),
          "brackets and a pattern over two components");
}

static void test_bounds(void)
{
    static char long_pattern[SBX_FILTER_PATTERN_MAX + 2];
    struct sbx_file_filter f;
    int added = 0;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < SBX_FILTER_MAX; i++)
        added += sbx_filter_add(&f, 1, "x") == 0;
    check(added == SBX_FILTER_MAX && sbx_filter_add(&f, 1, "x") != 0 &&
              sbx_filter_add(&f, 0, "x") == 0,
          "at most %d patterns of each kind", SBX_FILTER_MAX);
    memset(long_pattern, 'a', sizeof long_pattern - 1);
    check(sbx_filter_add(&f, 0, "") != 0 && sbx_filter_add(&f, 0, long_pattern) != 0 &&
              sbx_filter_add(&f, 0, long_pattern + 1) == 0,
          "an empty pattern and one over %d bytes are refused", SBX_FILTER_PATTERN_MAX);
}

/* A payload being built, in a memfd. */
static int payload(void)
{
    int fd = memfd_create("test-file-filter", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    return fd;
}

/* put_record: tag, the length as given (it may lie), then body_len bytes of body. */
static void put_record(int fd, char tag, uint64_t len, const char *body, size_t body_len)
{
    unsigned char header[9];
    header[0] = (unsigned char)tag;
    for (int i = 0; i < 8; i++)
        header[1 + i] = (unsigned char)(len >> (8 * (7 - i)));
    if (write(fd, header, sizeof header) != (ssize_t)sizeof header ||
        (body_len > 0 && write(fd, body, body_len) != (ssize_t)body_len))
        abort();
}

static void put_text(int fd, char tag, const char *text)
{
    put_record(fd, tag, strlen(text), text, strlen(text));
}

/* read_back: sbx_filter_read_payload of fd (then closed), its result in *rc. */
static struct sbx_file_filter read_back(int fd, int *rc)
{
    struct sbx_file_filter f;
    memset(&f, 0, sizeof f);
    *rc = sbx_filter_read_payload(&f, fd);
    close(fd);
    return f;
}

static void test_payload(void)
{
    static char big[100000];
    struct sbx_file_filter f;
    int fd = payload(), rc;
    put_text(fd, 'p', "python\0-u");
    put_record(fd, 'f', sizeof big, big, sizeof big);
    put_text(fd, '+', "out");
    put_text(fd, '-', "out/skip");
    put_text(fd, 'e', "A=1");
    f = read_back(fd, &rc);
    check(rc == 0 && f.n_include == 1 && f.n_exclude == 1 && !f.broken &&
              sbx_filter_wants_file(&f, "out/a") && !sbx_filter_wants_file(&f, "out/skip/b"),
          "a hand-over's patterns are read, its other records skipped");
    sbx_filter_free(&f);
    f = read_back(payload(), &rc);
    check(rc == 0 && !f.broken && sbx_filter_wants_file(&f, "x"),
          "a hand-over without patterns wants every file");
    fd = payload();
    put_text(fd, '+', "out");
    if (write(fd, "+\0\0", 3) != 3)
        abort();
    f = read_back(fd, &rc);
    check(rc != 0 && f.broken && !sbx_filter_wants_file(&f, "out/a") &&
              !sbx_filter_enters_dir(&f, "out"),
          "a header cut short fails closed");
    sbx_filter_free(&f);
    fd = payload();
    put_record(fd, '-', 3, "a\0b", 3);
    f = read_back(fd, &rc);
    check(rc != 0 && f.broken, "a pattern holding NUL fails closed");
    fd = payload();
    put_record(fd, '+', 10, "abc", 3);
    f = read_back(fd, &rc);
    check(rc != 0 && f.broken, "a pattern cut short fails closed");
    fd = payload();
    put_record(fd, '+', SBX_FILTER_PATTERN_MAX + 1, big, SBX_FILTER_PATTERN_MAX + 1);
    put_record(fd, 'f', UINT64_MAX, NULL, 0);
    f = read_back(fd, &rc);
    check(rc != 0 && f.broken, "a pattern too long fails closed");
    fd = payload();
    put_record(fd, 'f', UINT64_MAX - 4, NULL, 0);
    f = read_back(fd, &rc);
    check(rc != 0 && f.broken, "a length that overflows the offset fails closed");
    fd = payload();
    for (int i = 0; i <= SBX_FILTER_MAX; i++)
        put_text(fd, '-', "x");
    f = read_back(fd, &rc);
    check(rc != 0 && f.broken && f.n_exclude == SBX_FILTER_MAX,
          "one pattern too many fails closed");
    sbx_filter_free(&f);
    check(f.n_exclude == 0 && sbx_filter_add(&f, 0, "y") == 0,
          "a freed filter takes patterns again");
    fd = payload();
    put_text(fd, '+', "out");
    f = read_back(fd, &rc);
    check(sbx_filter_add(&f, 0, "y") != 0, "a filter that owns its patterns takes no other");
    sbx_filter_free(&f);
}

static char root[] = "/tmp/pysandbox-c-filter-XXXXXX";

/* make_file: root/name with text, each directory above it made. */
static void make_file(const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", root, name);
    for (char *slash = strchr(path + strlen(root) + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    FILE *file = fopen(path, "w");
    if (file == NULL || fputs(text, file) < 0 || fclose(file) != 0)
        abort();
}

/* collect: the stream of root's files under the caps and filter, in memory (free it). */
static unsigned char *collect(unsigned long long max_files, const struct sbx_file_filter *filter,
                              size_t *len)
{
    int fd = payload();
    off_t size;
    unsigned char *data;
    sbx_collect_files(fd, root, NULL, 1 << 20, max_files, filter);
    size = lseek(fd, 0, SEEK_END);
    data = malloc((size_t)size + 1);
    if (data == NULL || pread(fd, data, (size_t)size, 0) != size)
        abort();
    close(fd);
    *len = (size_t)size;
    return data;
}

/* records: how many file records a collected stream holds, by their tag bytes. */
static int records(const unsigned char *data, size_t len)
{
    int n = 0;
    size_t at = 0;
    while (at + 6 <= len && data[at] == 'F') {
        uint32_t name_len = 0;
        uint64_t size = 0;
        for (int i = 3; i >= 0; i--)
            name_len = name_len << 8 | data[at + 2 + i];
        for (int i = 7; i >= 0; i--)
            size = size << 8 | data[at + 6 + name_len + i];
        at += 6 + name_len + 8 + size;
        n++;
    }
    return at + 2 == len && data[at] == 'E' ? n : -1;
}

static void test_collector(void)
{
    const char *cache[] = {".cache", "*.txt", NULL}, *deep[] = {"deep", NULL};
    const char *out[] = {"out", NULL};
    char name[200] = "deep";
    struct sbx_file_filter f = filter_of(NULL, cache), broken;
    unsigned char *data;
    size_t len;
    make_file("out/a.png", "png");
    make_file(".cache/x/y.json", "{}");
    make_file("notes.txt", "notes");
    data = collect(1, &f, &len);
    check(records(data, len) == 1 && data[len - 1] == 0 && memmem(data, len, "out/a.png", 9),
          "a cap of one file with two filtered out returns the one, not truncated");
    free(data);
    f = filter_of(out, NULL);
    data = collect(1, &f, &len);
    check(records(data, len) == 1 && data[len - 1] == 0,
          "an include pattern counts only its files");
    free(data);
    data = collect(1, NULL, &len);
    check(records(data, len) == 1 && data[len - 1] == 1, "unfiltered, the same cap truncates");
    free(data);
    for (int i = 0; i < 40; i++)
        strcat(name, "/d");
    strcat(name, "/f");
    make_file(name, "deep");
    data = collect(10, NULL, &len);
    check(records(data, len) == 3 && data[len - 1] == 1, "unfiltered, that directory is noted");
    free(data);
    f = filter_of(NULL, deep);
    data = collect(10, &f, &len);
    check(records(data, len) == 3 && data[len - 1] == 0,
          "a directory too deep to walk, excluded, is never entered");
    free(data);
    memset(&broken, 0, sizeof broken);
    broken.broken = 1;
    data = collect(10, &broken, &len);
    check(records(data, len) == 0 && data[len - 1] == 1,
          "a broken filter returns no file and says files were left out");
    free(data);
}

int main(void)
{
    umask(022);
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    test_matching();
    test_bounds();
    test_payload();
    test_collector();
    char remove[sizeof root + 16];
    snprintf(remove, sizeof remove, "rm -rf %s", root);
    if (system(remove) != 0)
        return 2;
    return done();
}
