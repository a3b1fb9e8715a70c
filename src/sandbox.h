/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of the pysandbox C core.
 *
 * Plain C only: this header must never include Python.h.  The files that
 * include it and not Python.h (all but the module's Python face, which
 * tests/test_packaging.py names) therefore cannot touch a Python object,
 * which is what makes it safe to run them in a vfork child and without the
 * GIL.  Each block of prototypes says which file defines it; the spawn's,
 * the pump's and the init's own interfaces are in spawn.h, pump.h and
 * init_files.h.
 */
#ifndef PYSANDBOX_SANDBOX_H
#define PYSANDBOX_SANDBOX_H

#include <pthread.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>

/* Older C library headers lack these numbers; they are the same on every
 * architecture that has them (the unified syscall table since Linux 5.1). */
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_prlimit64
#error "pysandbox needs the prlimit64 system call (Linux 2.6.36 or later)"
#endif

#define SBX_MAX_RLIMITS 16
/* A template's warm plan passes 16 with no readable path (the copy client's 8,
 * the waiter's 3, the code's, two payloads: files and the font list): room for
 * readable paths. */
#define SBX_MAX_PASS_FDS 32
#define SBX_MAX_CAPTURES 4
#define SBX_MAX_CGROUPS 4

/* One resource limit the child applies to itself before exec. */
struct sbx_rlimit {
    int resource;
    rlim_t soft;
    rlim_t hard;
};

/*
 * Everything the child needs, built by the parent before the clone.
 * pass_fds[i] becomes fd 3 + i in the child; then the write ends of
 * n_captures more pipes follow (fd 3 + n_pass_fds + j), which the pump
 * captures like stdout (bwrap's --json-status-fd, the init's reports).
 * All other fds but 0, 1, 2 are closed.  path must be absolute: the child
 * does no PATH lookup.
 */
struct sbx_spec {
    const char *path;
    char *const *argv;
    char *const *envp;
    const struct sbx_rlimit *rlimits;
    size_t n_rlimits;
    const int *pass_fds;
    size_t n_pass_fds;
    size_t n_captures;
    const int *cgroup_fds; /* cgroup.procs files the child joins (writes "0") */
    size_t n_cgroup_fds;
    int cgroup_dir_fd;   /* a cgroup v2 group's directory the child is born in; -1: none */
    int close_fds_above; /* highest fd to close when neither close_range nor /proc works */
    int init_pidfd_at;   /* where the child keeps a pidfd of the sandbox's init (a copy
                            client, copy_client.c), for kill.c to pin it by; -1: bwrap */
};

/* The parent's handles on a running child.  Every fd is O_CLOEXEC. */
struct sbx_child {
    pid_t pid;
    int pidfd;                         /* -1 when the kernel has no CLONE_PIDFD */
    int init_pidfd;                    /* the sandbox's init once pinned (kill.c); -1 */
    int init_pidfd_at;                 /* spec->init_pidfd_at */
    pid_t init_pid;                    /* its pid, valid while init_pidfd >= 0 */
    int unix_list_fd;                  /* its netns's /proc/net/unix (unixgc.c); -1 */
    int in_fd;                         /* write end of the child's stdin, O_NONBLOCK */
    int out_fd;                        /* read end of the child's stdout, O_NONBLOCK */
    int err_fd;                        /* read end of the child's stderr, O_NONBLOCK */
    int capture_fds[SBX_MAX_CAPTURES]; /* read ends, O_NONBLOCK; -1 if none */
    int cgroup_joined_at_clone;        /* clone3 created it in spec->cgroup_dir_fd's group */
};

/*
 * Where starting or running a sandbox failed, each with the words its
 * OSError's strerror begins with (sbx_stage_name).  A failed spawn reports
 * one with the errno of the failing call; RELEASE is pump()'s (releasing a
 * warm sandbox's waiter).  The module raises the OSError with the
 * stage as its `stage` attribute and exposes each as _sandbox.STAGE_<NAME>
 * (module.c), so Python tells stages apart by number, never by the words.
 * New stages go at the end: the numbers are the interface.
 */
#define SBX_STAGES(X)                                                                              \
    X(NONE, "spawn")                                                                               \
    X(PIPE, "creating pipes")                                                                      \
    X(PASS_FDS, "duplicating pass_fds")                                                            \
    X(STACK, "allocating the child stack")                                                         \
    X(CLONE, "clone")                                                                              \
    X(CGROUP_CLONE, "joining the sandbox's cgroup at clone")                                       \
    X(CGROUP_OPEN, "opening the sandbox's cgroup.procs")                                           \
    X(SIGNALS, "resetting signals in the child")                                                   \
    X(PDEATHSIG, "prctl(PR_SET_PDEATHSIG) in the child")                                           \
    X(RLIMIT, "setrlimit in the child")                                                            \
    X(SCHED, "leaving a real-time scheduling policy in the child")                                 \
    X(CGROUP_JOIN, "joining the sandbox's cgroup in the child")                                    \
    X(DUP2, "dup2 in the child")                                                                   \
    X(EXEC, "execve")                                                                              \
    X(RELEASE, "releasing the warm sandbox's waiter")                                              \
    X(PGROUP, "leaving the caller's process group in the child")

