/* SPDX-License-Identifier: MIT */
/*
 * copy_tree.c: a copy of the template's working directory in a copy's own
 * (copy.c), made by the copy's program once it is the copy's identity, so
 * that what it writes is its own.  The template's set-up is trusted: its
 * files are copied as they are, bounded in depth only.
 */
#define _GNU_SOURCE
#include "copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_TREE_DEPTH 64

/*
 * copy_file: the regular file `name` of from_dir into to_dir, with its
 * permission bits.  Returns 0 or -1.  Reads and writes only.
 */
static int copy_file(int from_dir, int to_dir, const char *name, mode_t mode)
{
    char buffer[65536];
    ssize_t n = 0;
    int from = openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), to = -1;
    if (from >= 0)
        to = openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    while (to >= 0 && (n = read(from, buffer, sizeof buffer)) > 0) {
        char *at = buffer;
        while (n > 0) {
            ssize_t written = write(to, at, (size_t)n);
            if (written < 0)
                break;
            at += written;
            n -= written;
        }
        if (n > 0)
            break;
    }
    if (to >= 0 && n == 0 && fchmod(to, mode & 07777) == 0) {
        close(from);
        return close(to);
    }
    if (from >= 0)
        close(from);
    if (to >= 0)
        close(to);
    return -1;
}

/*
 * copy_below: the directories, regular files and symlinks below from_dir
 * into to_dir (both fds stay open), but for the top-level entry `skip`
 * (the code file, bound by P1), at most MAX_TREE_DEPTH deep.  Other kinds
 * are left out.  Returns 0 or -1.  P2, after its identity is set, so what
 * it writes is its own; malloc (opendir) is safe after glibc's fork.
 */
static int copy_below(int from_dir, int to_dir, const char *skip, int depth)
{
    struct dirent *entry;
    DIR *dir;
    int rc = 0, listing = dup(from_dir);
    if (listing < 0 || depth > MAX_TREE_DEPTH || (dir = fdopendir(listing)) == NULL) {
        if (listing >= 0)
            close(listing);
        return -1;
    }
    while (rc == 0 && (entry = readdir(dir)) != NULL) {
        const char *name = entry->d_name;
        struct stat st;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
            (skip != NULL && strcmp(name, skip) == 0))
            continue;
        if (fstatat(from_dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = -1;
        } else if (S_ISREG(st.st_mode)) {
            rc = copy_file(from_dir, to_dir, name, st.st_mode);
        } else if (S_ISDIR(st.st_mode)) {
            int from = openat(from_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int to = -1;
            if (from >= 0 && mkdirat(to_dir, name, 0700) == 0)
                to = openat(to_dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = to < 0 ? -1 : copy_below(from, to, NULL, depth + 1);
            if (rc == 0)
                rc = fchmod(to, st.st_mode & 07777);
            if (from >= 0)
                close(from);
            if (to >= 0)
                close(to);
        } else if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = readlinkat(from_dir, name, target, sizeof target - 1);
            if (n >= 0)
                target[n] = '\0';
            rc = n < 0 ? -1 : symlinkat(target, to_dir, name);
        }
    }
    closedir(dir);
    return rc;
}

/*
 * sbx_copy_tree: copy_below from the top: the template's working directory
 * (from_dir) into the copy's (to_dir), but for the top-level entry `skip`.
 * Returns 0 or -1.
 */
int sbx_copy_tree(int from_dir, int to_dir, const char *skip)
{
    return copy_below(from_dir, to_dir, skip, 0);
}
