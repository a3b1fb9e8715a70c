/*
 * module.c: the Python face of the C core, module pysandbox._sandbox.
 *
 * One of the few files that include Python.h (tests/test_packaging.py names
 * them).  It converts arguments to the plain C spec, releases the GIL around
 * sbx_spawn and sbx_pump, takes it back in the hooks (signal checks every
 * SBX_TICK_MS, the output and stdin callbacks), and has output.c turn the
 * outcome into a dict of facts.  Policy lives in pysandbox/.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "landlock.h"
#include "output.h"
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FALLBACK_FD (1 << 20)

/* State shared with the hooks while the GIL is released. */
struct call_ctx {
    PyThreadState *tstate;
    PyObject *stdin_callback; /* borrowed; NULL when there is none (likewise below) */
    PyObject *on_stdout;
    PyObject *on_stderr;
    PyObject *cancel;
    int cancelled;
};

/*
 * tick_hook: take the GIL, run pending signal handlers (Ctrl-C raises
 * KeyboardInterrupt here), ask cancel.is_set(), give the GIL back.
 * Non-zero aborts the run: with an exception left set, or with
 * ctx->cancelled set and no exception.  Called by sbx_pump without the GIL.
 */
static int tick_hook(void *opaque)
{
    struct call_ctx *ctx = opaque;
    int rc;
    PyEval_RestoreThread(ctx->tstate);
    rc = PyErr_CheckSignals();
    if (rc == 0 && ctx->cancel != NULL) {
        PyObject *is_set = PyObject_CallMethod(ctx->cancel, "is_set", NULL);
        if (is_set == NULL) {
            rc = -1;
        } else {
            int truth = PyObject_IsTrue(is_set);
            Py_DECREF(is_set);
            if (truth < 0)
                rc = -1;
            else
                rc = ctx->cancelled = truth;
        }
    }
    ctx->tstate = PyEval_SaveThread();
    return rc != 0;
}

/*
 * show_chunk: callback(chunk), its result ignored; nothing when callback is
 * NULL.  Needs the GIL.  Returns 0, or -1 with the callback's exception set.
 */
static int show_chunk(PyObject *callback, PyObject *chunk)
{
    PyObject *ignored;
    if (callback == NULL)
        return 0;
    ignored = PyObject_CallOneArg(callback, chunk);
    Py_XDECREF(ignored);
    return ignored == NULL ? -1 : 0;
}

/*
 * reply_to_chunk: call stdin_callback(chunk).  A bytes reply is queued on
 * input, None closes stdin once the queue is written.  Anything else, or an
 * exception, returns -1 with the exception set.  Needs the GIL.
 */
static int reply_to_chunk(PyObject *stdin_callback, PyObject *chunk, struct sbx_input *input)
{
    PyObject *reply = PyObject_CallOneArg(stdin_callback, chunk);
    int rc = -1;
    if (reply == NULL) {
        /* the exception is set */
    } else if (reply == Py_None) {
        input->close_when_done = 1;
        rc = 0;
    } else if (PyBytes_Check(reply)) {
        if (sbx_buffer_append(&input->pending, PyBytes_AS_STRING(reply),
                              (size_t)PyBytes_GET_SIZE(reply)) == 0)
            rc = 0;
        else
            PyErr_NoMemory();
    } else {
        PyErr_Format(PyExc_TypeError, "the stdin callback must return bytes or None, not %.100s",
                     Py_TYPE(reply)->tp_name);
    }
    Py_XDECREF(reply);
    return rc;
}

/*
 * stdout_hook: with the GIL held, show the chunk to on_stdout, then, while
 * stdin can still be written (input not NULL), ask stdin_callback for its
 * reply.  An exception aborts the run (non-zero) with it left set.  Called
 * by sbx_pump without the GIL.
 */
static int stdout_hook(void *opaque, const char *data, size_t len, struct sbx_input *input)
{
    struct call_ctx *ctx = opaque;
    PyObject *chunk;
    int rc = -1;

    PyEval_RestoreThread(ctx->tstate);
    chunk = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    if (chunk != NULL && show_chunk(ctx->on_stdout, chunk) == 0)
        rc = input != NULL && ctx->stdin_callback != NULL
                 ? reply_to_chunk(ctx->stdin_callback, chunk, input)
                 : 0;
    Py_XDECREF(chunk);
    ctx->tstate = PyEval_SaveThread();
    return rc != 0;
}

/*
 * stderr_hook: show the chunk to on_stderr with the GIL held.  An exception
 * aborts the run (non-zero) with it left set.  Called by sbx_pump without
 * the GIL.
 */
static int stderr_hook(void *opaque, const char *data, size_t len)
{
    struct call_ctx *ctx = opaque;
    PyObject *chunk;
    int rc = -1;

    PyEval_RestoreThread(ctx->tstate);
    chunk = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    if (chunk != NULL)
        rc = show_chunk(ctx->on_stderr, chunk);
    Py_XDECREF(chunk);
    ctx->tstate = PyEval_SaveThread();
    return rc != 0;
}

