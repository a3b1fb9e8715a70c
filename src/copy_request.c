/* SPDX-License-Identifier: MIT */
/*
 * copy_request.c: a request for a template's copy (copy.c): received on the
 * template's control socket with its fds, parsed into its options, and its
 * fds put where the copy's init and program expect them.  Its words are
 * described at the top of copy.c.
 */
#define _GNU_SOURCE
#include "copy.h"

#include "fdpass.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * sbx_copy_receive: block until the next request arrives on control_fd and
 * fill *request (its fds close-on-exec).  Returns 1 for a request, 0 when
 * the host closed the socket (or sent an empty message without fds, which
 * looks the same), -1 with errno on a failure (a request that is empty,
 * cut short, or carries no link is EBADMSG, its fds closed).  Any thread;
 * no GIL needed.
 */
int sbx_copy_receive(int control_fd, struct sbx_copy_request *request)
{
    struct sbx_fd_message message;
    ssize_t n = sbx_fd_recv(control_fd, request->text, sizeof request->text - 1, &message);
    request->n_fds = 0;
    if (n < 0)
        return -1;
    if (n == 0 && message.n_fds == 0)
        return 0;
    memcpy(request->fds, message.fds, message.n_fds * sizeof(int));
    request->n_fds = message.n_fds;
    request->text[n] = '\0';
    request->length = (size_t)n;
    if (n == 0 || request->n_fds == 0 || message.cut) {
        sbx_copy_release(request);
        errno = EBADMSG;
        return -1;
    }
    return 1;
}

/* sbx_copy_release: close the request's fds.  Any thread; no GIL needed. */
void sbx_copy_release(struct sbx_copy_request *request)
{
    size_t i;
    for (i = 0; i < request->n_fds; i++)
        close(request->fds[i]);
    request->n_fds = 0;
}

/* parse_fd_list: "N,N,..." into fds[]; returns how many, or -1. */
static long parse_fd_list(const char *text, int *fds)
{
    size_t count = 0;
    char *end;
    while (*text != '\0') {
        long fd = strtol(text, &end, 10);
        if (end == text || fd < 0 || fd > 65535 || count == SBX_COPY_MAX_FDS)
            return -1;
        fds[count++] = (int)fd;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return -1;
        text = end;
    }
    return (long)count;
}

/* parse_one_fd: a single fd number into *fd; returns 0 or -1. */
static int parse_one_fd(const char *text, int *fd)
{
    int fds[SBX_COPY_MAX_FDS];
    if (parse_fd_list(text, fds) != 1)
        return -1;
    *fd = fds[0];
    return 0;
}

/* parse_option: one option and its value into *opt; returns 0 or -1. */
static int parse_option(const char *name, char *value, struct sbx_copy_options *opt)
{
    long long a, b, c;
    int used = 0;
    if (strcmp(name, "--fds") == 0) {
        long n = parse_fd_list(value, opt->targets);
        opt->n_targets = (size_t)n;
        return n < 0 ? -1 : 0;
    }
    if (strcmp(name, "--keep") == 0) {
        long n = parse_fd_list(value, opt->keep);
        opt->n_keep = (size_t)n;
        return n < 0 ? -1 : 0;
    }
    if (strcmp(name, "--id") == 0) {
        /* (uid_t)-1 would mean "unchanged" to setresuid. */
        if (sscanf(value, "%lld:%lld%n", &a, &b, &used) != 2 || value[used] != '\0' || a < 0 ||
            b < 0 || a >= 0xffffffffLL || b >= 0xffffffffLL)
            return -1;
        opt->has_id = 1;
        opt->uid = (uid_t)a;
        opt->gid = (gid_t)b;
        return 0;
    }
    if (strcmp(name, "--rlimit") == 0) {
        /* A resource past int would wrap to another one (2^32 to RLIMIT_CPU). */
        if (opt->n_rlimits == MAX_RLIMITS ||
            sscanf(value, "%lld:%lld:%lld%n", &a, &b, &c, &used) != 3 || value[used] != '\0' ||
            a < 0 || a >= RLIM_NLIMITS)
            return -1;
        opt->rlimits[opt->n_rlimits].resource = (int)a;
        opt->rlimits[opt->n_rlimits].soft = b < 0 ? RLIM_INFINITY : (rlim_t)b;
        opt->rlimits[opt->n_rlimits].hard = c < 0 ? RLIM_INFINITY : (rlim_t)c;
        opt->n_rlimits++;
        return 0;
    }
    if (strcmp(name, "--landlock-write") == 0) {
        if (opt->n_landlock == MAX_LANDLOCK)
            return -1;
        opt->landlock[opt->n_landlock++] = value;
        return 0;
    }
    if (strcmp(name, "--code") == 0) {
        char *colon = strchr(value, ':');
        if (colon == NULL || colon[1] != '/')
            return -1;
        *colon = '\0';
        opt->code_path = colon + 1;
        return parse_one_fd(value, &opt->code_fd);
    }
    if (strcmp(name, "--workdir") == 0 && value[0] == '/') {
        opt->workdir = value;
        return 0;
    }
    if (strcmp(name, "--cache") == 0 && value[0] == '/') {
        opt->cache = value;
        return 0;
    }
    if (strcmp(name, "--seccomp-fd") == 0)
        return parse_one_fd(value, &opt->seccomp_fd);
    return -1;
}

