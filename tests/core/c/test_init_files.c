/* SPDX-License-Identifier: MIT */
/*
 * test_init_files.c: the init's file record streams (src/init_files.c),
 * linked alone, fed hostile streams: cut at every byte, huge and
 * overflowing lengths, names that are empty, absolute, hold NUL, "." or
 * "..", or go through a planted symlink, duplicate names, thousands of
 * records under a low fd limit, and an empty stream.  Each case unpacks
 * into a fresh directory work/ inside a case directory, so a file that
 * escaped work/ would be seen beside it.  TAP on stdout (tap.h).
 */
#define _GNU_SOURCE
#include "init_files.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* A stream being built, in memory. */
struct stream {
    unsigned char *data;
    size_t len;
};

static void put(struct stream *s, const void *bytes, size_t n)
{
    s->data = realloc(s->data, s->len + n + 1);
    if (s->data == NULL)
        abort();
    memcpy(s->data + s->len, bytes, n);
    s->len += n;
}

static void put_le(struct stream *s, uint64_t value, int width)
{
    for (int i = 0; i < width; i++) {
        unsigned char byte = (unsigned char)(value >> (8 * i));
        put(s, &byte, 1);
    }
}

/*
 * record: 'F' mode name_len name size data, the lengths as given (they may
 * lie): name_bytes of name and data_len of data follow them.
 */
static void record(struct stream *s, unsigned char mode, const char *name, size_t name_bytes,
                   uint32_t name_len, uint64_t size, const char *data, size_t data_len)
{
    put(s, "F", 1);
    put(s, &mode, 1);
    put_le(s, name_len, 4);
    put(s, name, name_bytes);
    put_le(s, size, 8);
    put(s, data, data_len);
}

/* file: an honest record of a text file. */
static void file(struct stream *s, unsigned char mode, const char *name, const char *text)
{
    record(s, mode, name, strlen(name), (uint32_t)strlen(name), strlen(text), text, strlen(text));
}

static void end(struct stream *s)
{
    put(s, "E\0", 2);
}

/* remove_tree: delete everything under dir_fd (taken), then nothing else. */
static void remove_tree(int dir_fd)
{
    DIR *dir = fdopendir(dir_fd);
    struct dirent *entry;
    if (dir == NULL) {
        close(dir_fd);
        return;
    }
    while ((entry = readdir(dir)) != NULL) {
        int sub;
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        sub = openat(dirfd(dir), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sub >= 0) {
            remove_tree(sub);
            unlinkat(dirfd(dir), entry->d_name, AT_REMOVEDIR);
        } else {
            unlinkat(dirfd(dir), entry->d_name, 0);
        }
    }
    closedir(dir);
}

/* One case: its directory (holding work/), work/ itself and its path, the outcome. */
struct run {
    int case_fd;
    int work_fd;
    char work[sizeof "/tmp/pysandbox-c-units-XXXXXX" + 48];
    int rc;
    struct sbx_unpack_failure failure;
};

static char root[] = "/tmp/pysandbox-c-units-XXXXXX";
static int root_fd = -1;

/* start_case: a fresh case directory with an empty work/ in it. */
static struct run start_case(void)
{
    static int serial;
    char name[32];
    struct run r;
    memset(&r, 0, sizeof r);
    snprintf(name, sizeof name, "case%d", serial++);
    snprintf(r.work, sizeof r.work, "%s/%s/work", root, name);
    if (mkdirat(root_fd, name, 0755) != 0 ||
        (r.case_fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY)) < 0 ||
        mkdirat(r.case_fd, "work", 0755) != 0 ||
        (r.work_fd = openat(r.case_fd, "work", O_RDONLY | O_DIRECTORY)) < 0)
        abort();
    return r;
}

/* feed: the first len bytes of s, from a file, unpacked into r's work/. */
static void feed(struct run *r, const struct stream *s, size_t len)
{
    char path[] = "/tmp/pysandbox-c-units-stream-XXXXXX";
    int in_fd = mkstemp(path);
    if (in_fd < 0)
        abort();
    unlink(path);
    if ((len > 0 && write(in_fd, s->data, len) != (ssize_t)len) || lseek(in_fd, 0, SEEK_SET) != 0)
        abort();
    r->rc = sbx_unpack_files(in_fd, r->work_fd, &r->failure);
    close(in_fd);
}

