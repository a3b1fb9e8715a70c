/* SPDX-License-Identifier: MIT */
/*
 * sandbox_type.c: the Sandbox type, a started bwrap process until pump()
 * runs it to its end or kill() (or the object's release) ends it.  Includes
 * Python.h: every function here is called with the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "args.h"
#include "hooks.h"
#include "output.h"
#include "sandbox.h"
#include "sandbox_type.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* Where a Sandbox is in its single life; zeroed memory reads as ended.
 * REPORTED: run to its init's report (end_at_report), bwrap still to be
 * killed and reaped by kill() or the object's release. */
enum { SANDBOX_ENDED = 0, SANDBOX_STARTED, SANDBOX_PUMPING, SANDBOX_REPORTED };

/*
 * A started bwrap process and the parent's ends of its pipes, until pump()
 * runs it to its end or kill() (or the object's release) ends it.  state is
 * read and written with the GIL held only.
 */
typedef struct {
    PyObject_HEAD struct sbx_child child;
    pid_t owner; /* the process that started it: a fork's copy is not the sandbox's */
    size_t n_captures;
    size_t capture_caps[SBX_MAX_CAPTURES];
    int state;
} SandboxObject;

/*
 * sbx_sandbox_new: a Sandbox of module's type that owns nothing yet (it
 * reads as ended), made before the spawn so that nothing can fail once
 * bwrap runs.  Returns a new reference or NULL with an exception set.
 */
PyObject *sbx_sandbox_new(PyObject *module)
{
    PyObject *type = PyObject_GetAttrString(module, "Sandbox");
    SandboxObject *sandbox;
    if (type == NULL)
        return NULL;
    sandbox = PyObject_New(SandboxObject, (PyTypeObject *)type);
    Py_DECREF(type);
    if (sandbox == NULL)
        return NULL;
    sandbox->state = SANDBOX_ENDED;
    sandbox->child.pid = -1;
    sandbox->child.init_pidfd = -1;
    sandbox->child.init_pidfd_at = -1;
    sandbox->child.unix_list_fd = -1;
    return (PyObject *)sandbox;
}

/*
 * sbx_sandbox_adopt: hand a new Sandbox (from sbx_sandbox_new) the child
 * sbx_spawn started and the caps of its n_captures captures; it owns the
 * child from here on.  Cannot fail.
 */
void sbx_sandbox_adopt(PyObject *obj, const struct sbx_child *child, size_t n_captures,
                       const size_t *capture_caps)
{
    SandboxObject *sandbox = (SandboxObject *)obj;
    sandbox->child = *child;
    sandbox->owner = getpid();
    sandbox->n_captures = n_captures;
    memcpy(sandbox->capture_caps, capture_caps, sizeof sandbox->capture_caps);
    sandbox->state = SANDBOX_STARTED;
}

/*
 * end_child: kill the sandbox, reap bwrap and close the parent's fds,
 * without the GIL (the kill waits for bwrap to exit).  In a process forked
 * from the one that started it, only the fds (its copies) are closed: the
 * sandbox is the other process's.  Called with the GIL by the thread that
 * moved state away from SANDBOX_STARTED, so no other thread touches the
 * child meanwhile.
 */
