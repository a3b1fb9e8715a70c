/* SPDX-License-Identifier: MIT */
/*
 * test_copy_request.c: a template's copy requests as the template receives
 * them (src/copy_request.c, and src/fdpass.c under it), linked alone: each
 * message goes over a SOCK_SEQPACKET pair that passes no credentials, as
 * the template's control socket does, through sbx_copy_receive into
 * sbx_copy_parse.  A well-formed request (every field checked), its last
 * word without its NUL, empty messages and messages without fds, requests
 * at and past SBX_COPY_MAX_REQUEST bytes, at and past SBX_COPY_MAX_FDS fds
 * (up to the kernel's most), and fd counts that --fds does not list; no fd
 * of a message may stay open.  The words alone: test_copy_parse.c.  TAP on
 * stdout (tap.h).
 */
#define _GNU_SOURCE
#include "copy_words.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The most fds the kernel passes in one message (its SCM_MAX_FD). */
#define KERNEL_MAX_FDS 253
/* What attempt returns when sbx_copy_receive gave no request to parse. */
#define NOT_RECEIVED (-2)

static int control[2] = {-1, -1}; /* [0] the host's end, [1] the template's */
static int spare = -1;            /* /dev/null: every fd a message carries is a copy */
static int baseline;              /* the fds open before a group of cases */

/*
 * send_raw: one message of length bytes of data and n_fds copies of spare
 * (up to KERNEL_MAX_FDS, past what sbx_fd_send allows) on the host's end;
 * aborts when the kernel refuses it.
 */
static void send_raw(const char *data, size_t length, size_t n_fds)
{
    union {
        char space[CMSG_SPACE(sizeof(int) * KERNEL_MAX_FDS)];
        struct cmsghdr align;
    } space;
    struct iovec iov = {(void *)data, length};
    struct msghdr header;
    size_t i;
    memset(&header, 0, sizeof header);
    memset(&space, 0, sizeof space);
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    if (n_fds > 0) {
        struct cmsghdr *part;
        header.msg_control = space.space;
        header.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        part = CMSG_FIRSTHDR(&header);
        part->cmsg_level = SOL_SOCKET;
        part->cmsg_type = SCM_RIGHTS;
        part->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        for (i = 0; i < n_fds; i++)
            memcpy(CMSG_DATA(part) + i * sizeof(int), &spare, sizeof(int));
    }
    if (sendmsg(control[0], &header, 0) != (ssize_t)length)
        abort();
}

/* open_fds: how many fds this process has open (the directory's own included). */
static int open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    int count = 0;
    if (dir == NULL)
        abort();
    while (readdir(dir) != NULL)
        count++;
    closedir(dir);
    return count;
}

/*
 * receive: send the message, then sbx_copy_receive it into request; its
 * result, the text fenced when it is 1 (the fds then are the caller's).
 */
static int receive(const char *data, size_t length, size_t n_fds)
{
    int rc;
    send_raw(data, length, n_fds);
    unfence();
    rc = sbx_copy_receive(control[1], request);
    if (rc == 1)
        fence();
    return rc;
}

/*
 * attempt: receive then parse into *opt; the parse's result, or
 * NOT_RECEIVED when sbx_copy_receive gave no request.  The fds are released;
 * *opt still points into request->text.
 */
static int attempt(const char *data, size_t length, size_t n_fds, struct sbx_copy_options *opt)
{
    int rc = receive(data, length, n_fds);
    if (rc != 1)
        return NOT_RECEIVED;
    rc = sbx_copy_parse(request, opt);
    sbx_copy_release(request);
    return rc;
}

/* outcome: w as a request carrying n_fds fds, received and parsed (attempt). */
static int outcome(const struct words *w, size_t n_fds, struct sbx_copy_options *opt)
{
    return attempt(message, join(w), n_fds, opt);
}

/* test_well_formed: every field of the well-formed request, and its last word unterminated. */
static void test_well_formed(void)
{
    struct words w = well_formed();
    struct sbx_copy_options opt;
    size_t length = join(&w);
    baseline = open_fds();
    check(outcome(&w, WELL_FORMED_FDS, &opt) == 0, "the well-formed request parses");
    check(opt.n_targets == 5 && opt.targets[0] == 0 && opt.targets[3] == 4 && opt.targets[4] == 5 &&
              opt.n_keep == 4 && opt.keep[3] == 7,
          "its --fds and --keep lists");
    check(opt.has_id && opt.uid == 1000 && opt.gid == 1001, "its --id");
    check(opt.n_rlimits == 2 && opt.rlimits[0].resource == 7 && opt.rlimits[0].soft == 1024 &&
              opt.rlimits[0].hard == 4096 && opt.rlimits[1].resource == 0 &&
              opt.rlimits[1].soft == RLIM_INFINITY && opt.rlimits[1].hard == RLIM_INFINITY,
          "its --rlimit words, -1 an infinity");
    check(strcmp(opt.workdir, "/tmp/w") == 0 && opt.seccomp_fd == 4 && opt.code_fd == 7 &&
              strcmp(opt.code_path, "/tmp/w/code.py") == 0 && strcmp(opt.cache, "/tmp/c") == 0,
          "its --workdir, --cache, --seccomp-fd and --code");
    check(opt.n_landlock == 2 && strcmp(opt.landlock[0], "/tmp/w") == 0 &&
              strcmp(opt.landlock[1], "/dev/null") == 0,
          "its --landlock-write paths");
    check(opt.n_init == 4 && strcmp(opt.init_argv[0], "/init") == 0 &&
              strcmp(opt.init_argv[2], "5") == 0 && strcmp(opt.init_argv[3], "--") == 0 &&
              opt.init_argv[4] == NULL,
          "the init's command line, a later \"--\" its own, NULL after it");
    check(attempt(message, length - 1, WELL_FORMED_FDS, &opt) == 0 && opt.n_init == 4 &&
              strcmp(opt.init_argv[3], "--") == 0,
          "a last word without its NUL ends at the request's end");
    check(open_fds() == baseline, "no fd of theirs is left open");
}

