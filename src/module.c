/* SPDX-License-Identifier: MIT */
/*
 * module.c: the Python face of the C core, module pysandbox._sandbox.
 *
 * One of the few files that include Python.h (tests/test_packaging.py names
 * them): the module's functions (start, run, seccomp_program, landlock_abi,
 * unix_gc_pass) and its multi-phase init.  start() converts its arguments to
 * the plain C spec (args.c), releases the GIL around sbx_spawn and hands the
 * child to a Sandbox (sandbox_type.c), whose pump() runs the loop with the
 * hooks of hooks.c and has output.c turn the outcome into a dict of facts.
 * Policy lives in pysandbox/.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "args.h"
#include "copy.h"
#include "landlock.h"
#include "output.h"
#include "sandbox.h"
#include "sandbox_type.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * raise_spawn_error: OSError(errno, "<stage>: <strerror>", path) with the
 * stage as its `stage` attribute.  The errno picks the OSError subclass
 * (FileNotFoundError for ENOENT...).  Needs the GIL; returns NULL.
 */
static PyObject *raise_spawn_error(const struct sbx_spawn_error *error, const char *path)
{
    PyObject *exc =
        PyObject_CallFunction(PyExc_OSError, "iss", error->err, strerror(error->err), path);
    PyObject *note;
    int rc;
    if (exc == NULL)
        return NULL;
    note = PyUnicode_FromFormat("%s: %s", sbx_stage_name(error->stage), strerror(error->err));
    rc = note == NULL ? -1 : PyObject_SetAttrString(exc, "strerror", note);
    Py_XDECREF(note);
    if (rc != 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return sbx_raise_at_stage(exc, error->stage);
}

PyDoc_STRVAR(start_doc,
             "start($module, /, argv, env, *, rlimits=(), pass_fds=(), captures=(),\n"
             "      cgroup_procs=(), cgroup_dir_fd=-1, init_pidfd_at=-1)\n"
             "--\n\n"
             "Spawn argv[0] (an absolute path) with argv and env, apply rlimits in the\n"
             "child, map pass_fds to fds 3, 4, ... and close every other fd.  Each cap in\n"
             "captures adds a pipe whose write end comes next (3 + len(pass_fds) + i) and\n"
             "whose contents, up to the cap, come back in the facts' 'captures'.  The\n"
             "child writes \"0\" to each fd of cgroup_procs (cgroup.procs files) before\n"
             "the exec.  cgroup_dir_fd, when >= 0, is an fd of a cgroup v2 group's\n"
             "directory: the child is created in it by clone3(CLONE_INTO_CGROUP), or\n"
             "where the kernel or a seccomp filter refuses that call, joins it through\n"
             "its cgroup.procs before the exec.  init_pidfd_at, when >= 0, is where the\n"
             "child (a template's copy client) keeps a pidfd of the sandbox's init, which\n"
             "is pinned from there rather than as the child's child.\n"
             "Returns a Sandbox, whose pump() runs it\n"
             "to its end; nothing of it is read until then.  Raises OSError if the\n"
             "child could not be started.");

/*
 * sandbox_start: see start_doc.  Called with the GIL; releases it for the
 * spawn.  On failure nothing is left: no fd, no child, no memory.
 */
static PyObject *sandbox_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *sandbox = NULL;
    struct sbx_start_args a;
    struct sbx_child child;
    struct sbx_spawn_error spawn_error;
    int spawn_rc;

    if (sbx_start_args_parse(&a, args, kwargs) != 0)
        goto cleanup;
    /* The object first: once bwrap runs, nothing may fail before it owns it. */
    sandbox = sbx_sandbox_new(module);
    if (sandbox == NULL)
        goto cleanup;

    Py_BEGIN_ALLOW_THREADS
    spawn_rc = sbx_spawn(&a.spec, &child, &spawn_error);
    Py_END_ALLOW_THREADS
    if (spawn_rc != 0) {
        raise_spawn_error(&spawn_error, a.spec.path);
        Py_CLEAR(sandbox);
        goto cleanup;
    }
    sbx_sandbox_adopt(sandbox, &child, a.spec.n_captures, a.capture_caps);

cleanup:
    sbx_start_args_release(&a);
    return sandbox;
}

/* The keywords of pump() that run() does not take: it starts the clock at the spawn,
 * and reaps what it started before it returns. */
static const char *const pump_only_keywords[] = {"since", "release_fd", "end_at_report",
                                                 "end_after_stream", NULL};

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

PyDoc_STRVAR(seccomp_doc, "seccomp_program($module, /, *, template=False)\n--\n\n"
                          "The BPF program of the sandbox's syscall filter, for bwrap's\n"
                          "--seccomp; with template, the filter of a template's interpreter,\n"
                          "which may also make the namespaces and mounts of its copies.\n"
                          "Raises OSError if libseccomp cannot build it.");

/*
 * sandbox_seccomp_program: see seccomp_doc.  Called with the GIL; builds
 * the filter without it.
 */
