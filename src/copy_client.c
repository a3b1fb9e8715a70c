/* SPDX-License-Identifier: MIT */
/*
 * copy_client.c: pysandbox's copy client, the program the C core starts in
 * bwrap's place for a job that runs as a copy of a template (copy.c).  A
 * standalone executable (pysandbox/_copy), run on the host, in the job's
 * cgroup and with the job's rlimits, as:
 *
 *   _copy --control-fd N --status-fd N [--cgroup-procs-fd N]...
 *         --forward N,N,... -- WORDS...
 *
 * It asks the template for a copy: on the template's control socket
 * (--control-fd, a SOCK_SEQPACKET socket), one message whose words are
 * "--fds" and the --forward list, a "--rlimit" for each of its own
 * resource limits, then WORDS; and whose fds are a new link to this
 * process, then each fd of --forward.  Then, over the link:
 *
 *   - the copy's hello ("h"): the kernel attaches the sender's credentials,
 *     so its pid here is the host's; it is moved into this process's cgroups
 *     (each --cgroup-procs-fd: a v2 group's cgroup.procs, or a v1 group's
 *     tasks, which moves the one thread the copy has then; a character
 *     device, /dev/null, is a slot left unused) and acknowledged
 *     ("k"): from then on it is counted and limited as the job;
 *   - "b" with a pidfd of the copy's init once its sandbox is built: the
 *     pidfd is kept as fd 3, for the C core to pin the init by (its pid
 *     namespace ends when the init does), and bwrap's "child-pid" document
 *     is written on --status-fd;
 *   - "x" and the init's exit code: written as bwrap's "exit-code" document,
 *     and this process exits with that code, as bwrap does;
 *   - "E" and why the copy could not be made: written on stderr, exit 1
 *     without an exit-code document (the launch reports a sandbox that could
 *     not be built).
 *
 * When the C core kills the job, it kills the copy's init first; killed
 * itself, this process hangs up the link, and the copy kills its init.
 *
 * With --template first, it starts a root caller's template instead
 * (copy_template.c).
 */
#define _GNU_SOURCE
#include "copy_client.h"

#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FORWARD (SBX_FDPASS_MAX - 1)
#define MAX_JOINS 8
#define MAX_REQUEST 65536
#define INIT_PIDFD 3

struct client_options {
    int control_fd;
    int status_fd;
    int joins[MAX_JOINS];
    size_t n_joins;
    int forward[MAX_FORWARD];
    size_t n_forward;
    const char *forward_text;
    char **words;
};

/* die: say why on stderr and exit 1 (no exit-code document is written). */
static _Noreturn void die(const char *what, const char *detail)
{
    fprintf(stderr, "pysandbox-copy: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* parse_fd: a non-negative fd number, or die. */
static int parse_fd(const char *text)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < 0 || value > 65535)
        die("bad fd", text);
    return (int)value;
}

/* parse_forward: "N,N,..." into opt->forward, or die. */
static void parse_forward(const char *text, struct client_options *opt)
{
    char copy[1024], *item, *rest;
    if (strlen(text) >= sizeof copy)
        die("too many fds to forward", NULL);
    strcpy(copy, text);
    for (item = strtok_r(copy, ",", &rest); item != NULL; item = strtok_r(NULL, ",", &rest)) {
        if (opt->n_forward == MAX_FORWARD)
            die("too many fds to forward", NULL);
        opt->forward[opt->n_forward++] = parse_fd(item);
    }
    opt->forward_text = text;
}

/* parse_options: argv into *opt, or die. */
static void parse_options(int argc, char **argv, struct client_options *opt)
{
    int i;
    memset(opt, 0, sizeof *opt);
    opt->control_fd = opt->status_fd = -1;
    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--control-fd") == 0)
            opt->control_fd = parse_fd(argv[i + 1]);
        else if (strcmp(argv[i], "--status-fd") == 0)
            opt->status_fd = parse_fd(argv[i + 1]);
        else if (strcmp(argv[i], "--cgroup-procs-fd") == 0 && opt->n_joins < MAX_JOINS)
            opt->joins[opt->n_joins++] = parse_fd(argv[i + 1]);
        else if (strcmp(argv[i], "--forward") == 0)
            parse_forward(argv[i + 1], opt);
        else
            die("unknown option", argv[i]);
    }
    if (i >= argc || strcmp(argv[i], "--") != 0 || opt->control_fd < 0 || opt->status_fd < 0 ||
        opt->n_forward == 0)
        die("usage: _copy --control-fd N --status-fd N [--cgroup-procs-fd N]... "
            "--forward N,... -- WORDS...",
            NULL);
    opt->words = argv + i + 1;
}

/* add_word: append word and its NUL to text (at *length), or die. */
static void add_word(char *text, size_t *length, const char *word)
{
    size_t size = strlen(word) + 1;
    if (size > MAX_REQUEST - *length)
        die("the copy request is too long", NULL);
    memcpy(text + *length, word, size);
    *length += size;
}

/*
 * build_request: the request's words (see the top of this file) into text;
 * returns their length.
 */
