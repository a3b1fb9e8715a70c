/*
 * module.c: the Python face of the C core, module pysandbox._sandbox.
 *
 * The only file that includes Python.h.  It converts arguments to the plain
 * C spec, releases the GIL around sbx_spawn and sbx_pump, takes it back in
 * the hooks (signal checks every SBX_TICK_MS, the output and stdin
 * callbacks), and
 * turns the outcome into a dict of facts.  Policy lives in pysandbox/.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sandbox.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

static double timeval_seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/*
 * set_item: dict[key] = value, stealing the reference to value (which may be
 * NULL after a failed constructor).  Needs the GIL.  Returns 0 or -1.
 */
static int set_item(PyObject *dict, const char *key, PyObject *value)
{
    int rc;
    if (value == NULL)
        return -1;
    rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

/*
 * is_ascii_space: the ASCII characters str.strip() removes.  In UTF-8 these
 * bytes never occur inside a multi-byte sequence.
 */
static int is_ascii_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

/* Captures at least this large are copied into pages advised for huge pages. */
#define HUGE_COPY_MIN (4 * 1024 * 1024)
#define HUGE_PAGE_SIZE (2 * 1024 * 1024)
/* Text is copied and checked for ASCII this much at a time, while it is in cache. */
#define ASCII_CHUNK (256 * 1024)

/*
 * advise_huge: before the first touch of n bytes at dest, the memory of a
 * new object, advise its whole huge pages as such.  For a large object
 * malloc maps fresh pages, and the copy into them costs one page fault and
 * clear per 2 MiB instead of per 4 KiB.  A hint about pages the object
 * owns: it changes no byte, and where the kernel has no transparent huge
 * pages (or the range is not mapped that way) it fails harmlessly.
 */
static void advise_huge(char *dest, size_t n)
{
#ifdef MADV_HUGEPAGE
    uintptr_t first = ((uintptr_t)dest + HUGE_PAGE_SIZE - 1) & ~(uintptr_t)(HUGE_PAGE_SIZE - 1);
    uintptr_t last = ((uintptr_t)dest + n) & ~(uintptr_t)(HUGE_PAGE_SIZE - 1);
    if (n >= HUGE_COPY_MIN && last > first)
        madvise((void *)first, last - first, MADV_HUGEPAGE);
#else
    (void)dest;
    (void)n;
#endif
}

/*
 * bytes_object: n bytes at data as a new bytes object, copied once into it.
 * Needs the GIL; returns a new reference or NULL with an exception set.
 */
static PyObject *bytes_object(const char *data, size_t n)
{
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (bytes != NULL && n > 0) {
        advise_huge(PyBytes_AS_STRING(bytes), n);
        memcpy(PyBytes_AS_STRING(bytes), data, n);
    }
    return bytes;
}

/* is_ascii: whether no byte of the n at p has its high bit set. */
static int is_ascii(const char *p, size_t n)
{
    uint64_t seen = 0, word;
    size_t i = 0;
    for (; i + sizeof word <= n; i += sizeof word) {
        memcpy(&word, p + i, sizeof word);
        seen |= word;
    }
    for (; i < n; i++)
        seen |= (unsigned char)p[i];
    return (seen & 0x8080808080808080ULL) == 0;
}

/*
 * ascii_object: n bytes at data as a new str when they are all ASCII (then
 * equal to their UTF-8 decoding), copied once into it a chunk at a time,
 * each chunk checked while it is in cache.  Returns a new reference, NULL
 * with an exception set, or NULL with none when a byte is not ASCII (the
 * caller decodes instead).  Needs the GIL.
 */
static PyObject *ascii_object(const char *data, size_t n)
{
    PyObject *str = PyUnicode_New((Py_ssize_t)n, 127);
    char *dest;
    size_t done;
    if (str == NULL)
        return NULL;
    dest = (char *)PyUnicode_1BYTE_DATA(str);
    advise_huge(dest, n);
    for (done = 0; done < n; done += ASCII_CHUNK) {
        size_t chunk = n - done < ASCII_CHUNK ? n - done : ASCII_CHUNK;
        memcpy(dest + done, data + done, chunk);
        if (!is_ascii(dest + done, chunk)) {
            Py_DECREF(str);
            return NULL;
        }
    }
    return str;
}

/*
 * output_object: a captured stream as bytes, or with text as str decoded
 * from UTF-8 with the ASCII white space at both ends left out (None when the
 * bytes are not UTF-8).  Either way the bytes are copied once, straight from
 * the capture buffer into the final object (a large ASCII text without the
 * decoder, which cannot be told to advise huge pages), and nothing is left
 * for str.strip() to copy in the common case; Python still calls
 * str.strip() for the non-ASCII white space, so the result is exactly
 * bytes.decode().strip().  Needs the GIL; returns a new reference or NULL
 * with an exception set.
 */
static PyObject *output_object(const struct sbx_buffer *buf, int text)
{
    const char *start = buf->data, *end = buf->data + buf->len;
    PyObject *decoded;
    if (!text)
        return bytes_object(buf->data, buf->len);
    while (start < end && is_ascii_space(*start))
        start++;
    while (end > start && is_ascii_space(end[-1]))
        end--;
    if ((size_t)(end - start) >= HUGE_COPY_MIN) {
        decoded = ascii_object(start, (size_t)(end - start));
        if (decoded != NULL || PyErr_Occurred())
            return decoded;
    }
    decoded = PyUnicode_DecodeUTF8(start, end - start, "strict");
    if (decoded == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return decoded;
}

/*
 * build_result: the outcome as a dict of facts.  Needs the GIL.  Returns a
 * new reference or NULL with an exception set.  Does not free the outcome.
 */
static PyObject *build_result(const struct sbx_outcome *o, size_t n_captures, int text,
                              int cancelled, int joined_at_clone)
{
    PyObject *d = PyDict_New(), *captures = PyList_New((Py_ssize_t)n_captures),
             *truncated = PyList_New((Py_ssize_t)n_captures);
    size_t i;
    if (d == NULL || captures == NULL || truncated == NULL)
        goto fail;
    for (i = 0; i < n_captures; i++) {
        PyObject *data = bytes_object(o->captures[i].data, o->captures[i].len);
        if (data == NULL)
            goto fail;
        PyList_SET_ITEM(captures, (Py_ssize_t)i, data);
        PyList_SET_ITEM(truncated, (Py_ssize_t)i, PyBool_FromLong(o->captures_truncated[i]));
    }
    /* set_item steals its value even when it fails: one at a time, so the
     * other list is still ours to release. */
    if (set_item(d, "captures", captures)) {
        captures = NULL;
        goto fail;
    }
    captures = NULL;
    if (set_item(d, "captures_truncated", truncated)) {
        truncated = NULL;
        goto fail;
    }
    truncated = NULL;
    if (set_item(d, "status_known", PyBool_FromLong(o->status_known)) ||
        set_item(d, "wait_status", PyLong_FromLong(o->wait_status)) ||
        set_item(d, "stdout", output_object(&o->out, text)) ||
        set_item(d, "stderr", output_object(&o->err, text)) ||
        set_item(d, "cpu_exceeded", PyBool_FromLong(o->cpu_exceeded)) ||
        set_item(d, "tree_cpu_time", PyFloat_FromDouble(o->tree_cpu_time)) ||
        set_item(d, "cancelled", PyBool_FromLong(cancelled)) ||
        set_item(d, "cgroup_joined_at_clone", PyBool_FromLong(joined_at_clone)) ||
        set_item(d, "timed_out", PyBool_FromLong(o->timed_out)) ||
        set_item(d, "stdout_truncated", PyBool_FromLong(o->stdout_truncated)) ||
        set_item(d, "stderr_truncated", PyBool_FromLong(o->stderr_truncated)) ||
        set_item(d, "killed_on_cap", PyBool_FromLong(o->killed_on_cap)) ||
        set_item(d, "wall_time", PyFloat_FromDouble(o->wall_time)) ||
        set_item(d, "user_time", PyFloat_FromDouble(timeval_seconds(o->usage.ru_utime))) ||
        set_item(d, "system_time", PyFloat_FromDouble(timeval_seconds(o->usage.ru_stime))) ||
        set_item(d, "max_rss", PyLong_FromLongLong((long long)o->usage.ru_maxrss * 1024LL)))
        goto fail;
    return d;

fail:
    Py_XDECREF(d);
    Py_XDECREF(captures);
    Py_XDECREF(truncated);
    return NULL;
}

PyDoc_STRVAR(run_doc,
             "run($module, /, argv, env, *, rlimits=(), pass_fds=(), captures=(), stdin=b'',\n"
             "    stdin_callback=None, on_stdout=None, on_stderr=None,\n"
             "    stdout_cap=sys.maxsize, stderr_cap=sys.maxsize,\n"
             "    kill_on_cap=False, timeout, cpu_limit=0.0, cancel=None, text=False,\n"
             "    cgroup_procs=(), cgroup_cpu_fd=-1, cgroup_dir_fd=-1)\n"
             "--\n\n"
             "Spawn argv[0] (an absolute path) with argv and env, apply rlimits in the\n"
             "child, map pass_fds to fds 3, 4, ... and close every other fd.  Each cap in\n"
             "captures adds a pipe whose write end comes next (3 + len(pass_fds) + i) and\n"
             "whose contents, up to the cap, come back in 'captures'.  Feed stdin,\n"
             "capture stdout/stderr up to their caps, kill after `timeout` seconds, or\n"
             "once the whole process tree has used cpu_limit CPU seconds (if > 0), or\n"
             "once cancel.is_set() (checked every tick; the result then says\n"
             "'cancelled').  Without stdin_callback, stdin is closed once written;\n"
             "with it, stdin_callback(chunk) is called with each chunk of stdout while\n"
             "stdin is open and returns bytes to write or None to close stdin.\n"
             "on_stdout(chunk) and on_stderr(chunk) see every byte kept of their\n"
             "stream, in order, as it is read (their results are ignored).  While a\n"
             "callback runs, a watchdog thread still kills the child at `timeout` or\n"
             "past cpu_limit; the call returns once the callback has.  An\n"
             "exception in a callback kills and reaps the child and propagates.  With\n"
             "text, stdout and stderr are str decoded from UTF-8 without the ASCII white\n"
             "space at their ends, or None where they are not UTF-8.  The child writes\n"
             "\"0\" to each fd of cgroup_procs (cgroup.procs files) before the exec.\n"
             "cgroup_cpu_fd, when >= 0, is a readable fd of the sandbox's cgroup CPU\n"
             "counter (v1 cpuacct.usage or v2 cpu.stat): the CPU watcher then also\n"
             "counts every task that ever ran in the group.  cgroup_dir_fd, when >= 0,\n"
             "is an fd of a cgroup v2 group's directory: the child is created in it by\n"
             "clone3(CLONE_INTO_CGROUP), or where the kernel or a seccomp filter refuses\n"
             "that call, joins it through its cgroup.procs before the exec; the result\n"
             "says which in 'cgroup_joined_at_clone'.\n"
             "Returns a dict of\n"
             "facts; raises OSError if the child could not be started.");

/*
 * sandbox_run: see run_doc.  Called with the GIL; releases it for the spawn
 * and the loop.  Every fd, the child and all memory are released on every
 * path; an exception from a hook (KeyboardInterrupt, the callback's own)
 * propagates after the child is killed and reaped.
 */
static PyObject *sandbox_run(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"argv",         "env",           "rlimits",        "pass_fds",
                               "captures",     "stdin",         "stdin_callback", "on_stdout",
                               "on_stderr",    "stdout_cap",    "stderr_cap",     "kill_on_cap",
                               "timeout",      "cpu_limit",     "cancel",         "text",
                               "cgroup_procs", "cgroup_cpu_fd", "cgroup_dir_fd",  NULL};
    PyObject *argv_obj, *env_obj, *rlimits_obj = NULL, *fds_obj = NULL;
    PyObject *stdin_callback = Py_None, *on_stdout = Py_None, *on_stderr = Py_None;
    PyObject *captures_obj = NULL, *cancel = Py_None, *cgroups_obj = NULL;
    int cgroup_fds[SBX_MAX_CGROUPS];
    Py_buffer stdin_view = {0};
    Py_ssize_t stdout_cap = PY_SSIZE_T_MAX, stderr_cap = PY_SSIZE_T_MAX, n;
    int kill_on_cap = 0, text = 0, pump_rc, spawn_rc, cgroup_cpu_fd = -1, cgroup_dir_fd = -1;
    double timeout = -1.0, cpu_limit = 0.0, started;
    PyObject *keep = NULL, *result = NULL;
    char **argv = NULL, **envp = NULL;
    struct sbx_rlimit rlimits[SBX_MAX_RLIMITS];
    int pass_fds[SBX_MAX_PASS_FDS];
    struct sbx_spec spec;
    struct sbx_child child;
    struct sbx_spawn_error spawn_error;
    struct sbx_input input;
    struct sbx_outcome outcome;
    struct sbx_pump_config config;
    struct call_ctx ctx;

    (void)module;
    memset(&spec, 0, sizeof spec);
    memset(&input, 0, sizeof input);
    memset(&outcome, 0, sizeof outcome);
    memset(&config, 0, sizeof config);
    memset(&ctx, 0, sizeof ctx);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOy*OOOnnpddOpOii:run", keywords,
                                     &argv_obj, &env_obj, &rlimits_obj, &fds_obj, &captures_obj,
                                     &stdin_view, &stdin_callback, &on_stdout, &on_stderr,
                                     &stdout_cap, &stderr_cap, &kill_on_cap, &timeout, &cpu_limit,
                                     &cancel, &text, &cgroups_obj, &cgroup_cpu_fd, &cgroup_dir_fd))
        return NULL;
    if (stdout_cap < 0 || stderr_cap < 0 || !(timeout > 0) || !isfinite(timeout) ||
        !(cpu_limit >= 0) || !isfinite(cpu_limit)) {
        PyErr_SetString(PyExc_ValueError,
                        "caps must be >= 0, timeout finite and > 0, cpu_limit finite and >= 0");
        goto cleanup;
    }
    if (check_callback(stdin_callback, "stdin_callback") ||
        check_callback(on_stdout, "on_stdout") || check_callback(on_stderr, "on_stderr"))
        goto cleanup;
    if (captures_obj != NULL) {
        if ((n = parse_caps(captures_obj, config.capture_caps)) < 0)
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
    if (stdin_view.buf != NULL &&
        sbx_buffer_append(&input.pending, stdin_view.buf, (size_t)stdin_view.len) != 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    input.close_when_done = stdin_callback == Py_None;

    spec.path = argv[0];
    spec.argv = argv;
    spec.envp = envp;
    spec.close_fds_above = fallback_fd_limit();
    spec.cgroup_dir_fd = cgroup_dir_fd;
    config.stdout_cap = (size_t)stdout_cap;
    config.stderr_cap = (size_t)stderr_cap;
    config.kill_on_cap = kill_on_cap;
    config.timeout_sec = timeout;
    config.cpu_limit = cpu_limit;
    config.cgroup_cpu_fd = cgroup_cpu_fd;
    config.hooks.tick = tick_hook;
    config.hooks.on_stdout = stdin_callback == Py_None && on_stdout == Py_None ? NULL : stdout_hook;
    config.hooks.on_stderr = on_stderr == Py_None ? NULL : stderr_hook;
    config.hooks.ctx = &ctx;
    ctx.stdin_callback = stdin_callback == Py_None ? NULL : stdin_callback;
    ctx.on_stdout = on_stdout == Py_None ? NULL : on_stdout;
    ctx.on_stderr = on_stderr == Py_None ? NULL : on_stderr;
    ctx.cancel = cancel == Py_None ? NULL : cancel;

    ctx.tstate = PyEval_SaveThread();
    started = sbx_monotonic();
    spawn_rc = sbx_spawn(&spec, &child, &spawn_error);
    pump_rc = spawn_rc == 0 ? sbx_pump(&child, &input, &config, &outcome, started) : 0;
    PyEval_RestoreThread(ctx.tstate);

    if (spawn_rc != 0)
        raise_spawn_error(&spawn_error, spec.path);
    else if (pump_rc == SBX_PUMP_FAILED)
        PyErr_SetFromErrno(PyExc_OSError);
    else if (pump_rc == SBX_PUMP_DONE || (pump_rc == SBX_PUMP_ABORTED && ctx.cancelled))
        result = build_result(&outcome, spec.n_captures, text, ctx.cancelled,
                              child.cgroup_joined_at_clone);
    /* Otherwise SBX_PUMP_ABORTED: a hook left its exception set. */

cleanup:
    sbx_buffer_free(&outcome.out);
    sbx_buffer_free(&outcome.err);
    for (size_t i = 0; i < SBX_MAX_CAPTURES; i++)
        sbx_buffer_free(&outcome.captures[i]);
    sbx_buffer_free(&input.pending);
    PyMem_Free(argv);
    PyMem_Free(envp);
    Py_XDECREF(keep);
    if (stdin_view.buf != NULL)
        PyBuffer_Release(&stdin_view);
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

static PyMethodDef sandbox_methods[] = {
    {"run", (PyCFunction)(void (*)(void))sandbox_run, METH_VARARGS | METH_KEYWORDS, run_doc},
    {"seccomp_program", sandbox_seccomp_program, METH_NOARGS, seccomp_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot sandbox_slots[] = {
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
