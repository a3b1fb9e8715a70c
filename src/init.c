/* SPDX-License-Identifier: MIT */
/*
 * init.c: pysandbox's init, the first program bubblewrap runs inside the
 * sandbox.  A standalone executable (not part of the extension module), run
 * as:
 *
 *   _init [--drop UID:GID] [--lifeline-fd N] [--report-fd N]
 *         [--files-in-fd N] [--files-out-fd N] [--files-dir DIR]
 *         [--files-max BYTES] [--files-count N] [--skip NAME]
 *         [--files-include PAT]... [--files-exclude PAT]... [--files-filter-fd N]
 *         [--landlock-write PATH]... -- PROGRAM ARGS...
 *   _init --adopt PID:FD [the options above but --drop, --files-in-fd and
 *         --landlock-write] --
 *
 * --drop     become UID:GID with no supplementary groups, empty capability
 *            sets and bounding set (a root caller's sandbox, which bwrap runs
 *            without a user namespace so that its root is not host root);
 * --lifeline-fd  the read end of a pipe whose only write end the caller
 *            holds: EOF there means the caller died (kill -9, OOM killer,
 *            os._exit...), and the init then kills every process of the
 *            sandbox and exits at once.  A parent-death signal cannot do
 *            this: it is checked against the credentials of the dying
 *            parent (bwrap, uid 0 without capabilities, or another user
 *            namespace), which may not signal the sandbox's uid;
 * --landlock-write  the program may write only beneath PATH and the other
 *            such paths (landlock.c); given at all, the program never runs
 *            without that restriction;
 * --adopt    the program already runs as child PID (a template's copy,
 *            copy.c): supervise it, and write one byte on FD (then closed),
 *            which it waits for, once this process is undumpable; refused
 *            with --drop, --files-in-fd and --landlock-write (the copy did);
 * then       unpack the input files from --files-in-fd into DIR, run PROGRAM
 *            as a child, and when it exits kill whatever it left running,
 *            report the raw wait status and the CPU and memory the whole tree
 *            used on --report-fd, stream the regular files of DIR to
 *            --files-out-fd (at most N files and BYTES of content: the rest
 *            are left out, and the walk stops at the (N+1)-th file), only those
 *            the --files-include/--files-exclude patterns, or a warm call's
 *            in the payload memfd N of --files-filter-fd, want (file_filter.c),
 *            and exit as PROGRAM did (128 + signal if killed).
 *
 * bwrap runs it as pid 1 of the sandbox's pid namespace (--as-pid-1): the
 * program cannot signal it, every orphan is reparented to it, and once it
 * exits the kernel has ended every process of the sandbox, so nothing
 * outlives bwrap.  The program runs as pid 2, as in a plain bwrap sandbox.
 *
 * Its kill(-1, SIGKILL) ends every process it may signal, which is the
 * sandbox only where pysandbox launched it: so it refuses to do anything
 * (a message on stderr, exit status 2) unless it is pid 1 of its pid
 * namespace and holds what only pysandbox's launch hands it, the read end of
 * the lifeline pipe and a writable report fd, both above the standard
 * streams.  Started by hand on a host, or as a container's entrypoint, it
 * touches nothing.
 *
 * Always sets no_new_privs, so no setuid binary or file capability can give
 * the code more than it has.  The file streams, their format and their
 * distrust of the files, are in init_files.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capabilities.h"
#include "file_filter.h"
#include "init_files.h"
#include "landlock.h"

struct options {
    int drop;
    uid_t uid;
    gid_t gid;
    int lifeline_fd;
    int report_fd;
    int files_in_fd;
    int files_out_fd;
    const char *files_dir;
    unsigned long long files_max;
    unsigned long long files_count;
    const char *skip;
    struct sbx_file_filter filter;
    int filter_fd;
    char **program;
    pid_t adopted;
    int adopted_ready_fd;
};

/* Where die() reports a failure to the caller: --report-fd, once parsed. */
static int failure_report_fd = -1;

