# SPDX-License-Identifier: MIT
"""The keeper: the program a ``Session``'s sandbox runs, and its only link to the host.

Never imported on the host: ``session.py`` reads this file's text and shows it to the
sandbox as its program (``python -u KEEPER REQUEST_FD REPLY_FD CALL_FD [+PATTERN | -PATTERN]...``,
the patterns: the session's ``files_include`` and ``files_exclude``), so it imports nothing
of pysandbox and runs on every supported Python.  Everything it says to the host is
checked there as hostile input (``session_channel.py``): the code of the session runs
with the keeper's uid and may forge, stop or kill it, which can only lose its own
session.

Three kinds of process, all below the init:

* the keeper (this process): reads the host's requests, forks the first state process,
  watches each call (its wall time, the CPU time of every process it starts, its
  output), ends what a call left running, and answers the host.  A subreaper, so every
  orphan of a call is its child to reap and count.
* the state process: holds the session's ``__main__``; for each call it forks a call
  process and waits for it.
* the call process: runs the code.  When the code ends without a limit ending it, it
  tells the keeper (``FINISHED``) and becomes the state process; the keeper kills the
  old one.  When a limit ends it (or it crashes), its parent, untouched, stays the
  state: the call is rolled back, every object as it was before it.

Three pipes come from the host: requests to the keeper, the keeper's replies, and the
call pipe, on which the host writes a call's code straight to the state (the call
process, forked ahead of its call, reads it), while it tells the keeper the call's
limits on the request pipe: a call's start wakes the two at once, not one after the
other.  The keeper empties the call pipe after each call.

Frames, both ways and on the internal result pipe: one byte of kind, four of length
(big-endian), the payload.

It is longer than 500 lines because the sandbox is shown exactly one program and
nothing of the package is importable there: its parts cannot be modules of their own.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import json
import linecache
import os
import select
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

if TYPE_CHECKING:
    # Never imported: ``session_plan.keeper_program`` joins their text to this program's.
    from .display_hook import DISPLAY, Shows, install, is_rich, write_all, write_frame

HEADER = struct.Struct(">BI")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: How often a running call's CPU time is added up.
TICK = 0.02
#: Seconds a spare waits for its call before it warms up: a call that comes at once
#: needs no warm-up, and right after a call the memory limit ended, the killed process's
#: files (a memfd) are released a moment after its exit, so the warm-up's allocations
#: wait until the sandbox's memory is free again.
WARM_UP_DELAY = 0.005
#: Host to keeper: a call's limits (JSON); an interrupt; a call's input files (JSON,
#: then their bytes).  Host to the state, on the call pipe: a call's code (JSON).
CALL, INTERRUPT, UPLOAD = ord("C"), ord("I"), ord("U")
#: Keeper to host: ready; a chunk of stdout, of stderr; an output file; a call's end;
#: the session's end; the input files are written.
READY, STDOUT, STDERR, FILE, DONE, FATAL, WRITTEN = (ord(c) for c in "ROEFDXW")
#: Keeper to host, and the call process to the keeper on the display pipe, besides a
#: display (``DISPLAY``, see ``display_hook.py``; an empty one stands for a display the
#: call process left out, over the call's cap): the variables a call was asked for
#: (``{"values": TREE}``, the tree of the value codec, or ``{"error": TEXT, "kind":
#: "missing" | "type" | "value"}``).
VALUES = ord("V")
#: State and call processes to keeper: started; the code ended; it ran out of memory;
#: the call process ended (told by its parent, the state process).
STARTED, FINISHED, OUT_OF_MEMORY, ENDED = (ord(c) for c in "sfme")
#: Keeper to state, after each call: what the call left is ended, reap your children;
#: state to keeper: done.
REAP, REAPED = ord("p"), ord("r")
CHUNK = 65536
#: Bytes of a frame of variables beyond the codec's: its wrapping; and those a frame
#: that says why there are none may take whatever the cap.
VALUES_ROOM = 64
ERROR_ROOM = 32 * 1024
#: Characters of the reason why variables could not be sent.
VALUE_ERROR_MAX = 4096


def read_exact(fd: int, size: int) -> bytes:
    """``size`` bytes from the blocking ``fd``; EOFError at its end."""
    parts = []
    while size:
        part = os.read(fd, min(size, 1 << 20))
        if not part:
            raise EOFError
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def read_frame(fd: int) -> tuple[int, bytes]:
    """One frame from the blocking ``fd``: ``(kind, payload)``."""
    kind, length = HEADER.unpack(read_exact(fd, HEADER.size))
    return kind, read_exact(fd, length)


def libc_prctl() -> Callable[..., int] | None:
    """``prctl`` of the C library, or None where ctypes is missing."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