static size_t build_request(const struct client_options *opt, char *text)
{
    size_t length = 0;
    char limit[96];
    char **word;
    int resource;
    add_word(text, &length, "--fds");
    add_word(text, &length, opt->forward_text);
    for (resource = 0; resource < RLIM_NLIMITS; resource++) {
        struct rlimit value;
        if (getrlimit(resource, &value) != 0)
            continue;
        snprintf(limit, sizeof limit, "%d:%lld:%lld", resource,
                 value.rlim_cur == RLIM_INFINITY ? -1LL : (long long)value.rlim_cur,
                 value.rlim_max == RLIM_INFINITY ? -1LL : (long long)value.rlim_max);
        add_word(text, &length, "--rlimit");
        add_word(text, &length, limit);
    }
    for (word = opt->words; *word != NULL; word++)
        add_word(text, &length, *word);
    return length;
}

/* send_request: the request and its fds (the link first) on the control socket. */
static void send_request(const struct client_options *opt, int link)
{
    static char text[MAX_REQUEST];
    int fds[MAX_FORWARD + 1];
    size_t length = build_request(opt, text);
    fds[0] = link;
    memcpy(fds + 1, opt->forward, opt->n_forward * sizeof(int));
    if (sbx_fd_send(opt->control_fd, text, length, fds, opt->n_forward + 1) != 0)
        die("cannot reach the template", strerror(errno));
}

/*
 * hear: the copy's next message on the link into text (NUL-terminated),
 * its sender's host pid into *pid and an fd it carried into *fd (-1:
 * none).  Dies when the link closed first, or on an "E" message.
 */
static void hear(int link, char *text, size_t size, pid_t *pid, int *fd)
{
    struct sbx_fd_message message;
    ssize_t n = sbx_fd_recv(link, text, size - 1, &message);
    size_t i;
    if (n <= 0)
        die("the copy ended before it reported", n < 0 ? strerror(errno) : NULL);
    text[n] = '\0';
    *pid = message.sender;
    *fd = message.n_fds > 0 ? message.fds[0] : -1;
    for (i = 1; i < message.n_fds; i++)
        close(message.fds[i]);
    if (text[0] == 'E')
        die("the template could not make the copy", text + 1);
}

/*
 * take_copy: the hello of the copy (X): move it into this process's cgroups
 * (each --cgroup-procs-fd that is not a character device) and acknowledge
 * it.
 */
static void take_copy(const struct client_options *opt, int link)
{
    char text[512], pid_text[32];
    struct stat st;
    size_t i;
    pid_t pid;
    int fd, length;
    hear(link, text, sizeof text, &pid, &fd);
    if (fd >= 0)
        close(fd);
    if (text[0] != 'h' || pid <= 0)
        die("the copy did not say hello", NULL);
    length = snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
    for (i = 0; i < opt->n_joins; i++) {
        if (fstat(opt->joins[i], &st) == 0 && S_ISCHR(st.st_mode)) {
            close(opt->joins[i]);
            continue;
        }
        if (write(opt->joins[i], pid_text, (size_t)length) != length)
            die("cannot move the copy into the job's cgroup", strerror(errno));
        close(opt->joins[i]);
    }
    if (send(link, "k", 1, MSG_NOSIGNAL) != 1)
        die("the copy ended before it was taken", strerror(errno));
}

/* report: one line on bwrap's status fd. */
static void report(int status_fd, const char *key, long value)
{
    char line[64];
    int length = snprintf(line, sizeof line, "{ \"%s\": %ld }\n", key, value);
    if (write(status_fd, line, (size_t)length) != length)
        die("cannot write the status", strerror(errno));
}

/*
 * make_link: the link's socket pair into link[], passing credentials to
 * link[0], which stays above INIT_PIDFD: with fd 3 free at the start
 * (nothing forwarded there) the pair would take it, and the init's pidfd,
 * put there on "b", would replace the link.  Dies on a failure.
 */
static void make_link(int link[2])
{
    int one = 1, moved;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) != 0 ||
        setsockopt(link[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0)
        die("cannot make the copy's link", strerror(errno));
    if (link[0] > INIT_PIDFD)
        return;
    moved = fcntl(link[0], F_DUPFD_CLOEXEC, INIT_PIDFD + 1);
    if (moved < 0)
        die("cannot make the copy's link", strerror(errno));
    close(link[0]);
    link[0] = moved;
}

int main(int argc, char **argv)
{
    struct client_options opt;
    char text[512];
    int link[2], fd;
    size_t i;
    pid_t pid;
    if (argc > 1 && strcmp(argv[1], "--template") == 0)
        return sbx_template_main(argc, argv);
    parse_options(argc, argv, &opt);
    make_link(link);
    send_request(&opt, link[1]);
    close(link[1]);
    close(opt.control_fd);
    for (i = 0; i < opt.n_forward; i++) {
        if (opt.forward[i] > 2 && opt.forward[i] != opt.status_fd)
            close(opt.forward[i]);
    }
    take_copy(&opt, link[0]);
    hear(link[0], text, sizeof text, &pid, &fd);
    if (text[0] != 'b' || fd < 0 || pid <= 0)
        die("the copy did not say it was built", NULL);
    if (fd != INIT_PIDFD && (dup2(fd, INIT_PIDFD) != INIT_PIDFD || close(fd) != 0))
        die("cannot keep the copy's init", strerror(errno));
    report(opt.status_fd, "child-pid", (long)pid);
    hear(link[0], text, sizeof text, &pid, &fd);
    if (text[0] != 'x')
        die("the copy did not say how it ended", NULL);
    report(opt.status_fd, "exit-code", strtol(text + 1, NULL, 10));
    return (int)strtol(text + 1, NULL, 10);
}