/*
 * die: the sandbox could not start the program.  Print why on stderr and,
 * once the report fd is known, report "fail ERRNO WHY" there, so that the
 * caller raises an error naming the cause instead of blaming a program that
 * never ran; exit 127.  Also used by the forked child when exec fails (the
 * report fd is close-on-exec, so only a failed exec still holds it).
 */
static void die(const char *what, const char *detail)
{
    int saved = errno;
    char why[SBX_MAX_NAME + 256];
    snprintf(why, sizeof why, "%s%s%s: %s", what, detail ? " " : "", detail ? detail : "",
             strerror(saved));
    for (char *c = why; *c != '\0'; c++) {
        if (*c == '\n')
            *c = ' ';
    }
    fprintf(stderr, "pysandbox-init: %s\n", why);
    if (failure_report_fd >= 0)
        dprintf(failure_report_fd, "fail %d %s\n", saved, why);
    _exit(127);
}

static int parse_fd(const char *text)
{
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < 0 || value > 1 << 20) {
        errno = EINVAL;
        die("bad fd", text);
    }
    return (int)value;
}

/* parse_count: a whole number of bytes or files; dies unless it is all digits. */
static unsigned long long parse_count(const char *text)
{
    char *end;
    unsigned long long value;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (*text < '0' || *text > '9' || *end != '\0' || errno != 0) {
        errno = EINVAL;
        die("bad count", text);
    }
    return value;
}

/* parse_options: argv into *opt; exits 127 on a malformed command line. */
static void parse_options(int argc, char **argv, struct options *opt)
{
    int i;
    memset(opt, 0, sizeof *opt);
    opt->lifeline_fd = opt->report_fd = opt->files_in_fd = opt->files_out_fd = -1;
    opt->filter_fd = -1;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--") == 0) {
            opt->program = argv + i + 1;
            break;
        }
        if (value == NULL) {
            errno = EINVAL;
            die("missing value for", arg);
        }
        i++;
        if (strcmp(arg, "--drop") == 0) {
            unsigned long uid, gid;
            if (sscanf(value, "%lu:%lu", &uid, &gid) != 2) {
                errno = EINVAL;
                die("bad --drop", value);
            }
            opt->drop = 1;
            opt->uid = (uid_t)uid;
            opt->gid = (gid_t)gid;
        } else if (strcmp(arg, "--lifeline-fd") == 0) {
            opt->lifeline_fd = parse_fd(value);
        } else if (strcmp(arg, "--report-fd") == 0) {
            opt->report_fd = parse_fd(value);
        } else if (strcmp(arg, "--files-in-fd") == 0) {
            opt->files_in_fd = parse_fd(value);
        } else if (strcmp(arg, "--files-out-fd") == 0) {
            opt->files_out_fd = parse_fd(value);
        } else if (strcmp(arg, "--files-dir") == 0) {
            opt->files_dir = value;
        } else if (strcmp(arg, "--files-max") == 0) {
            opt->files_max = parse_count(value);
        } else if (strcmp(arg, "--files-count") == 0) {
            opt->files_count = parse_count(value);
        } else if (strcmp(arg, "--skip") == 0) {
            opt->skip = value;
        } else if (strcmp(arg, "--files-include") == 0 || strcmp(arg, "--files-exclude") == 0) {
            if (sbx_filter_add(&opt->filter, arg[8] == 'e', value) != 0)
                die("too many or bad patterns at", value);
        } else if (strcmp(arg, "--files-filter-fd") == 0) {
            opt->filter_fd = parse_fd(value);
        } else if (strcmp(arg, "--adopt") == 0) {
            long pid;
            int used = 0;
            if (sscanf(value, "%ld:%d%n", &pid, &opt->adopted_ready_fd, &used) != 2 ||
                value[used] != '\0' || pid <= 1 || opt->adopted_ready_fd <= STDERR_FILENO) {
                errno = EINVAL;
                die("bad --adopt", value);
            }
            opt->adopted = (pid_t)pid;
        } else if (strcmp(arg, "--landlock-write") == 0) {
            if (sbx_landlock_allow(value) != 0)
                die("too many --landlock-write paths at", value);
        } else {
            errno = EINVAL;
            die("unknown option", arg);
        }
    }
    errno = EINVAL;
    if (opt->adopted > 0 && (opt->drop || opt->files_in_fd >= 0 || sbx_landlock_requested()))
        die("--adopt with --drop, --files-in-fd or --landlock-write", NULL);
    if (opt->adopted <= 0 && (opt->program == NULL || opt->program[0] == NULL))
        die("no program to run", NULL);
}

