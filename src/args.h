/* SPDX-License-Identifier: MIT */
/*
 * args.h: the arguments of start() and pump() converted to plain C
 * (args.c).  Include Python.h first: only the files that do can use these.
 * Every function needs the GIL.
 */
#ifndef PYSANDBOX_ARGS_H
#define PYSANDBOX_ARGS_H

#include "sandbox.h"

/*
 * start()'s arguments as a spec for sbx_spawn.  spec points into the arrays
 * below and into argv and envp, whose strings keep holds.
 */
struct sbx_start_args {
    struct sbx_spec spec;
    char **argv; /* PyMem_Malloc'd; NULL until converted (likewise envp) */
    char **envp;
    PyObject *keep; /* the bytes objects the strings of argv and envp are in */
    struct sbx_rlimit rlimits[SBX_MAX_RLIMITS];
    int pass_fds[SBX_MAX_PASS_FDS];
    int cgroup_fds[SBX_MAX_CGROUPS];
    size_t capture_caps[SBX_MAX_CAPTURES];
};

/* 0, or -1 with an exception set; either way sbx_start_args_release(a) follows. */
int sbx_start_args_parse(struct sbx_start_args *a, PyObject *args, PyObject *kwargs);
void sbx_start_args_release(struct sbx_start_args *a);

/*
 * pump()'s arguments, checked.  The objects are borrowed from the call's
 * arguments, NULL where they are None.  config has everything but the
 * capture caps (the Sandbox's) and the hooks (the caller's).
 */
struct sbx_pump_args {
    Py_buffer stdin_view; /* .buf NULL when there is none */
    PyObject *stdin_callback;
    PyObject *on_stdout;
    PyObject *on_stderr;
    PyObject *cancel;
    int text;
    int release_fd;
    double since;
    struct sbx_pump_config config;
};

/* 0, or -1 with an exception set and nothing to release; after 0,
 * sbx_pump_args_release(a) follows. */
int sbx_pump_args_parse(struct sbx_pump_args *a, PyObject *args, PyObject *kwargs);
void sbx_pump_args_release(struct sbx_pump_args *a);

#endif