/*
 * check_callback: TypeError naming `what` unless obj is None or callable.
 * Needs the GIL.  Returns 0 or -1.
 */
static int check_callback(PyObject *obj, const char *what)
{
    if (obj == Py_None || PyCallable_Check(obj))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be callable or None, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/*
 * sequence_snapshot: tuple(seq), or TypeError naming `what`.  Conversions of
 * the items may run Python code (__fspath__, __index__) that mutates seq;
 * a snapshot keeps every item alive and the length fixed.  Needs the GIL.
 */
static PyObject *sequence_snapshot(PyObject *seq, const char *what)
{
    PyObject *tuple = PySequence_Tuple(seq);
    if (tuple == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a sequence", what);
    }
    return tuple;
}

/*
 * to_cstring_array: convert a sequence of str/bytes (filesystem encoding)
 * into a NULL-terminated char* array.  The bytes objects are appended to
 * `keep`, which owns them for as long as the array is used; the array is
 * PyMem_Malloc'd and owned by the caller.  Needs the GIL.  Returns NULL with
 * an exception set (embedded NUL: ValueError).
 */
static char **to_cstring_array(PyObject *seq, const char *what, PyObject *keep)
{
    PyObject *fast = sequence_snapshot(seq, what);
    Py_ssize_t i, n;
    char **array;
    if (fast == NULL)
        return NULL;
    n = PyTuple_GET_SIZE(fast);
    array = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    if (array == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (i = 0; i < n; i++) {
        PyObject *converted = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(fast, i), &converted) ||
            PyList_Append(keep, converted) != 0) {
            Py_XDECREF(converted);
            Py_DECREF(fast);
            PyMem_Free(array);
            return NULL;
        }
        array[i] = PyBytes_AS_STRING(converted);
        Py_DECREF(converted);
    }
    Py_DECREF(fast);
    return array;
}

/*
 * parse_rlimits: fill out[] from a sequence of (resource, soft, hard) int
 * triples; -1 means RLIM_INFINITY.  Needs the GIL.  Returns the count or -1
 * with an exception set.
 */
static Py_ssize_t parse_rlimits(PyObject *seq, struct sbx_rlimit *out)
{
    PyObject *fast = sequence_snapshot(seq, "rlimits");
    Py_ssize_t i, n;
    if (fast == NULL)
        return -1;
    n = PyTuple_GET_SIZE(fast);
    if (n > SBX_MAX_RLIMITS) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many rlimits");
        return -1;
    }
    for (i = 0; i < n; i++) {
        long long soft, hard;
        int resource;
        PyObject *item = PyTuple_GET_ITEM(fast, i);
        if (!PyTuple_Check(item)) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "rlimits items must be (resource, soft, hard) tuples");
            return -1;
        }
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fast, i),
                              "iLL;rlimits items must be "
                              "(resource, soft, hard)",
                              &resource, &soft, &hard)) {
            Py_DECREF(fast);
            return -1;
        }
        out[i].resource = resource;
        out[i].soft = soft < 0 ? RLIM_INFINITY : (rlim_t)soft;
        out[i].hard = hard < 0 ? RLIM_INFINITY : (rlim_t)hard;
    }
    Py_DECREF(fast);
    return n;
}

/*
 * parse_fds: fill out[] from a sequence of fd numbers.  Needs the GIL.
 * Returns the count or -1 with an exception set.
 */
static Py_ssize_t parse_fds(PyObject *seq, int *out, Py_ssize_t max, const char *what)
{
    PyObject *fast = sequence_snapshot(seq, what);
    Py_ssize_t i, n;
    if (fast == NULL)
        return -1;
    n = PyTuple_GET_SIZE(fast);
    if (n > max) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "too many %s", what);
        return -1;
    }
    for (i = 0; i < n; i++) {
        long fd = PyLong_AsLong(PyTuple_GET_ITEM(fast, i));
        if (fd == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (fd < 0 || fd > INT_MAX) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_ValueError, "%s must be valid fd numbers", what);
            return -1;
        }
        out[i] = (int)fd;
    }
    Py_DECREF(fast);
    return n;
}

/*
 * parse_caps: fill out[] from a sequence of non-negative ints.  Needs the
 * GIL.  Returns the count or -1 with an exception set.
 */
static Py_ssize_t parse_caps(PyObject *seq, size_t *out)
{
    PyObject *fast = sequence_snapshot(seq, "captures");
    Py_ssize_t i, n;
    if (fast == NULL)
        return -1;
    n = PyTuple_GET_SIZE(fast);
    if (n > SBX_MAX_CAPTURES) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "too many captures");
        return -1;
    }
    for (i = 0; i < n; i++) {
        Py_ssize_t cap = PyNumber_AsSsize_t(PyTuple_GET_ITEM(fast, i), PyExc_OverflowError);
        if (cap == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (cap < 0) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "capture caps must be >= 0");
            return -1;
        }
        out[i] = (size_t)cap;
    }
    Py_DECREF(fast);
    return n;
}