/*
 * refuse: the init was not launched by pysandbox: say why on stderr and exit
 * 2, having changed nothing (no signal sent, no fd written).
 */
static void refuse(const char *why)
{
    fprintf(stderr,
            "pysandbox-init: refusing to run: %s.  This is pysandbox's init, which "
            "pysandbox starts as pid 1 inside each sandbox (it kills every process "
            "it may signal); run programs with `pysandbox run` instead\n",
            why);
    _exit(2);
}

/*
 * open_mode: the access mode (O_RDONLY, O_WRONLY or O_RDWR) of fd, and in
 * *type its file type (the S_IFMT bits); -1 unless fd is open and above the
 * standard streams.  fstat and fcntl only: nothing is read or written.
 */
static int open_mode(int fd, mode_t *type)
{
    struct stat st;
    int flags;
    if (fd <= STDERR_FILENO || fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0)
        return -1;
    *type = st.st_mode & S_IFMT;
    return flags & O_ACCMODE;
}

/*
 * check_launched: refuse unless this process holds what pysandbox's launch
 * hands the init (see the top of this file); getpid() == 1 was checked first.
 * The lifeline must be a pipe's read end, never read-write (that would be a
 * writer of its own and never see EOF): the caller keeps the only write end.
 * The report fd may be any writable file (a benchmark sends it to one).
 */
static void check_launched(const struct options *opt)
{
    mode_t type = 0;
    int report_mode;
    if (opt->lifeline_fd < 0 || opt->report_fd < 0)
        refuse("it was not given --lifeline-fd and --report-fd");
    if (open_mode(opt->lifeline_fd, &type) != O_RDONLY || type != S_IFIFO)
        refuse("--lifeline-fd is not the read end of a pipe above fd 2");
    report_mode = open_mode(opt->report_fd, &type);
    if (report_mode != O_WRONLY && report_mode != O_RDWR)
        refuse("--report-fd is not open for writing above fd 2");
}

/*
 * drop_privileges: become uid/gid for good, with no capability in any set
 * (capabilities.c): the bounding set goes first, while CAP_SETPCAP is still
 * there.  Dies on a failure.
 */