enum sbx_stage {
#define SBX_STAGE_ENUM(name, words) SBX_STAGE_##name,
    SBX_STAGES(SBX_STAGE_ENUM)
#undef SBX_STAGE_ENUM
    /* Not a stage: how many there are. */
    SBX_STAGE_COUNT
};

struct sbx_spawn_error {
    int stage;
    int err;
};

/* spawn.c: the spawn, and closing the fds it made; any thread, no GIL. */
const char *sbx_stage_name(int stage);
int sbx_spawn(const struct sbx_spec *spec, struct sbx_child *child, struct sbx_spawn_error *error);
void sbx_close_fd(int *fd);
void sbx_child_close_pipes(struct sbx_child *child);
void sbx_child_close_fds(struct sbx_child *child);

/*
 * A growable byte buffer owned by whoever initialised it (all zero: empty).
 * data is a heap block, or with mapped an anonymous mapping of alloc bytes
 * (pump.c says when); only sbx_buffer_free releases it.  With external, data
 * is alloc bytes of memory the initialiser owns and keeps alive until the
 * buffer is freed: it is filled but never grown, moved or released here
 * (sbx_buffer_free only forgets it).
 */
struct sbx_buffer {
    char *data;
    size_t len;
    size_t alloc;
    int mapped;
    int external;
};

/* A buffer's first block, and the pump's largest read or write of the scratch. */
#define SBX_CHUNK_SIZE (64 * 1024)

/* buffer.c: the buffer's owner only; no GIL. */
void sbx_buffer_free(struct sbx_buffer *buf);
int sbx_buffer_reserve(struct sbx_buffer *buf, size_t extra, size_t limit);
int sbx_buffer_append(struct sbx_buffer *buf, const char *data, size_t len);

/* Pending bytes for the child's stdin. */
struct sbx_input {
    struct sbx_buffer pending;
    size_t offset;       /* bytes of pending already written */
    int close_when_done; /* close stdin once pending is written */
};

/*
 * Callbacks the pump makes; all run WITHOUT the GIL held by the caller of
 * sbx_pump, and may take it themselves.  A non-zero return aborts the run:
 * the child is killed and reaped and sbx_pump returns SBX_PUMP_ABORTED.
 *   tick:      called at least every SBX_TICK_MS milliseconds.
 *   on_stdout: called with each chunk of stdout as far as it fits under the
 *              stdout cap, never empty; may append to input and set
 *              input->close_when_done.  input is NULL for the bytes read
 *              after the child ended: no reply can be written then.
 *              NULL: none.
 *   on_stderr: the same for stderr, without input.  NULL: none.
 * While a hook runs, the watchdog (watchdog.c) enforces the deadline and the
 * CPU limit: it kills the sandbox when they pass, and the pump reaps it when
 * the hook returns (output caps hold: nothing more is read meanwhile).
 */
#define SBX_TICK_MS 50

struct sbx_hooks {
    int (*tick)(void *ctx);
    int (*on_stdout)(void *ctx, const char *data, size_t len, struct sbx_input *input);
    int (*on_stderr)(void *ctx, const char *data, size_t len);
    void *ctx;
};

struct sbx_pump_config {
    size_t stdout_cap;
    size_t stderr_cap;
    size_t capture_caps[SBX_MAX_CAPTURES];
    double cpu_limit;      /* CPU seconds of the whole tree; 0: not watched */
    int cgroup_cpu_fd;     /* cpuacct.usage (v1) or cpu.stat (v2) of the sandbox's cgroup; -1 */
    int kill_on_cap;       /* kill the child as soon as a stream passes its cap */
    double timeout_sec;    /* wall-clock limit; the child is killed past it */
    long long disk_inodes; /* inodes the tmpfs at disk_dir may hold; 0: not watched */
    const char *disk_dir;  /* absolute, inside the sandbox, ":" between several (disk.c) */
    int end_at_report;     /* capture of the init's report: the run ends once it holds
                              the init's "exit" line, bwrap left to the caller; -1: no */
    int end_after_stream;  /* with it, the capture of the init's file record stream,
                              which must have ended too; -1: none */
    struct sbx_hooks hooks;
};

/*
 * Why the run ended, as facts; Python decides what they mean.  status_known
 * is 0 when the exit status was lost: the host auto-reaps children (SIGCHLD
 * ignored) or another thread reaped this one; the captures then still hold
 * what bwrap said on its status pipe.  tree_cpu_time is the last sample of
 * the watcher (-1 when not watched); peak_tasks the most tasks (threads
 * counted, as RLIMIT_NPROC counts them) it saw in the tree in one sample
 * (0 when not watched).
 */
