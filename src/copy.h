/* SPDX-License-Identifier: MIT */
/*
 * copy.h: a template's copies, made inside the template's sandbox (copy.c).
 * Plain C: never includes Python.h.
 */
#ifndef PYSANDBOX_COPY_H
#define PYSANDBOX_COPY_H

#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "fdpass.h"

/* The most fds one request may carry (the link included): one message's. */
#define SBX_COPY_MAX_FDS SBX_FDPASS_MAX
/* The largest request: its words, NUL-separated. */
#define SBX_COPY_MAX_REQUEST 65536

/*
 * One request for a copy, as received from the copy client (copy_client.c):
 * its words (NUL-separated in text, length bytes) and the fds it carried,
 * the link to the client first.  Owns the fds until sbx_copy_release.
 */
struct sbx_copy_request {
    sigset_t mask;      /* the template's signal mask, which P1 and P2 restore */
    volatile int clean; /* P1 sets it as it leaves by exec or _exit (copy_serve.c) */
    char text[SBX_COPY_MAX_REQUEST + 1]; /* and a NUL after the last word */
    size_t length;
    int fds[SBX_COPY_MAX_FDS];
    size_t n_fds;
};

/* The most rlimits and init arguments a request may give. */
#define MAX_RLIMITS 16
#define MAX_INIT_ARGS 96
#define MAX_LANDLOCK 32

/* A request's options, pointing into its text. */
struct sbx_copy_options {
    int targets[SBX_COPY_MAX_FDS];
    size_t n_targets;
    int keep[SBX_COPY_MAX_FDS];
    size_t n_keep;
    int has_id;
    uid_t uid;
    gid_t gid;
    struct {
        int resource;
        rlim_t soft, hard;
    } rlimits[MAX_RLIMITS];
    size_t n_rlimits;
    const char *landlock[MAX_LANDLOCK];
    size_t n_landlock;
    int code_fd;
    const char *code_path;
    const char *workdir;
    const char *cache; /* NULL: no cache directory to renew */
    int seccomp_fd;
    char *init_argv[MAX_INIT_ARGS + 3];
    size_t n_init;
};

int sbx_copy_receive(int control_fd, struct sbx_copy_request *request);
int sbx_copy_parse(struct sbx_copy_request *request, struct sbx_copy_options *opt);
int sbx_copy_place_fds(struct sbx_copy_request *request, const struct sbx_copy_options *opt);
void sbx_close_all_but(const int *keep, size_t n, int also);
int sbx_copy_tree(int from_dir, int to_dir, const char *skip);
int sbx_shared_writable(char *what, size_t size);
void sbx_copy_rseq_find(void);
void sbx_copy_rseq_register(void);
void sbx_copy_release(struct sbx_copy_request *request);
struct sbx_copy_hooks;
int sbx_copy_become(struct sbx_copy_request *request, const struct sbx_copy_hooks *hooks);
/*
 * What sbx_copy_serve asks of its caller (the module): release and retake the
 * GIL around each wait, and Python's fork hooks around each fork.
 */
struct sbx_copy_hooks {
    void *state;
    void (*release)(void *state);
    void (*acquire)(void *state);
    void (*before_fork)(void *state);
    void (*after_fork_parent)(void *state);
    void (*after_fork_child)(void *state);
};

int sbx_copy_serve(int control_fd, struct sbx_copy_request *request,
                   const struct sbx_copy_hooks *hooks);

#endif