class State:
    """The session's interpreter state: the state and call processes' side."""

    def __init__(self, call_fd: int, control_fd: int, result_fd: int, show_fd: int) -> None:
        self.call_fd = call_fd
        self.control_fd = control_fd
        self.result_fd = result_fd
        self.keeper = os.getppid()
        self.shows: Shows = install(show_fd, 0)
        main = type(sys)("__main__")
        sys.modules["__main__"] = main
        self.namespace = main.__dict__
        self.namespace["__builtins__"] = __builtins__
        sys.argv = [""]
        sys.path[0] = ""
        # Every call process is the first the kernel's OOM killer takes (the keeper
        # stays at 0); a process may raise its own score, never lower it again.
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adjust:
            adjust.write("1000")

    def serve(self) -> NoReturn:
        """Fork a call process for each call, wait for it, and after each call reap
        what it left when the keeper says so; never returns.

        A state with one thread forks the next call process as soon as the last call
        is over (a spare), so a call does not wait for the fork: the spare is an exact
        copy, for nothing runs in the state between calls.  A state that has other
        threads (started by a call: they run on in it) forks when the call comes, so
        the call sees what they did meanwhile."""
        write_frame(self.result_fd, STARTED, json.dumps({"pid": os.getpid()}).encode())
        while True:
            request = None if self.single_threaded() else self.next_request()
            # The state this one replaced, while it is still there (its parent until
            # the keeper has ended it), or 0.
            replaced = os.getppid()
            child = os.fork()
            if child == 0:
                self.run_call(request, 0 if replaced == self.keeper else replaced)
            else:
                self.wait_for(child)
            self.after_call()

    @staticmethod
    def single_threaded() -> bool:
        try:
            return len(os.listdir("/proc/self/task")) == 1
        except OSError:
            return False

    def next_request(self) -> dict[str, Any]:
        """The next call's request, from the host's call pipe (the keeper empties it
        after each call, so what it holds is this call's); the process ends with the
        pipe or on a frame of another kind."""
        request: dict[str, Any] = json.loads(self.frame_from(self.call_fd, CALL))
        return request

    @staticmethod
    def frame_from(fd: int, expected: int) -> bytes:
        """The payload of the next frame on ``fd``, which must be of kind ``expected``;
        the process ends with the pipe, or on a frame of another kind."""
        try:
            kind, payload = read_frame(fd)
        except EOFError:
            os._exit(0)
        if kind != expected:
            os._exit(2)
        return payload

    def wait_for(self, child: int) -> None:
        """Reap children until the call process ``child`` ends, then tell the keeper
        how it ended."""
        while True:
            pid, status, usage = os.wait4(-1, 0)
            if pid == child:
                break
        ended = {
            "pid": child,
            "status": status,
            "cpu": usage.ru_utime + usage.ru_stime,
            "max_rss": usage.ru_maxrss * 1024,
        }
        write_frame(self.result_fd, ENDED, json.dumps(ended).encode())

    def after_call(self) -> None:
        """Wait for the keeper to have ended what the call left running, reap those of
        them that are this process's children, and say so."""
        self.frame_from(self.control_fd, REAP)
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        write_frame(self.result_fd, REAPED, b"{}")

    def run_call(self, request: dict[str, Any] | None, replaced: int) -> None:
        """In the call process: wait for the call when it is a spare, and for the
        ``replaced`` state to be gone (the keeper ends it once the host has the last
        call's answer: the code runs once its memory is free and the keeper watches),
        run the code, tell the keeper, and return to ``serve`` as the new state
        process."""
        #: The state read the request itself: it has threads of its own.
        threaded = request is not None
        if request is None:
            if not select.select([self.call_fd], [], [], WARM_UP_DELAY)[0]:
                with contextlib.suppress(Exception):  # only a head start (EMFILE...)
                    self.warm_up()
            request = self.next_request()
        if replaced:
            wait_gone(replaced)
        self.shows.cap = request["show_max"]
        name = f"<cell-{request['cell']}>"
        code = request["code"]
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        value, error = None, None
        me = os.getpid()
        try:
            if request.get("push") is not None:
                self.namespace.update(codec().decode_tree(request["push"]))
            value = self.execute(code, name, self.namespace)
        except MemoryError:
            self.out_of_memory()
        except BaseException as exc:
            error = describe(exc, request["value_max"], name if request.get("harness") else None)
        shown = None
        try:
            shown = self.after_code(value, error is None, request)
        except MemoryError:
            self.out_of_memory()
        except BaseException as exc:
            error = describe(exc, request["value_max"])
        self.flush()
        if os.getpid() != me:
            # A child the code forked that ran on to the cell's end instead of exiting
            # (as after ``os.fork()`` in a notebook): it is no call process; it ends here.
            os._exit(0)
        done = {"pid": me, "value": shown, "error": error, "threaded": threaded}
        write_frame(self.result_fd, FINISHED, json.dumps(done).encode())

    def out_of_memory(self) -> NoReturn:
        """End the call process as one that ran out of memory: it is rolled back."""
        self.flush()
        write_frame(self.result_fd, OUT_OF_MEMORY, b"{}")
        os._exit(1)

    def after_code(self, value: object, ran: bool, request: dict[str, Any]) -> str | None:
        """What a call does after its code: the final ``value`` kept as ``_`` and shown
        (its ``repr``, returned, and a display if it is rich), the figures left open
        shown, and, when the code ``ran`` without raising, the variables asked for sent."""
        shown = None
        if value is not None:
            self.namespace["_"] = value
            shown = repr(value)[: request["value_max"]]
            self.show_value(value)
        self.shows.open_figures()
        if ran and request.get("pull"):
            self.send_values(request["pull"], request["values_max"], bool(request.get("harness")))
        return shown

    def show_value(self, value: object) -> None:
        """A final value with a rich representation (a figure, a DataFrame's HTML) is
        also shown, as a notebook's ``Out[]``: the display says it is the value's."""
        if is_rich(value):
            parts = self.shows.parts_of(value)
            if any(mime != "text/plain" for mime, _ in parts):
                self.shows.send(parts, value=True)

    def send_values(self, names: list[str], cap: int, take: bool = False) -> None:
        """Send the variables ``names`` of the session, encoded by the value codec within
        ``cap`` bytes, or why they cannot be; ``take``: they leave the session, sent or
        not (a ``Session.call``'s return value)."""
        missing = [name for name in names if name not in self.namespace]
        try:
            if missing:
                raise NameError(f"name {missing[0]!r} is not defined in the session")
            read = self.namespace.pop if take else self.namespace.__getitem__
            wanted = {name: read(name) for name in dict.fromkeys(names)}
            payload = b'{"values": ' + codec().encode(wanted, max_bytes=cap, name="pull") + b"}"
        except MemoryError:
            raise
        except Exception as exc:
            kind = {NameError: "missing", TypeError: "type"}.get(type(exc), "value")
            payload = json.dumps({"error": str(exc)[:VALUE_ERROR_MAX], "kind": kind}).encode()
        self.shows.send_frame(VALUES, payload)

    def warm_up(self) -> None:
        """In a spare, before its call comes (when it has come, the call does this in
        passing): do once what every call does (read a request, compile, run, report),
        so that the memory it writes is this process's own by then.  Every page a fork
        shares is copied at its first write (the kernel faults it in): about 0.2 ms of
        a trivial call's time, off its path this way.
        The session's namespace and the line cache get an entry they did not hold,
        taken out again at once: they are as they were (a key of str, for a dict of
        only str keys is the one the interpreter's fast lookups take)."""
        ends = os.pipe()
        try:
            write_frame(ends[1], CALL, b'{"code": "x = 1", "cell": 0, "value_max": 1}')
            json.loads(self.frame_from(ends[0], CALL))
        finally:
            os.close(ends[0])
            os.close(ends[1])
        key = "\0pysandbox-warm-up"
        if key not in self.namespace:
            self.namespace[key] = None
            del self.namespace[key]
        if key not in linecache.cache:
            linecache.cache[key] = (0, None, [], key)
            del linecache.cache[key]
        value = self.execute("_w = [1]\n_w", "<warm-up>", {})
        self.flush()
        json.dumps({"pid": os.getpid(), "value": repr(value), "error": None}).encode()

    @staticmethod
    def execute(code: str, name: str, namespace: dict[str, Any]) -> object:
        """Run ``code`` in ``namespace`` as a notebook cell: the value of a final
        expression, else None."""
        tree = ast.parse(code, name, "exec")
        last = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = ast.Expression(final.value)
        exec(compile(tree, name, "exec"), namespace)
        if last is None:
            return None
        return eval(compile(last, name, "eval"), namespace)

    @staticmethod
    def flush() -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()


