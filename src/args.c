/* SPDX-License-Identifier: MIT */
/*
 * args.c: the arguments of start() and pump() converted to plain C: argv
 * and env as C strings, the rlimits, fds and caps as arrays, every value
 * checked before anything is spawned or run (TypeError, ValueError).
 * Includes Python.h: every function here needs the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "args.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#define MAX_FALLBACK_FD (1 << 20)

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
 * convert_start_arrays: the sequences of start()'s arguments into a's
 * arrays and spec, in the order start() always checked them.  Returns 0, or
 * -1 with an exception set.
 */
static int convert_start_arrays(struct sbx_start_args *a, PyObject *argv_obj, PyObject *env_obj,
                                PyObject *rlimits_obj, PyObject *fds_obj, PyObject *captures_obj,
                                PyObject *cgroups_obj)
{
    Py_ssize_t n;
    if (captures_obj != NULL) {
        if ((n = parse_caps(captures_obj, a->capture_caps)) < 0)
            return -1;
        a->spec.n_captures = (size_t)n;
    }
    a->keep = PyList_New(0);
    if (a->keep == NULL)
        return -1;
    a->argv = to_cstring_array(argv_obj, "argv", a->keep);
    if (a->argv == NULL)
        return -1;
    if (a->argv[0] == NULL || a->argv[0][0] != '/') {
        PyErr_SetString(PyExc_ValueError, "argv[0] must be an absolute path");
        return -1;
    }
    a->envp = to_cstring_array(env_obj, "env", a->keep);
    if (a->envp == NULL)
        return -1;
    if (rlimits_obj != NULL) {
        if ((n = parse_rlimits(rlimits_obj, a->rlimits)) < 0)
            return -1;
        a->spec.rlimits = a->rlimits;
        a->spec.n_rlimits = (size_t)n;
    }
    if (fds_obj != NULL) {
        if ((n = parse_fds(fds_obj, a->pass_fds, SBX_MAX_PASS_FDS, "pass_fds")) < 0)
            return -1;
        a->spec.pass_fds = a->pass_fds;
        a->spec.n_pass_fds = (size_t)n;
    }
    if (cgroups_obj != NULL) {
        if ((n = parse_fds(cgroups_obj, a->cgroup_fds, SBX_MAX_CGROUPS, "cgroup_procs")) < 0)
            return -1;
        a->spec.cgroup_fds = a->cgroup_fds;
        a->spec.n_cgroup_fds = (size_t)n;
    }
    return 0;
}

/*
 * sbx_start_args_parse: start(argv, env, *, rlimits, pass_fds, captures,
 * cgroup_procs, cgroup_dir_fd, init_pidfd_at) into *a, whose spec is then ready for
 * sbx_spawn.  Returns 0, or -1 with an exception set; either way the caller
 * releases *a with sbx_start_args_release.
 */
int sbx_start_args_parse(struct sbx_start_args *a, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"argv",          "env",           "rlimits",
                               "pass_fds",      "captures",      "cgroup_procs",
                               "cgroup_dir_fd", "init_pidfd_at", NULL};
    PyObject *argv_obj, *env_obj, *rlimits_obj = NULL, *fds_obj = NULL, *captures_obj = NULL;
    PyObject *cgroups_obj = NULL;
    int cgroup_dir_fd = -1, init_pidfd_at = -1;

    memset(a, 0, sizeof *a);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOOii:start", keywords, &argv_obj,
                                     &env_obj, &rlimits_obj, &fds_obj, &captures_obj, &cgroups_obj,
                                     &cgroup_dir_fd, &init_pidfd_at))
        return -1;
    if (convert_start_arrays(a, argv_obj, env_obj, rlimits_obj, fds_obj, captures_obj,
                             cgroups_obj) != 0)
        return -1;
    a->spec.path = a->argv[0];
    a->spec.argv = a->argv;
    a->spec.envp = a->envp;
    a->spec.close_fds_above = fallback_fd_limit();
    a->spec.cgroup_dir_fd = cgroup_dir_fd;
    a->spec.init_pidfd_at = init_pidfd_at;
    return 0;
}

/* sbx_start_args_release: free what sbx_start_args_parse converted.  GIL. */
void sbx_start_args_release(struct sbx_start_args *a)
{
    PyMem_Free(a->argv);
    PyMem_Free(a->envp);
    Py_CLEAR(a->keep);
    a->argv = a->envp = NULL;
}