struct sbx_outcome {
    int status_known;
    int wait_status;
    int timed_out;
    int stdout_truncated;
    int stderr_truncated;
    int killed_on_cap;
    int cpu_exceeded;
    int disk_exceeded; /* the tmpfs at disk_dir passed disk_inodes */
    int reported;      /* ended at the init's report (end_at_report): bwrap not reaped */
    double tree_cpu_time;
    long peak_tasks;
    double wall_time;
    struct rusage usage;
    struct sbx_buffer out;
    struct sbx_buffer err;
    struct sbx_buffer captures[SBX_MAX_CAPTURES];
    int captures_truncated[SBX_MAX_CAPTURES];
};

enum { SBX_PUMP_DONE = 0, SBX_PUMP_ABORTED = 1, SBX_PUMP_FAILED = -1 };

/* pump.c: the loop, and its clock; no GIL. */
double sbx_monotonic(void);
int sbx_pump(struct sbx_child *child, struct sbx_input *input, const struct sbx_pump_config *config,
             struct sbx_outcome *outcome, double started);

/* Ending the sandbox (kill.c); any thread, no GIL. */
#define SBX_KILL_SLICE_SEC 0.02 /* how often a kill is repeated until bwrap exits */
enum { SBX_KILL_GONE = 0, SBX_KILL_SENT = 1, SBX_KILL_LAST = 2 };

int sbx_reap(struct sbx_child *child, int *wait_status, struct rusage *usage);
int sbx_child_has_exited(pid_t pid);
int sbx_child_gone(const struct sbx_child *child);
int sbx_pin_init(struct sbx_child *child);
int sbx_kill_step(struct sbx_child *child, double since);
int sbx_kill_and_reap(struct sbx_child *child, int *wait_status, struct rusage *usage);

/*
 * The watchdog (watchdog.c): a thread that enforces the deadline, the CPU
 * limit and the tmpfs's inodes while the pump's thread is inside a hook, which may run Python code
 * for as long as it likes.  Armed around each hook call; it looks every
 * SBX_TICK_MS (and at the deadline) and, once a limit passed, kills every
 * SBX_KILL_SLICE_SEC until bwrap has exited.  It never reaps and never
 * touches a Python object.  The fields below the lock are the lock's.
 */
enum { SBX_WATCH_NONE = 0, SBX_WATCH_DEADLINE, SBX_WATCH_CPU, SBX_WATCH_DISK };

struct sbx_watchdog {
    struct sbx_child *child; /* touched only while armed (sbx_pin_init) */
    double deadline;         /* sbx_monotonic() */
    double cpu_limit;        /* 0: not watched */
    int cgroup_cpu_fd;
    long long disk_inodes; /* as in sbx_pump_config */
    const char *disk_dir;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int armed;
    int stopping;
    int fired;       /* SBX_WATCH_*: which limit passed while a hook ran */
    double fired_at; /* when it fired */
    double ended_at; /* when bwrap was seen exited after the kill; -1: not seen */
    double cpu_used; /* the largest CPU sample; -1: none */
    long peak_tasks; /* the most tasks in one sample; 0: none */
};

/* What the watchdog saw during one hook call. */
struct sbx_watch_report {
    int fired;
    double killed_at; /* when it fired and killed: the end of the program's wall time */
    double cpu_used;
    long peak_tasks;
};

/* watchdog.c: the pump's thread only. */
int sbx_watchdog_start(struct sbx_watchdog *w, struct sbx_child *child,
                       const struct sbx_pump_config *config, double deadline);
void sbx_watchdog_arm(struct sbx_watchdog *w);
void sbx_watchdog_disarm(struct sbx_watchdog *w, struct sbx_watch_report *report);
void sbx_watchdog_stop(struct sbx_watchdog *w);

/* proctree.c: the process tree and the cgroup from /proc; any thread, no GIL. */
double sbx_tree_cpu_seconds(pid_t root, long *tasks);
double sbx_cgroup_cpu_seconds(int fd);
double sbx_sandbox_cpu_seconds(pid_t root, int cgroup_cpu_fd, long *tasks);
size_t sbx_kill_children(pid_t parent);
int sbx_pin_child(pid_t parent, pid_t *pid);
int sbx_pin_held(int holder_pidfd, int at, pid_t *pid);
pid_t sbx_tree_root(const struct sbx_child *child);
int sbx_same_as_ours(pid_t pid, const char *entry, const char *ours);

/* disk.c: the sandbox's tmpfs; any thread, no GIL. */
long long sbx_sandbox_inodes(struct sbx_child *child, const char *dir);

/* unixgc.c: the kernel's unix garbage collector; any thread, no GIL. */
int sbx_collect_unix_garbage(int list_fd);
int sbx_unix_gc_pass(void);
int sbx_open_unix_list(pid_t init_pid, int init_pidfd);
int sbx_unix_sockets_left(int fd);

/* seccomp_filter.c: the syscall filter as BPF; any thread, no GIL. */
/* The filters sbx_seccomp_program builds. */
enum { SBX_FILTER_SANDBOX = 0, SBX_FILTER_TEMPLATE = 1 };
int sbx_user_namespace(const char *uid_map, const char *gid_map, int *fd);
int sbx_seccomp_program(int kind, char **program, size_t *length);

#endif