def codec() -> Any:
    """The value codec: ``_model/value_codec.py``, whose text ``session_plan`` joins to
    this program's."""
    return globals()["ValueCodec"]


def stop(pid: int) -> None:
    """Stop the keeper's child ``pid``, every thread of it, and return once it has
    stopped (or ended)."""
    try:
        os.kill(pid, signal.SIGSTOP)
        os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    except (ProcessLookupError, ChildProcessError):
        pass


def wait_gone(pid: int) -> None:
    """Wait until the process ``pid`` has exited (its memory is unmapped by then)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # a kernel before 5.3: look every millisecond
        while (stat := process_stat(pid)) is not None and stat.state not in (b"Z", b"X"):
            time.sleep(0.001)
        return
    try:
        select.select([handle], [], [])
    finally:
        os.close(handle)


def describe(exc: BaseException, cap: int, hidden: str | None = None) -> dict[str, str]:
    """An exception as data: its type, message and the traceback of the cell's frames,
    without the first ones of the file named ``hidden`` (a harness's cell)."""
    trace = exc.__traceback__
    while trace is not None and trace.tb_frame.f_code.co_filename in (__file__, hidden):
        trace = trace.tb_next
    try:
        message = str(exc)
    except BaseException:
        message = "<the exception's str() failed>"
    try:
        text = "".join(traceback.format_exception(type(exc), exc, trace))
    except BaseException:
        text = f"{type(exc).__name__}: {message}\n"
    return {"type": type(exc).__name__, "message": message[:cap], "traceback": text[-cap:]}


class Stat(NamedTuple):
    """What ``/proc/PID/stat`` says of a process."""

    state: bytes
    parent: int
    #: CPU seconds of the process and its reaped children.
    cpu: float


def process_stat(pid: int | str) -> Stat | None:
    """The ``Stat`` of ``pid``, or None (no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        ticks = sum(int(field) for field in fields[11:15])
        return Stat(fields[0], int(fields[1]), ticks / CLOCK_TICKS)
    except (OSError, IndexError, ValueError):
        return None


class Keeper:
    """The keeper's side: the host's requests, the state process, the calls."""

    def __init__(
        self, request_fd: int, reply_fd: int, call_fd: int, patterns: Patterns = ((), ())
    ) -> None:
        self.request_fd = request_fd
        #: The session's ``files_include`` and ``files_exclude``: only the files they let
        #: through are watched and returned.
        self.patterns = patterns
        self.reply_fd = reply_fd
        self.call_fd = call_fd
        self.me = os.getpid()
        self.out_read, out_write = os.pipe()
        self.err_read, err_write = os.pipe()
        control_read, self.control_write = os.pipe()
        self.result_read, result_write = os.pipe()
        self.show_read, show_write = os.pipe()
        prctl = libc_prctl()
        if prctl is None or prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            self.fatal("the keeper cannot become a subreaper")
        #: The working directory's files as the last call's answer (or the start) left
        #: them: a call's changed files are those that differ.
        self.files_seen = walk(patterns=patterns)
        #: REAP requests whose REAPED has not been read yet, and whether one is due once
        #: the host has its answer.
        self.unanswered = 0
        self.reap_later = False
        #: The state the last committed call replaced (0: none), until ``retire``.
        self.replaced = 0
        self.state = os.fork()
        if self.state == 0:
            for fd in (request_fd, reply_fd, self.out_read, self.err_read, self.show_read):
                os.close(fd)
            os.close(self.control_write)
            os.close(self.result_read)
            os.dup2(out_write, 1)
            os.dup2(err_write, 2)
            os.close(out_write)
            os.close(err_write)
            os.close(0)
            os.open("/dev/null", os.O_RDONLY)
            State(call_fd, control_read, result_write, show_write).serve()
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        for fd in (out_write, err_write, control_read, result_write, show_write):
            os.close(fd)
        for fd in (self.out_read, self.err_read, self.show_read):
            os.set_blocking(fd, False)
        self.results = b""
        kind, _ = self.next_result(None)
        if kind != STARTED:
            self.fatal("the state process did not start")
        write_frame(reply_fd, READY, json.dumps({"pid": self.me}).encode())

    def fatal(self, reason: str) -> NoReturn:
        """End the session: say why, then exit (the init ends every other process)."""
        try:
            write_frame(self.reply_fd, FATAL, json.dumps({"reason": reason}).encode())
        finally:
            os._exit(3)

    def next_result(self, deadline: float | None) -> tuple[int | None, bytes]:
        """The next frame on the result pipe, (None, b"") at ``deadline``."""
        while True:
            if len(self.results) >= HEADER.size:
                kind, length = HEADER.unpack_from(self.results)
                if length > 1 << 22:
                    self.fatal("a frame on the result pipe is too long")
                if len(self.results) >= HEADER.size + length:
                    payload = self.results[HEADER.size : HEADER.size + length]
                    self.results = self.results[HEADER.size + length :]
                    return kind, payload
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.result_read], [], [], timeout)
            if not ready:
                return None, b""
            data = os.read(self.result_read, CHUNK)
            if not data:
                self.fatal("the state process closed the result pipe")
            self.results += data

    def serve(self) -> NoReturn:
        """Answer the host's requests until it closes the request pipe."""
        while True:
            try:
                kind, payload = read_frame(self.request_fd)
            except EOFError:
                os._exit(0)
            if kind == CALL:
                Call(self, json.loads(payload)).run()
                if self.reap_later:
                    self.send_reap()
                self.retire()
            elif kind == UPLOAD:
                self.upload(payload)
            elif kind != INTERRUPT:
                self.fatal(f"unknown request {kind}")

    def upload(self, payload: bytes) -> None:
        """Write a call's input files (a JSON list of ``[name, size, mode]``, then their
        bytes) to the working directory, and say so, or say which one could not be
        written and why (the disk is full, a directory has its name): the host then
        sends no call.  They are not the call's changes."""
        (size,) = struct.unpack_from(">I", payload)
        offset = 4 + size
        answer = {}
        for name, length, mode in json.loads(payload[4:offset]):
            path = os.path.join("/sandbox", name)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                with os.fdopen(os.open(path, flags, mode), "wb") as out:
                    out.write(payload[offset : offset + length])
                self.files_seen[name] = facts_of(os.stat(path, follow_symlinks=False))
            except OSError as exc:
                answer = {"error": f"{name}: {exc.strerror}"}
                break
            offset += length
        write_frame(self.reply_fd, WRITTEN, json.dumps(answer).encode())

    def drain_calls(self) -> None:
        """Empty the call pipe: a call process that a limit ended before it had read
        its request whole left (some of) it there, which the next must not take for
        its own.  The host writes the next request only once it has this call's answer."""
        while select.select([self.call_fd], [], [], 0)[0]:
            if not os.read(self.call_fd, CHUNK):
                return

    def send_reap(self) -> None:
        """Tell the state that the call is over (``State.after_call``)."""
        self.reap_later = False
        write_frame(self.control_write, REAP, b"{}")
        self.unanswered += 1

    def retire(self) -> None:
        """End and reap the state that the last call replaced (stopped since the
        commit), once the host has its answer (its exit, which unmaps its memory,
        would take a CPU from the answer), or at once when the call left processes
        behind (``Call.commit``).  The next call's process, forked meanwhile, runs its
        code only once the replaced state is gone (``State.run_call``), so with its
        memory free and nothing of it left, and the keeper reads the call's limits
        right after this."""
        if self.replaced:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.replaced, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.replaced, 0)
            self.replaced = 0
            # The new state was the old one's child until now: had it ended, the old
            # one reaped it, and the keeper would never see that end.
            state = process_stat(self.state)
            if state is None or state.state == b"Z":
                self.fatal("the session's state process ended")