static struct run unpack(const struct stream *s, size_t len)
{
    struct run r = start_case();
    feed(&r, s, len);
    return r;
}

static void finish(struct run *r)
{
    close(r->work_fd);
    close(r->case_fd);
}

/* entries: how many names dir_fd holds (. and .. aside). */
static int entries(int dir_fd)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY), count = 0;
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *entry;
    if (dir == NULL)
        return -1;
    while ((entry = readdir(dir)) != NULL)
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(dir);
    return count;
}

/* content_is: whether the regular file name under dir_fd holds exactly text. */
static int content_is(int dir_fd, const char *name, const char *text)
{
    char buf[256];
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW);
    ssize_t n;
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf);
    close(fd);
    return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

static mode_t mode_of(int dir_fd, const char *name)
{
    struct stat st;
    return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mode & 07777 : 0;
}

static int failed_with(const struct run *r, const char *what, const char *detail)
{
    return r->rc == -1 && r->failure.what != NULL && strcmp(r->failure.what, what) == 0 &&
           strcmp(r->failure.detail, detail == NULL ? "" : detail) == 0;
}

static int malformed(const struct run *r)
{
    return failed_with(r, "reading the input files", "(malformed stream)");
}

static void test_empty_streams(void)
{
    struct stream s = {NULL, 0};
    struct run r = unpack(&s, 0);
    check(r.rc == 0 && entries(r.work_fd) == 0, "a zero-length stream unpacks nothing");
    finish(&r);
    end(&s);
    r = unpack(&s, s.len);
    check(r.rc == 0 && entries(r.work_fd) == 0, "an end record alone unpacks nothing");
    finish(&r);
    free(s.data);
}

static void test_honest_files(void)
{
    struct stream s = {NULL, 0};
    struct run r;
    file(&s, 0, "plain.txt", "hello");
    file(&s, SBX_MODE_EXECUTABLE, "run.sh", "#!/bin/sh\n");
    file(&s, 0, "a/b/deep.txt", "deep");
    file(&s, 0, "empty", "");
    end(&s);
    r = unpack(&s, s.len);
    check(r.rc == 0, "honest records unpack");
    check(content_is(r.work_fd, "plain.txt", "hello") && mode_of(r.work_fd, "plain.txt") == 0644,
          "a plain file has its bytes and mode 0644");
    check(mode_of(r.work_fd, "run.sh") == 0755, "an executable file has mode 0755");
    check(content_is(r.work_fd, "a/b/deep.txt", "deep") && mode_of(r.work_fd, "a/b") == 0755,
          "a name with '/' creates its directories");
    check(content_is(r.work_fd, "empty", ""), "an empty file is created empty");
    check(entries(r.case_fd) == 1, "nothing lands beside the working directory");
    finish(&r);
    free(s.data);
}

static void test_bad_headers(void)
{
    static const unsigned char modes[] = {2, 0x80, 0xff};
    struct stream s = {NULL, 0};
    struct run r;
    put(&s, "X", 1);
    r = unpack(&s, s.len);
    check(malformed(&r), "an unknown tag is a malformed stream");
    finish(&r);
    for (size_t i = 0; i < sizeof modes; i++) {
        s.len = 0;
        file(&s, modes[i], "f", "x");
        r = unpack(&s, s.len);
        check(malformed(&r) && entries(r.work_fd) == 0, "mode bits %#x are refused", modes[i]);
        finish(&r);
    }
    free(s.data);
}

