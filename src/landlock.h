/* SPDX-License-Identifier: MIT */
/*
 * landlock.h: the Landlock restriction of the sandboxed program, shared by
 * the init (which applies it) and the extension module (which asks the
 * kernel's ABI version).  Plain C: never includes Python.h.
 */
#ifndef PYSANDBOX_LANDLOCK_H
#define PYSANDBOX_LANDLOCK_H

int sbx_landlock_abi(void);
int sbx_landlock_allow(const char *path);
int sbx_landlock_requested(void);
int sbx_landlock_restrict(void);

#endif
