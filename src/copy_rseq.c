/* SPDX-License-Identifier: MIT */
/*
 * copy_rseq.c: a copy's program gets the restartable-sequences registration
 * a fresh program has.
 *
 * The C library registers each thread's rseq area with the kernel (glibc
 * 2.35 and later), then reads the CPU number the kernel keeps in it
 * (sched_getcpu) and lets libraries run per-CPU critical sections on it.
 * The kernel drops the registration in a child made with CLONE_VM, so the
 * copy's first process (a vfork child of the template's serving thread) has
 * none, nor has the program it forks; yet the C library still believes in
 * it, and the program would read a CPU number frozen at the template's.
 * The program registers the area of its one thread again, as the C library
 * did: same address (the thread pointer plus __rseq_offset), length
 * (__rseq_size, at least the original 32 bytes) and signature.
 *
 * The C library's symbols are looked up once, in the template, before any
 * copy (dlsym may take locks another thread of the template holds at a
 * fork).  Where the C library has no rseq, or did not register (its tunable
 * off, an old kernel), there is nothing to do.
 */
#define _GNU_SOURCE
#include "copy.h"

#include <dlfcn.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The C library's signature for its registrations (its sys/rseq.h RSEQ_SIG). */
#if defined(__x86_64__) || defined(__i386__)
#define COPY_RSEQ_SIG 0x53053053u
#elif defined(__aarch64__)
#define COPY_RSEQ_SIG 0xd428bc00u
#endif

/* The rseq system call's number, where the build's headers predate it. */
#ifndef SYS_rseq
#if defined(__x86_64__)
#define SYS_rseq 334
#elif defined(__i386__)
#define SYS_rseq 386
#elif defined(__aarch64__)
#define SYS_rseq 293
#endif
#endif

/* The registration's least length, and where the kernel's CPU number lies. */
#define RSEQ_MIN_LENGTH 32
#define RSEQ_CPU_ID_AT 4
/* What a registration that failed leaves as CPU number: the C library then
 * asks the kernel instead of reading the area. */
#define RSEQ_CPU_ID_REGISTRATION_FAILED (-2)

static const ptrdiff_t *rseq_offset;
static const unsigned int *rseq_size;

/*
 * sbx_copy_rseq_find: look up the C library's rseq offset and size, once,
 * in the template before it serves any copy.  Never fails: without them a
 * copy registers nothing.
 */
void sbx_copy_rseq_find(void)
{
    rseq_offset = (const ptrdiff_t *)dlsym(RTLD_DEFAULT, "__rseq_offset");
    rseq_size = (const unsigned int *)dlsym(RTLD_DEFAULT, "__rseq_size");
}

/*
 * thread_pointer: the calling thread's thread pointer, which the C library's
 * __rseq_offset is relative to; NULL on an architecture this file does not
 * know.
 */
static char *thread_pointer(void)
{
    char *pointer = NULL;
#if defined(__x86_64__)
    __asm__("mov %%fs:0, %0" : "=r"(pointer));
#elif defined(__i386__)
    __asm__("mov %%gs:0, %0" : "=r"(pointer));
#elif defined(__aarch64__)
    __asm__("mrs %0, tpidr_el0" : "=r"(pointer));
#endif
    return pointer;
}

/*
 * sbx_copy_rseq_register: in the copy's program, right after its fork and
 * while it has one thread, register its thread's rseq area again.  When the
 * kernel refuses, the area's CPU number is marked as a failed registration,
 * so that the C library asks the kernel rather than read a stale number.
 * Async-signal-safe.
 */
void sbx_copy_rseq_register(void)
{
    char *tp = thread_pointer(), *area;
    unsigned int length;
    int32_t failed = RSEQ_CPU_ID_REGISTRATION_FAILED;
    if (tp == NULL || rseq_offset == NULL || rseq_size == NULL || *rseq_size == 0)
        return;
    area = tp + *rseq_offset;
    length = *rseq_size < RSEQ_MIN_LENGTH ? RSEQ_MIN_LENGTH : *rseq_size;
#if defined(COPY_RSEQ_SIG) && defined(SYS_rseq)
    if (syscall(SYS_rseq, area, length, 0, COPY_RSEQ_SIG) == 0)
        return;
#else
    (void)length;
#endif
    __builtin_memcpy(area + RSEQ_CPU_ID_AT, &failed, sizeof failed);
}