/*
 * fallback_fd_limit: the highest fd the child scans when close_range is
 * missing (kernels before 5.9).  Needs nothing; any thread.
 */
static int fallback_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > MAX_FALLBACK_FD)
        return MAX_FALLBACK_FD;
    return (int)rl.rlim_cur;
}

/*
 * raise_spawn_error: OSError(errno, "<stage>: <strerror>", path).  The
 * errno picks the OSError subclass (FileNotFoundError for ENOENT...).
 * Needs the GIL; returns NULL.
 */
static PyObject *raise_spawn_error(const struct sbx_spawn_error *error, const char *path)
{
    PyObject *exc =
        PyObject_CallFunction(PyExc_OSError, "iss", error->err, strerror(error->err), path);
    PyObject *note;
    if (exc == NULL)
        return NULL;
    note = PyUnicode_FromFormat("%s: %s", sbx_stage_name(error->stage), strerror(error->err));
    if (note != NULL && PyObject_SetAttrString(exc, "strerror", note) == 0)
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_XDECREF(note);
    Py_DECREF(exc);
    return NULL;
}

/* The message of pump()'s OSError when release_fd's lease could not be given up. */
#define RELEASE_FAILED "giving up the code file's lease"

/* Where a Sandbox is in its single life; zeroed memory reads as ended. */
enum { SANDBOX_ENDED = 0, SANDBOX_STARTED, SANDBOX_PUMPING };

/*
 * A started bwrap process and the parent's ends of its pipes, until pump()
 * runs it to its end or kill() (or the object's release) ends it.  state is
 * read and written with the GIL held only.
 */
typedef struct {
    PyObject_HEAD struct sbx_child child;
    size_t n_captures;
    size_t capture_caps[SBX_MAX_CAPTURES];
    int state;
} SandboxObject;

PyDoc_STRVAR(start_doc,
             "start($module, /, argv, env, *, rlimits=(), pass_fds=(), captures=(),\n"
             "      cgroup_procs=(), cgroup_dir_fd=-1)\n"
             "--\n\n"
             "Spawn argv[0] (an absolute path) with argv and env, apply rlimits in the\n"
             "child, map pass_fds to fds 3, 4, ... and close every other fd.  Each cap in\n"
             "captures adds a pipe whose write end comes next (3 + len(pass_fds) + i) and\n"
             "whose contents, up to the cap, come back in the facts' 'captures'.  The\n"
             "child writes \"0\" to each fd of cgroup_procs (cgroup.procs files) before\n"
             "the exec.  cgroup_dir_fd, when >= 0, is an fd of a cgroup v2 group's\n"
             "directory: the child is created in it by clone3(CLONE_INTO_CGROUP), or\n"
             "where the kernel or a seccomp filter refuses that call, joins it through\n"
             "its cgroup.procs before the exec.  Returns a Sandbox, whose pump() runs it\n"
             "to its end; nothing of it is read until then.  Raises OSError if the\n"
             "child could not be started.");

/*
 * sandbox_start: see start_doc.  Called with the GIL; releases it for the
 * spawn.  On failure nothing is left: no fd, no child, no memory.
 */
