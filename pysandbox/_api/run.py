# SPDX-License-Identifier: MIT
"""``run`` and ``run_python``: any program in the sandbox, with stdin, files, limits and a
``Result`` that says exactly how it ended."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from .._host import programs
from .._launch import bwrap
from .._launch.bwrap import MAIN_NAME, MAIN_PATH, WORKDIR
from .._launch.launcher import launch
from .._launch.plan import Facts, FdLayout, Plan
from .._launch.readable import check_readable
from .._model.cancel import CancelEvent
from .._model.file import File
from .._model.filestream import check_fits_tmpfs, encode_files, stream_cap
from .._model.limits import MIN_OPEN_FILES, Limits
from .._model.result import Result
from .call import Call, OnOutput, Stdin
from .result_of import result_of

__all__ = [
    "Call",
    "OnOutput",
    "Stdin",
    "as_bytes",
    "build_plan",
    "check_argv",
    "check_env",
    "check_file_filter",
    "check_output_callback",
    "check_python",
    "check_readable",
    "finish",
    "python_fontlist",
    "python_program",
    "run",
    "run_python",
]


def check_output_callback(callback: object, name: str) -> None:
    """``TypeError`` naming ``name`` unless ``callback`` is None or callable."""
    if callback is not None and not callable(callback):
        raise TypeError(f"{name} must be callable or None, not {type(callback).__name__}")


def check_argv(argv: object) -> list[str]:
    """``argv`` as a list, or a ``TypeError``/``ValueError`` naming ``argv``."""
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence):
        raise TypeError(f"argv must be a sequence of str, not {type(argv).__name__}")
    items = list(argv)
    if not items:
        raise ValueError("argv must not be empty")
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"argv items must be str, not {type(item).__name__}")
        if "\0" in item:
            raise ValueError("argv items must not contain NUL")
    if not items[0]:
        raise ValueError("argv[0] must not be empty")
    return items


def check_env(env: object) -> list[str]:
    """``env`` as bwrap's ``--setenv`` options, or a ``TypeError``/``ValueError`` naming
    ``env``."""
    if env is None:
        return []
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of str to str, not {type(env).__name__}")
    options = []
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("env keys and values must be str")
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(f"env has an invalid variable: {key!r}")
        options += ["--setenv", key, value]
    return options


def check_file_filter(include: object, exclude: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``files_include`` and ``files_exclude`` as tuples (None: ``()``), or a
    ``TypeError``/``ValueError`` naming the argument (``file_patterns.check_patterns``,
    imported only when a pattern is given: ``pysandbox run``'s start-up does without)."""
    if include is None and exclude is None:
        return (), ()
    from .._model.file_patterns import check_patterns

    return check_patterns(include, "files_include"), check_patterns(exclude, "files_exclude")


def filter_options(include: tuple[str, ...], exclude: tuple[str, ...]) -> list[str]:
    """The init's options for checked ``files_include`` and ``files_exclude``."""
    options = []
    for pattern in include:
        options += ["--files-include", pattern]
    for pattern in exclude:
        options += ["--files-exclude", pattern]
    return options


def as_bytes(data: bytes | bytearray | memoryview | str, what: str) -> bytes:
    """``data`` as bytes (str as UTF-8); errors name ``what``."""
    if isinstance(data, str):
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{what} is not encodable as UTF-8: {exc.reason}") from None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, str or None, not {type(data).__name__}")


def _stdin_plan(
    stdin: Stdin,
) -> tuple[bytes, Callable[[bytes], bytes | None] | None]:
    """The initial stdin bytes and the C core's ``stdin_callback`` for ``stdin``."""
    if stdin is None:
        return b"", None
    if not callable(stdin):
        return as_bytes(stdin, "stdin"), None
    callback = stdin

    def reply_to(chunk: bytes) -> bytes | None:
        reply = callback(chunk)
        return None if reply is None else as_bytes(reply, "the stdin callback's reply")

    first = reply_to(b"")
    if first is None:
        return b"", None
    return first, reply_to


def finish(plan: Plan, limits: Limits, launcher: Callable[[Plan], Facts] = launch) -> Result:
    """Launch ``plan`` (made by ``build_plan``, which returned ``limits``) with
    ``launcher`` and classify how it ended: the second half of ``run``, for callers that
    wait between the two (a ``Runner``, which may run it in a warm sandbox)."""
    return result_of(launcher(plan), limits)


