/* SPDX-License-Identifier: MIT */
/*
 * proctree.c: the CPU time of a whole process tree, read from /proc.
 *
 * RLIMIT_CPU counts one process; a sandbox that forks eight busy children
 * gets eight budgets.  The pump samples the tree under bwrap with this
 * instead, every tick, and kills the sandbox once the sum passes the limit.
 */
#define _GNU_SOURCE
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* More processes than this in one sandbox are not followed (and the
 * per-process RLIMIT_CPU backstop still holds for them). */
#define MAX_TREE 4096
/* A children file of MAX_TREE pids of up to 7 digits and a space. */
#define CHILDREN_BUF (MAX_TREE * 8 + 1)

/*
 * read_small_file: read up to size - 1 bytes of path into buf and NUL-
 * terminate.  One read, not read_whole_file's loop: /proc/<pid>/stat comes
 * whole from one read, and the CPU watcher reads it for every process of
 * the tree every tick.  Returns the length, or -1 (errno set).
 */
static ssize_t read_small_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    if (fd < 0)
        return -1;
    do {
        n = read(fd, buf, size - 1);
    } while (n < 0 && errno == EINTR);
    close(fd);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/*
 * process_ticks: utime + stime + cutime + cstime of pid, in clock ticks:
 * what it used itself and what its reaped descendants used; its number of
 * threads (num_threads, from the same read) added to *tasks.  0, and
 * nothing added, when the process is gone.
 */
static unsigned long long process_ticks(pid_t pid, long *tasks)
{
    char path[64], buf[1024], *fields;
    unsigned long long utime, stime, cutime, cstime;
    long threads;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small_file(path, buf, sizeof buf) <= 0)
        return 0;
    /* The command name may hold spaces and parentheses: skip past the last ')'. */
    fields = strrchr(buf, ')');
    if (fields == NULL ||
        sscanf(fields + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu %*d %*d %ld",
               &utime, &stime, &cutime, &cstime, &threads) != 5)
        return 0;
    *tasks += threads;
    return utime + stime + cutime + cstime;
}

/*
 * read_whole_file: read path to EOF into buf (at most size - 1 bytes, NUL-
 * terminated).  When the file does not fit, the last, possibly cut, token
 * is dropped.  Returns the length kept, or -1.
 */
static ssize_t read_whole_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    if (fd < 0)
        return -1;
    while (len < size - 1) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len == size - 1)
        while (len > 0 && buf[len - 1] != ' ' && buf[len - 1] != '\n')
            len--;
    buf[len] = '\0';
    return (ssize_t)len;
}

/*
 * push_children: append the children of every thread of pid to tree[],
 * up to MAX_TREE entries in all.  Returns the new count.
 */
static size_t push_children(pid_t pid, pid_t *tree, size_t count)
{
    char path[64], *buf = malloc(CHILDREN_BUF);
    DIR *tasks;
    struct dirent *task;
    if (buf == NULL)
        return count;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    tasks = opendir(path);
    if (tasks == NULL) {
        free(buf);
        return count;
    }
    while ((task = readdir(tasks)) != NULL && count < MAX_TREE) {
        char children_path[128], *cursor, *end;
        if (task->d_name[0] == '.')
            continue;
        snprintf(children_path, sizeof children_path, "/proc/%d/task/%.20s/children", (int)pid,
                 task->d_name);
        if (read_whole_file(children_path, buf, CHILDREN_BUF) <= 0)
            continue;
        for (cursor = buf; count < MAX_TREE; cursor = end) {
            long child = strtol(cursor, &end, 10);
            if (end == cursor)
                break;
            tree[count++] = (pid_t)child;
        }
    }
    closedir(tasks);
    free(buf);
    return count;
}

/*
 * sbx_tree_cpu_seconds: CPU seconds used by root and all its descendants,
 * live ones and the ones already reaped inside the tree; *tasks is set to
 * the number of their threads alive (zombies count one each, as they do
 * for RLIMIT_NPROC until reaped), or 0 when the tree could not be read.
 * A process that exits between two reads may be missed for one sample;
 * the final figure comes from wait4.  Any thread; no GIL needed; allocates
 * (not for the vfork child).  Returns -1.0 if the tree could not be read at
 * all.
 */
double sbx_tree_cpu_seconds(pid_t root, long *tasks)
{
    long ticks_per_second = sysconf(_SC_CLK_TCK);
    pid_t *tree = malloc(MAX_TREE * sizeof *tree);
    unsigned long long ticks = 0;
    size_t count = 1, next;
    *tasks = 0;
    if (tree == NULL)
        return -1.0;
    tree[0] = root;
    for (next = 0; next < count; next++) {
        ticks += process_ticks(tree[next], tasks);
        count = push_children(tree[next], tree, count);
    }
    free(tree);
    return ticks_per_second > 0 ? (double)ticks / (double)ticks_per_second : -1.0;
}

/*
 * parent_of: the parent pid of pid from /proc, or -1.
 */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[1024], *fields;
    int ppid;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small_file(path, buf, sizeof buf) <= 0)
        return -1;
    fields = strrchr(buf, ')');
    if (fields == NULL || sscanf(fields + 1, " %*c %d", &ppid) != 1)
        return -1;
    return (pid_t)ppid;
}

/*
 * signal_child: SIGKILL pid if it is still parent's child.  Through a pidfd,
 * which never names a recycled pid; without one (the host is out of fds),
 * kill(2) right after the check, the only way left to end the sandbox.
 */