static void test_lengths(void)
{
    static const uint32_t name_lens[] = {0, SBX_MAX_NAME + 1, 0x80000000u, 0xffffffffu};
    char *longest = malloc(SBX_MAX_NAME + 1);
    struct stream s = {NULL, 0};
    struct run r;
    for (size_t i = 0; i < sizeof name_lens / sizeof name_lens[0]; i++) {
        s.len = 0;
        record(&s, 0, "name", 4, name_lens[i], 1, "x", 1);
        r = unpack(&s, s.len);
        check(malformed(&r) && entries(r.work_fd) == 0, "a name length of %#x is refused",
              (unsigned)name_lens[i]);
        finish(&r);
    }
    /* The longest name is read whole (then the kernel refuses its one component). */
    memset(longest, 'n', SBX_MAX_NAME);
    longest[SBX_MAX_NAME] = '\0';
    s.len = 0;
    file(&s, 0, longest, "x");
    end(&s);
    r = unpack(&s, s.len);
    check(failed_with(&r, "creating input file", longest) && r.failure.err == ENAMETOOLONG,
          "a name of SBX_MAX_NAME bytes is read whole and fails only at its creation");
    finish(&r);
    s.len = 0;
    record(&s, 0, "huge", 4, 4, UINT64_MAX, "0123456789", 10);
    r = unpack(&s, s.len);
    check(failed_with(&r, "writing input file", "huge"),
          "a data length of 2^64-1 fails at the end of the stream");
    finish(&r);
    s.len = 0;
    record(&s, 0, "short", 5, 5, 1000, "abc", 3);
    put(&s, "E\0", 2);
    r = unpack(&s, s.len);
    check(failed_with(&r, "writing input file", "short"),
          "a data length past the stream swallows the end record and fails");
    finish(&r);
    free(s.data);
    free(longest);
}

/*
 * test_every_cut: a stream of two records cut at every byte: before a tag
 * it ends there (what came before unpacked), inside a header it is
 * malformed, inside data the file cannot be written.
 */
static void test_every_cut(void)
{
    struct stream s = {NULL, 0};
    size_t first_end, header = 1 + 1 + 4 + 3 + 8, all_good = 1;
    file(&s, 0, "one", "first");
    first_end = s.len;
    file(&s, 0, "two", "second");
    end(&s);
    for (size_t cut = 0; cut <= s.len; cut++) {
        struct run r = unpack(&s, cut);
        size_t at = cut < first_end ? cut : cut - first_end;
        int good;
        if (cut == 0 || cut == first_end || cut >= s.len - 2)
            good = r.rc == 0;
        else if (at < header)
            good = malformed(&r);
        else
            good = failed_with(&r, "writing input file", cut < first_end ? "one" : "two");
        if (!good)
            check(0, "the stream cut at byte %zu of %zu", cut, s.len);
        all_good &= good;
        finish(&r);
    }
    check(all_good, "a stream cut at any of its bytes ends, or fails as the cut says");
    free(s.data);
}

static void test_hostile_names(void)
{
    static const char *const names[] = {"..",   "../escape", "a/../../escape",
                                        ".",    "./x",       "a/./b",
                                        "a//b", "a/",        "/",
                                        "/abs", "a/..",      "../../../../../../tmp/escape"};
    struct stream s = {NULL, 0};
    struct run r;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        s.len = 0;
        file(&s, 0, names[i], "x");
        end(&s);
        r = unpack(&s, s.len);
        check(malformed(&r) && r.failure.err == EINVAL && entries(r.work_fd) == 0 &&
                  entries(r.case_fd) == 1,
              "the name \"%s\" is refused and creates nothing anywhere", names[i]);
        finish(&r);
    }
    s.len = 0;
    record(&s, 0, "a\0b", 3, 3, 1, "x", 1);
    r = unpack(&s, s.len);
    check(malformed(&r) && entries(r.work_fd) == 0, "a name holding NUL is refused, not cut");
    finish(&r);
    free(s.data);
}

static void test_existing_names(void)
{
    struct stream s = {NULL, 0};
    struct run r;
    file(&s, 0, "twice", "first");
    file(&s, 0, "twice", "second");
    end(&s);
    r = unpack(&s, s.len);
    check(failed_with(&r, "creating input file", "twice") && r.failure.err == EEXIST &&
              content_is(r.work_fd, "twice", "first"),
          "a second record of a name fails and leaves the first file");
    finish(&r);
    s.len = 0;
    file(&s, 0, "f", "file");
    file(&s, 0, "f/g", "under a file");
    end(&s);
    r = unpack(&s, s.len);
    check(failed_with(&r, "creating input file", "f/g"), "a file is not made a directory");
    finish(&r);
    /* A planted symlink to the case directory, outside work/. */
    s.len = 0;
    file(&s, 0, "link/planted", "x");
    end(&s);
    r = start_case();
    if (symlinkat("..", r.work_fd, "link") != 0)
        abort();
    feed(&r, &s, s.len);
    check(failed_with(&r, "creating input file", "link/planted") &&
              (r.failure.err == ENOTDIR || r.failure.err == ELOOP) && entries(r.case_fd) == 1,
          "a planted symlink to a directory is not followed");
    finish(&r);
    s.len = 0;
    file(&s, 0, "leaf", "x");
    end(&s);
    r = start_case();
    if (symlinkat("../outside", r.work_fd, "leaf") != 0)
        abort();
    feed(&r, &s, s.len);
    check(failed_with(&r, "creating input file", "leaf") && r.failure.err == EEXIST &&
              entries(r.case_fd) == 1,
          "a planted symlink in a file's place is not written through");
    finish(&r);
    free(s.data);
}