static PyObject *sandbox_seccomp_program(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"template", NULL};
    char *program;
    size_t length;
    int rc, template = 0;
    PyObject *result;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p:seccomp_program", keywords, &template))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc =
        sbx_seccomp_program(template ? SBX_FILTER_TEMPLATE : SBX_FILTER_SANDBOX, &program, &length);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        errno = -rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    result = PyBytes_FromStringAndSize(program, (Py_ssize_t)length);
    free(program);
    return result;
}

PyDoc_STRVAR(user_namespace_doc,
             "user_namespace($module, uid_map, gid_map, /)\n--\n\n"
             "A new user namespace with these maps (the text of /proc/PID/uid_map and\n"
             "gid_map; setgroups denied), as an fd (for the copy client's --template).\n"
             "Only a\n"
             "caller that may write such maps (root) can make one.  Raises OSError.");

/*
 * sandbox_user_namespace: see user_namespace_doc.  Called with the GIL;
 * releases it while the helper process makes the namespace.
 */
static PyObject *sandbox_user_namespace(PyObject *module, PyObject *args)
{
    const char *uid_map, *gid_map;
    int rc, fd;
    (void)module;
    if (!PyArg_ParseTuple(args, "ss:user_namespace", &uid_map, &gid_map))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = sbx_user_namespace(uid_map, gid_map, &fd);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(fd);
}

PyDoc_STRVAR(serve_copies_doc,
             "serve_copies($module, control_fd, /)\n--\n\n"
             "Serve a template's copies (src/copy.c), in the template's interpreter:\n"
             "for each request of a copy client on control_fd, fork a copy.  Returns\n"
             "True in a copy's program, confined and supervised by its own init, its\n"
             "fds in place; False once the host closed control_fd.  Raises OSError.");

/* The GIL released around serve_copies' waits (struct sbx_copy_hooks). */
struct serve_state {
    PyThreadState *saved;
};

static void serve_release(void *state)
{
    ((struct serve_state *)state)->saved = PyEval_SaveThread();
}

static void serve_acquire(void *state)
{
    PyEval_RestoreThread(((struct serve_state *)state)->saved);
}

static void serve_before_fork(void *state)
{
    (void)state;
    PyOS_BeforeFork();
}

static void serve_after_fork_parent(void *state)
{
    (void)state;
    PyOS_AfterFork_Parent();
}

static void serve_after_fork_child(void *state)
{
    (void)state;
    PyOS_AfterFork_Child();
}

/*
 * sandbox_serve_copies: see serve_copies_doc.  Called with the GIL, which
 * sbx_copy_serve releases around each wait; forks with Python's fork hooks
 * (the copy's program runs Python again).
 */
static PyObject *sandbox_serve_copies(PyObject *module, PyObject *arg)
{
    struct serve_state state = {NULL};
    struct sbx_copy_hooks hooks = {&state,
                                   serve_release,
                                   serve_acquire,
                                   serve_before_fork,
                                   serve_after_fork_parent,
                                   serve_after_fork_child};
    struct sbx_copy_request *request;
    long control = PyLong_AsLong(arg);
    int rc;
    (void)module;
    if (control == -1 && PyErr_Occurred())
        return NULL;
    request = PyMem_RawMalloc(sizeof *request);
    if (request == NULL)
        return PyErr_NoMemory();
    rc = sbx_copy_serve((int)control, request, &hooks);
    PyMem_RawFree(request);
    if (rc < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(rc);
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
    {"user_namespace", sandbox_user_namespace, METH_VARARGS, user_namespace_doc},
    {"serve_copies", sandbox_serve_copies, METH_O, serve_copies_doc},
    {"seccomp_program", (PyCFunction)(void (*)(void))sandbox_seccomp_program,
     METH_VARARGS | METH_KEYWORDS, seccomp_doc},
    {"landlock_abi", sandbox_landlock_abi, METH_NOARGS, landlock_doc},
    {"unix_gc_pass", sandbox_unix_gc_pass, METH_NOARGS, unix_gc_pass_doc},
    {NULL, NULL, 0, NULL},
};

/*
 * sandbox_exec: add the STAGE_* constants (one per enum sbx_stage value,
 * the `stage` of the OSErrors start(), run() and pump() raise) and the
 * Sandbox type to the module (one per interpreter).
 * Called with the GIL at import.  Returns 0 or -1 with an exception set.
 */
static int sandbox_exec(PyObject *module)
{
    static const struct {
        const char *name;
        int value;
    } stages[] = {
#define STAGE_CONSTANT(name, words) {"STAGE_" #name, SBX_STAGE_##name},
        SBX_STAGES(STAGE_CONSTANT)
#undef STAGE_CONSTANT
    };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        if (PyModule_AddIntConstant(module, stages[i].name, stages[i].value) != 0)
            return -1;
    }
    return sbx_sandbox_type_add(module);
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
