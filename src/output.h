/* SPDX-License-Identifier: MIT */
/*
 * output.h: the outcome of a run as Python objects, or as the OSError of a
 * stage (output.c).  Include
 * Python.h first: only the files that do (module.c and the others the
 * packaging test names) can use these.  Every function needs the GIL.
 */
#ifndef PYSANDBOX_OUTPUT_H
#define PYSANDBOX_OUTPUT_H

#include "sandbox.h"

/*
 * sbx_direct_begin: a new object of cap bytes for the pump to read a stream
 * straight into, through buf made external, or NULL (no exception) when the
 * pump is to use its own buffer.  The caller owns the reference.
 */
PyObject *sbx_direct_begin(struct sbx_buffer *buf, size_t cap, int text);

/*
 * sbx_build_result: the outcome as a dict of facts; takes direct[0] and
 * direct[1] (from sbx_direct_begin, or NULL) when it uses them.  A new
 * reference, or NULL with an exception set.
 */
PyObject *sbx_build_result(const struct sbx_outcome *o, size_t n_captures, int text, int cancelled,
                           int joined_at_clone, PyObject **direct);

/*
 * sbx_raise_at_stage: raise exc (taken; may be NULL with an exception set)
 * with its `stage` attribute the enum sbx_stage value stage.  Returns NULL.
 */
PyObject *sbx_raise_at_stage(PyObject *exc, int stage);

#endif