/* test_empty: empty messages, messages without fds, and requests of no words. */
static void test_empty(void)
{
    static const char nuls[4] = {0, 0, 0, 0};
    struct sbx_copy_options opt;
    baseline = open_fds();
    errno = 0;
    check(receive("", 0, 1) == -1 && errno == EBADMSG && request->n_fds == 0 &&
              open_fds() == baseline,
          "an empty message with an fd is EBADMSG, its fd closed");
    check(receive("", 0, 0) == 0, "an empty message without fds looks like the host's hang-up");
    errno = 0;
    check(receive("--", 3, 0) == -1 && errno == EBADMSG, "words without a link are EBADMSG");
    load("", 0, 1);
    check(sbx_copy_parse(request, &opt) == -1, "a request of no words is refused");
    load(nuls, sizeof nuls, 1);
    check(sbx_copy_parse(request, &opt) == -1, "a request of empty words is refused");
    check(attempt("--\0/init", 9, 1, &opt) == -1, "an init's command line alone is refused");
    check(attempt("/init", 6, 1, &opt) == -1, "a lone unknown word is refused");
    check(open_fds() == baseline, "no fd of theirs is left open");
}

/* pad: w with one more init word of filler that makes its request size bytes long. */
static size_t pad(struct words *w, size_t size, char *filler)
{
    size_t length = join(w);
    memset(filler, 'a', size - length - 1);
    filler[size - length - 1] = '\0';
    w->word[w->n++] = filler;
    return join(w);
}

/* test_size: requests at SBX_COPY_MAX_REQUEST bytes and past it. */
static void test_size(void)
{
    static char filler[SBX_COPY_MAX_REQUEST];
    struct sbx_copy_options opt;
    struct words w = well_formed();
    size_t length = pad(&w, SBX_COPY_MAX_REQUEST, filler);
    baseline = open_fds();
    check(length == SBX_COPY_MAX_REQUEST && attempt(message, length, WELL_FORMED_FDS, &opt) == 0 &&
              opt.n_init == 5 && strlen(opt.init_argv[4]) == strlen(filler),
          "a well-formed request of SBX_COPY_MAX_REQUEST bytes parses, its last word whole");
    w = well_formed();
    length = pad(&w, SBX_COPY_MAX_REQUEST + 1, filler);
    errno = 0;
    check(receive(message, length, WELL_FORMED_FDS) == -1 && errno == EBADMSG &&
              open_fds() == baseline,
          "one byte more is EBADMSG, its fds closed");
    memset(message, 'x', SBX_COPY_MAX_REQUEST);
    check(attempt(message, SBX_COPY_MAX_REQUEST, 1, &opt) == -1,
          "one unterminated word of SBX_COPY_MAX_REQUEST bytes is refused");
    errno = 0;
    check(receive(message, sizeof message, 1) == -1 && errno == EBADMSG,
          "twice as long is EBADMSG");
    check(open_fds() == baseline, "no fd of theirs is left open");
}

/* test_fd_counts: requests with SBX_COPY_MAX_FDS fds, more, and a count --fds does not list. */
static void test_fd_counts(void)
{
    static const size_t too_many[] = {SBX_COPY_MAX_FDS + 1, SBX_COPY_MAX_FDS + 8, 200,
                                      KERNEL_MAX_FDS};
    char list[6 * KERNEL_MAX_FDS];
    struct sbx_copy_options opt;
    struct words w = well_formed();
    size_t i;
    int before;
    baseline = open_fds();
    set(&w, "--fds", numbers(list, 3, SBX_COPY_MAX_FDS - 1));
    check(outcome(&w, SBX_COPY_MAX_FDS, &opt) == 0 && opt.n_targets == SBX_COPY_MAX_FDS - 1,
          "a request of SBX_COPY_MAX_FDS fds parses");
    for (i = 0; i < sizeof too_many / sizeof *too_many; i++) {
        set(&w, "--fds", numbers(list, 3, too_many[i] - 1));
        errno = 0;
        before = open_fds();
        check(receive(message, join(&w), too_many[i]) == -1 && errno == EBADMSG &&
                  request->n_fds == 0 && open_fds() == before,
              "a request of %zu fds is EBADMSG, every fd closed", too_many[i]);
    }
    w = well_formed();
    check(outcome(&w, WELL_FORMED_FDS - 1, &opt) == -1, "fewer fds than --fds lists are refused");
    check(outcome(&w, WELL_FORMED_FDS + 1, &opt) == -1, "more fds than --fds lists are refused");
    check(open_fds() == baseline, "no fd of theirs is left open");
}

int main(void)
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) != 0 ||
        (spare = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 ||
        (request = calloc(1, sizeof *request)) == NULL)
        abort();
    test_well_formed();
    test_empty();
    test_size();
    test_fd_counts();
    unfence();
    free(request);
    close(spare);
    close(control[0]);
    close(control[1]);
    return done();
}