class Call:
    """One call, watched by the keeper from its request to its answer."""

    def __init__(self, keeper: Keeper, request: dict[str, Any]) -> None:
        self.keeper = keeper
        self.request = request
        self.written = {STDOUT: 0, STDERR: 0}
        self.truncated = {STDOUT: False, STDERR: False}
        self.caps = {STDOUT: request["stdout"], STDERR: request["stderr"]}
        self.reaped_cpu = 0.0
        self.killed_for: str | None = None
        self.deadline = 0.0
        self.displays = Displays(
            keeper.reply_fd,
            request["displays_max"],
            request["displays_count"],
            max(request["values_max"], ERROR_ROOM) + VALUES_ROOM if request["pull"] else -1,
        )

    def run(self) -> None:
        """Watch the call (its code came to the state on the call pipe) until it ends,
        then answer the host."""
        keeper = self.keeper
        deadline = self.deadline = time.monotonic() + self.request["wall"]
        outcome = None
        while outcome is None:
            now = time.monotonic()
            if now >= deadline and self.killed_for is None:
                self.kill("wall_time_exceeded")
            timeout = TICK
            if self.killed_for is None:
                timeout = min(timeout, max(0.0, deadline - now))
            readable = [keeper.result_read, keeper.out_read, keeper.err_read, keeper.show_read]
            readable.append(keeper.request_fd)
            if keeper.results:
                readable = [keeper.result_read]
                timeout = 0.0
            ready, _, _ = select.select(readable, [], [], timeout)
            if keeper.request_fd in ready:
                self.request_from_host()
            self.pump(ready)
            if keeper.result_read in ready or keeper.results:
                outcome = self.result()
            self.reap()
            if outcome is None and self.killed_for is not None:
                # A call process the state forked after the kill (it was still
                # reaping what the last call left) is ended as it comes.
                self.end_strays()
            running = outcome is None and self.killed_for is None
            if running and self.cpu_now() > self.request["cpu"]:
                self.kill("cpu_time_exceeded")
        keeper.drain_calls()
        self.answer(outcome)

    def request_from_host(self) -> None:
        keeper = self.keeper
        try:
            kind, _ = read_frame(keeper.request_fd)
        except EOFError:
            os._exit(0)
        if kind != INTERRUPT:
            keeper.fatal("a request came while a call ran")
        if self.killed_for is None:
            self.kill("interrupted")

    def result(self) -> dict[str, Any] | None:
        """The call's end from the result pipe, or None while it runs."""
        keeper = self.keeper
        kind, payload = keeper.next_result(time.monotonic())
        if kind is None:
            return None
        if kind == REAPED and keeper.unanswered:
            keeper.unanswered -= 1
            return None
        message = json.loads(payload)
        if kind == OUT_OF_MEMORY:
            if self.killed_for is None:
                self.killed_for = "memory_exceeded"
            return None
        if kind == FINISHED and self.killed_for is None:
            return self.commit(message)
        if kind == FINISHED:
            return None
        if kind == ENDED:
            return self.rolled_back(message)
        keeper.fatal(f"unknown result {kind}")
        return None

    def commit(self, message: dict[str, Any]) -> dict[str, Any]:
        keeper = self.keeper
        new_state = message["pid"]
        # The call's code can write to the result pipe, so FINISHED may be forged: only
        # a child of the state (the call process, or an impostor among them that would
        # then serve as the state) may become the state.  Any other pid (the init, the
        # keeper, a grandchild) would leave the session without a state process while
        # the call reads as committed.
        pid_like = isinstance(new_state, int) and not isinstance(new_state, bool)
        own = process_stat(new_state) if pid_like and new_state > 0 else None
        if own is None or own.parent != keeper.state:
            keeper.fatal("a report of the call's end came from no child of the state")
        if own.state == b"Z":
            keeper.fatal("the call's process ended as it finished")
        # Killed once the host has its answer (``Keeper.retire``); its CPU time is not
        # the call's.  One with threads (they run on in it) is stopped first, and the
        # keeper waits until it is, so that nothing they do outlives the call.
        if message.get("threaded") is True:
            stop(keeper.state)
        keeper.replaced = keeper.state
        keeper.state = new_state
        zombies = self.end_strays()
        if zombies:
            # What the call left, killed, may be the replaced state's children (its
            # threads forked them): they come to the keeper to reap once it is gone.
            keeper.retire()
            zombies = self.end_strays()
        self.settle(wait=bool(zombies))
        if zombies:
            # The call's processes that the state has just reaped count in its CPU.
            own = process_stat(new_state) or own
        cpu = self.reaped_cpu + own.cpu
        return {
            "outcome": "committed",
            "status": "ok",
            "value": message["value"],
            "error": message["error"],
            "cpu": cpu,
            "max_rss": peak_rss(new_state),
        }

    def rolled_back(self, message: dict[str, Any]) -> dict[str, Any]:
        # The call process's children were reparented to the keeper, which reaped them:
        # the state has none of the call's to reap.
        self.end_strays()
        self.settle(wait=False)
        status = message["status"]
        reason = self.killed_for
        if reason is None:
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                reason = "memory_exceeded"
            elif os.WIFSIGNALED(status):
                reason = "signaled"
            else:
                reason = "nonzero_exit"
        return {
            "outcome": "rolled_back",
            "status": reason,
            "wait_status": status,
            "cpu": self.reaped_cpu + message["cpu"],
            "max_rss": message["max_rss"],
        }

    def settle(self, wait: bool) -> None:
        """Tell the state the call is over: it reaps its ended children, answers, and
        forks the next spare.  What the call started and ``end_strays`` killed may be
        the state's children (after a commit, the call's process is the state), not
        the keeper's: zombies until the state reaps them, and a call returns only when
        what it ended is gone and reaped, so with such zombies (``wait``) the keeper
        waits for the answer, and the session is lost if the state will not give it.
        Otherwise the answer is taken later (``Keeper.unanswered``)."""
        keeper = self.keeper
        if not wait:
            # Once the host has its answer (``Keeper.serve``): the state then forks the
            # next spare, which for a large state copies megabytes of page tables, and
            # on a machine of few CPUs would hold the answer back.
            keeper.reap_later = True
            return
        keeper.send_reap()
        deadline = max(self.deadline, time.monotonic()) + 1.0
        while keeper.unanswered:
            kind, _ = keeper.next_result(deadline)
            if kind != REAPED:
                keeper.fatal("the state process did not reap the call's processes")
            keeper.unanswered -= 1
        self.reap()

    def kill(self, why: str) -> None:
        self.killed_for = why
        self.end_strays()

    def others(self) -> list[tuple[int, float, bool]]:
        """Every process of the sandbox but the init, the keeper and the state (and the
        state a call replaced): ``(pid, CPU seconds, whether it is a zombie)``."""
        keeper = self.keeper
        keep = {1, keeper.me, keeper.state, keeper.replaced}
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep:
                stat = process_stat(name)
                if stat is not None:
                    found.append((int(name), stat.cpu, stat.state == b"Z"))
        return found

    def end_strays(self) -> list[tuple[int, float, bool]]:
        """Kill every process but the keeper and the state until none lives; the
        zombies left (children of the state, not the keeper's to reap), as ``others``
        lists them."""
        while True:
            self.reap()
            found = self.others()
            living = [pid for pid, _, zombie in found if not zombie]
            if not living:
                return found
            for pid in living:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.0005)

    def reap(self) -> None:
        """Reap the keeper's ended children and count their CPU time; the state's end
        is the session's."""
        while True:
            try:
                pid, _, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.keeper.state:
                self.keeper.fatal("the session's state process ended")
            if pid == self.keeper.replaced:
                self.keeper.replaced = 0
                continue
            self.reaped_cpu += usage.ru_utime + usage.ru_stime

    def cpu_now(self) -> float:
        return self.reaped_cpu + sum(cpu for _, cpu, _ in self.others())

    def pump(self, ready: list[int]) -> None:
        keeper = self.keeper
        for fd, kind in ((keeper.out_read, STDOUT), (keeper.err_read, STDERR)):
            if fd in ready:
                self.forward(fd, kind)
        if keeper.show_read in ready:
            self.displays.take(keeper.show_read)

    def forward(self, fd: int, kind: int, into: list[bytes] | None = None) -> None:
        """Everything now in the stream ``fd`` to the host, within the call's cap: sent
        at once, or added to ``into`` as frames."""
        for data in chunks_now(fd):
            room = self.caps[kind] - self.written[kind]
            if len(data) > room:
                data = data[: max(0, room)]
                self.truncated[kind] = True
                if not self.request["truncate"] and self.killed_for is None:
                    self.kill("output_exceeded")
            if data and into is not None:
                into.append(HEADER.pack(kind, len(data)) + data)
            elif data:
                write_frame(self.keeper.reply_fd, kind, data)
            self.written[kind] += len(data)

    def answer(self, outcome: dict[str, Any]) -> None:
        """The rest of the call's output, its files and its ``DONE``, in one write when
        they are small (the host wakes once for them), else a frame at a time (no copy
        of megabytes of files in the keeper's memory)."""
        keeper = self.keeper
        frames: list[bytes] = []
        for fd, kind in ((keeper.out_read, STDOUT), (keeper.err_read, STDERR)):
            self.forward(fd, kind, frames)
        self.displays.take(keeper.show_read, frames)
        self.displays.drain(keeper.show_read)
        files, files_truncated, keeper.files_seen = changed_files(
            keeper.files_seen,
            self.request["files_max"],
            self.request["files_count"],
            keeper.patterns,
        )
        for name, mode, data in files:
            header = json.dumps({"name": name, "mode": mode}).encode()
            payload = struct.pack(">I", len(header)) + header + data
            frames.append(HEADER.pack(FILE, len(payload)) + payload)
        outcome.update(
            stdout_truncated=self.truncated[STDOUT],
            stderr_truncated=self.truncated[STDERR],
            files_truncated=files_truncated,
            displays_truncated=self.displays.truncated,
        )
        done = json.dumps(outcome).encode()
        frames.append(HEADER.pack(DONE, len(done)) + done)
        if sum(map(len, frames)) <= CHUNK:
            frames = [b"".join(frames)]
        for frame in frames:
            write_all(keeper.reply_fd, frame)