def python_program(code: object, args: object) -> tuple[list[str], bytes]:
    """``run_python``'s program line and the code as UTF-8, or a ``TypeError``/``ValueError``
    naming ``code`` or ``args``."""
    source, extra = check_python(code, args)
    return [programs.find_python(), "-u", MAIN_PATH, *extra], source


def check_python(code: object, args: object) -> tuple[bytes, list[str]]:
    """``run_python``'s ``code`` as UTF-8 and its ``args`` as a list, or a ``TypeError``/
    ``ValueError`` naming ``code`` or ``args``; pure, unlike ``python_program``."""
    if not isinstance(code, str):
        raise TypeError(f"code must be str, not {type(code).__name__}")
    if "\0" in code:
        raise ValueError("code must not contain NUL characters")
    try:
        source = code.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"code is not encodable as UTF-8: {exc.reason}") from exc
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a sequence of str, not {type(args).__name__}")
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"args items must be str, not {type(arg).__name__}")
        if "\0" in arg:
            raise ValueError("args items must not contain NUL")
    return source, list(args)


def python_fontlist(code: bytes | None) -> tuple[str, bytes] | None:
    """The prebuilt matplotlib font list a sandbox running Python code (``code`` not
    None) is shown (``fontlist.py``); None for any other program."""
    if code is None:
        return None
    from .fontlist import fontlist  # only where Python runs: run's hot path never needs it

    return fontlist(programs.find_python(), _run_without_fontlist)


def _run_without_fontlist(code: str, limits: Limits, env: Mapping[str, str]) -> Result:
    """``run_python`` of ``code`` with no prebuilt font list: the one that builds it."""
    program, source = python_program(code, [])
    call = Call(program, code=source, limits=limits, env=env)
    return finish(*build_plan(call, fontlist=False))


def _init_options(
    layout: FdLayout, limits: Limits, files_fd: int | None, python: bool, waiter: bool
) -> list[str]:
    """The init's options of a ``run``: where the files go out and come in, and their
    caps; ``main.py`` not returned for ``run_python``; a warm sandbox's init reads its
    call's file patterns from the hand-over in the payload (``Handover``), as its call
    comes after it started."""
    options = ["--files-out-fd", str(layout.captures[0])]
    options += ["--files-dir", WORKDIR, "--files-max", str(limits.files_out)]
    options += ["--files-count", str(limits.files_out_count)]
    if files_fd is not None:
        options += ["--files-in-fd", str(files_fd)]
    if python:
        options += ["--skip", MAIN_NAME]
    if waiter:
        options += ["--files-filter-fd", str(layout.waiter[2])]
    return options


