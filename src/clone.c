/* SPDX-License-Identifier: MIT */
/*
 * clone.c: the two ways the spawn creates its child, both with CLONE_VM |
 * CLONE_VFORK so that the cost does not grow with the caller's heap: the C
 * library's clone(), and where the child must be born in a cgroup v2 group,
 * the raw clone3 system call with CLONE_INTO_CGROUP through a trampoline
 * written per architecture (x86_64, aarch64; elsewhere sbx_clone3_child
 * answers ENOSYS and the child joins its group by a write, see spawn.c).
 * Parent only: the child leaves these functions in sbx_child_main.
 */
#define _GNU_SOURCE
#include "spawn.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>

#if defined(__GLIBC__) && (__GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 24))
/* Older glibc's clone(CLONE_VM) overwrites the parent thread's cached tid. */
#error "pysandbox needs glibc 2.24 or later"
#endif

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* clone3 runs a function on a new stack only through the trampoline below,
 * written for these architectures; elsewhere a group is joined by a write. */
#if defined(__x86_64__) || defined(__aarch64__)
#define HAVE_CLONE3_RUN 1
#else
#define HAVE_CLONE3_RUN 0
#endif

/*
 * sbx_clone_child: clone with CLONE_VM | CLONE_VFORK and no exit signal, so a
 * child that fails before execve is never auto-reaped and its failure can be
 * collected (it is reaped with __WALL).  execve resets the exit signal to
 * SIGCHLD, so a running bwrap is auto-reaped in a host that ignores SIGCHLD:
 * sbx_pump reports that as status_known = 0.  Asks for a pidfd, and retries
 * without one on kernels older than 5.2.  Returns the pid, or -1 with errno
 * set.
 */
pid_t sbx_clone_child(struct sbx_child_args *args, char *stack_top, int *pidfd)
{
    pid_t pid;
    *pidfd = -1;
    pid = clone(sbx_child_main, stack_top, CLONE_VM | CLONE_VFORK | CLONE_PIDFD, args, pidfd);
    if (pid < 0 && errno == EINVAL) {
        *pidfd = -1;
        pid = clone(sbx_child_main, stack_top, CLONE_VM | CLONE_VFORK, args);
    }
    return pid;
}

#if HAVE_CLONE3_RUN
/* struct clone_args of <linux/sched.h> up to its cgroup field (Linux 5.7,
 * CLONE_ARGS_SIZE_VER2), spelled out for older kernel headers. */
struct clone3_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
    uint64_t set_tid;
    uint64_t set_tid_size;
    uint64_t cgroup;
};
_Static_assert(sizeof(struct clone3_args) == 88, "struct clone_args, CLONE_ARGS_SIZE_VER2");

/*
 * clone3_run: the raw clone3 system call with *cl.  In the child, fn(arg)
 * on the stack *cl describes, then the exit system call with fn's result;
 * the child never returns from here.  In the parent, returns the child's pid
 * or -errno.
 *
 * Why not glibc's clone(): it cannot ask for CLONE_INTO_CGROUP (a flag above
 * bit 31 whose fd travels in struct clone_args), and glibc exports no clone3
 * that runs a function on a new stack.  This is the least such a wrapper
 * needs: the system call; in the child (it returned 0) a call of fn on the
 * new stack and the exit.  The child stays inside the asm statement, so it
 * never uses the caller's stack frame (the kernel has switched it to the new
 * stack; fn and arg are in registers the system call preserves) and never
 * hands the compiler a register it did not expect.
 *   x86_64: syscall returns in rax and clobbers rcx and r11; fn and arg ride
 *     in rdx and rbx (clone3 reads rdi and rsi only).  The kernel sets rsp
 *     to stack + stack_size; the and aligns it to the 16 bytes the call
 *     needs whatever that size; a zero rbp ends the child's backtrace.
 *   aarch64: svc returns in x0 and preserves every other register; fn and
 *     arg ride in x2 and x3.  sp is stack + stack_size, 16-byte aligned since
 *     the stack is whole pages; a zero x29 ends the backtrace.
 * Async-signal-safe when fn is (a system call and fn).  The caller blocks
 * every signal around it, as around clone.  With CLONE_VFORK in cl->flags
 * the parent resumes once the child has exec'd or exited.
 */
static long clone3_run(struct clone3_args *cl, int (*fn)(void *), void *arg)
{
#if defined(__x86_64__)
    long ret = SYS_clone3;
    __asm__ volatile("syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xorl %%ebp, %%ebp\n\t"
                     "andq $-16, %%rsp\n\t"
                     "movq %%rbx, %%rdi\n\t"
                     "callq *%%rdx\n\t"
                     "movl %%eax, %%edi\n\t"
                     "movl %[exit_nr], %%eax\n\t"
                     "syscall\n\t"
                     "hlt\n"
                     "1:"
                     : "+a"(ret)
                     : "D"(cl), "S"(sizeof *cl), "d"(fn), "b"(arg), [exit_nr] "i"(SYS_exit)
                     : "rcx", "r11", "memory", "cc");
    return ret;
#elif defined(__aarch64__)
    register long x0 __asm__("x0") = (long)cl;
    register long x1 __asm__("x1") = (long)sizeof *cl;
    register long x2 __asm__("x2") = (long)fn;
    register long x3 __asm__("x3") = (long)arg;
    register long x8 __asm__("x8") = SYS_clone3;
    __asm__ volatile("svc #0\n\t"
                     "cbnz x0, 1f\n\t"
                     "mov x29, xzr\n\t"
                     "mov x0, x3\n\t"
                     "blr x2\n\t"
                     "mov x8, %[exit_nr]\n\t"
                     "svc #0\n\t"
                     "brk #0\n"
                     "1:"
                     : "+r"(x0)
                     : "r"(x1), "r"(x2), "r"(x3), "r"(x8), [exit_nr] "i"(SYS_exit)
                     : "memory", "cc");
    return x0;
#endif
}

/*
 * sbx_clone3_child: clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD |
 * CLONE_INTO_CGROUP) with no exit signal (as sbx_clone_child, for the same
 * reason), the child born in the cgroup v2 group of the directory
 * cgroup_dir_fd, running sbx_child_main(args) on [stack, stack +
 * SBX_CHILD_STACK_SIZE).  Returns the pid, or -1 with errno set (and *pidfd
 * -1).  Parent only; the caller blocks every signal around it.
 */
pid_t sbx_clone3_child(struct sbx_child_args *args, char *stack, int cgroup_dir_fd, int *pidfd)
{
    struct clone3_args cl;
    long rc;
    memset(&cl, 0, sizeof cl);
    *pidfd = -1;
    cl.flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP;
    cl.pidfd = (uint64_t)(uintptr_t)pidfd;
    cl.stack = (uint64_t)(uintptr_t)stack;
    cl.stack_size = SBX_CHILD_STACK_SIZE;
    cl.cgroup = (uint64_t)cgroup_dir_fd;
    rc = clone3_run(&cl, sbx_child_main, args);
    if (rc < 0) {
        *pidfd = -1;
        errno = (int)-rc;
        return -1;
    }
    return (pid_t)rc;
}
#else
/*
 * sbx_clone3_child: no trampoline for this architecture: ENOSYS, as from a
 * kernel without clone3, so the caller joins the group by a write.
 */
pid_t sbx_clone3_child(struct sbx_child_args *args, char *stack, int cgroup_dir_fd, int *pidfd)
{
    (void)args;
    (void)stack;
    (void)cgroup_dir_fd;
    *pidfd = -1;
    errno = ENOSYS;
    return -1;
}
#endif
