# SPDX-License-Identifier: MIT
"""The waiter: the program a warm sandbox's interpreter runs, with ``-c``, until its call.

It is never imported: ``waiter.py`` hands its text to ``python -c`` with three fds: the
read end of the *go* pipe, the write end of the *ready* pipe and the *payload* memfd.
They are made non-inheritable at once, and a process forked before the waiter is done
with them closes its copies, and those of fds 1 and 2 kept during the set-up
(``_guarded``).  The payload is records: a tag byte, the body's length (8 bytes,
big-endian), the body; it is read with ``pread``, never whole, so input files cost the
interpreter no memory.

1. It runs the template's trusted set-up, if the payload holds one (``i``: a module to
   import, ``s``: code to run in a namespace of its own, not the code's), with its
   output sent to ``/dev/null`` (it is not the call's).  A failure is told on the
   ready pipe (``X`` and the traceback) and ends it.  A template whose copies are
   made from it (``z``: the fd of its control socket, ``copies.py``) then says ``R``
   and serves copies (``_serve``); each copy goes on from step 2 with its call's fds.
2. It compiles a line (the compiler's first use makes its types: 1.3 ms), freezes the
   objects made so far (``gc.freeze``: the collector never walks them again, nor at
   the end of the call; not on Python 3.9 with neither ``atexit`` loaded nor a
   template, where nothing would unfreeze them for the teardown), says ``R`` on
   the ready pipe and blocks reading the go pipe, as long as it takes: nothing in it
   runs meanwhile.
3. Told to go (the host rewrote the payload with the call, then the C core wrote one
   byte into the go pipe as it started the clock), it reads the call: the program line
   a fresh sandbox would run (``p``: ``python -u /sandbox/main.py ARGS``, NUL-separated)
   and the position of the code's path in it (``c``), the environment variables to add
   (``e``), and the input files in the init's stream format (``f``), which it writes as
   the init does (0644, or 0755 when executable, less the umask; directories 0755;
   never through a symlink, never over a file), copied from the memfd by the kernel;
   a template's copy also gets its code (``m``), which it writes in its code file
   (the call's file patterns, ``+`` and ``-``, are the init's, which reads them at the
   end: the waiter skips them).
   It sets the variables, closes its three fds, and makes the interpreter what a fresh
   one would be at the code's first line: ``sys.argv``, ``sys.orig_argv``,
   ``sys.path[0]`` (where the interpreter put ``''`` for ``-c``), the importer cache's
   entry for the code file, and ``__main__``'s namespace.  Anything that goes wrong is
   told on the ready pipe (``X``) and ends it before the code runs.
4. It runs the code file as ``python FILE`` does: compiled with its path, run in a new
   ``__main__`` module; when the code ends, stderr and stdout are flushed and (but for
   ``SystemExit``) ``__file__`` and ``__cached__`` go, as the interpreter does.  A
   program that ended or called ``sys.exit`` with a status from 0 to 255 ends quickly:
   the interpreter joins its threads and runs its ``atexit`` handlers, the last of
   which, ``_end``, does what the code can see of the teardown and leaves
   (``os._exit``) without freeing every object.  An
   exception other than ``SystemExit`` is raised on, through the waiter, to the
   interpreter, which handles it exactly as for a fresh program (exit status 1, or
   ``SIGINT`` for a ``KeyboardInterrupt``, after the usual teardown); a
   ``sys.excepthook`` wrapper, put in place only then and removed by its first call,
   leaves the waiter's two frames out of what the hook is shown.  Source that does not
   compile (or starts like ``.pyc`` magic) is run by a fresh interpreter in the
   waiter's place (``execv`` of the program line), as its error must read exactly as
   fresh; nothing of the code has run then.

It is longer than 500 lines because it is one program, handed whole to ``python -c``:
the sandbox's interpreter imports nothing of pysandbox's.

``_run``, the hook and ``_end`` use only their parameters (defaults bound when they
were defined): the waiter's namespace is cleared once the code has its own, which
holds nothing of the waiter's.
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import types  # noqa: F401 (named by type comments)


def _unseen(name):  # type: (str) -> types.ModuleType
    """The built-in module ``name``, imported without being left in ``sys.modules``
    when it was not there: the code sees the modules of a fresh interpreter."""
    loaded = name in sys.modules
    module = __import__(name)
    if not loaded:
        del sys.modules[name]
    return module


def _records(fd):  # type: (int) -> list[tuple[bytes, int, int]]
    """The payload's records: ``(tag, offset of the body, length of the body)``."""
    found = []  # type: list[tuple[bytes, int, int]]
    at = 0
    while True:
        head = os.pread(fd, 9, at)
        if len(head) < 9:
            return found
        size = int.from_bytes(head[1:], "big")
        found.append((head[:1], at + 9, size))
        at += 9 + size