static PyObject *sandbox_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"argv",     "env",          "rlimits",       "pass_fds",
                               "captures", "cgroup_procs", "cgroup_dir_fd", NULL};
    PyObject *argv_obj, *env_obj, *rlimits_obj = NULL, *fds_obj = NULL, *captures_obj = NULL;
    PyObject *cgroups_obj = NULL, *keep = NULL, *type = NULL;
    SandboxObject *sandbox = NULL;
    int cgroup_fds[SBX_MAX_CGROUPS], pass_fds[SBX_MAX_PASS_FDS], cgroup_dir_fd = -1, spawn_rc;
    size_t capture_caps[SBX_MAX_CAPTURES];
    char **argv = NULL, **envp = NULL;
    struct sbx_rlimit rlimits[SBX_MAX_RLIMITS];
    struct sbx_spec spec;
    struct sbx_child child;
    struct sbx_spawn_error spawn_error;
    Py_ssize_t n;

    memset(&spec, 0, sizeof spec);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOOi:start", keywords, &argv_obj, &env_obj,
                                     &rlimits_obj, &fds_obj, &captures_obj, &cgroups_obj,
                                     &cgroup_dir_fd))
        return NULL;
    if (captures_obj != NULL) {
        if ((n = parse_caps(captures_obj, capture_caps)) < 0)
            goto cleanup;
        spec.n_captures = (size_t)n;
    }
    keep = PyList_New(0);
    if (keep == NULL)
        goto cleanup;
    argv = to_cstring_array(argv_obj, "argv", keep);
    if (argv == NULL)
        goto cleanup;
    if (argv[0] == NULL || argv[0][0] != '/') {
        PyErr_SetString(PyExc_ValueError, "argv[0] must be an absolute path");
        goto cleanup;
    }
    envp = to_cstring_array(env_obj, "env", keep);
    if (envp == NULL)
        goto cleanup;
    if (rlimits_obj != NULL) {
        if ((n = parse_rlimits(rlimits_obj, rlimits)) < 0)
            goto cleanup;
        spec.rlimits = rlimits;
        spec.n_rlimits = (size_t)n;
    }
    if (fds_obj != NULL) {
        if ((n = parse_fds(fds_obj, pass_fds, SBX_MAX_PASS_FDS, "pass_fds")) < 0)
            goto cleanup;
        spec.pass_fds = pass_fds;
        spec.n_pass_fds = (size_t)n;
    }
    if (cgroups_obj != NULL) {
        if ((n = parse_fds(cgroups_obj, cgroup_fds, SBX_MAX_CGROUPS, "cgroup_procs")) < 0)
            goto cleanup;
        spec.cgroup_fds = cgroup_fds;
        spec.n_cgroup_fds = (size_t)n;
    }
    spec.path = argv[0];
    spec.argv = argv;
    spec.envp = envp;
    spec.close_fds_above = fallback_fd_limit();
    spec.cgroup_dir_fd = cgroup_dir_fd;
    /* The object first: once bwrap runs, nothing may fail before it owns it. */
    type = PyObject_GetAttrString(module, "Sandbox");
    if (type == NULL)
        goto cleanup;
    sandbox = PyObject_New(SandboxObject, (PyTypeObject *)type);
    if (sandbox == NULL)
        goto cleanup;
    sandbox->state = SANDBOX_ENDED;
    sandbox->child.pid = -1;
    sandbox->child.init_pidfd = -1;
    sandbox->child.unix_list_fd = -1;

    Py_BEGIN_ALLOW_THREADS
    spawn_rc = sbx_spawn(&spec, &child, &spawn_error);
    Py_END_ALLOW_THREADS
    if (spawn_rc != 0) {
        raise_spawn_error(&spawn_error, spec.path);
        Py_CLEAR(sandbox);
        goto cleanup;
    }
    sandbox->child = child;
    sandbox->n_captures = spec.n_captures;
    memcpy(sandbox->capture_caps, capture_caps, sizeof capture_caps);
    sandbox->state = SANDBOX_STARTED;

cleanup:
    PyMem_Free(argv);
    PyMem_Free(envp);
    Py_XDECREF(keep);
    Py_XDECREF(type);
    return (PyObject *)sandbox;
}

/*
 * end_child: kill the sandbox, reap bwrap and close the parent's fds,
 * without the GIL (the kill waits for bwrap to exit).  Called with the GIL
 * by the thread that moved state away from SANDBOX_STARTED, so no other
 * thread touches the child meanwhile.
 */
static void end_child(SandboxObject *self)
{
    int wait_status;
    struct rusage usage;
    Py_BEGIN_ALLOW_THREADS
    sbx_kill_and_reap(&self->child, &wait_status, &usage);
    sbx_child_close_fds(&self->child);
    Py_END_ALLOW_THREADS
}

/*
 * claim: move a STARTED sandbox to `next` (the caller then owns its child),
 * or raise RuntimeError naming `what`.  Needs the GIL.  Returns 0 or -1.
 */
static int claim(SandboxObject *self, int next, const char *what)
{
    if (self->state != SANDBOX_STARTED) {
        PyErr_Format(PyExc_RuntimeError, "cannot %s: the sandbox was already %s", what,
                     self->state == SANDBOX_PUMPING ? "being run" : "run or killed");
        return -1;
    }
    self->state = next;
    return 0;
}