static void drop_privileges(const struct options *opt)
{
    if (sbx_empty_bounding_set() != 0)
        die("dropping the capability bounding set", NULL);
    if (setgroups(0, NULL) != 0 || setresgid(opt->gid, opt->gid, opt->gid) != 0 ||
        setresuid(opt->uid, opt->uid, opt->uid) != 0)
        die("dropping to the sandbox user", NULL);
    if (sbx_clear_capabilities() != 0)
        die("clearing capabilities", NULL);
    /* The change of credentials cleared bwrap's --die-with-parent: arm it again.
     * Only a backstop: bwrap, uid 0 without capabilities, may not signal this
     * uid, so the kernel drops it; --lifeline-fd is what ends the sandbox. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        die("setting the parent-death signal", NULL);
}

/*
 * caller_gone: whether the lifeline shows the caller's death, given what
 * poll found on it (revents).  The caller holds the only write end and never
 * writes: a hang-up, or a read that returns 0 (EOF), means every write end
 * is closed, so the caller has exited.  A byte that arrives anyway is read
 * and dropped (the read cannot block: poll reported data).  Never true
 * without a lifeline (fd -1).
 */
static int caller_gone(int lifeline_fd, short revents)
{
    char sink[64];
    ssize_t n;
    if (lifeline_fd < 0 || revents == 0)
        return 0;
    if (revents & (POLLHUP | POLLERR | POLLNVAL))
        return 1;
    do {
        n = read(lifeline_fd, sink, sizeof sink);
    } while (n < 0 && errno == EINTR);
    return n == 0;
}

/* caller_gone_now: caller_gone for the lifeline's state at this instant. */
static int caller_gone_now(int lifeline_fd)
{
    struct pollfd lifeline = {lifeline_fd, POLLIN, 0};
    if (lifeline_fd < 0)
        return 0;
    while (poll(&lifeline, 1, 0) < 0) {
        if (errno != EINTR)
            die("polling the lifeline", NULL);
    }
    return caller_gone(lifeline_fd, lifeline.revents);
}

/*
 * abandon: the caller is gone and nobody will read a report: kill every
 * other process of the sandbox and exit now.  The init is pid 1 of the
 * sandbox's pid namespace, so its exit also makes the kernel end and reap
 * whatever the kill(-1) missed before the init itself can be reaped.
 */
static void abandon(void)
{
    kill(-1, SIGKILL);
    _exit(128 + SIGKILL);
}

/*
 * wait_for_program: reap children until `program` exits and return its raw
 * wait status; orphans reparented to the init are reaped on the way.
 * SIGCHLD is blocked and delivered on sig_fd (a non-blocking signalfd), so
 * the init sleeps in poll until a child changes state or the lifeline
 * reports the caller's death, which abandons the sandbox at once.  Each
 * wake-up drains sig_fd and then reaps with WNOHANG until nothing is left:
 * a SIGCHLD that arrives after the drain wakes the next poll.
 */
static int wait_for_program(pid_t program, int sig_fd, int lifeline_fd)
{
    struct pollfd fds[2] = {{sig_fd, POLLIN, 0}, {lifeline_fd, POLLIN, 0}};
    struct signalfd_siginfo info;
    int status;
    pid_t pid;
    for (;;) {
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid == program)
                return status;
        }
        if (pid < 0 && errno != EINTR)
            die("waiting for the program", NULL);
        if (poll(fds, lifeline_fd >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("waiting for the program", NULL);
        }
        if (caller_gone(lifeline_fd, fds[1].revents))
            abandon();
        while (read(sig_fd, &info, sizeof info) > 0)
            ;
    }
}

/* release_adopted: tell the adopted program (--adopt, this process's
 * child) it is supervised now; returns its pid. */
