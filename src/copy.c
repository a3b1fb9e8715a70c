/* SPDX-License-Identifier: MIT */
/*
 * copy.c: a template's copies, made inside the template's sandbox.
 *
 * A template is a sandbox whose interpreter has done its set-up and then
 * serves copies (copy_serve.c): for each request a copy client (copy_client.c,
 * started by the host's C core in the job's cgroup in place of bwrap) sends
 * on the template's control socket, it forks P1, pid 1 of a new pid
 * namespace (a vfork child), which makes a sandbox of its own around a fork
 * of the interpreter:
 *
 *   1. P1 says hello on the link (the client reads P1's host pid from the
 *      credentials the kernel attaches, moves it into the job's cgroup, and
 *      acknowledges); it puts the request's fds at the numbers the job's
 *      init and program expect and closes every other;
 *   2. P1 unshares the mount, network, IPC, UTS and cgroup namespaces,
 *      brings up the loopback device, mounts the copy's own /proc (its
 *      /proc/sys read-only, as a fresh sandbox's) and a new tmpfs, as large
 *      as the template's, over the working directory (and the cache
 *      directory, when it has one), makes the code file in
 *      it read-only (the waiter writes the call's code through an fd of it),
 *      refuses to go on if the template has a writable shared mapping, which
 *      the copy would share (copy_memory.c), and tells the client it is built (with a pidfd of
 * itself, which the client keeps for the C core to pin the copy's init by);
 *   3. P1 forks P2, the program, and executes pysandbox's init in its
 *      --adopt mode, which supervises P2 and reports as for a fresh sandbox;
 *      the template reaps P1 and tells the client its exit code;
 *   4. P2 copies the template's working directory (and cache) into its own, confines
 *      itself (rlimits, its identity, no capability, no_new_privs, Landlock,
 *      the whole syscall filter), waits until the init supervises it, and
 *      returns: the interpreter then runs the waiter's hand-over as in a
 *      warm sandbox.
 *
 * The request's words (sbx_copy_request.text) are options, then "--" and
 * the init's command line:
 *
 *   --fds N,N,...    where the carried fds go, in order (the link excluded)
 *   --keep N,N,...   the fds the program keeps (the waiter's, stdio)
 *   --id UID:GID     who the copy is in the template's user namespace
 *   --rlimit R:SOFT:HARD    a resource limit of the copy (repeated)
 *   --landlock-write PATH   where the program may write (repeated)
 *   --code FD:PATH   the code file to make at PATH, read-only, with a writable
 *                    fd of it at FD in the program
 *   --workdir PATH   the working directory to renew
 *   --cache PATH     the cache directory to renew too (a tmpfs of its own)
 *   --seccomp-fd N   the memfd with the syscall filter's BPF program
 *
 * P1 is the template's vfork child: it shares the template's memory and
 * stack (and runs as its thread, every signal blocked, while the template
 * waits) until it executes the init.  So it writes nothing the template
 * relies on (Landlock's paths go to P2 only; the request's flag `clean`
 * tells the template P1 left on purpose, holding none of the C library's
 * locks, which its fork of P2 takes), changes its identity by raw system
 * calls (the C library's would signal the template's threads), never
 * returns from sbx_copy_become, and leaves by exec or _exit.  Python's fork
 * hooks run in the template around the vfork, and the child's in P2, a whole
 * copy of the interpreter, which returns to Python.  P1 starts a session of
 * its own first: a process group is not bounded by a pid namespace.
 */
#define _GNU_SOURCE
#include "capabilities.h"
#include "copy.h"

#include "fdpass.h"
#include "landlock.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FILTER_BYTES (64 * 1024)
/* The longest P1 waits for its client's acknowledgement. */
#define ACK_SECONDS 10

/*
 * tell: send text (a NUL-terminated message) on the link, with fd attached
 * when it is not -1.  Returns 0, or -1 with errno.  Async-signal-safe.
 */