class Displays:
    """The keeper's side of a call's displays: frames read off the display pipe (the
    code can write anything there), each sent to the host whole once it has come, within
    the call's caps; one past them is skipped as it comes, never held, and counted as
    left out.  After a frame of another kind, the rest of the call's is skipped."""

    def __init__(self, reply_fd: int, max_bytes: int, max_count: int, values_max: int) -> None:
        self.reply_fd = reply_fd
        self.room = max_bytes
        self.count = max_count
        #: Bytes of the one frame of variables a call may send.
        self.values_room = values_max
        self.buffer = bytearray()
        self.skip = 0
        self.broken = False
        self.truncated = False

    def take(self, fd: int, into: list[bytes] | None = None) -> None:
        """Read what ``fd`` holds now and send (or add to ``into``) each whole frame."""
        for data in chunks_now(fd):
            self.buffer += data
            self.frames(into)

    def frames(self, into: list[bytes] | None) -> None:
        buffer = self.buffer
        while True:
            if self.skip or self.broken:
                cut = len(buffer) if self.broken else min(self.skip, len(buffer))
                del buffer[:cut]
                self.skip -= 0 if self.broken else cut
                if self.skip or self.broken:
                    return
            if len(buffer) < HEADER.size:
                return
            kind, length = HEADER.unpack_from(buffer)
            if not self.fits(kind, length):
                self.broken = kind not in (DISPLAY, VALUES)
                self.truncated = self.truncated or kind == DISPLAY or self.broken
                del buffer[: HEADER.size]
                self.skip = length
                continue
            if len(buffer) < HEADER.size + length:
                return
            frame = bytes(buffer[: HEADER.size + length])
            del buffer[: HEADER.size + length]
            if kind == VALUES:
                self.values_room = -1
            else:
                self.room -= length
                self.count -= 1
            if into is not None:
                into.append(frame)
            else:
                write_all(self.reply_fd, frame)

    def fits(self, kind: int, length: int) -> bool:
        """Whether a frame of ``kind`` and ``length`` is within the call's caps: a
        display of some bytes, and one frame of variables."""
        if kind == VALUES:
            return 0 <= length <= self.values_room
        return kind == DISPLAY and 0 < length <= self.room and self.count > 0

    def drain(self, fd: int) -> None:
        """Discard what is left: a frame cut short by the call's end, and anything a
        process of the call wrote after it (they are all gone by now)."""
        if self.buffer or self.skip:
            self.truncated = True
        self.buffer.clear()
        for _ in chunks_now(fd):
            pass


