/* SPDX-License-Identifier: MIT */
/*
 * sandbox_type.h: the Sandbox type (sandbox_type.c).  Include Python.h
 * first: only the files that do can use these.  Every function needs the
 * GIL.
 */
#ifndef PYSANDBOX_SANDBOX_TYPE_H
#define PYSANDBOX_SANDBOX_TYPE_H

#include "sandbox.h"

int sbx_sandbox_type_add(PyObject *module);
PyObject *sbx_sandbox_new(PyObject *module);
void sbx_sandbox_adopt(PyObject *sandbox, const struct sbx_child *child, size_t n_captures,
                       const size_t *capture_caps);

#endif
