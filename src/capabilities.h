/* SPDX-License-Identifier: MIT */
/*
 * capabilities.h: emptying a process's capability sets, shared by the init
 * (its drop to the sandbox user) and the module (a template's copy's drop).
 * Plain C: never includes Python.h.
 */
#ifndef PYSANDBOX_CAPABILITIES_H
#define PYSANDBOX_CAPABILITIES_H

int sbx_empty_bounding_set(void);
int sbx_clear_capabilities(void);

#endif