def _body(fd, offset, size):  # type: (int, int, int) -> bytes
    """``size`` bytes of the memfd ``fd`` from ``offset``."""
    parts = []  # type: list[bytes]
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 20), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(parts)


def _tell(fd, what):  # type: (int, bytes) -> None
    """Tell the host on the ready pipe (at most 4 KiB: one write, never partial)."""
    os.write(fd, what[:4096])


def _guarded(fd, mode):  # type: (int, str) -> object
    """``fd``, made non-inheritable, as an unbuffered file whose ``close`` a forked
    child calls: before the waiter closed it, that closes the child's copy; after, it
    does nothing (so a fork of the code never closes another fd of that number).  A
    builtin method, not a function: Python 3.9 crashes at exit when a function is
    registered and a file is left open."""
    os.set_inheritable(fd, False)
    file = open(fd, mode, buffering=0)  # noqa: SIM115 (closed by the waiter)
    os.register_at_fork(after_in_child=file.close)
    return file


def _set_up(fd, records):  # type: (int, list[tuple[bytes, int, int]]) -> None
    """Step 1: the template's imports and code, their output sent to ``/dev/null``."""
    if not records:
        return
    saved = [_guarded(os.dup(1), "wb"), _guarded(os.dup(2), "wb")]
    null = os.open("/dev/null", os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    try:
        for tag, offset, size in records:
            body = _body(fd, offset, size)
            if tag == b"i":
                __import__(body.decode())
            elif tag == b"s":
                namespace = {"__name__": "__template__", "__builtins__": __builtins__}
                exec(compile(body, "<template set-up>", "exec", dont_inherit=True), namespace)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:  # noqa: SIM105 (contextlib is not imported in a fresh interpreter)
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os.dup2(saved[0].fileno(), 1)  # type: ignore[attr-defined]
        os.dup2(saved[1].fileno(), 2)  # type: ignore[attr-defined]
        for copy in saved:
            copy.close()  # type: ignore[attr-defined]


def _copy(source, target, offset, size):  # type: (int, int, int, int) -> None
    """Copy ``size`` bytes of ``source`` from ``offset`` to ``target``, by the kernel."""
    while size > 0:
        sent = os.sendfile(target, source, offset, min(size, 1 << 30))
        if sent <= 0:
            raise OSError(5, "the payload was cut short")
        offset += sent
        size -= sent


def _open_parent(name):  # type: (bytes) -> tuple[int, bytes]
    """A directory fd for ``name``'s parent below ``/sandbox`` (each step made 0755 if
    missing, never through a symlink), and its last component."""
    parent = os.open("/sandbox", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    parts = name.split(b"/")
    try:
        for part in parts[:-1]:
            try:  # noqa: SIM105 (contextlib is not imported in a fresh interpreter)
                os.mkdir(part, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            step = os.open(part, flags, dir_fd=parent)
            os.close(parent)
            parent = step
    except BaseException:
        os.close(parent)
        raise
    return parent, parts[-1]


def _unpack(fd, offset, size):  # type: (int, int, int) -> None
    """Write the input files of the stream at ``offset`` (``size`` bytes) of ``fd``."""
    end = offset + size
    while offset + 6 <= end:
        head = os.pread(fd, 6, offset)
        if head[:1] != b"F":
            return
        length = int.from_bytes(head[2:6], "little")
        name = os.pread(fd, length, offset + 6)
        data_size = int.from_bytes(os.pread(fd, 8, offset + 6 + length), "little")
        data_at = offset + 14 + length
        try:
            parent, leaf = _open_parent(name)
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                out = os.open(leaf, flags, 0o755 if head[1] & 1 else 0o644, dir_fd=parent)
            finally:
                os.close(parent)
            try:
                _copy(fd, out, data_at, data_size)
            finally:
                os.close(out)
        except OSError as exc:
            shown = name.decode("utf-8", "replace")
            raise OSError(exc.errno, f"{shown}: {exc.strerror}") from None
        offset = data_at + data_size


#: Where a template's sandbox shows the C core (``bwrap.EXTENSION_PATH``).
_EXTENSION = "/.pysandbox/_sandbox.so"


def _serve(control):  # type: (int) -> None
    """A template's step 2, once ready: serve copies on the ``control`` socket with the
    C core (loaded from ``_EXTENSION``, never put in ``sys.modules``) until the host
    closes it (then exit), and return in a copy only: confined, with the call's fds at
    the waiter's numbers (``src/copy.c``)."""
    imp = sys.modules["_imp"]
    spec = type(sys)("spec")
    spec.name, spec.origin = "pysandbox._sandbox", _EXTENSION  # type: ignore[attr-defined]
    core = imp.create_dynamic(spec)
    imp.exec_dynamic(core)
    if not core.serve_copies(control):
        os._exit(0)


def _write_code(fd, offset, size):  # type: (int, int, int) -> None
    """A copy's code (``m``: the fd of its code file, a newline, the code), written in
    that file, which is read-only everywhere else, and the fd closed."""
    head = os.pread(fd, min(size, 16), offset).split(b"\n", 1)[0]
    target = int(head)
    _copy(fd, target, offset + len(head) + 1, size - len(head) - 1)
    os.close(target)


def _wait(go, ready, payload):  # type: (int, int, int) -> tuple[str, list[str]]
    """Steps 1 to 3; returns the code's path and the program line."""
    files = [_guarded(go, "rb"), _guarded(ready, "wb"), _guarded(payload, "rb")]
    if _EXITS is not None:
        _EXITS.register(_end)
    records = _records(payload)
    try:
        _set_up(payload, records)
    except BaseException:
        import traceback

        _tell(ready, b"X" + traceback.format_exc().encode("utf-8", "replace"))
        os._exit(1)
    # The compiler makes its syntax tree's types at its first use: 1.3 ms, not the call's.
    compile(b"pass\n", "<waiter>", "exec", dont_inherit=True)
    if _EXITS is not None or records:
        _GC.freeze()
    _tell(ready, b"R")
    for tag, offset, size in records:
        if tag == b"z":
            _serve(int(_body(payload, offset, size)))
            _tell(ready, b"R")
    if os.read(go, 1) != b"g":
        os._exit(1)
    try:
        program, start = [""], 0
        for tag, offset, size in _records(payload):
            if tag == b"f":
                _unpack(payload, offset, size)
                continue
            if tag == b"m":
                _write_code(payload, offset, size)
                continue
            body = _body(payload, offset, size).decode("utf-8", "surrogateescape")
            if tag == b"p":
                program = body.split("\0")
            elif tag == b"c":
                start = int(body)
            elif tag == b"e":
                key, _, value = body.partition("=")
                os.environ[key] = value
    except BaseException as exc:
        what = f"the input file {exc.strerror}" if isinstance(exc, OSError) else repr(exc)
        _tell(ready, f"Xcannot prepare the call: {what}".encode("utf-8", "replace"))
        os._exit(1)
    for file in files:
        file.close()  # type: ignore[attr-defined]
    path = program[start]
    sys.argv = program[start:]
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = program
    if sys.path and sys.path[0] == "":
        sys.path[0] = os.path.dirname(path)
    # ``python FILE`` asks for an importer of FILE (a zip or a directory would have
    # one): none, and the answer is cached.
    sys.path_importer_cache[path] = None
    return path, program


#: ``sys.excepthook`` was deleted.
_MISSING = object()


def _flush(sys=sys, getattr=getattr, error=BaseException):  # type: ignore[no-untyped-def]
    """What the interpreter does as soon as a program's code ends, however it ends:
    flush stderr, then stdout, every error ignored."""
    for name in ("stderr", "stdout"):
        try:  # noqa: SIM105 (contextlib is not imported in a fresh interpreter)
            getattr(sys, name).flush()
        except error:
            pass


def _file_gone(namespace):  # type: ignore[no-untyped-def]
    """What the interpreter does once a program's code has ended without
    ``SystemExit`` (after the excepthook): ``__file__`` and ``__cached__`` go."""
    namespace.pop("__file__", None)
    namespace.pop("__cached__", None)


def _trimming_hook(  # type: ignore[no-untyped-def]
    namespace,
    sys=sys,
    getattr=getattr,
    isinstance=isinstance,
    range=range,
    missing=_MISSING,
    Exit=SystemExit,
    Any=BaseException,
    retrace=BaseException.with_traceback,
    display=sys.__excepthook__,
    gone=_file_gone,
):
    """Put a wrapper around ``sys.excepthook`` that removes itself when called and
    shows the hook the traceback without the waiter's two frames (``<module>`` and
    ``_run``), as the interpreter's own ``sys.last_traceback``; then, as the
    interpreter does, ``__file__`` and ``__cached__`` go.  A hook that raises is
    reported as the interpreter reports it, without this wrapper's frame; so is a
    missing one."""
    hook = getattr(sys, "excepthook", missing)

    def trimmed(kind, value, trace):  # type: ignore[no-untyped-def]
        if hook is missing:
            del sys.excepthook
        else:
            sys.excepthook = hook
        for _ in range(2):
            if trace is not None:
                trace = trace.tb_next
        if isinstance(value, Any):
            retrace(value, trace)
        sys.last_traceback = trace
        try:
            if hook is missing:
                sys.stderr.write("sys.excepthook is missing\n")
                display(kind, value, trace)
            else:
                hook(kind, value, trace)
        except Exit:
            raise
        except Any as error:
            # What the interpreter prints for a hook that raises, without this frame.
            sys.stderr.write("Error in sys.excepthook:\n")
            display(error.__class__, error, retrace(error, error.__traceback__.tb_next))
            sys.stderr.write("\nOriginal exception was:\n")
            display(kind, value, trace)
        finally:
            gone(namespace)

    sys.excepthook = trimmed


def _clear(namespace, list=list, isinstance=isinstance, str=str):  # type: ignore[no-untyped-def]
    """Empty a module's namespace as the interpreter does at its end: names that start
    with one underscore become None first, then every other name but
    ``__builtins__``, so each ``__del__`` still finds the names not yet cleared."""
    for first in (True, False):
        for name in list(namespace):
            if not isinstance(name, str) or name == "__builtins__":
                continue
            if first and (name[:1] != "_" or name[:2] == "__"):
                continue
            namespace[name] = None


#: The built-in modules the end needs, imported unseen.
_GC = _unseen("gc")
_IO = _unseen("_io")
_WEAKREF = _unseen("_weakref")

#: ``atexit``, unseen; None on Python 3.9 when it is not loaded: that version keeps the
#: handlers in the module, which cannot be imported unseen, so its programs end slowly.
_EXITS = _unseen("atexit") if sys.version_info >= (3, 10) or "atexit" in sys.modules else None

#: What ``_end`` needs, set by ``_run``: the exit status once the code has ended as the
#: interpreter can end it quickly (None until then), and the modules loaded before it.
_ENDING = [None, frozenset()]  # type: list[object]

#: The built-in modules ``_end`` needs besides, imported unseen; the type of modules;
#: the builtins' namespace.
_THREAD = _unseen("_thread")
_SIGNAL = _unseen("_signal")
_MODULE = type(sys)
_BUILTINS = sys.modules["builtins"].__dict__

#: What the interpreter sets to None in ``sys`` before it lets the modules go
#: (``finalize_modules_delete_special``).
_SYS_NONE = (
    "path",
    "argv",
    "ps1",
    "ps2",
    *(("last_exc",) if sys.version_info >= (3, 12) else ()),
    "last_type",
    "last_value",
    "last_traceback",
    "path_hooks",
    "path_importer_cache",
    "meta_path",
    "__interactivehook__",
)


def _let_go(  # type: ignore[no-untyped-def]
    before,
    sys=sys,
    list=list,
    isinstance=isinstance,
    reversed=reversed,
    module_type=_MODULE,
    clear=_clear,
    collect=_GC.collect,
    ref=_WEAKREF.ref,
):
    """What the interpreter does to the modules at its end: every module leaves
    ``sys.modules`` and the garbage is collected (so the objects of the code's globals
    meet their ``__del__`` with those globals still whole), then the namespaces of
    ``__main__`` and of the modules imported since the hand-over (not in ``before``)
    still alive are cleared, last one first.  The modules loaded before are not
    cleared: that is the teardown skipped."""
    gone = []
    for name in list(sys.modules):
        if name not in before or name == "__main__":
            try:  # noqa: SIM105 (contextlib is not imported in a fresh interpreter)
                gone.append(ref(sys.modules[name]))
            except TypeError:
                pass
        sys.modules[name] = None
    sys.modules.clear()
    collect()
    for alive in reversed(gone):
        module = alive()
        if isinstance(module, module_type):
            clear(module.__dict__)
        module = None
    collect()


def _flush_files(  # type: ignore[no-untyped-def]
    objects=_GC.get_objects,
    isinstance=isinstance,
    text=_IO.TextIOWrapper,
    buffered=(_IO.BufferedWriter, _IO.BufferedRandom),
):
    """Flush the files the code left open wherever they are held (the interpreter
    would close those its teardown frees), text files first, as they write into their
    buffers.  Only the objects made since the waiter froze the rest are looked at."""
    files = [thing for thing in objects() if isinstance(thing, (text, *buffered))]
    for kinds in (text, buffered):
        for file in files:
            if isinstance(file, kinds) and not file.closed:
                file.flush()


def _signals_off(  # type: ignore[no-untyped-def]
    callable=callable,
    range=range,
    signal=_SIGNAL,
):
    """What the interpreter does once the streams are flushed: the signal handlers the
    code set go back to the default (``_PySignal_Fini``)."""
    for number in range(1, signal.NSIG):
        try:
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
        except (ValueError, OSError):
            continue


def _specials_off(  # type: ignore[no-untyped-def]
    sys=sys,
    getattr=getattr,
    setattr=setattr,
    builtins=_BUILTINS,
    none=_SYS_NONE,
):
    """What the interpreter does to ``builtins`` and ``sys`` before it lets the modules
    go (``finalize_modules_delete_special``): ``_``, the import machinery, ``argv``,
    ``path`` and the last exception set to None, the standard streams put back."""
    builtins["_"] = None
    for name in none:
        setattr(sys, name, None)
    for name in ("stdin", "stdout", "stderr"):
        setattr(sys, name, getattr(sys, "__" + name + "__", None))


def _end(  # type: ignore[no-untyped-def]
    ending=_ENDING,
    sys=sys,
    os=os,
    getattr=getattr,
    isenabled=_GC.isenabled,
    collect=_GC.collect,
    unfreeze=_GC.unfreeze,
    callbacks=_GC.callbacks,
    threads=_THREAD._count,
    exits=_EXITS,
    signals_off=_signals_off,
    specials_off=_specials_off,
    let_go=_let_go,
    flush_files=_flush_files,
    Any=BaseException,
):
    """The ``atexit`` handler registered first, so the interpreter runs it last, once
    the threads the code started are joined and every other handler ran (the
    template's, the code's, ``weakref.finalize``'s): it ends the program with the
    status ``_run`` left in ``ending`` after doing what the code can still see of the
    interpreter's teardown, and skips the rest (freeing every object one by one: 1.5 ms
    for a bare interpreter, 45 ms with pandas loaded; the sandbox is thrown away
    whole).  In the interpreter's order: the handlers that ran are let go of (they may
    hold the code's objects), the streams are flushed, the signal handlers reset, the
    garbage collected, ``sys`` readied (``_specials_off``), the modules let go
    (``_let_go``, with no ``gc.callbacks``: the interpreter calls none then); then the
    files left open are flushed (``_flush_files``).  The interpreter's own teardown
    does the rest, exactly as for a fresh program, with every object unfrozen, when
    there is no status (the code raised), when a thread still runs (a daemon thread
    may hold a file's lock; the interpreter stops them first), and when a step fails (a
    stream that cannot be flushed: the interpreter reports it and exits with 120).
    (Whether the code froze objects itself is not asked: ``gc.get_freeze_count()``
    walks every frozen object, 4 ms with pandas loaded.)"""
    status, before = ending
    if status is None or threads():
        unfreeze()
        return
    kept = {}
    try:
        exits._clear()
        for name in ("stdout", "stderr"):
            getattr(sys, name).flush()
        signals_off()
        if isenabled():
            collect()
        specials_off()
        callbacks[:] = []
        for name in before:
            if name != "__main__" and name in sys.modules:
                kept[name] = sys.modules[name]
        let_go(before)
        flush_files()
    except Any:
        sys.modules.update(kept)
        unfreeze()
        return
    os._exit(status)


def _run(  # type: ignore[no-untyped-def]
    path,
    program,
    sys=sys,
    os=os,
    open=open,
    compile=compile,
    exec=exec,
    type=type,
    int=int,
    frozenset=frozenset,
    ending=_ENDING,
    flush=_flush,
    hook=_trimming_hook,
    gone=_file_gone,
    BaseException=BaseException,
    SystemExit=SystemExit,
    SyntaxError=SyntaxError,
    ValueError=ValueError,
):
    """Step 4, with its parameters only: the code runs in a new ``__main__`` module, the
    waiter's namespace cleared, and tells ``_end`` how it ended.  Source the
    interpreter would read otherwise than ``compile`` (a syntax error, an encoding
    problem, ``.pyc`` magic) is run by a fresh interpreter, ``program``: nothing of the
    code has run, and its error then reads exactly as fresh."""
    waiter = sys.modules["__main__"].__dict__
    builtins = waiter["__builtins__"]
    bootstrap = sys.modules["_frozen_importlib_external"]
    loader = bootstrap.SourceFileLoader("__main__", path)
    with open(path, "rb") as file:
        source = file.read()
    try:
        if source[:2] == bootstrap.MAGIC_NUMBER[:2]:
            raise ValueError("compiled code")
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        flush()
        os.execv(program[0], program)
    module = type(sys)("__main__")
    namespace = module.__dict__
    namespace.update(
        __loader__=loader,
        __annotations__={},
        __builtins__=builtins,
        __file__=path,
        __cached__=None,
    )
    sys.modules["__main__"] = module
    waiter.clear()
    waiter["__builtins__"] = builtins
    ending[1] = frozenset(sys.modules)
    try:
        exec(code, namespace)
    except SystemExit as stop:
        flush()
        status = 0 if stop.code is None else stop.code
        if type(status) is int and 0 <= status <= 255:
            ending[0] = status
        raise
    except BaseException:
        flush()
        hook(namespace)
        raise
    flush()
    gone(namespace)
    ending[0] = 0


def _forget_c_source():  # type: () -> None
    """Python 3.13's ``-c`` puts the waiter's text in ``linecache`` (importing it): a
    fresh ``python FILE`` has neither."""
    if list(sys.modules)[-1:] == ["linecache"]:
        sys.modules.pop("linecache").cache.pop("<string>", None)


_forget_c_source()
_run(*_wait(*(int(fd) for fd in sys.argv[1:4])))  # type: ignore[no-untyped-call]