static void test_many_records(void)
{
    struct stream s = {NULL, 0};
    struct rlimit low, saved;
    int probe_before, probe_after, good = 1;
    char name[32];
    struct run r;
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "d%d/f%d", i % 10, i);
        file(&s, 0, name, "x");
    }
    end(&s);
    probe_before = dup(0);
    close(probe_before);
    getrlimit(RLIMIT_NOFILE, &saved);
    low = saved;
    low.rlim_cur = 64; /* the soft limit only, so that it can be raised back */
    setrlimit(RLIMIT_NOFILE, &low);
    r = unpack(&s, s.len);
    setrlimit(RLIMIT_NOFILE, &saved);
    for (int i = 0; i < 10 && good; i++) {
        int sub;
        snprintf(name, sizeof name, "d%d", i);
        sub = openat(r.work_fd, name, O_RDONLY | O_DIRECTORY);
        good = sub >= 0 && entries(sub) == 300;
        close(sub);
    }
    check(r.rc == 0 && good, "3000 records unpack under a limit of 64 fds");
    finish(&r);
    probe_after = dup(0);
    close(probe_after);
    check(probe_after == probe_before, "and leave no fd open");
    free(s.data);
}

/* collected: sbx_collect_files of dir with the caps, as a stream in memory. */
static struct stream collected(const char *dir, unsigned long long max_bytes,
                               unsigned long long max_files)
{
    char path[] = "/tmp/pysandbox-c-units-out-XXXXXX";
    struct stream out = {NULL, 0};
    int fd = mkstemp(path);
    off_t size;
    if (fd < 0)
        abort();
    unlink(path);
    sbx_collect_files(fd, dir, NULL, max_bytes, max_files, NULL);
    size = lseek(fd, 0, SEEK_END);
    out.data = malloc((size_t)size + 1);
    out.len = (size_t)size;
    if (out.data == NULL || pread(fd, out.data, out.len, 0) != size)
        abort();
    close(fd);
    return out;
}

static void test_round_trip(void)
{
    struct stream s = {NULL, 0}, out;
    struct run r, back;
    file(&s, 0, "x/one", "1");
    file(&s, SBX_MODE_EXECUTABLE, "two", "22");
    end(&s);
    r = unpack(&s, s.len);
    out = collected(r.work, 1000, 10);
    back = unpack(&out, out.len);
    check(back.rc == 0 && content_is(back.work_fd, "x/one", "1") &&
              content_is(back.work_fd, "two", "22") && mode_of(back.work_fd, "two") == 0755 &&
              out.data[out.len - 1] == 0,
          "what sbx_collect_files streams unpacks to the same files and modes");
    finish(&back);
    free(out.data);
    out = collected(r.work, 1000, 1);
    check(out.len >= 2 && out.data[out.len - 2] == 'E' && out.data[out.len - 1] == 1,
          "past its file count the stream says files were left out");
    free(out.data);
    finish(&r);
    free(s.data);
}

int main(void)
{
    umask(022);
    if (mkdtemp(root) == NULL || (root_fd = open(root, O_RDONLY | O_DIRECTORY)) < 0) {
        perror("mkdtemp");
        return 2;
    }
    test_empty_streams();
    test_honest_files();
    test_bad_headers();
    test_lengths();
    test_every_cut();
    test_hostile_names();
    test_existing_names();
    test_many_records();
    test_round_trip();
    remove_tree(root_fd);
    rmdir(root);
    return done();
}
