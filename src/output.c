/* SPDX-License-Identifier: MIT */
/*
 * output.c: the outcome of a run as Python objects.  The captured bytes
 * become their final bytes or str, copied once (an ASCII fast path, pages
 * advised for huge pages) or read straight into the object (the direct
 * buffers, unless the allocator fills what it hands out); then the dict of
 * facts, or the OSError of a start or run that failed at a stage.  Includes
 * Python.h: every function here needs the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "output.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

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
 * Output read straight into its final object.  A stream whose cap is in
 * [DIRECT_MIN, DIRECT_MAX] is read by the pump into the memory of a bytes
 * object of cap bytes (with text, a compact ASCII str) made before the
 * loop, as os.read() reads into the bytes it returns: malloc maps a block
 * that large afresh, so the pages the output never reaches are never
 * backed, and after the loop the object is shrunk to the output (realloc of
 * a mapped block is an mremap, which copies nothing).  32 MiB of output then
 * costs one region faulted once and no copy, instead of the pump's buffer,
 * the object, and a copy between them.  The pump sees only an external
 * sbx_buffer (no GIL, no Python object); the object's reference stays here.
 * Above DIRECT_MAX, or when the object cannot be had, the pump's own buffer
 * is copied once as before.  Results under DIRECT_KEEP_MIN bytes are
 * copied into an object of their size, and the big one released.
 */
#define DIRECT_MIN HUGE_COPY_MIN
#define DIRECT_MAX ((size_t)1 << 30)
#define DIRECT_KEEP_MIN (256 * 1024)

/*
 * allocator_fills: whether the object allocator writes every byte it hands
 * out, as Python's debug hooks (PYTHONMALLOC=debug) do with 0xCD: then a
 * cap-sized object would cost its whole cap in memory and time, and the
 * pump's own buffer, grown as needed, is used instead.  A probe of 64 fresh
 * bytes: without the hooks they are all 0xCD only by a rare chance, which
 * costs nothing but the old path.  Needs the GIL.
 */
static int allocator_fills(void)
{
    unsigned char *probe = PyObject_Malloc(64);
    int filled = probe != NULL;
    for (size_t i = 0; filled && i < 64; i++)
        filled = probe[i] == 0xCD;
    PyObject_Free(probe);
    return filled;
}

/*
 * sbx_direct_begin: with a cap in [DIRECT_MIN, DIRECT_MAX], a new object of cap
 * bytes (str when text) whose memory buf (empty) is made to point at, as an
 * external buffer.  Its first DIRECT_KEEP_MIN bytes are left out of the
 * huge-page advice, so that a small output never costs the clearing of a
 * huge page.  Returns the new reference, or NULL with no exception set when
 * the cap is out of range, the allocator fills what it gives, or the memory
 * is refused (buf unchanged: the pump uses its own).  Needs the GIL.
 */
PyObject *sbx_direct_begin(struct sbx_buffer *buf, size_t cap, int text)
{
    PyObject *obj;
    char *data;
    if (cap < DIRECT_MIN || cap > DIRECT_MAX || allocator_fills())
        return NULL;
    obj = text ? PyUnicode_New((Py_ssize_t)cap, 127)
               : PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    if (obj == NULL) {
        PyErr_Clear(); /* MemoryError: the pump's buffer grows only as needed */
        return NULL;
    }
    data = text ? (char *)PyUnicode_1BYTE_DATA(obj) : PyBytes_AS_STRING(obj);
    advise_huge(data + DIRECT_KEEP_MIN, cap - DIRECT_KEEP_MIN);
    buf->data = data;
    buf->len = 0;
    buf->alloc = cap;
    buf->external = 1;
    return obj;
}

/*
 * direct_output: output_object() for a stream read into *direct (from
 * sbx_direct_begin, len bytes of it filled); takes the reference and leaves
 * NULL in *direct.  Bytes of DIRECT_KEEP_MIN or more are the object itself,
 * shrunk.  Text whose stripped bytes are that many and all ASCII (then equal
 * to their UTF-8 decoding) is the object too, the bytes moved down over the
 * leading white space if any, shrunk; any other text (non-ASCII, not UTF-8,
 * short) is output_object() of the same bytes, so the result is exactly
 * bytes.decode().strip() as there.  Needs the GIL; returns a new reference
 * or NULL with an exception set.
 */
static PyObject *direct_output(const struct sbx_buffer *buf, PyObject **direct, int text)
{
    PyObject *obj = *direct, *copied;
    char *data = buf->data, *start = data, *end = data + buf->len;
    *direct = NULL;
    if (!text && buf->len >= DIRECT_KEEP_MIN) {
        /* On failure _PyBytes_Resize releases the object and sets NULL. */
        return _PyBytes_Resize(&obj, (Py_ssize_t)buf->len) == 0 ? obj : NULL;
    }
    if (text) {
        while (start < end && is_ascii_space(*start))
            start++;
        while (end > start && is_ascii_space(end[-1]))
            end--;
    }
    if (text && (size_t)(end - start) >= DIRECT_KEEP_MIN &&
        is_ascii(start, (size_t)(end - start))) {
        if (start > data)
            memmove(data, start, (size_t)(end - start));
        /* Refcount 1, never hashed: resized in place (the NUL written). */
        if (PyUnicode_Resize(&obj, end - start) != 0) {
            Py_XDECREF(obj);
            return NULL;
        }
        return obj;
    }
    copied = output_object(buf, text);
    Py_DECREF(obj);
    return copied;
}

/*
 * stream_object: a captured stream's final object: direct_output() when it
 * was read into *direct, else output_object().
 */
static PyObject *stream_object(const struct sbx_buffer *buf, PyObject **direct, int text)
{
    return *direct != NULL ? direct_output(buf, direct, text) : output_object(buf, text);
}

/*
 * sbx_build_result: the outcome as a dict of facts.  Needs the GIL.  Returns a
 * new reference or NULL with an exception set.  Does not free the outcome;
 * direct[0] and direct[1] (stdout's and stderr's objects from sbx_direct_begin,
 * or NULL) are taken by stream_object, or left for the caller to release.
 */
PyObject *sbx_build_result(const struct sbx_outcome *o, size_t n_captures, int text, int cancelled,
                           int joined_at_clone, PyObject **direct)
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
        set_item(d, "stdout", stream_object(&o->out, &direct[0], text)) ||
        set_item(d, "stderr", stream_object(&o->err, &direct[1], text)) ||
        set_item(d, "cpu_exceeded", PyBool_FromLong(o->cpu_exceeded)) ||
        set_item(d, "disk_exceeded", PyBool_FromLong(o->disk_exceeded)) ||
        set_item(d, "reported", PyBool_FromLong(o->reported)) ||
        set_item(d, "tree_cpu_time", PyFloat_FromDouble(o->tree_cpu_time)) ||
        set_item(d, "peak_tasks", PyLong_FromLong(o->peak_tasks)) ||
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

/*
 * sbx_raise_at_stage: raise exc (an OSError, taken; NULL after a failed
 * constructor, whose exception then stands) with its `stage` attribute set
 * to stage, an enum sbx_stage value (the module's STAGE_* constants).
 * Needs the GIL; returns NULL with an exception set.
 */
PyObject *sbx_raise_at_stage(PyObject *exc, int stage)
{
    PyObject *value;
    if (exc == NULL)
        return NULL;
    value = PyLong_FromLong(stage);
    if (value != NULL && PyObject_SetAttrString(exc, "stage", value) == 0)
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_XDECREF(value);
    Py_DECREF(exc);
    return NULL;
}
