/* SPDX-License-Identifier: MIT */
/*
 * copy_template.c: the copy client's --template mode, which starts a root
 * caller's template sandbox (copy.c) in its own user namespace:
 *
 *   _copy --template --userns-fd N [--stage PATH]... -- BWRAP ARGS...
 *
 * The C core starts it in bwrap's place, as root, with the template's fds.
 * It executes bwrap (same pid: the core's child stays bwrap) as uid 0 of the
 * user namespace --userns-fd (made by the module's user_namespace(): its
 * ids map to unprivileged host ids), so that the namespaces and mounts bwrap
 * makes belong to that user namespace, where the template keeps the
 * capabilities to make its copies' (a copy's own mount namespace then
 * locks none of them, and may mount its /proc).
 *
 * bwrap then runs as an unprivileged host id, which may not enter a
 * directory only root may enter (/root, where pyenv puts the interpreter).
 * So, first, in a mount namespace of its own (owned by the host's user
 * namespace: nothing of it shows outside this process), each --stage PATH
 * below such a directory is made reachable at the same path: the topmost
 * closed directory above it is covered with a tmpfs any user may enter,
 * and PATH is bound back in it (from an O_PATH fd opened, as root, in that
 * mount namespace before the cover).  Every other path below a covered
 * directory is hidden from bwrap, which binds only the staged ones.
 */
#define _GNU_SOURCE
#include "copy_client.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_STAGES 8

struct stage {
    int fd;
    char path[4096];
    char top[4096];
};

/* fail: say why on stderr (bwrap's stderr: the launch reports it) and exit 1. */
static _Noreturn void fail(const char *what, const char *detail)
{
    fprintf(stderr, "pysandbox-copy: %s%s%s: %s\n", what, detail ? " " : "", detail ? detail : "",
            strerror(errno));
    exit(1);
}

/*
 * closed_top: the topmost directory above path that not every user may
 * enter (no o+x), into top; returns 0, or -1 when there is none.
 */
static int closed_top(const char *path, char *top, size_t size)
{
    char walk[4096];
    char *slash;
    struct stat st;
    if (strlen(path) >= sizeof walk || path[0] != '/')
        return -1;
    strcpy(walk, path);
    for (slash = strchr(walk + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (stat(walk, &st) == 0 && !(st.st_mode & S_IXOTH)) {
            if (strlen(walk) >= size)
                return -1;
            strcpy(top, walk);
            return 0;
        }
        *slash = '/';
    }
    return -1;
}

/* make_dirs: every directory from below `top` down to path's parent, 0755. */
static void make_dirs(const char *top, const char *path)
{
    char walk[4096];
    char *slash;
    strcpy(walk, path);
    for (slash = strchr(walk + strlen(top) + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(walk, 0755) != 0 && errno != EEXIST)
            fail("making the staged path", walk);
        *slash = '/';
    }
}

/*
 * stage_all: open each stage, then cover its closed top directory with a
 * tmpfs (once) and bind the stage back at its path from its fd.
 */
static void stage_all(struct stage *stages, size_t n)
{
    const char *covered[MAX_STAGES];
    char source[64];
    size_t n_covered = 0, i, j;
    struct stat st;
    for (i = 0; i < n; i++) {
        stages[i].fd = open(stages[i].path, O_PATH | O_CLOEXEC);
        if (stages[i].fd < 0)
            fail("opening the staged path", stages[i].path);
        if (closed_top(stages[i].path, stages[i].top, sizeof stages[i].top) != 0) {
            errno = EINVAL;
            fail("nothing closed above the staged path", stages[i].path);
        }
    }
    for (i = 0; i < n; i++) {
        const char *top = stages[i].top;
        for (j = 0; j < n_covered && strcmp(covered[j], top) != 0; j++)
            continue;
        if (j == n_covered) {
            if (mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=65536") != 0)
                fail("covering", top);
            covered[n_covered++] = top;
        }
        make_dirs(top, stages[i].path);
        if (fstat(stages[i].fd, &st) != 0)
            fail("reading the staged path", stages[i].path);
        if (S_ISDIR(st.st_mode) ? mkdir(stages[i].path, 0755) != 0 && errno != EEXIST
                                : mknod(stages[i].path, S_IFREG | 0644, 0) != 0 && errno != EEXIST)
            fail("making the staged path", stages[i].path);
        snprintf(source, sizeof source, "/proc/self/fd/%d", stages[i].fd);
        if (mount(source, stages[i].path, NULL, MS_BIND | MS_REC, NULL) != 0)
            fail("binding the staged path", stages[i].path);
        close(stages[i].fd);
    }
}

/* parse_stage: an absolute PATH into *stage, or exit. */
static void parse_stage(const char *text, struct stage *stage)
{
    if (text[0] != '/' || strlen(text) >= sizeof stage->path) {
        errno = EINVAL;
        fail("bad --stage", text);
    }
    stage->fd = -1;
    strcpy(stage->path, text);
}

/*
 * sbx_template_main: the --template mode (see the top of this file);
 * argv[1] is "--template".  Never returns: executes bwrap or exits 1.
 */
int sbx_template_main(int argc, char **argv)
{
    struct stage stages[MAX_STAGES];
    size_t n = 0;
    int i, userns = -1;
    for (i = 2; i + 1 < argc && strcmp(argv[i], "--") != 0; i += 2) {
        if (strcmp(argv[i], "--userns-fd") == 0)
            userns = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--stage") == 0 && n < MAX_STAGES)
            parse_stage(argv[i + 1], &stages[n++]);
        else {
            errno = EINVAL;
            fail("bad option", argv[i]);
        }
    }
    if (i + 1 >= argc || strcmp(argv[i], "--") != 0 || userns < 0) {
        errno = EINVAL;
        fail("usage: _copy --template --userns-fd N [--stage PATH]... -- BWRAP ARGS", NULL);
    }
    if (n > 0) {
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
            fail("making the staging mount namespace", NULL);
        stage_all(stages, n);
    }
    if (setgroups(0, NULL) != 0 || setns(userns, CLONE_NEWUSER) != 0)
        fail("entering the template's user namespace", NULL);
    if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
        fail("becoming the template's uid 0", NULL);
    close(userns);
    /* The change of credentials cleared the core's parent-death signal. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        fail("setting the parent-death signal", NULL);
    execv(argv[i + 1], argv + i + 1);
    fail("executing", argv[i + 1]);
}