/*
 * absolute_paths: whether `paths` is one or more absolute paths separated by
 * ':' (disk_dir: each a tmpfs whose inodes count, see disk.c).
 */
static int absolute_paths(const char *paths)
{
    if (paths == NULL || paths[0] != '/')
        return 0;
    for (paths = strchr(paths, ':'); paths != NULL; paths = strchr(paths + 1, ':'))
        if (paths[1] != '/')
            return 0;
    return 1;
}

/*
 * sbx_pump_args_parse: pump()'s keywords into *a, checked: caps >= 0, a
 * finite timeout > 0, a finite cpu_limit >= 0, a finite since, disk_inodes
 * >= 0 with a disk_dir of absolute paths (':' between them), end_at_report -1 or a capture's index
 * (end_after_stream too, and only with it),
 * callbacks callable or None (ValueError,
 * TypeError).  Returns 0, or -1 with an exception set and nothing held.
 */
int sbx_pump_args_parse(struct sbx_pump_args *a, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"stdin",         "stdin_callback",   "on_stdout",   "on_stderr",
                               "stdout_cap",    "stderr_cap",       "kill_on_cap", "timeout",
                               "cpu_limit",     "cancel",           "text",        "cgroup_cpu_fd",
                               "since",         "release_fd",       "disk_inodes", "disk_dir",
                               "end_at_report", "end_after_stream", NULL};
    PyObject *stdin_callback = Py_None, *on_stdout = Py_None, *on_stderr = Py_None;
    PyObject *cancel = Py_None;
    Py_ssize_t stdout_cap = PY_SSIZE_T_MAX, stderr_cap = PY_SSIZE_T_MAX;
    struct sbx_pump_config *c = &a->config;

    memset(a, 0, sizeof *a);
    c->timeout_sec = -1.0;
    c->cgroup_cpu_fd = -1;
    c->end_at_report = -1;
    c->end_after_stream = -1;
    a->release_fd = -1;
    a->since = -1.0;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "|$y*OOOnnpddOpidiLzii:pump", keywords, &a->stdin_view, &stdin_callback,
            &on_stdout, &on_stderr, &stdout_cap, &stderr_cap, &c->kill_on_cap, &c->timeout_sec,
            &c->cpu_limit, &cancel, &a->text, &c->cgroup_cpu_fd, &a->since, &a->release_fd,
            &c->disk_inodes, &c->disk_dir, &c->end_at_report, &c->end_after_stream))
        return -1;
    if (stdout_cap < 0 || stderr_cap < 0 || !(c->timeout_sec > 0) || !isfinite(c->timeout_sec) ||
        !(c->cpu_limit >= 0) || !isfinite(c->cpu_limit) || !isfinite(a->since) ||
        c->disk_inodes < 0 || (c->disk_inodes > 0 && !absolute_paths(c->disk_dir)) ||
        c->end_at_report < -1 || c->end_at_report >= SBX_MAX_CAPTURES || c->end_after_stream < -1 ||
        c->end_after_stream >= SBX_MAX_CAPTURES ||
        (c->end_after_stream >= 0 && c->end_at_report < 0)) {
        PyErr_SetString(PyExc_ValueError, "caps must be >= 0, timeout finite and > 0, "
                                          "cpu_limit finite and >= 0, since finite, "
                                          "disk_inodes >= 0 and with absolute disk_dir paths, "
                                          "end_at_report a capture or -1, "
                                          "end_after_stream -1 or a capture with it");
        sbx_pump_args_release(a);
        return -1;
    }
    if (check_callback(stdin_callback, "stdin_callback") ||
        check_callback(on_stdout, "on_stdout") || check_callback(on_stderr, "on_stderr")) {
        sbx_pump_args_release(a);
        return -1;
    }
    c->stdout_cap = (size_t)stdout_cap;
    c->stderr_cap = (size_t)stderr_cap;
    a->stdin_callback = stdin_callback == Py_None ? NULL : stdin_callback;
    a->on_stdout = on_stdout == Py_None ? NULL : on_stdout;
    a->on_stderr = on_stderr == Py_None ? NULL : on_stderr;
    a->cancel = cancel == Py_None ? NULL : cancel;
    return 0;
}

/* sbx_pump_args_release: let go of the stdin buffer.  GIL. */
void sbx_pump_args_release(struct sbx_pump_args *a)
{
    if (a->stdin_view.buf != NULL)
        PyBuffer_Release(&a->stdin_view);
    a->stdin_view.buf = NULL;
}