def chunks_now(fd: int) -> Iterator[bytes]:
    """The chunks the non-blocking ``fd`` holds now, until it is empty or ends."""
    while True:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            return
        yield data


def peak_rss(pid: int) -> int:
    """The peak resident set of ``pid`` in bytes (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


Facts = tuple[int, int, int, int]


def facts_of(info: os.stat_result) -> Facts:
    """What tells a file's versions apart: ``(mtime_ns, size, inode, mode)``."""
    return info.st_mtime_ns, info.st_size, info.st_ino, info.st_mode


#: The ``files_include`` and ``files_exclude`` patterns.
Patterns = tuple[tuple[str, ...], tuple[str, ...]]


def matches(patterns: tuple[str, ...], path: str) -> bool:
    """Whether one of ``patterns`` matches ``path`` or one of its parent directories
    (``fnmatch.fnmatchcase``, where ``*`` matches ``/`` too), as the init's filter."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(prefix, pattern) for pattern in patterns for prefix in prefixes)


def walk(top: str = "/sandbox", patterns: Patterns = ((), ())) -> dict[str, Facts]:
    """``{relative path: facts_of(its stat)}`` of the regular files below ``top`` that
    ``patterns`` let through (no include pattern or one matches, no exclude pattern
    does), links not followed; a directory an exclude pattern matches is not entered.
    Only those can come back, so only their changes are watched."""
    include, exclude = patterns
    found = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(top, relative)))
        except OSError:
            continue
        for entry in entries:
            name = os.path.join(relative, entry.name)
            if exclude and matches(exclude, name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(name)
                elif entry.is_file(follow_symlinks=False) and (
                    not include or matches(include, name)
                ):
                    found[name] = facts_of(entry.stat(follow_symlinks=False))
            except OSError:
                continue
    return found


def changed_files(
    before: dict[str, Facts], max_bytes: int, max_count: int, patterns: Patterns = ((), ())
) -> tuple[list[tuple[str, int, bytes]], bool, dict[str, Facts]]:
    """The files ``patterns`` let through that differ from ``before``, within the caps:
    ``([(name, mode, data)], truncated, those files as they are now)``."""
    files: list[tuple[str, int, bytes]] = []
    total, truncated = 0, False
    now = walk(patterns=patterns)
    for name, facts in sorted(now.items()):
        if before.get(name) == facts:
            continue
        if len(files) >= max_count or total + facts[1] > max_bytes:
            truncated = True
            continue
        try:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            descriptor = os.open(os.path.join("/sandbox", name), flags)
            with os.fdopen(descriptor, "rb") as source:
                data = source.read(max_bytes - total + 1)
        except OSError:
            continue
        if total + len(data) > max_bytes:
            truncated = True
            continue
        total += len(data)
        files.append((name, facts[3] & 0o777, data))
    return files, truncated, now


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    given = sys.argv[4:]
    session_patterns = (
        tuple(word[1:] for word in given if word.startswith("+")),
        tuple(word[1:] for word in given if word.startswith("-")),
    )
    request, reply, call = (int(fd) for fd in sys.argv[1:4])
    Keeper(request, reply, call, session_patterns).serve()
