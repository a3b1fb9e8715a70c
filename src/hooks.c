/* SPDX-License-Identifier: MIT */
/*
 * hooks.c: the hooks through which the GIL-free pump calls back into Python
 * while it runs: the tick (signal handlers, cancel.is_set()), on_stdout and
 * stdin_callback, on_stderr.  Each takes the GIL back from the thread state
 * the caller saved and gives it up again before it returns.  Includes
 * Python.h.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hooks.h"

/*
 * tick_hook: take the GIL, run pending signal handlers (Ctrl-C raises
 * KeyboardInterrupt here), ask cancel.is_set(), give the GIL back.
 * Non-zero aborts the run: with an exception left set, or with
 * ctx->cancelled set and no exception.  Called by sbx_pump without the GIL.
 */
static int tick_hook(void *opaque)
{
    struct sbx_call_ctx *ctx = opaque;
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
    struct sbx_call_ctx *ctx = opaque;
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
    struct sbx_call_ctx *ctx = opaque;
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
 * sbx_set_hooks: the pump's hooks for a's callbacks, with ctx as their state.
 * The stdout hook runs for on_stdout and for stdin_callback; the tick always.
 */
void sbx_set_hooks(struct sbx_hooks *hooks, struct sbx_call_ctx *ctx, const struct sbx_pump_args *a)
{
    hooks->tick = tick_hook;
    hooks->on_stdout = a->stdin_callback == NULL && a->on_stdout == NULL ? NULL : stdout_hook;
    hooks->on_stderr = a->on_stderr == NULL ? NULL : stderr_hook;
    hooks->ctx = ctx;
    ctx->stdin_callback = a->stdin_callback;
    ctx->on_stdout = a->on_stdout;
    ctx->on_stderr = a->on_stderr;
    ctx->cancel = a->cancel;
}