PyDoc_STRVAR(pump_doc, "pump($self, /, *, stdin=b'', stdin_callback=None, on_stdout=None,\n"
                       "     on_stderr=None, stdout_cap=sys.maxsize, stderr_cap=sys.maxsize,\n"
                       "     kill_on_cap=False, timeout, cpu_limit=0.0, cancel=None, text=False,\n"
                       "     cgroup_cpu_fd=-1, since=-1.0, release_fd=-1, disk_inodes=0,\n"
                       "     disk_dir=None)\n"
                       "--\n\n"
                       "Run the sandbox to its end, once.  Feed stdin, capture stdout/stderr up\n"
                       "to their caps, kill `timeout` seconds after `since` (a time.monotonic()\n"
                       "value; < 0: now, which is also where wall_time counts from), or once the\n"
                       "whole process tree has used cpu_limit CPU seconds (if > 0), or once\n"
                       "cancel.is_set() (checked every tick; the result then says 'cancelled').\n"
                       "Without stdin_callback, stdin is closed once written; with it,\n"
                       "stdin_callback(chunk) is called with each chunk of stdout while stdin is\n"
                       "open and returns bytes to write or None to close stdin.  on_stdout(chunk)\n"
                       "and on_stderr(chunk) see every byte kept of their stream, in order, as it\n"
                       "is read (their results are ignored).  While a callback runs, a watchdog\n"
                       "thread still kills the child at the deadline or past cpu_limit; the call\n"
                       "returns once the callback has.  An exception in a callback kills and\n"
                       "reaps the child and propagates.  With text, stdout and stderr are str\n"
                       "decoded from UTF-8 without the ASCII white space at their ends, or None\n"
                       "where they are not UTF-8.  cgroup_cpu_fd, when >= 0, is a readable fd of\n"
                       "the sandbox's cgroup CPU counter (v1 cpuacct.usage or v2 cpu.stat): the\n"
                       "CPU watcher then also counts every task that ever ran in the group.\n"
                       "release_fd, when >= 0, holds a file lease (a warm sandbox's code file):\n"
                       "it is given up (F_SETLEASE F_UNLCK) once the clock has started and\n"
                       "before anything else, so the program waiting on the file starts under\n"
                       "the limits; if that fails, the child is killed and reaped first.\n"
                       "disk_inodes, when > 0, caps the inodes (hard links included) of the\n"
                       "tmpfs at disk_dir inside the sandbox: past it the sandbox is killed and\n"
                       "the result says 'disk_exceeded'.  The call returns once the sandbox's\n"
                       "init is gone, however long the kernel takes to tear it down; wall_time\n"
                       "ends at the program's exit or at the kill.\n"
                       "Returns a dict of facts; raises OSError if the loop failed, RuntimeError\n"
                       "if the sandbox was already run or killed.");

/*
 * Sandbox_pump: see pump_doc.  Called with the GIL; releases it for the
 * loop.  The child is reaped and its fds closed on every path once the
 * arguments are accepted; an exception from a hook (KeyboardInterrupt, the
 * callback's own) propagates after that.
 */