static pid_t release_adopted(const struct options *opt)
{
    siginfo_t info = {0};
    if (waitid(P_PID, (id_t)opt->adopted, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        sbx_write_all(opt->adopted_ready_fd, "g", 1) != 0)
        die("releasing the adopted program", NULL);
    close(opt->adopted_ready_fd);
    return opt->adopted;
}

/*
 * supervise: run the program as a child; when it ends, end everything it
 * left behind, and report.  Returns the exit code init should exit with.
 * Abandons the sandbox (never returns) as soon as the lifeline shows that
 * the caller died, also before the program is started.
 */
static int supervise(struct options *opt)
{
    struct rusage usage;
    sigset_t child_signal, saved_mask;
    pid_t program;
    int status = 0, program_status = 0, code, sig_fd;

    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        die("becoming a subreaper", NULL);
    /* Not dumpable, before the program exists: the program, same uid, cannot
     * open this one's /proc/1/mem or fds (nor reopen the lifeline for writing
     * through /proc/1/fd, which would keep it from ever reaching EOF).  exec
     * makes the program dumpable. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Blocked before the fork, so no exit can slip between reaping and poll. */
    sigemptyset(&child_signal);
    sigaddset(&child_signal, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &child_signal, &saved_mask) != 0)
        die("blocking SIGCHLD", NULL);
    sig_fd = signalfd(-1, &child_signal, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sig_fd < 0)
        die("signalfd", NULL);
    if (caller_gone_now(opt->lifeline_fd))
        abandon();
    program = opt->adopted > 0 ? release_adopted(opt) : fork();
    if (program < 0)
        die("fork", NULL);
    if (program == 0) {
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        if (sbx_landlock_restrict() != 0)
            die("restricting the program with Landlock", NULL);
        execvp(opt->program[0], opt->program);
        die("cannot execute", opt->program[0]);
    }
    program_status = wait_for_program(program, sig_fd, opt->lifeline_fd);
    close(sig_fd);
    /* Whatever it left running (daemons, background jobs) ends with it. */
    kill(-1, SIGKILL);
    while (waitpid(-1, &status, 0) > 0 || errno == EINTR)
        ;
    getrusage(RUSAGE_CHILDREN, &usage);
    if (opt->report_fd >= 0) {
        char line[160];
        int len = snprintf(line, sizeof line, "exit %d %lld %lld %ld\n", program_status,
                           (long long)usage.ru_utime.tv_sec * 1000000 + usage.ru_utime.tv_usec,
                           (long long)usage.ru_stime.tv_sec * 1000000 + usage.ru_stime.tv_usec,
                           usage.ru_maxrss);
        sbx_write_all(opt->report_fd, line, (size_t)len);
        close(opt->report_fd);
    }
    if (opt->filter_fd >= 0)
        sbx_filter_read_payload(&opt->filter, opt->filter_fd);
    if (opt->files_out_fd >= 0 && opt->files_dir != NULL)
        sbx_collect_files(opt->files_out_fd, opt->files_dir, opt->skip, opt->files_max,
                          opt->files_count, &opt->filter);
    if (WIFEXITED(program_status))
        code = WEXITSTATUS(program_status);
    else
        code = 128 + WTERMSIG(program_status);
    return code;
}

/*
 * unpack_input: the input files from --files-in-fd into --files-dir, then
 * the stream closed; dies (exit 127, the failure reported) on any failure.
 */
static void unpack_input(const struct options *opt)
{
    struct sbx_unpack_failure failure;
    int dir_fd = open(opt->files_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0)
        die("opening", opt->files_dir);
    if (sbx_unpack_files(opt->files_in_fd, dir_fd, &failure) != 0) {
        errno = failure.err;
        die(failure.what, failure.detail[0] != '\0' ? failure.detail : NULL);
    }
    close(opt->files_in_fd);
    close(dir_fd);
}

int main(int argc, char **argv)
{
    struct options opt;
    if (getpid() != 1)
        refuse("it is not pid 1 of a pid namespace");
    parse_options(argc, argv, &opt);
    check_launched(&opt);
    failure_report_fd = opt.report_fd;
    /* Close-on-exec at once, so that the program never holds the lifeline;
     * and a number that is not an open fd is refused. */
    if (opt.lifeline_fd >= 0 && fcntl(opt.lifeline_fd, F_SETFD, FD_CLOEXEC) != 0)
        die("bad --lifeline-fd", NULL);
    if (opt.drop)
        drop_privileges(&opt);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die("setting no_new_privs", NULL);
    /* Input files may be larger than the program's RLIMIT_FSIZE: fail, not die. */
    signal(SIGXFSZ, SIG_IGN);
    if (opt.files_in_fd >= 0 && opt.files_dir != NULL)
        unpack_input(&opt);
    signal(SIGXFSZ, SIG_DFL);
    if (opt.files_in_fd >= 0)
        fcntl(opt.files_in_fd, F_SETFD, FD_CLOEXEC);
    if (opt.report_fd >= 0)
        fcntl(opt.report_fd, F_SETFD, FD_CLOEXEC);
    if (opt.files_out_fd >= 0)
        fcntl(opt.files_out_fd, F_SETFD, FD_CLOEXEC);
    return supervise(&opt);
}