static void end_child(SandboxObject *self)
{
    int wait_status;
    struct rusage usage;
    Py_BEGIN_ALLOW_THREADS
    if (getpid() == self->owner)
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

/*
 * run_to_end: start the clock (a->since, unless given), release a warm
 * sandbox's waiter (one byte written to a->release_fd, the write end of the
 * pipe it reads) and pump the sandbox to its end; when the byte cannot be
 * written, kill and reap it instead, with *release_errno set.  Called
 * WITHOUT the GIL by the thread that claimed the sandbox.  Returns SBX_PUMP_*.
 */
static int run_to_end(SandboxObject *self, struct sbx_input *input, struct sbx_pump_args *a,
                      struct sbx_outcome *outcome, int *release_errno)
{
    if (a->since < 0)
        a->since = sbx_monotonic();
    if (a->release_fd >= 0 && write(a->release_fd, "g", 1) != 1) {
        *release_errno = errno != 0 ? errno : EIO;
        sbx_kill_and_reap(&self->child, &outcome->wait_status, &outcome->usage);
        sbx_child_close_fds(&self->child);
        return SBX_PUMP_FAILED;
    }
    return sbx_pump(&self->child, input, &a->config, outcome, a->since);
}

/*
 * raise_release_error: OSError("releasing the warm sandbox's waiter: <strerror>")
 * (no errno: only the words, as ever) with its stage, SBX_STAGE_RELEASE.
 * Needs the GIL.
 */
static void raise_release_error(int err)
{
    PyObject *message =
        PyUnicode_FromFormat("%s: %s", sbx_stage_name(SBX_STAGE_RELEASE), strerror(err));
    PyObject *exc = message == NULL ? NULL : PyObject_CallOneArg(PyExc_OSError, message);
    Py_XDECREF(message);
    sbx_raise_at_stage(exc, SBX_STAGE_RELEASE);
}

/*
 * free_buffers: release the outcome's buffers and the pending stdin, all
 * owned by Sandbox_pump's frame.
 */
static void free_buffers(struct sbx_outcome *outcome, struct sbx_input *input)
{
    sbx_buffer_free(&outcome->out);
    sbx_buffer_free(&outcome->err);
    for (size_t i = 0; i < SBX_MAX_CAPTURES; i++)
        sbx_buffer_free(&outcome->captures[i]);
    sbx_buffer_free(&input->pending);
}

PyDoc_STRVAR(pump_doc, "pump($self, /, *, stdin=b'', stdin_callback=None, on_stdout=None,\n"
                       "     on_stderr=None, stdout_cap=sys.maxsize, stderr_cap=sys.maxsize,\n"
                       "     kill_on_cap=False, timeout, cpu_limit=0.0, cancel=None, text=False,\n"
                       "     cgroup_cpu_fd=-1, since=-1.0, release_fd=-1, disk_inodes=0,\n"
                       "     disk_dir=None, end_at_report=-1, end_after_stream=-1)\n"
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
                       "release_fd, when >= 0, is the write end of a pipe a warm sandbox's\n"
                       "waiter reads: one byte is written to it once the clock has started and\n"
                       "before anything else, so the code the waiter then runs starts under\n"
                       "the limits; if that fails, the child is killed and reaped first.\n"
                       "disk_inodes, when > 0, caps the inodes (hard links included) of the\n"
                       "tmpfs at disk_dir inside the sandbox (several, their sum: absolute\n"
                       "paths separated by ':'): past it the sandbox is killed and\n"
                       "the result says 'disk_exceeded'.  The call returns once the sandbox's\n"
                       "init is gone, however long the kernel takes to tear it down; wall_time\n"
                       "ends at the program's exit or at the kill.  With end_at_report, the\n"
                       "index of the capture the init reports on, it returns as soon as that\n"
                       "capture holds the init's 'exit' line (every other process of the\n"
                       "sandbox is gone then, and the program's output is in the pipes), with\n"
                       "'reported' true: bwrap, which ends by itself, is then left to kill()\n"
                       "or the object's release to reap.  With end_after_stream too, the\n"
                       "file records the init streams on that capture after its report must\n"
                       "have ended as well.\n"
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
    PyObject *result = NULL, *direct[2] = {NULL, NULL};
    int pump_rc, release_errno = 0;
    struct sbx_pump_args a;
    struct sbx_input input;
    struct sbx_outcome outcome;
    struct sbx_call_ctx ctx;

    memset(&input, 0, sizeof input);
    memset(&outcome, 0, sizeof outcome);
    memset(&ctx, 0, sizeof ctx);
    if (sbx_pump_args_parse(&a, args, kwargs) != 0)
        return NULL;
    if (a.config.end_at_report >= (int)self->n_captures ||
        a.config.end_after_stream >= (int)self->n_captures) {
        PyErr_SetString(PyExc_ValueError,
                        "end_at_report and end_after_stream must name the sandbox's captures");
        sbx_pump_args_release(&a);
        return NULL;
    }
    if (a.stdin_view.buf != NULL &&
        sbx_buffer_append(&input.pending, a.stdin_view.buf, (size_t)a.stdin_view.len) != 0) {
        PyErr_NoMemory();
        goto cleanup;
    }
    if (claim(self, SANDBOX_PUMPING, "run it") != 0)
        goto cleanup;
    input.close_when_done = a.stdin_callback == NULL;
    memcpy(a.config.capture_caps, self->capture_caps, sizeof a.config.capture_caps);
    sbx_set_hooks(&a.config.hooks, &ctx, &a);
    direct[0] = sbx_direct_begin(&outcome.out, a.config.stdout_cap, a.text);
    direct[1] = sbx_direct_begin(&outcome.err, a.config.stderr_cap, a.text);

    ctx.tstate = PyEval_SaveThread();
    pump_rc = run_to_end(self, &input, &a, &outcome, &release_errno);
    PyEval_RestoreThread(ctx.tstate);
    self->state = outcome.reported ? SANDBOX_REPORTED : SANDBOX_ENDED;

    if (release_errno != 0)
        raise_release_error(release_errno);
    else if (pump_rc == SBX_PUMP_FAILED)
        PyErr_SetFromErrno(PyExc_OSError);
    else if (pump_rc == SBX_PUMP_DONE || (pump_rc == SBX_PUMP_ABORTED && ctx.cancelled))
        result = sbx_build_result(&outcome, self->n_captures, a.text, ctx.cancelled,
                                  self->child.cgroup_joined_at_clone, direct);
    /* Otherwise SBX_PUMP_ABORTED: a hook left its exception set. */

cleanup:
    free_buffers(&outcome, &input);
    /* After the buffers that pointed into them: on every path not taken by
     * sbx_build_result (a hook's exception, a failed pump or result). */
    Py_XDECREF(direct[0]);
    Py_XDECREF(direct[1]);
    sbx_pump_args_release(&a);
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
    long tasks;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i:cpu_time", keywords, &cgroup_cpu_fd))
        return NULL;
    if (self->state == SANDBOX_STARTED) {
        Py_BEGIN_ALLOW_THREADS
        used = sbx_sandbox_cpu_seconds(sbx_tree_root(&self->child), cgroup_cpu_fd, &tasks);
        Py_END_ALLOW_THREADS
    }
    return PyFloat_FromDouble(used);
}

PyDoc_STRVAR(kill_doc, "kill($self, /)\n--\n\n"
                       "End the sandbox unrun (or run to its init's report, bwrap still\n"
                       "to reap): kill every process of it, reap bwrap and close the\n"
                       "pipes; returns once nothing of it is left.  No-op once it was run\n"
                       "to its end or killed; RuntimeError while pump() runs it.  In a\n"
                       "process forked from the one that started it, it only closes that\n"
                       "process's copies of the fds: the sandbox is not its to end.");

/* Sandbox_kill: see kill_doc.  Called with the GIL; kills without it. */
static PyObject *Sandbox_kill(SandboxObject *self, PyObject *unused)
{
    (void)unused;
    if (self->state == SANDBOX_ENDED)
        Py_RETURN_NONE;
    if (self->state == SANDBOX_REPORTED)
        self->state = SANDBOX_STARTED;
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
 * Sandbox_dealloc: a sandbox never run, or run to its init's report, is
 * killed and reaped, so dropping the last reference leaks no process or
 * fd (in a forked process, only its fds are closed: end_child).  Called
 * with the GIL; kills without it.
 */
static void Sandbox_dealloc(SandboxObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    if (self->state == SANDBOX_STARTED || self->state == SANDBOX_REPORTED) {
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

/*
 * sbx_sandbox_type_add: add the Sandbox type to module (one per
 * interpreter).  Called with the GIL at import.  Returns 0 or -1 with an
 * exception set.
 */
int sbx_sandbox_type_add(PyObject *module)
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