static int tell(int link, const char *text, int fd)
{
    return sbx_fd_send(link, text, strlen(text), &fd, fd >= 0 ? 1 : 0);
}

/* The request P1 serves (in the template's memory), for leave_cleanly. */
static struct sbx_copy_request *served;

/*
 * leave_cleanly: tell the template, through the request in its memory, that
 * P1 leaves on purpose (by exec or _exit), holding none of its locks.
 */
static void leave_cleanly(void)
{
    if (served != NULL)
        served->clean = 1;
}

/*
 * fail: tell the client why the copy could not be made ("E" and the
 * reason, with errno's text) and exit 127.  P1, and P2 until it is
 * confined; async-signal-safe but for snprintf of plain strings.
 */
static _Noreturn void fail(int link, const char *what)
{
    char message[512];
    snprintf(message, sizeof message, "E%s: %s", what, strerror(errno));
    tell(link, message, -1);
    leave_cleanly();
    _exit(127);
}

/*
 * mount_ro_over: bind path onto itself read-only (nosuid, nodev, noexec),
 * as bwrap's --ro-bind of /proc/sys does; a path that is missing is left
 * alone.  Returns 0 or -1.
 */
static int mount_ro_over(const char *path)
{
    if (access(path, F_OK) != 0)
        return errno == ENOENT ? 0 : -1;
    if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0)
        return -1;
    return mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

/*
 * bring_up_loopback: the copy's network namespace's loopback device up, as
 * bwrap's --unshare-net leaves a fresh sandbox's (the kernel then gives it
 * 127.0.0.1 and ::1): code that serves and calls itself on localhost works
 * in a copy as in a fresh sandbox.  P1, with CAP_NET_ADMIN.  0 or -1.
 */
static int bring_up_loopback(void)
{
    struct ifreq request;
    int rc = -1, fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&request, 0, sizeof request);
    strcpy(request.ifr_name, "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &request) == 0) {
        request.ifr_flags |= IFF_UP | IFF_RUNNING;
        rc = ioctl(fd, SIOCSIFFLAGS, &request);
    }
    close(fd);
    return rc;
}

/*
 * renew_tmpfs: cover the template's tmpfs at `path` with a new one of its
 * size (mode 0777), and return an fd of the template's, now hidden, above
 * the link and the code's fd (not one of the fds placed), or fail.
 */
static int renew_tmpfs(int link, const struct sbx_copy_options *opt, const char *path)
{
    char data[64];
    struct statfs fs;
    int old, made = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    old = made < 0 ? -1
                   : fcntl(made, F_DUPFD_CLOEXEC, (link > opt->code_fd ? link : opt->code_fd) + 1);
    if (made >= 0)
        close(made);
    if (old < 0 || fstatfs(old, &fs) != 0)
        fail(link, path == opt->workdir ? "opening the template's working directory"
                                        : "opening the template's cache directory");
    snprintf(data, sizeof data, "size=%llu,mode=0777",
             (unsigned long long)fs.f_blocks * (unsigned long long)fs.f_bsize);
    if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, data) != 0)
        fail(link, path == opt->workdir ? "mounting the copy's working directory"
                                        : "mounting the copy's cache directory");
    return old;
}

/*
 * build_root: P1's mounts in the copy's mount namespace: every mount made
 * private, a /proc of the copy's pid namespace (its sys and sysrq-trigger
 * read-only), and a new tmpfs at the working directory, of the template's
 * size, entered (the template's, which the process was in, is covered),
 * with the code file in it, empty, 0444 and bound read-only over
 * itself; a writable fd of it at --code's FD, through which the program's
 * waiter writes the call's code once it has it; and a new tmpfs at the
 * cache directory, when there is one (*old_cache: an fd of the template's,
 * for P2 to copy from; else -1).  Returns an fd of the template's working
 * directory, now hidden (for P2 to copy from), or fails.
 */