static PyObject *Sandbox_pump(SandboxObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {
        "stdin",       "stdin_callback", "on_stdout",   "on_stderr", "stdout_cap", "stderr_cap",
        "kill_on_cap", "timeout",        "cpu_limit",   "cancel",    "text",       "cgroup_cpu_fd",
        "since",       "release_fd",     "disk_inodes", "disk_dir",  NULL};
    PyObject *stdin_callback = Py_None, *on_stdout = Py_None, *on_stderr = Py_None;
    PyObject *cancel = Py_None, *result = NULL, *direct[2] = {NULL, NULL};
    Py_buffer stdin_view = {0};
    Py_ssize_t stdout_cap = PY_SSIZE_T_MAX, stderr_cap = PY_SSIZE_T_MAX;
    int kill_on_cap = 0, text = 0, pump_rc, cgroup_cpu_fd = -1, release_fd = -1, release_errno = 0;
    double timeout = -1.0, cpu_limit = 0.0, since = -1.0;
    long long disk_inodes = 0;
    const char *disk_dir = NULL;
    struct sbx_input input;
    struct sbx_outcome outcome;
    struct sbx_pump_config config;
    struct call_ctx ctx;

    memset(&input, 0, sizeof input);
    memset(&outcome, 0, sizeof outcome);
    memset(&config, 0, sizeof config);
    memset(&ctx, 0, sizeof ctx);
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "|$y*OOOnnpddOpidiLz:pump", keywords, &stdin_view, &stdin_callback,
            &on_stdout, &on_stderr, &stdout_cap, &stderr_cap, &kill_on_cap, &timeout, &cpu_limit,
            &cancel, &text, &cgroup_cpu_fd, &since, &release_fd, &disk_inodes, &disk_dir))
        return NULL;
    if (stdout_cap < 0 || stderr_cap < 0 || !(timeout > 0) || !isfinite(timeout) ||
        !(cpu_limit >= 0) || !isfinite(cpu_limit) || !isfinite(since) || disk_inodes < 0 ||
        (disk_inodes > 0 && (disk_dir == NULL || disk_dir[0] != '/'))) {
        PyErr_SetString(PyExc_ValueError, "caps must be >= 0, timeout finite and > 0, "
                                          "cpu_limit finite and >= 0, since finite, "
                                          "disk_inodes >= 0 and with an absolute disk_dir");
        goto cleanup;
    }
    if (check_callback(stdin_callback, "stdin_callback") ||
        check_callback(on_stdout, "on_stdout") || check_callback(on_stderr, "on_stderr"))
        goto cleanup;
    if (stdin_view.buf != NULL &&
        sbx_buffer_append(&input.pending, stdin_view.buf, (size_t)stdin_view.len) != 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    if (claim(self, SANDBOX_PUMPING, "run it") != 0)
        goto cleanup;
    input.close_when_done = stdin_callback == Py_None;
    config.stdout_cap = (size_t)stdout_cap;
    config.stderr_cap = (size_t)stderr_cap;
    memcpy(config.capture_caps, self->capture_caps, sizeof config.capture_caps);
    config.kill_on_cap = kill_on_cap;
    config.timeout_sec = timeout;
    config.cpu_limit = cpu_limit;
    config.cgroup_cpu_fd = cgroup_cpu_fd;
    config.disk_inodes = disk_inodes;
    config.disk_dir = disk_dir;
    config.hooks.tick = tick_hook;
    config.hooks.on_stdout = stdin_callback == Py_None && on_stdout == Py_None ? NULL : stdout_hook;
    config.hooks.on_stderr = on_stderr == Py_None ? NULL : stderr_hook;
    config.hooks.ctx = &ctx;
    ctx.stdin_callback = stdin_callback == Py_None ? NULL : stdin_callback;
    ctx.on_stdout = on_stdout == Py_None ? NULL : on_stdout;
    ctx.on_stderr = on_stderr == Py_None ? NULL : on_stderr;
    ctx.cancel = cancel == Py_None ? NULL : cancel;
    direct[0] = sbx_direct_begin(&outcome.out, config.stdout_cap, text);
    direct[1] = sbx_direct_begin(&outcome.err, config.stderr_cap, text);

    ctx.tstate = PyEval_SaveThread();
    if (since < 0)
        since = sbx_monotonic();
    if (release_fd >= 0 && fcntl(release_fd, F_SETLEASE, F_UNLCK) != 0) {
        release_errno = errno;
        sbx_kill_and_reap(&self->child, &outcome.wait_status, &outcome.usage);
        sbx_child_close_fds(&self->child);
        pump_rc = SBX_PUMP_FAILED;
    } else {
        pump_rc = sbx_pump(&self->child, &input, &config, &outcome, since);
    }
    PyEval_RestoreThread(ctx.tstate);
    self->state = SANDBOX_ENDED;

    if (release_errno != 0)
        PyErr_Format(PyExc_OSError, "%s: %s", RELEASE_FAILED, strerror(release_errno));
    else if (pump_rc == SBX_PUMP_FAILED)
        PyErr_SetFromErrno(PyExc_OSError);
    else if (pump_rc == SBX_PUMP_DONE || (pump_rc == SBX_PUMP_ABORTED && ctx.cancelled))
        result = sbx_build_result(&outcome, self->n_captures, text, ctx.cancelled,
                                  self->child.cgroup_joined_at_clone, direct);
    /* Otherwise SBX_PUMP_ABORTED: a hook left its exception set. */

cleanup:
    sbx_buffer_free(&outcome.out);
    sbx_buffer_free(&outcome.err);
    for (size_t i = 0; i < SBX_MAX_CAPTURES; i++)
        sbx_buffer_free(&outcome.captures[i]);
    sbx_buffer_free(&input.pending);
    /* After the buffers that pointed into them: on every path not taken by
     * sbx_build_result (a hook's exception, a failed pump or result). */
    Py_XDECREF(direct[0]);
    Py_XDECREF(direct[1]);
    if (stdin_view.buf != NULL)
        PyBuffer_Release(&stdin_view);
    return result;
}

PyDoc_STRVAR(cpu_time_doc, "cpu_time($self, /, cgroup_cpu_fd=-1)\n--\n\n"
                           "CPU seconds the sandbox has used so far: its process tree's, or\n"
                           "with cgroup_cpu_fd (as for pump) the cgroup's when larger.\n"
                           "-1.0 once it was run or killed.");

/*
 * Sandbox_cpu_time: see cpu_time_doc.  Called with the GIL; reads /proc
 * (and the counter) without it.
 */
static PyObject *Sandbox_cpu_time(SandboxObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"cgroup_cpu_fd", NULL};
    int cgroup_cpu_fd = -1;
    double used = -1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i:cpu_time", keywords, &cgroup_cpu_fd))
        return NULL;
    if (self->state == SANDBOX_STARTED) {
        Py_BEGIN_ALLOW_THREADS
        used = sbx_sandbox_cpu_seconds(self->child.pid, cgroup_cpu_fd);
        Py_END_ALLOW_THREADS
    }
    return PyFloat_FromDouble(used);
}

PyDoc_STRVAR(kill_doc, "kill($self, /)\n--\n\n"
                       "End the sandbox unrun: kill every process of it, reap bwrap and\n"
                       "close the pipes; returns once nothing of it is left.  No-op once\n"
                       "it was run or killed; RuntimeError while pump() runs it.");

