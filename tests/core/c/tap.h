/* SPDX-License-Identifier: MIT */
/*
 * tap.h: the least of the Test Anything Protocol the C unit tests need:
 * "ok N - what" or "not ok N - what" per check, then the plan "1..N", and
 * an exit status that is 1 when any check failed.  tests/test_c_units.py
 * builds and runs the programs and holds every line to "ok".
 */
#ifndef PYSANDBOX_TAP_H
#define PYSANDBOX_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_count;
static int tap_failed;

/* check: one TAP line for cond, described by a printf format.  Returns cond. */
__attribute__((format(printf, 2, 3))) static int check(int cond, const char *format, ...)
{
    va_list args;
    tap_count++;
    tap_failed += !cond;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    va_start(args, format);
    vprintf(format, args);
    va_end(args);
    printf("\n");
    fflush(stdout);
    return cond;
}

/* done: the plan line, and main's exit status. */
static int done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

#endif