static int build_root(int link, const struct sbx_copy_options *opt, int *old_cache)
{
    int old, made;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        fail(link, "making the copy's mounts private");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        fail(link, "mounting the copy's /proc");
    if (mount_ro_over("/proc/sys") != 0 || mount_ro_over("/proc/sysrq-trigger") != 0 ||
        mount_ro_over("/proc/irq") != 0 || mount_ro_over("/proc/bus") != 0)
        fail(link, "covering the copy's /proc/sys");
    *old_cache = opt->cache == NULL ? -1 : renew_tmpfs(link, opt, opt->cache);
    old = renew_tmpfs(link, opt, opt->workdir);
    /* The working directory was the template's, now covered: the new one. */
    if (chdir(opt->workdir) != 0)
        fail(link, "entering the copy's working directory");
    if (opt->code_path == NULL)
        return old;
    made = open(opt->code_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (made < 0)
        fail(link, "making the code file");
    if (mount(opt->code_path, opt->code_path, NULL, MS_BIND, NULL) != 0 ||
        mount(NULL, opt->code_path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              NULL) != 0)
        fail(link, "making the code file read-only");
    if (made != opt->code_fd) {
        if (dup2(made, opt->code_fd) < 0)
            fail(link, "placing the code file's fd");
        close(made);
    }
    fcntl(opt->code_fd, F_SETFD, 0);
    return old;
}

/*
 * install_filter: add the syscall filter whose BPF program is in the memfd
 * seccomp_fd (no_new_privs is set by then).  Returns 0 or -1.
 */
static int install_filter(int seccomp_fd)
{
    static struct sock_filter program[MAX_FILTER_BYTES / sizeof(struct sock_filter)];
    struct sock_fprog filter;
    ssize_t n = pread(seccomp_fd, program, sizeof program, 0);
    if (n <= 0 || n % (ssize_t)sizeof(struct sock_filter) != 0) {
        errno = n < 0 ? errno : EINVAL;
        return -1;
    }
    filter.len = (unsigned short)(n / (ssize_t)sizeof(struct sock_filter));
    filter.filter = program;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter, 0, 0);
}

/*
 * drop_identity: become the copy's identity (--id; the template's own
 * without it) with no capability in any set (capabilities.c): the bounding
 * set is emptied first, while CAP_SETPCAP is there.  Raw set*id calls: the C library's
 * would signal the template's threads, whose memory P1 shares.  Returns 0,
 * or -1 with errno.
 */
static int drop_identity(const struct sbx_copy_options *opt)
{
    if (sbx_empty_bounding_set() != 0)
        return -1;
    if (opt->has_id && (syscall(SYS_setresgid, opt->gid, opt->gid, opt->gid) != 0 ||
                        syscall(SYS_setresuid, opt->uid, opt->uid, opt->uid) != 0))
        return -1;
    return sbx_clear_capabilities();
}

/*
 * restrict_copy: the rest of what a fresh sandbox's init does before the
 * program runs, once the identity is dropped: the copy's rlimits (none above
 * the template's hard limits, which only privilege could raise),
 * no_new_privs, Landlock for the program, then the syscall filter.
 * Returns 0, or -1 with errno and *what set.
 */
static int restrict_copy(const struct sbx_copy_options *opt, int program, const char **what)
{
    size_t i;
    *what = "setting the copy's rlimits";
    for (i = 0; i < opt->n_rlimits; i++) {
        struct rlimit limit = {opt->rlimits[i].soft, opt->rlimits[i].hard}, now;
        /* A limit above the template's cannot be raised (a non-root caller's
         * RLIMIT_NPROC is counted when each sandbox starts): the lower holds. */
        if (getrlimit(opt->rlimits[i].resource, &now) != 0)
            return -1;
        if (limit.rlim_max > now.rlim_max)
            limit.rlim_max = now.rlim_max;
        if (limit.rlim_cur > limit.rlim_max)
            limit.rlim_cur = limit.rlim_max;
        if (setrlimit(opt->rlimits[i].resource, &limit) != 0)
            return -1;
    }
    *what = "setting no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    *what = "restricting the program with Landlock";
    for (i = 0; program && i < opt->n_landlock; i++) {
        if (sbx_landlock_allow(opt->landlock[i]) != 0)
            return -1;
    }
    if (program && sbx_landlock_restrict() != 0)
        return -1;
    *what = "installing the syscall filter";
    return install_filter(opt->seccomp_fd);
}