def build_plan(
    call: Call, *, waiter: bool = False, client: bool = False, fontlist: bool = True
) -> tuple[Plan, Limits]:
    """Check the arguments of ``run`` and build its ``Plan``: ``call.program`` under the
    init, in a writable ``WORKDIR`` with the files, and the code when ``call.code`` is
    given (``run_python``), with matplotlib's prebuilt font list unless not ``fontlist``
    (its own build); with ``waiter``, its fds numbered for a warm sandbox's waiter
    (``waiter.waiting_plan`` makes it one), whose init then takes the files' patterns
    from the hand-over, and with ``client`` for a copy client's too (a template's
    copies, ``copies.py``).  Returns the limits in force with it."""
    limits, files, code = _checked_limits(call.limits), call.files, call.code
    files_stream = encode_files(files) if files else None
    check_fits_tmpfs(files or {}, limits.disk, limits.disk_inodes())
    if files and code is not None and MAIN_NAME in files:
        raise ValueError(f"files: {MAIN_NAME!r} is where run_python puts the code")
    paths = check_readable(call.readable)
    env_options = check_env(call.env)
    include, exclude = check_file_filter(call.files_include, call.files_exclude)
    check_output_callback(call.on_stdout, "on_stdout")
    check_output_callback(call.on_stderr, "on_stderr")
    initial, stdin_callback = _stdin_plan(call.stdin)
    python = programs.find_python()

    payloads = [] if files_stream is None else [files_stream]
    # Each of the font list and the display pipe is one more descriptor handed to bwrap:
    # a limit at the smallest one (``MIN_OPEN_FILES``) has room for neither, and then
    # matplotlib builds its font list itself.
    spare = limits.open_files - MIN_OPEN_FILES
    shows = _displays_wanted(call, spare)
    fonts = python_fontlist(code) if fontlist and spare > int(shows) else None
    if fonts is not None:
        payloads.append(fonts[1])
    layout = FdLayout.of(
        payloads=len(payloads),
        captures=2 if shows else 1,
        code=code is not None,
        binds=len(paths),
        waiter=waiter,
        client=client,
    )
    files_fd = layout.payloads[0] if files_stream is not None else None
    init_options = _init_options(layout, limits, files_fd, code is not None, waiter)
    init_options += filter_options(include, exclude)
    plan = Plan(
        layout=layout,
        python=python,
        options=bwrap.run_options(
            disk=limits.disk,
            readable=list(zip(layout.binds, paths)),
            env=env_options,
            fontlist=None if fonts is None else (layout.payloads[-1], fonts[0]),
        ),
        readable=paths,
        writable=[WORKDIR, bwrap.CACHE_DIR],
        init_options=init_options,
        program=_shown_program(call.program, layout, limits) if shows else call.program,
        code=code,
        code_path=None if code is None else MAIN_PATH,
        code_mode=bwrap.MAIN_MODE,
        payloads=payloads,
        capture_caps=[
            stream_cap(limits.files_out, limits.files_out_count),
            *([display_stream_cap(limits)] if shows else []),
        ],
        rlimits=limits.rlimits(),
        processes=limits.processes,
        memory_total=limits.memory + limits.disk + bwrap.CACHE_SIZE,
        disk_inodes=limits.disk_inodes(),
        stdout_cap=limits.stdout,
        stderr_cap=limits.stderr,
        kill_on_cap=not limits.truncate_output,
        timeout=limits.wall_time,
        cpu_limit=limits.cpu_time,
        stdin=initial,
        stdin_callback=stdin_callback,
        on_stdout=call.on_stdout,
        on_stderr=call.on_stderr,
        cancel=call.cancel,
    )
    return plan, limits


def _checked_limits(limits: object) -> Limits:
    """``limits`` as given, or the defaults for None; ``TypeError`` for anything else."""
    if limits is None:
        return Limits()
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits or None, not {type(limits).__name__}")
    return limits


def _displays_wanted(call: Call, spare_fds: int) -> bool:
    """``run_python``'s ``displays``, checked: a bool, and a descriptor to spare for the
    display pipe (``spare_fds`` past ``MIN_OPEN_FILES``)."""
    if not isinstance(call.displays, bool):
        raise TypeError(f"displays must be a bool, not {type(call.displays).__name__}")
    if call.displays and spare_fds < 1:
        raise ValueError(
            f"displays: the display pipe needs Limits.open_files of at least "
            f"{MIN_OPEN_FILES + 1}, got {MIN_OPEN_FILES + spare_fds}"
        )
    return call.displays


def display_stream_cap(limits: Limits) -> int:
    """Bytes of a one-shot run's display stream kept: the displays' bytes and each
    frame's header, plus one frame header past the count (to see it was passed)."""
    return limits.displays + (limits.displays_count + 1) * 5


def _shown_program(program: list[str], layout: FdLayout, limits: Limits) -> list[str]:
    """``python -u main.py ARGS`` as the display hook runs it: ``python -u -c PROGRAM
    FD CAP main.py ARGS``, its displays on the second capture."""
    from .sandbox_programs import one_shot_program  # only where displays are asked

    python, unbuffered, path, *args = program
    cap = str(limits.displays)
    return [python, unbuffered, "-c", one_shot_program(), str(layout.captures[1]), cap, path, *args]


