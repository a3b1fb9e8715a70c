/* SPDX-License-Identifier: MIT */
/*
 * hooks.h: the pump's hooks into Python (hooks.c).  Include Python.h first:
 * only the files that do can use these.
 */
#ifndef PYSANDBOX_HOOKS_H
#define PYSANDBOX_HOOKS_H

#include "args.h"

/*
 * State shared with the hooks while the GIL is released.  The caller puts
 * the thread state PyEval_SaveThread gave it in tstate before sbx_pump and
 * takes it back after; each hook restores and saves it again.
 */
struct sbx_call_ctx {
    PyThreadState *tstate;
    PyObject *stdin_callback; /* borrowed; NULL when there is none (likewise below) */
    PyObject *on_stdout;
    PyObject *on_stderr;
    PyObject *cancel;
    int cancelled; /* the tick saw cancel.is_set() */
};

void sbx_set_hooks(struct sbx_hooks *hooks, struct sbx_call_ctx *ctx,
                   const struct sbx_pump_args *a);

#endif