/*
 * start_program: P1's fork of P2, the program: it drops to the copy's
 * identity, copies the template's working directory (old[0]) into the
 * new one, and its cache directory (old[1], when >= 0), confines itself, closes
 * every fd the program does not keep, and waits for the init's byte on
 * ready[0].  Returns 0 in P2 only (any failure there is told on the link,
 * which P2 holds until it is confined); P2's pid in P1.
 */
static pid_t start_program(int link, const struct sbx_copy_options *opt, const int old[2],
                           const int ready[2], const struct sbx_copy_hooks *hooks)
{
    const char *what, *skip = NULL;
    char byte = 0;
    ssize_t n;
    int workdir;
    pid_t program;
    int saved[SBX_COPY_MAX_FDS];
    size_t i;
    /* Python's fork hooks (the child's, run here; the template ran the
     * others) close the template waiter's fds in the child: the program's, at
     * the same numbers, are put back from these. */
    for (i = 0; i < opt->n_keep; i++) {
        saved[i] = fcntl(opt->keep[i], F_DUPFD_CLOEXEC, link + 1);
        if (saved[i] < 0)
            fail(link, "keeping the program's fds");
    }
    program = fork();
    if (program != 0) {
        for (i = 0; i < opt->n_keep; i++)
            close(saved[i]);
        return program;
    }
    sbx_copy_rseq_register();
    hooks->after_fork_child(hooks->state);
    pthread_sigmask(SIG_SETMASK, &served->mask, NULL);
    for (i = 0; i < opt->n_keep; i++) {
        if (dup2(saved[i], opt->keep[i]) < 0)
            fail(link, "restoring the program's fds");
        close(saved[i]);
    }
    close(ready[1]);
    if (opt->code_path != NULL &&
        strncmp(opt->code_path, opt->workdir, strlen(opt->workdir)) == 0 &&
        opt->code_path[strlen(opt->workdir)] == '/')
        skip = opt->code_path + strlen(opt->workdir) + 1;
    if (drop_identity(opt) != 0)
        fail(link, "becoming the copy's user");
    /* A change of uid made it undumpable; a fresh program is dumpable after its exec. */
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    workdir = open(opt->workdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (workdir < 0 || sbx_copy_tree(old[0], workdir, skip) != 0)
        fail(link, "copying the template's working directory");
    close(workdir);
    if (old[1] >= 0) {
        workdir = open(opt->cache, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (workdir < 0 || sbx_copy_tree(old[1], workdir, NULL) != 0)
            fail(link, "copying the template's cache directory");
        close(workdir);
        close(old[1]);
    }
    close(old[0]);
    if (restrict_copy(opt, 1, &what) != 0)
        fail(link, what);
    close(opt->seccomp_fd);
    close(link);
    sbx_close_all_but(opt->keep, opt->n_keep, ready[0]);
    /* Only the init's byte releases it: EOF means the init never started. */
    while ((n = read(ready[0], &byte, 1)) < 0 && errno == EINTR)
        continue;
    if (n != 1 || byte != 'g')
        _exit(127);
    close(ready[0]);
    return 0;
}

/*
 * run_init: P1's rest, once P2 exists: confine itself as the init of a
 * fresh sandbox is, and execute the init with --adopt (the link, close-on-
 * exec, stays open until then to tell a failure).  Never returns.
 * malloc-free: the adopted command line is built on the stack.
 */
static _Noreturn void run_init(int link, struct sbx_copy_options *opt, pid_t program, int ready)
{
    char adopt[32];
    char *argv[MAX_INIT_ARGS + 3];
    const char *what;
    size_t i;
    snprintf(adopt, sizeof adopt, "%d:%d", (int)program, ready);
    argv[0] = opt->init_argv[0];
    argv[1] = "--adopt";
    argv[2] = adopt;
    for (i = 1; i < opt->n_init; i++)
        argv[i + 2] = opt->init_argv[i];
    argv[opt->n_init + 2] = NULL;
    if (drop_identity(opt) != 0)
        fail(link, "dropping the init's capabilities");
    if (restrict_copy(opt, 0, &what) != 0)
        fail(link, what);
    close(opt->seccomp_fd);
    if (fcntl(ready, F_SETFD, 0) != 0)
        fail(link, "passing the init its fd");
    leave_cleanly();
    pthread_sigmask(SIG_SETMASK, &served->mask, NULL);
    execv(argv[0], argv);
    fail(link, "executing the init");
}

/*
 * sbx_copy_become: make the calling process (P1, the template's vfork
 * child holding the request, pid 1 of a new pid namespace: copy_serve.c)
 * into a copy's init, as the top of this file says.  Returns
 * 0 in the copy's program only, with every namespace, mount, limit and
 * restriction in place and the init supervising it; P1 never returns.  A
 * failure before P2 is confined is told to the client, which reports it as
 * a sandbox that could not be built.  Single-threaded (a fork); no GIL.
 */
int sbx_copy_become(struct sbx_copy_request *request, const struct sbx_copy_hooks *hooks)
{
    struct timeval patience = {ACK_SECONDS, 0};
    served = request;
    /* A session and process group of its own: kill(0, ...) and setpriority of
     * the group reach no further than the copy. */
    if (setsid() < 0)
        fail(request->fds[0], "leaving the template's session");
    struct sbx_copy_options opt;
    char shared[256] = "";
    pid_t program;
    int link = request->fds[0], old[2], ready[2];
    char ack = 0;
    errno = EINVAL;
    if (sbx_copy_parse(request, &opt) != 0)
        fail(link, "a malformed copy request");
    /* The template waits for this process (it shares its memory): never for ever. */
    setsockopt(link, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
    if (tell(link, "h", -1) != 0 || recv(link, &ack, 1, 0) != 1 || ack != 'k') {
        errno = ECONNRESET;
        fail(link, "the copy client did not take the copy");
    }
    link = sbx_copy_place_fds(request, &opt);
    if (link < 0)
        fail(request->fds[0], "placing the copy's fds");
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0 &&
        (errno != EINVAL || unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0))
        fail(link, "making the copy's namespaces");
    if (bring_up_loopback() != 0)
        fail(link, "bringing up the copy's loopback device");
    old[0] = build_root(link, &opt, &old[1]);
    /* P1 shares the template's memory: its map is the template's. */
    if (sbx_shared_writable(shared, sizeof shared) != 0) {
        char why[sizeof shared + 96];
        snprintf(why, sizeof why,
                 "the set-up left a writable shared mapping, which every copy "
                 "would share (%s)",
                 shared);
        errno = EBUSY;
        fail(link, shared[0] != '\0' ? why : "reading the template's memory map");
    }
    if (tell(link, "b", (int)syscall(SYS_pidfd_open, getpid(), 0)) != 0)
        fail(link, "telling the copy client");
    if (pipe2(ready, O_CLOEXEC) != 0)
        fail(link, "making the copy's ready pipe");
    program = start_program(link, &opt, old, ready, hooks);
    if (program < 0)
        fail(link, "starting the copy's program");
    if (program == 0)
        return 0;
    close(ready[0]);
    close(old[0]);
    if (old[1] >= 0)
        close(old[1]);
    if (opt.code_fd >= 0)
        close(opt.code_fd);
    run_init(link, &opt, program, ready[1]);
}