def run(
    argv: Sequence[str],
    *,
    stdin: Stdin = None,
    limits: Limits | None = None,
    files: Mapping[str, bytes | File] | None = None,
    readable: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cancel: CancelEvent | None = None,
    on_stdout: OnOutput = None,
    on_stderr: OnOutput = None,
    files_include: Iterable[str] | None = None,
    files_exclude: Iterable[str] | None = None,
) -> Result:
    """Run a program in a fresh sandbox and say exactly how it ended.

    :param argv: the program and its arguments; ``argv[0]`` is an absolute path inside
        the sandbox or a name looked up on its ``PATH`` (``/usr/local/bin:/usr/bin:/bin``).
        A program the sandbox cannot start (missing, not executable) raises
        ``SandboxError`` naming the cause, never a result with an exit code.
    :param stdin: None (closed), bytes or str (UTF-8) fed completely, then closed; or a
        callable for interactive programs, called once with ``b""`` and then with each
        chunk of stdout as it arrives (what the pipe delivered: part of a line, or
        several lines), returning bytes or str to write, ``b""`` for nothing now, or
        None to close stdin.  If it raises, the sandbox is killed and
        reaped and the exception propagates.
    :param limits: the limits (``Limits()`` when None).
    :param files: input files placed in the working directory ``/sandbox``, by relative
        path: the content (bytes), or a ``File`` that may be executable;
        ``Result.files`` holds the regular files left there at the end, and
        ``Result.executables`` names those that are executable.
    :param readable: host paths the program may read, bound read-only at the same path.
    :param env: environment variables added to ``PATH`` and ``HOME`` (``/sandbox``).
    :param cancel: an object whose ``is_set()`` is asked every 50 ms; once true, the
        sandbox is killed and ``Cancelled`` is raised (``threading.Event`` fits).
    :param on_stdout: a callable shown the program's stdout as it arrives: called in
        this thread with each chunk (bytes, never empty, as the pipe delivered it), in
        order; the chunks join to exactly ``Result.stdout`` (nothing past the cap).  Its
        result is ignored.  Limits hold meanwhile: past the wall time the program is
        killed as soon as the callback returns, and the result says
        ``WALL_TIME_EXCEEDED``.  If it raises, the sandbox is killed and reaped and the
        exception propagates.  With a ``stdin`` callback too, it sees each chunk first.
    :param on_stderr: the same for stderr.
    :param files_include: glob patterns (an iterable of str; None: no filter): only the
        files one matches come back in ``Result.files``.  A pattern is matched against
        the file's path relative to ``/sandbox`` with ``fnmatch`` rules, ``*`` matching
        ``/`` too, and also matches every file below a directory it matches
        (``["out"]`` takes all of ``out/``).
    :param files_exclude: glob patterns as ``files_include``: no file one matches comes
        back, and a directory one matches is not even walked (``[".cache"]``).  Files
        filtered out are not read and count toward neither ``files_out`` nor
        ``files_out_count``.
    :raises TypeError, ValueError: a bad argument, before anything runs.
    :raises SandboxError: the sandbox could not run the program at all.
    """
    call = Call(
        check_argv(argv),
        stdin=stdin,
        limits=limits,
        files=files,
        readable=readable,
        env=env,
        cancel=cancel,
        on_stdout=on_stdout,
        on_stderr=on_stderr,
        files_include=files_include,
        files_exclude=files_exclude,
    )
    return finish(*build_plan(call))


def run_python(
    code: str,
    *,
    args: Sequence[str] = (),
    stdin: Stdin = None,
    limits: Limits | None = None,
    files: Mapping[str, bytes | File] | None = None,
    readable: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cancel: CancelEvent | None = None,
    on_stdout: OnOutput = None,
    on_stderr: OnOutput = None,
    files_include: Iterable[str] | None = None,
    files_exclude: Iterable[str] | None = None,
    displays: bool = False,
) -> Result:
    """Run Python source with the caller's own interpreter, as ``python -u main.py ARGS``.

    The code is ``/sandbox/main.py`` (read-only, and not returned in ``Result.files``);
    everything else is as for ``run``.

    :param displays: also give back what a notebook would show, as ``Result.displays``:
        ``display()`` is a builtin, matplotlib draws with pysandbox's inline backend
        (``plt.show()`` shows the open figures; those still open at the end are shown
        then), within ``Limits.displays`` and ``displays_count``.  The code then runs
        under a small program of pysandbox's (``python -c``, which runs ``main.py`` as
        ``python main.py`` does: ``docs/sessions.rst`` says what differs).
    """
    program, source = python_program(code, args)
    call = Call(
        program,
        code=source,
        stdin=stdin,
        limits=limits,
        files=files,
        readable=readable,
        env=env,
        cancel=cancel,
        on_stdout=on_stdout,
        on_stderr=on_stderr,
        files_include=files_include,
        files_exclude=files_exclude,
        displays=displays,
    )
    return finish(*build_plan(call))