/* Sandbox_kill: see kill_doc.  Called with the GIL; kills without it. */
static PyObject *Sandbox_kill(SandboxObject *self, PyObject *unused)
{
    (void)unused;
    if (self->state == SANDBOX_ENDED)
        Py_RETURN_NONE;
    if (claim(self, SANDBOX_ENDED, "kill it") != 0)
        return NULL;
    end_child(self);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(exited_doc, "exited($self, /)\n--\n\n"
                         "Whether bwrap has exited (or was run or killed), without reaping\n"
                         "it: a sandbox that ended by itself before pump() is of no use.");

/* Sandbox_exited: see exited_doc.  Called with the GIL; a few syscalls. */
static PyObject *Sandbox_exited(SandboxObject *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(self->state != SANDBOX_STARTED || sbx_child_gone(&self->child));
}

/* Sandbox_get_pid: bwrap's pid on the host while it runs, else -1.  GIL. */
static PyObject *Sandbox_get_pid(SandboxObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->state == SANDBOX_ENDED ? -1 : (long)self->child.pid);
}

/*
 * Sandbox_dealloc: a sandbox never run is killed and reaped, so dropping the
 * last reference leaks no process or fd.  Called with the GIL; kills
 * without it.
 */
static void Sandbox_dealloc(SandboxObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->state == SANDBOX_STARTED) {
        self->state = SANDBOX_ENDED;
        end_child(self);
    }
    PyObject_Free(self);
    Py_DECREF(type);
}