static void signal_child(pid_t parent, pid_t pid)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        if ((errno == EMFILE || errno == ENFILE) && parent_of(pid) == parent)
            kill(pid, SIGKILL);
        return;
    }
    if (parent_of(pid) == parent)
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
}

/*
 * sbx_kill_children: SIGKILL every child of parent (bwrap's child is the
 * init of the sandbox's pid namespace, whose death ends the namespace).
 * Each child is checked to still be parent's child before the signal
 * (signal_child).  Returns how many children parent had.  Any thread; no
 * GIL needed; allocates (not for the vfork child).
 */
size_t sbx_kill_children(pid_t parent)
{
    pid_t *children = malloc(MAX_TREE * sizeof *children);
    size_t count, i;
    if (children == NULL)
        return 0;
    count = push_children(parent, children, 0);
    for (i = 0; i < count; i++)
        signal_child(parent, children[i]);
    free(children);
    return count;
}

/*
 * sbx_pin_child: a pidfd (O_CLOEXEC) on parent's first child, opened and
 * then checked to still be parent's child, so it names that process for as
 * long as it is open; its pid in *pid.  Returns -1 when parent has no child
 * or the pidfd could not be opened.  Any thread; no GIL needed.
 */
int sbx_pin_child(pid_t parent, pid_t *pid)
{
    char path[64], buf[64], *end;
    long first;
    int pidfd;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
    if (read_whole_file(path, buf, sizeof buf) <= 0)
        return -1;
    first = strtol(buf, &end, 10);
    if (end == buf || first <= 0)
        return -1;
    pidfd = (int)syscall(SYS_pidfd_open, (pid_t)first, 0);
    if (pidfd < 0)
        return -1;
    if (parent_of((pid_t)first) != parent) {
        close(pidfd);
        return -1;
    }
    *pid = (pid_t)first;
    return pidfd;
}

/*
 * sbx_pin_held: a copy of the pidfd that the process of holder_pidfd keeps
 * at fd `at` (pidfd_getfd, close-on-exec), checked to be a pidfd of a live
 * process, whose pid in this process's namespace goes in *pid.  Returns -1
 * when it holds none yet, or its pid cannot be told.  Any thread; no GIL.
 */
int sbx_pin_held(int holder_pidfd, int at, pid_t *pid)
{
    char path[64], buf[512], *line;
    int pidfd;
    long value;
    if (holder_pidfd < 0)
        return -1;
    pidfd = (int)syscall(SYS_pidfd_getfd, holder_pidfd, at, 0);
    if (pidfd < 0)
        return -1;
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    line = read_whole_file(path, buf, sizeof buf) > 0 ? strstr(buf, "\nPid:") : NULL;
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0 || line == NULL ||
        (value = strtol(line + 5, NULL, 10)) <= 0) {
        close(pidfd);
        return -1;
    }
    *pid = (pid_t)value;
    return pidfd;
}

/*
 * sbx_same_as_ours: whether /proc/<pid>/<entry> names the same file as
 * `ours` (both followed: "root" and "/", "ns/net" and
 * "/proc/self/ns/net"), which tells whether pid still has this process's
 * root or namespace.  -1 when either cannot be seen.  Any thread; no GIL.
 */
int sbx_same_as_ours(pid_t pid, const char *entry, const char *ours)
{
    char path[96];
    struct stat theirs, mine;
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, entry);
    if (stat(path, &theirs) != 0 || stat(ours, &mine) != 0)
        return -1;
    return theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino;
}

/*
 * sbx_cgroup_cpu_seconds: the CPU seconds in a cgroup's CPU counter open on
 * fd: v1 cpuacct.usage (one number, nanoseconds) or v2 cpu.stat (its
 * "usage_usec" line, microseconds).  Read with pread from offset 0, so the
 * same fd serves every sample.  Returns -1.0 when fd < 0 or the counter
 * cannot be read or parsed.  Any thread; no GIL needed.
 */
double sbx_cgroup_cpu_seconds(int fd)
{
    static const char key[] = "usage_usec ";
    char buf[1024], *line;
    ssize_t n;
    if (fd < 0)
        return -1.0;
    n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1.0;
    buf[n] = '\0';
    if (buf[0] >= '0' && buf[0] <= '9')
        return (double)strtoull(buf, NULL, 10) / 1e9;
    for (line = buf; line != NULL; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, key, sizeof key - 1) == 0)
            return (double)strtoull(line + sizeof key - 1, NULL, 10) / 1e6;
    }
    return -1.0;
}

/*
 * sbx_sandbox_cpu_seconds: the CPU seconds the sandbox under bwrap (root)
 * has used, as the watcher counts them, and in *tasks the threads alive in
 * the tree (sbx_tree_cpu_seconds).  The tree's /proc figures miss
 * children that were reaped by nobody (a parent that ignores SIGCHLD)
 * between two samples; the sandbox's cgroup, when it has one (cgroup_cpu_fd
 * >= 0), counts every task that ever ran in it, so the larger wins.
 * Returns -1.0 when neither can be read.  Any thread; no GIL needed;
 * allocates.
 */
double sbx_sandbox_cpu_seconds(pid_t root, int cgroup_cpu_fd, long *tasks)
{
    double used = sbx_tree_cpu_seconds(root, tasks), group = sbx_cgroup_cpu_seconds(cgroup_cpu_fd);
    return group > used ? group : used;
}
