/* SPDX-License-Identifier: MIT */
/*
 * pump.h: the state of one sbx_pump call, shared by the loop (pump.c) and
 * the streams it moves bytes through (streams.c).  Plain C, like sandbox.h.
 */
#ifndef PYSANDBOX_PUMP_H
#define PYSANDBOX_PUMP_H

#include "sandbox.h"

/* Which hook sees a stream's kept bytes. */
enum { HOOK_NONE = 0, HOOK_STDOUT, HOOK_STDERR };

/* One pipe the parent reads: where its bytes go, how many it may keep, which hook. */
struct stream {
    int *fd;
    struct sbx_buffer *buf;
    size_t cap;
    int *truncated;
    int hook;
};

/* The state of one sbx_pump call. */
struct pump {
    struct sbx_child *child;
    struct sbx_input *input;
    const struct sbx_pump_config *config;
    struct sbx_outcome *outcome;
    struct stream streams[2 + SBX_MAX_CAPTURES]; /* stdout, stderr, the captures */
    int n_streams;
    char *scratch; /* SBX_CHUNK_SIZE bytes, on the heap: threads may have small stacks */
    struct sbx_watchdog watchdog; /* keeps the limits while a hook runs */
    double killed_at;             /* when the sandbox was killed on a limit or an abort; -1: not */
    size_t stream_at; /* end_after_stream: where its first record not yet whole starts */
};

/* What sbx_drain_stream found; STREAM_KILLED: the watchdog killed the sandbox during a hook. */
enum { STREAM_OPEN = 0, STREAM_EOF = 1, STREAM_ERROR = -1, STREAM_ABORT = -2, STREAM_KILLED = -3 };

int sbx_hook_returned(struct pump *p);
int sbx_drain_stream(struct pump *p, struct stream *s, int with_hooks);
int sbx_feed_stdin(int *fd, struct sbx_input *input);
int sbx_drain_after_exit(struct pump *p, double grace);
int sbx_deliver_rest(struct pump *p, const size_t seen[2]);

#endif