static PyMethodDef Sandbox_methods[] = {
    {"pump", (PyCFunction)(void (*)(void))Sandbox_pump, METH_VARARGS | METH_KEYWORDS, pump_doc},
    {"cpu_time", (PyCFunction)(void (*)(void))Sandbox_cpu_time, METH_VARARGS | METH_KEYWORDS,
     cpu_time_doc},
    {"kill", (PyCFunction)Sandbox_kill, METH_NOARGS, kill_doc},
    {"exited", (PyCFunction)Sandbox_exited, METH_NOARGS, exited_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Sandbox_getset[] = {
    {"pid", (getter)Sandbox_get_pid, NULL, "bwrap's pid on the host while it runs, else -1.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/*
 * Sandbox_new: refuse Sandbox(): only start() makes one, owning a child.
 * Called with the GIL; returns NULL with TypeError set.
 */
static PyObject *Sandbox_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    PyErr_Format(PyExc_TypeError, "cannot create '%.100s' instances: use start()", type->tp_name);
    return NULL;
}

static PyType_Slot Sandbox_slots[] = {
    {Py_tp_new, Sandbox_new},
    {Py_tp_doc, "A started sandbox (made by start()), run once by pump() or ended by kill()."},
    {Py_tp_dealloc, Sandbox_dealloc},
    {Py_tp_methods, Sandbox_methods},
    {Py_tp_getset, Sandbox_getset},
    {0, NULL},
};

static PyType_Spec Sandbox_spec = {
    .name = "pysandbox._sandbox.Sandbox",
    .basicsize = sizeof(SandboxObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = Sandbox_slots,
};

/* The keywords of pump() that run() does not take: it starts the clock at the spawn. */
static const char *const pump_only_keywords[] = {"since", "release_fd", NULL};

/* The keywords of run() that go to start(); the rest go to pump(). */
static const char *const start_keywords[] = {"rlimits",      "pass_fds",      "captures",
                                             "cgroup_procs", "cgroup_dir_fd", NULL};

PyDoc_STRVAR(run_doc,
             "run($module, /, argv, env, *, rlimits=(), pass_fds=(), captures=(), stdin=b'',\n"
             "    stdin_callback=None, on_stdout=None, on_stderr=None,\n"
             "    stdout_cap=sys.maxsize, stderr_cap=sys.maxsize,\n"
             "    kill_on_cap=False, timeout, cpu_limit=0.0, cancel=None, text=False,\n"
             "    cgroup_procs=(), cgroup_cpu_fd=-1, cgroup_dir_fd=-1, disk_inodes=0,\n"
             "    disk_dir=None)\n"
             "--\n\n"
             "start(argv, env, ...) then pump(...) on it, with the wall clock started\n"
             "at the spawn: the keywords go to whichever of the two takes them.\n"
             "Returns pump()'s dict of facts; raises OSError if the child could not be\n"
             "started.");

/*
 * sandbox_run: see run_doc.  Called with the GIL.  The keywords are split
 * between start() and pump(), so both see exactly their own arguments and
 * name a wrong one themselves.
 */
static PyObject *sandbox_run(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *start_kwargs = PyDict_New(), *pump_kwargs = NULL, *sandbox = NULL, *result = NULL;
    PyObject *pump = NULL, *empty = NULL;
    double since = sbx_monotonic();
    if (start_kwargs == NULL)
        return NULL;
    pump_kwargs = kwargs != NULL ? PyDict_Copy(kwargs) : PyDict_New();
    if (pump_kwargs == NULL)
        goto cleanup;
    for (const char *const *key = start_keywords; *key != NULL; key++) {
        PyObject *value = PyDict_GetItemString(pump_kwargs, *key); /* borrowed */
        if (value == NULL)
            continue;
        if (PyDict_SetItemString(start_kwargs, *key, value) != 0 ||
            PyDict_DelItemString(pump_kwargs, *key) != 0)
            goto cleanup;
    }
    for (const char *const *key = pump_only_keywords; *key != NULL; key++) {
        if (PyDict_GetItemString(pump_kwargs, *key) != NULL) {
            PyErr_Format(PyExc_TypeError, "run() got an unexpected keyword argument '%s'", *key);
            goto cleanup;
        }
    }
    sandbox = sandbox_start(module, args, start_kwargs);
    if (sandbox == NULL)
        goto cleanup;
    {
        PyObject *started_at = PyFloat_FromDouble(since);
        if (started_at == NULL || PyDict_SetItemString(pump_kwargs, "since", started_at) != 0) {
            Py_XDECREF(started_at);
            goto cleanup;
        }
        Py_DECREF(started_at);
    }
    pump = PyObject_GetAttrString(sandbox, "pump");
    empty = PyTuple_New(0);
    if (pump != NULL && empty != NULL)
        result = PyObject_Call(pump, empty, pump_kwargs);

cleanup:
    Py_XDECREF(pump);
    Py_XDECREF(empty);
    Py_XDECREF(sandbox);
    Py_XDECREF(start_kwargs);
    Py_XDECREF(pump_kwargs);
    return result;
}

PyDoc_STRVAR(seccomp_doc, "seccomp_program($module, /)\n--\n\n"
                          "The BPF program of the sandbox's syscall filter, for bwrap's\n"
                          "--seccomp; raises OSError if libseccomp cannot build it.");

/*
 * sandbox_seccomp_program: see seccomp_doc.  Called with the GIL; builds
 * the filter without it.
 */
static PyObject *sandbox_seccomp_program(PyObject *module, PyObject *unused)
{
    char *program;
    size_t length;
    int rc;
    PyObject *result;
    (void)module;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    rc = sbx_seccomp_program(&program, &length);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        errno = -rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    result = PyBytes_FromStringAndSize(program, (Py_ssize_t)length);
    free(program);
    return result;
}

PyDoc_STRVAR(landlock_doc, "landlock_abi($module, /)\n--\n\n"
                           "The running kernel's Landlock ABI version, 0 when it has none.");

/*
 * sandbox_landlock_abi: see landlock_doc.  Called with the GIL (one syscall).
 */
static PyObject *sandbox_landlock_abi(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(sbx_landlock_abi());
}

PyDoc_STRVAR(unix_gc_pass_doc,
             "unix_gc_pass($module, /)\n--\n\n"
             "Run the kernel's unix socket garbage collector once and wait until the\n"
             "files put on its deferred list before it ran are freed (up to 2 s); False\n"
             "when that was not seen.");

/*
 * sandbox_unix_gc_pass: see unix_gc_pass_doc.  Called with the GIL; waits
 * without it.
 */
static PyObject *sandbox_unix_gc_pass(PyObject *module, PyObject *unused)
{
    int freed;
    (void)module;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    freed = sbx_unix_gc_pass();
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(freed);
}

static PyMethodDef sandbox_methods[] = {
    {"run", (PyCFunction)(void (*)(void))sandbox_run, METH_VARARGS | METH_KEYWORDS, run_doc},
    {"start", (PyCFunction)(void (*)(void))sandbox_start, METH_VARARGS | METH_KEYWORDS, start_doc},
    {"seccomp_program", sandbox_seccomp_program, METH_NOARGS, seccomp_doc},
    {"landlock_abi", sandbox_landlock_abi, METH_NOARGS, landlock_doc},
    {"unix_gc_pass", sandbox_unix_gc_pass, METH_NOARGS, unix_gc_pass_doc},
    {NULL, NULL, 0, NULL},
};

/*
 * sandbox_exec: add the Sandbox type to the module (one per interpreter).
 * Called with the GIL at import.  Returns 0 or -1 with an exception set.
 */
static int sandbox_exec(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &Sandbox_spec, NULL);
    int rc;
    if (type == NULL)
        return -1;
    rc = PyModule_AddObject(module, "Sandbox", type); /* steals type on success only */
    if (rc != 0)
        Py_DECREF(type);
    return rc;
}

static PyModuleDef_Slot sandbox_slots[] = {
    {Py_mod_exec, sandbox_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil
    /* No module state; the hooks take the GIL explicitly where they touch objects. */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef sandbox_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pysandbox._sandbox",
    .m_doc = "C core of pysandbox: spawn bubblewrap under limits and pump its I/O.",
    .m_size = 0,
    .m_methods = sandbox_methods,
    .m_slots = sandbox_slots,
};

PyMODINIT_FUNC PyInit__sandbox(void)
{
    return PyModuleDef_Init(&sandbox_module);
}