/*
 * sbx_copy_parse: the request's words into *opt.  Returns 0, or -1 when a
 * word is unknown or malformed, an fd count does not match, or a required
 * option (--fds, --workdir, --seccomp-fd, the init's command line) is
 * missing.
 */
int sbx_copy_parse(struct sbx_copy_request *request, struct sbx_copy_options *opt)
{
    char *word = request->text, *end = request->text + request->length;
    memset(opt, 0, sizeof *opt);
    opt->code_fd = opt->seccomp_fd = -1;
    while (word < end) {
        char *value = word + strlen(word) + 1;
        if (strcmp(word, "--") == 0) {
            for (word = value; word < end && opt->n_init < MAX_INIT_ARGS; word += strlen(word) + 1)
                opt->init_argv[opt->n_init++] = word;
            break;
        }
        char *next = value < end ? value + strlen(value) + 1 : end;
        if (value >= end || parse_option(word, value, opt) != 0)
            return -1;
        word = next;
    }
    if (word < end || opt->n_init == 0 || opt->workdir == NULL || opt->seccomp_fd < 0 ||
        opt->n_targets != request->n_fds - 1)
        return -1;
    /* A template that is uid 0 of its namespace (a root caller's) never makes a copy
     * of uid 0: the copy gets an identity of its own. */
    if (!opt->has_id && getuid() == 0)
        return -1;
    if (opt->code_path != NULL && strlen(opt->code_path) <= strlen(opt->workdir))
        return -1;
    return 0;
}

/* listed: whether fd is one of fds[0..n). */
static int listed(int fd, const int *fds, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (fds[i] == fd)
            return 1;
    }
    return 0;
}

/*
 * sbx_close_all_but: close every fd but those of keep[0..n) (and `also`, when
 * not -1): close_range over the gaps between them, each fd where the
 * kernel has no close_range.  Async-signal-safe.
 */
void sbx_close_all_but(const int *keep, size_t n, int also)
{
    int fd = 0, top = also;
    size_t i;
    for (i = 0; i < n; i++) {
        if (keep[i] > top)
            top = keep[i];
    }
    while (fd <= top + 1) {
        int next = fd;
        while (next <= top && (listed(next, keep, n) || next == also))
            next++;
        fd = next;
        while (next <= top && !listed(next, keep, n) && next != also)
            next++;
        if (next > top) {
            if (syscall(SYS_close_range, (unsigned)fd, ~0u, 0u) != 0) {
                struct rlimit limit;
                int last = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536
                               ? (int)limit.rlim_cur
                               : 65536;
                for (; fd < last; fd++)
                    close(fd);
            }
            return;
        }
        if (syscall(SYS_close_range, (unsigned)fd, (unsigned)(next - 1), 0u) != 0) {
            for (; fd < next; fd++)
                close(fd);
        }
        fd = next;
    }
}

/*
 * sbx_copy_place_fds: put the request's fds (after the link) at their target
 * numbers, move the link above them all, close every other fd; returns
 * the link's new number, or -1 with errno when an fd runs out.  The targets
 * lose close-on-exec (the init and the program inherit them).  P1 only.
 */
int sbx_copy_place_fds(struct sbx_copy_request *request, const struct sbx_copy_options *opt)
{
    int above = 3, link, moved[SBX_COPY_MAX_FDS];
    size_t i;
    for (i = 0; i < opt->n_targets; i++) {
        if (opt->targets[i] >= above)
            above = opt->targets[i] + 1;
    }
    for (i = 0; i < request->n_fds; i++) {
        if (request->fds[i] >= above)
            above = request->fds[i] + 1;
    }
    link = fcntl(request->fds[0], F_DUPFD_CLOEXEC, above);
    if (link < 0)
        return -1;
    /* All moved above first: a target may be the number of a later source. */
    for (i = 0; i < opt->n_targets; i++) {
        moved[i] = fcntl(request->fds[i + 1], F_DUPFD_CLOEXEC, above);
        if (moved[i] < 0)
            return -1;
    }
    for (i = 0; i < opt->n_targets; i++) {
        if (dup2(moved[i], opt->targets[i]) < 0)
            return -1;
    }
    sbx_close_all_but(opt->targets, opt->n_targets, link);
    return link;
}
