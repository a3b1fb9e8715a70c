/* SPDX-License-Identifier: MIT */
/*
 * init_files.c: the init's file record streams, both ways: the input files
 * unpacked from --files-in-fd into the working directory before the program
 * runs, and its regular files streamed to --files-out-fd after.  A stream is
 * records
 *   'F' u8 mode u32le name_length name u64le data_length data ... 'E' u8 flags
 * (mode bit 0, SBX_MODE_EXECUTABLE: in, create the file 0755 rather than
 * 0644; out, its owner-execute bit is set; no other bit is allowed, so no
 * setuid, setgid or sticky bit travels either way.  flags bit 0: some files
 * were left out).  Nothing here trusts the files: they are opened relative
 * to directory fds with O_NOFOLLOW, and only regular files are read, so a
 * planted symlink or FIFO is skipped; the mode reported is that of the open
 * file (fstat).  Part of the init, not of the extension module; no function
 * here exits, so tests/core/c/test_init_files.c links this file alone (with
 * file_filter.c, the filter of the files streamed out).
 */
#define _GNU_SOURCE
#include "init_files.h"

#include "file_filter.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 32
/* How much of a file's data is copied at a time. */
#define COPY_SIZE (1 << 16)

/* read_exact: read len bytes; 0 on success, -1 at EOF (a record cut short) or error. */
static int read_exact(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* sbx_write_all: write len bytes; 0 on success, -1 on error. */
int sbx_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/*
 * open_parent: for a relative name "a/b/c", create and open "a/b" under
 * dir_fd (each component a real directory, never a symlink) and return its
 * fd with *leaf pointing at "c".  The name fits (name_fits), so every
 * component is a real step down.
 */
static int open_parent(int dir_fd, char *name, char **leaf)
{
    int fd = dup(dir_fd);
    char *component = name, *slash;
    while (fd >= 0 && (slash = strchr(component, '/')) != NULL) {
        int next;
        *slash = '\0';
        if (mkdirat(fd, component, 0755) != 0 && errno != EEXIST)
            next = -1;
        else
            next = openat(fd, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *slash = '/';
        close(fd);
        fd = next;
        component = slash + 1;
    }
    *leaf = component;
    return fd;
}

/* What read_header found. */
enum { RECORD_END = 0, RECORD_FILE = 1, RECORD_MALFORMED = -1 };

/*
 * name_fits: whether the len bytes at name are a name the host sends
 * (name_problem in pysandbox/_model/filestream.py): relative, without NUL,
 * every component neither empty nor "." nor "..".  Anything else could
 * make open_parent leave dir_fd ("../x", "a/../../x") or cut the name at
 * a NUL into another one.  Pure.
 */
static int name_fits(const char *name, size_t len)
{
    size_t start = 0;
    if (memchr(name, '\0', len) != NULL)
        return 0;
    for (size_t i = 0; i <= len; i++) {
        size_t n = i - start;
        if (i < len && name[i] != '/')
            continue;
        if (n == 0 || (n <= 2 && memcmp(name + start, "..", n) == 0))
            return 0;
        start = i + 1;
    }
    return 1;
}

/*
 * read_header: the next record's header from in_fd: its mode, its name
 * (NUL-terminated into name, which has SBX_MAX_NAME + 1 bytes) and its data
 * length.  RECORD_END at the end record, or at the end of the stream before
 * a tag; RECORD_MALFORMED for any other tag, a mode with unknown bits, a
 * name empty or longer than SBX_MAX_NAME, or a stream cut inside the header
 * (errno as the failed read left it), or a name that does not fit
 * (name_fits; errno EINVAL).
 */
static int read_header(int in_fd, unsigned char *mode, char *name, uint64_t *size)
{
    unsigned char tag, size_bytes[8], len_bytes[4];
    uint32_t name_len = 0;
    int i;
    if (read_exact(in_fd, &tag, 1) != 0 || tag == 'E')
        return RECORD_END;
    if (tag != 'F' || read_exact(in_fd, mode, 1) != 0 || (*mode & ~SBX_MODE_EXECUTABLE) != 0 ||
        read_exact(in_fd, len_bytes, 4) != 0)
        return RECORD_MALFORMED;
    for (i = 3; i >= 0; i--)
        name_len = name_len << 8 | len_bytes[i];
    if (name_len == 0 || name_len > SBX_MAX_NAME || read_exact(in_fd, name, name_len) != 0 ||
        read_exact(in_fd, size_bytes, 8) != 0)
        return RECORD_MALFORMED;
    if (!name_fits(name, name_len)) {
        errno = EINVAL;
        return RECORD_MALFORMED;
    }
    name[name_len] = '\0';
    *size = 0;
    for (i = 7; i >= 0; i--)
        *size = *size << 8 | size_bytes[i];
    return RECORD_FILE;
}

/* fail: record errno, what failed and about what (copied; NULL: nothing). */
static void fail(struct sbx_unpack_failure *f, const char *what, const char *detail)
{
    f->err = errno;
    f->what = what;
    snprintf(f->detail, sizeof f->detail, "%s", detail != NULL ? detail : "");
}

/*
 * unpack_one: create the file name under dir_fd, 0644, or 0755 when mode
 * says executable (less the umask, as for any file the program creates),
 * and copy the record's size bytes of data from in_fd into it, COPY_SIZE at
 * a time through buf.  Returns 0, or -1 with *f filled.  Closes what it
 * opened on every path.
 */
static int unpack_one(int in_fd, int dir_fd, char *name, unsigned char mode, uint64_t size,
                      char *buf, struct sbx_unpack_failure *f)
{
    mode_t create_mode = (mode & SBX_MODE_EXECUTABLE) ? 0755 : 0644;
    char *leaf;
    int parent = open_parent(dir_fd, name, &leaf), out = -1, rc = -1;
    if (parent >= 0)
        out =
            openat(parent, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, create_mode);
    if (out < 0) {
        fail(f, "creating input file", name);
        goto cleanup;
    }
    while (size > 0) {
        size_t chunk = size < COPY_SIZE ? (size_t)size : COPY_SIZE;
        if (read_exact(in_fd, buf, chunk) != 0 || sbx_write_all(out, buf, chunk) != 0) {
            fail(f, "writing input file", name);
            goto cleanup;
        }
        size -= chunk;
    }
    rc = 0;

cleanup:
    if (out >= 0)
        close(out);
    if (parent >= 0)
        close(parent);
    return rc;
}

/*
 * sbx_unpack_files: create the input files of the stream on in_fd under
 * dir_fd, up to its end record (or the end of the stream).  Returns 0, or
 * -1 with *failure saying what to die of: a malformed stream (unknown mode
 * bits included), a file that could not be created or written, no memory.
 * Files created before a failure stay.  Leaves in_fd and dir_fd open.
 */
int sbx_unpack_files(int in_fd, int dir_fd, struct sbx_unpack_failure *failure)
{
    char *name = malloc(SBX_MAX_NAME + 1), *buf = malloc(COPY_SIZE);
    unsigned char mode = 0;
    uint64_t size = 0;
    int record, rc = -1;
    if (name == NULL || buf == NULL) {
        fail(failure, "unpacking the input files", NULL);
        goto cleanup;
    }
    while ((record = read_header(in_fd, &mode, name, &size)) == RECORD_FILE) {
        if (unpack_one(in_fd, dir_fd, name, mode, size, buf, failure) != 0)
            goto cleanup;
    }
    if (record == RECORD_MALFORMED) {
        fail(failure, "reading the input files", "(malformed stream)");
        goto cleanup;
    }
    rc = 0;

cleanup:
    free(name);
    free(buf);
    return rc;
}

/* Where the files of the working directory go, and how much may: `left`
 * bytes of content and `files_left` files; `full` once a file found no room
 * in the count, which ends the walk; `filter`: which files are wanted at
 * all (NULL: every one). */
struct collector {
    int out_fd;
    const struct sbx_file_filter *filter;
    unsigned long long left;
    unsigned long long files_left;
    int left_out;
    int full;
    char path[SBX_MAX_NAME + 1];
};

/*
 * emit_file: append one record for the regular file open on fd, whose fstat
 * is *st: its mode byte says whether the owner may execute it, read from the
 * open file, never again through its path.  A file past the count is left
 * out and makes the collector full.
 */
static void emit_file(struct collector *c, int fd, const struct stat *st)
{
    size_t name_len = strlen(c->path), got = 0;
    unsigned char header[1 + 1 + 4 + 8];
    char *data;
    int i;
    if (c->files_left == 0) {
        c->left_out = 1;
        c->full = 1;
        return;
    }
    if ((unsigned long long)st->st_size > c->left) {
        c->left_out = 1;
        return;
    }
    data = malloc((size_t)st->st_size + 1);
    if (data == NULL) {
        c->left_out = 1;
        return;
    }
    while (got < (size_t)st->st_size) {
        ssize_t n = read(fd, data + got, (size_t)st->st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    header[0] = 'F';
    header[1] = (st->st_mode & S_IXUSR) ? SBX_MODE_EXECUTABLE : 0;
    for (i = 0; i < 4; i++)
        header[2 + i] = (unsigned char)(name_len >> (8 * i));
    for (i = 0; i < 8; i++)
        header[6 + i] = (unsigned char)((unsigned long long)got >> (8 * i));
    if (sbx_write_all(c->out_fd, header, 6) != 0 ||
        sbx_write_all(c->out_fd, c->path, name_len) != 0 ||
        sbx_write_all(c->out_fd, header + 6, 8) != 0 || sbx_write_all(c->out_fd, data, got) != 0)
        c->left_out = 1;
    c->left -= got;
    c->files_left--;
    free(data);
}

/*
 * collect_dir: stream the regular files under dir_fd (whose relative path is
 * c->path, "" at the top), depth first, never following a symlink and never
 * opening anything but a regular file or a directory; stops as soon as the
 * collector is full, so a million files cost the walk no more than the count.
 * Only the files the filter wants are read and counted, and an entry an
 * exclude pattern matches is not even opened (nor a directory entered).
 * Takes dir_fd.
 */
static void collect_dir(struct collector *c, int dir_fd, const char *skip, int depth)
{
    size_t base = strlen(c->path);
    DIR *dir = fdopendir(dir_fd);
    struct dirent *entry;
    if (dir == NULL) {
        close(dir_fd);
        c->left_out = 1;
        return;
    }
    while (!c->full && (entry = readdir(dir)) != NULL) {
        struct stat st;
        int fd;
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        if (depth == 0 && skip != NULL && strcmp(entry->d_name, skip) == 0)
            continue;
        if (base + strlen(entry->d_name) + 2 > SBX_MAX_NAME) {
            c->left_out = 1;
            continue;
        }
        snprintf(c->path + base, sizeof c->path - base, "%s%s", base ? "/" : "", entry->d_name);
        if (!sbx_filter_enters_dir(c->filter, c->path)) {
            c->path[base] = '\0';
            continue;
        }
        fd = openat(dirfd(dir), entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0) {
            /* A symlink (ELOOP) is skipped silently; anything else is noted. */
            if (errno != ELOOP)
                c->left_out = 1;
        } else if (S_ISREG(st.st_mode)) {
            if (sbx_filter_wants_file(c->filter, c->path))
                emit_file(c, fd, &st);
        } else if (S_ISDIR(st.st_mode) && depth < MAX_DEPTH) {
            collect_dir(c, fd, skip, depth + 1);
            fd = -1;
        } else if (S_ISDIR(st.st_mode)) {
            c->left_out = 1;
        }
        if (fd >= 0)
            close(fd);
        c->path[base] = '\0';
    }
    closedir(dir);
}

/*
 * sbx_collect_files: the whole stream of the regular files under dir for
 * out_fd, at most max_files files and max_bytes bytes of content, the top
 * entry named skip left out, only the files filter wants (NULL: all; a
 * broken filter wants none, and says files were left out), ended by 'E'
 * flags (FLAG bit 0: some files were left out).  Files the filter does not
 * want are neither read nor counted, nor said to be left out.  Never fails:
 * what cannot be read is left out and said so.
 */
void sbx_collect_files(int out_fd, const char *dir, const char *skip, unsigned long long max_bytes,
                       unsigned long long max_files, const struct sbx_file_filter *filter)
{
    struct collector *c = calloc(1, sizeof *c);
    unsigned char end[2] = {'E', 0};
    int dir_fd;
    if (c == NULL)
        return;
    c->out_fd = out_fd;
    c->filter = filter;
    c->left_out = filter != NULL && filter->broken;
    c->left = max_bytes;
    c->files_left = max_files;
    dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd >= 0)
        collect_dir(c, dir_fd, skip, 0);
    else
        c->left_out = 1;
    end[1] = (unsigned char)(c->left_out ? 1 : 0);
    sbx_write_all(c->out_fd, end, 2);
    free(c);
}
