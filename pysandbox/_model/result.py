# SPDX-License-Identifier: MIT
"""The records of a finished run: ``Result`` (with ``FrozenFiles``), ``ProcessOutput``
and ``SandboxFailure``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from .display import (
    Pretty,
    pretty,
    process_output_html,
    process_output_text,
    result_html,
    result_text,
)
from .escape import escape_report
from .file import File
from .record import record
from .status import Status, ending
from .untrusted import check_int, shown

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol, TypeVar, Union

    from .call_result import CallResult
    from .rich import Bundle
    from .schema import Encoding, FileDict, ResultDict
    from .session_result import CellResult

    _T = TypeVar("_T")

    class Outputs(Protocol):
        """What ``output_tails`` reads: a ``Result``, a ``CellResult``, a ``CallResult``."""

        @property
        def stdout(self) -> bytes: ...
        @property
        def stderr(self) -> bytes: ...
        @property
        def stdout_truncated(self) -> bool: ...
        @property
        def stderr_truncated(self) -> bool: ...

    #: What a ``SandboxFailure`` carries.
    Failed = Union["Result", CellResult, CallResult]

__all__ = [
    "FrozenFiles",
    "ProcessOutput",
    "Result",
    "SandboxFailure",
    "Status",
    "decode_text",
    "encode_text",
    "output_tails",
]

#: How many trailing lines of stdout and of stderr ``Result.check`` quotes.
CHECK_TAIL_LINES = 10


@record(frozen=False)
class ProcessOutput:
    """What ``eval_in_sandbox`` returns: the exit code and the stripped UTF-8 output.

    Truthy exactly when ``returncode == 0``.  Mutable, like the reference's record, so
    code written against the reference keeps working.
    """

    returncode: int = 0
    stdout: str = ""
    stderr: str = ""

    def __bool__(self) -> bool:
        return self.returncode == 0

    def _repr_pretty_(self, printer: Pretty, cycle: bool) -> None:
        """IPython's text form: the verdict, then stdout and stderr (``display``)."""
        pretty(printer, process_output_text(self), cycle, "ProcessOutput")

    def _repr_html_(self) -> str:
        """Jupyter's HTML form: the verdict, then stdout and stderr (``display``)."""
        return process_output_html(self)


class FrozenFiles(Mapping[str, bytes]):
    """A read-only mapping of relative path to content, the type of ``Result.files``.

    Unlike ``types.MappingProxyType`` it pickles, deep-copies and so goes through
    ``dataclasses.asdict``; it compares equal to any mapping with the same items.
    """

    __slots__ = ("_data",)

    def __init__(self, files: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = ()) -> None:
        self._data: dict[str, bytes] = dict(files)

    def __getitem__(self, name: str) -> bytes:
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenFiles], tuple[dict[str, bytes]]]:
        """Pickle and copy through the constructor, with a plain dict of the items."""
        return type(self), (dict(self._data),)


def encode_text(data: bytes) -> tuple[str, Encoding]:
    """``data`` as JSON text: ``(text, "utf-8")`` when it is valid UTF-8, else base64."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        import base64  # loads re, which a run does without

        return base64.b64encode(data).decode("ascii"), "base64"


def decode_text(text: object, encoding: object, what: str, encoding_what: str) -> bytes:
    """The inverse of ``encode_text``; ``ValueError`` naming ``what`` or ``encoding_what``."""
    if not isinstance(text, str):
        raise ValueError(f"{what}: expected a string, got {type(text).__name__}")
    if encoding == "utf-8":
        return text.encode("utf-8")
    if encoding == "base64":
        import base64  # loads re, which a run does without
        import binascii

        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise ValueError(f"{what}: invalid base64") from exc
    raise ValueError(f"{encoding_what}: must be 'utf-8' or 'base64', not {shown(encoding)}")


def _field(data: Mapping[str, object], key: str, kind: type[_T]) -> _T:
    """``data[key]`` when it is a ``kind`` (a bool is not an int), else ``ValueError``."""
    if key not in data:
        raise ValueError(f"{key}: missing")
    value = data[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ValueError(f"{key}: expected {kind.__name__}, got {shown(value)}")
    check_int(value, key)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key}: expected a finite number, got {shown(value)}")
    return value


def _flag(data: Mapping[str, object], key: str) -> bool:
    """``data[key]`` when it is a bool, False when it is missing, else ``ValueError``."""
    return _field(data, key, bool) if key in data else False


def _int_or_none(data: Mapping[str, object], key: str) -> int | None:
    """``data[key]`` when it is None or an int, else ``ValueError``."""
    if key in data and data[key] is None:
        return None
    return _field(data, key, int)


def _seconds(data: Mapping[str, object], key: str) -> float:
    """``data[key]`` as float seconds when it is an int or a float, else ``ValueError``."""
    if isinstance(data.get(key), int) and not isinstance(data.get(key), bool):
        return float(_field(data, key, int))  # within 2**63: float() cannot overflow
    return _field(data, key, float)


def _stream(data: Mapping[str, object], key: str) -> bytes:
    """The bytes that ``data[key]`` and ``data[key + "_encoding"]`` describe."""
    encoding = f"{key}_encoding"
    return decode_text(_field(data, key, str), _field(data, encoding, str), key, encoding)


def _tail(data: bytes, truncated: bool) -> str:
    """The last ``CHECK_TAIL_LINES`` lines of ``data``, decoded with replacement, control
    characters and CI log commands escaped (``_escape.escape_report``): the tails reach
    terminals and CI logs inside pytest reports and ``SandboxFailure``."""
    lines = escape_report(data.decode("utf-8", "replace")).split("\n")
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return "(empty)"
    shown = lines[-CHECK_TAIL_LINES:]
    notes = []
    if len(lines) > len(shown):
        notes.append(f"last {len(shown)} of {len(lines)} lines")
    if truncated:
        notes.append("truncated at the cap")
    head = f"({', '.join(notes)})\n" if notes else ""
    return head + "\n".join(shown)


def output_tails(result: Outputs) -> str:
    """The last ``CHECK_TAIL_LINES`` lines of stdout and of stderr, each under a
    ``--- stdout ---`` or ``--- stderr ---`` line, as ``Result.check`` quotes them."""
    return (
        f"--- stdout ---\n{_tail(result.stdout, result.stdout_truncated)}\n"
        f"--- stderr ---\n{_tail(result.stderr, result.stderr_truncated)}"
    )


@record(unhashed=("files", "displays"))
class Result:
    """What ``run`` and ``run_python`` return: how the program ended, its output, its
    usage, and the files it left.

    Truthy exactly when ``status`` is ``Status.OK``.  Immutable: ``files`` is a
    read-only mapping (a copy of the mapping given).  Hashable: ``files`` takes part in
    ``==`` but not in the hash; pickles and copies like any record.
    """

    #: How the run ended.
    status: Status
    #: The program's exit code, or None when a signal killed it.
    returncode: int | None
    #: The number of the signal that killed the program, or None when it exited.
    signal: int | None
    #: What the program wrote to stdout, at most ``Limits.stdout`` bytes.
    stdout: bytes
    #: What the program wrote to stderr, at most ``Limits.stderr`` bytes.
    stderr: bytes
    #: More was written to stdout than was kept.
    stdout_truncated: bool
    #: More was written to stderr than was kept.
    stderr_truncated: bool
    #: Seconds from the start of the sandbox to its end.
    wall_time: float
    #: User + system CPU seconds of the whole process tree, children included.
    cpu_time: float
    #: Bytes: the peak resident set size of the largest process.
    max_rss: int
    #: The regular files left in the working directory, by relative path (``"out/a.txt"``):
    #: a read-only ``FrozenFiles``.
    files: Mapping[str, bytes]
    #: Some files were left out of ``files`` (over ``Limits.files_out``, or unreadable).
    files_truncated: bool
    #: The names in ``files`` whose owner-execute bit was set at the end (0700, 0750 and
    #: 0755 are executable; 0644 and 0610 are not).
    executables: frozenset[str] = frozenset()
    #: Seconds the call waited for a free slot of its ``Runner`` before the sandbox
    #: started (0.0 outside a ``Runner``); never part of ``wall_time``.
    queued_time: float = 0.0
    #: What a notebook would have shown, for ``run_python(..., displays=True)``: figures
    #: (``plt.show()``, and those open at the end) and objects given to ``display()``, as
    #: checked and sanitized ``Bundle``s, in order; empty otherwise.
    displays: tuple[Bundle, ...] = ()
    #: Some displays were left out (over ``Limits.displays`` or ``displays_count``).
    displays_truncated: bool = False
    #: A fork or clone was refused because the sandbox had ``Limits.processes`` tasks.
    #: Exact where a pids cgroup caps the run (its ``pids.events``); without one
    #: (``RLIMIT_NPROC``), sampled: the C core's watcher saw, in one of its samples 50 ms
    #: apart, the sandbox hold as many tasks as the cap allows (see docs/security.rst).
    processes_exceeded: bool = False
    #: A limit ended the run before the program did, so the files it left were never
    #: collected: ``files`` is empty and ``files_truncated`` is set, with nothing over
    #: ``Limits.files_out``.
    files_not_collected: bool = False

    def __post_init__(self) -> None:
        """Keep a read-only copy of ``files``: later changes to the caller's do not show.
        ``executables`` becomes a frozenset and must name files of ``files``."""
        object.__setattr__(self, "files", FrozenFiles(self.files))
        object.__setattr__(self, "displays", tuple(self.displays))
        if isinstance(self.executables, (str, bytes)):
            raise TypeError("executables must be a set of names, not a single name")
        object.__setattr__(self, "executables", frozenset(self.executables))
        strays = sorted(self.executables - self.files.keys())
        if strays:
            raise ValueError(f"executables: names not in files: {strays!r}")

    def __bool__(self) -> bool:
        return self.status is Status.OK

    def files_with_modes(self) -> dict[str, File]:
        """``files`` as ``File`` values that keep the executable bit, ready to be the
        ``files=`` of the next run (a program compiled here runs there)."""
        return {
            name: File(content, executable=name in self.executables)
            for name, content in self.files.items()
        }

    def stdout_text(self, errors: str = "replace") -> str:
        """``stdout`` decoded as UTF-8; ``errors`` as for ``bytes.decode``."""
        return self.stdout.decode("utf-8", errors)

    def stderr_text(self, errors: str = "replace") -> str:
        """``stderr`` decoded as UTF-8; ``errors`` as for ``bytes.decode``."""
        return self.stderr.decode("utf-8", errors)

    def to_dict(self) -> ResultDict:
        """The result as a JSON-ready dict (``json.dumps`` takes it as it is), typed as
        ``pysandbox.ResultDict``.

        Keys: ``status`` (the ``Status`` name, ``"OK"``), ``returncode`` and ``signal``
        (int or None), ``stdout`` and ``stderr`` (str) with ``stdout_encoding`` and
        ``stderr_encoding`` (``"utf-8"`` when the bytes are valid UTF-8 and the text is
        them decoded, else ``"base64"``), ``stdout_truncated`` and ``stderr_truncated``,
        ``wall_time`` and ``cpu_time`` (float seconds), ``max_rss`` (int bytes), ``files``
        (relative path to ``{"data": str, "encoding": "utf-8" | "base64", "executable":
        bool}``), ``files_truncated`` and ``queued_time`` (float seconds); and for a run
        that has displays (or left some out), ``displays`` (a list of ``Bundle.to_json()``
        dicts, Jupyter's ``display_data`` data: images in base64) and
        ``displays_truncated``; ``processes_exceeded`` and ``files_not_collected`` only
        when true: a run without any of them writes exactly what 0.1.0 wrote.
        ``Result.from_dict`` turns it back into an equal result.
        """
        stdout, stdout_encoding = encode_text(self.stdout)
        stderr, stderr_encoding = encode_text(self.stderr)
        files: dict[str, FileDict] = {}
        for name, content in self.files.items():
            data, encoding = encode_text(content)
            executable = name in self.executables
            files[name] = {"data": data, "encoding": encoding, "executable": executable}
        described: ResultDict = {
            "status": self.status.name,
            "returncode": self.returncode,
            "signal": self.signal,
            "stdout": stdout,
            "stdout_encoding": stdout_encoding,
            "stdout_truncated": self.stdout_truncated,
            "stderr": stderr,
            "stderr_encoding": stderr_encoding,
            "stderr_truncated": self.stderr_truncated,
            "wall_time": self.wall_time,
            "cpu_time": self.cpu_time,
            "max_rss": self.max_rss,
            "files": files,
            "files_truncated": self.files_truncated,
            "queued_time": self.queued_time,
        }
        if self.displays or self.displays_truncated:
            described["displays"] = [bundle.to_json() for bundle in self.displays]
            described["displays_truncated"] = self.displays_truncated
        if self.processes_exceeded:
            described["processes_exceeded"] = True
        if self.files_not_collected:
            described["files_not_collected"] = True
        return described

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Result:
        """The ``Result`` that ``to_dict`` described; ``ValueError`` for a malformed dict.

        A files entry without ``"executable"`` (written before it existed) is not
        executable; a dict without ``"queued_time"`` did not wait (0.0), one without
        ``"displays"`` showed none, one without ``"processes_exceeded"`` or
        ``"files_not_collected"`` has it False.  Each display is checked again, as it came
        from a sandbox (``Bundle.from_json``)."""
        try:
            status = Status[_field(data, "status", str)]
        except KeyError:
            raise ValueError(f"status: no such Status {shown(data['status'])}") from None
        files_in = data.get("files")
        if not isinstance(files_in, Mapping):
            raise ValueError(f"files: expected a mapping, got {shown(files_in)}")
        files: dict[str, bytes] = {}
        executables: set[str] = set()
        for name, entry in files_in.items():
            if not isinstance(name, str) or not isinstance(entry, Mapping):
                raise ValueError("files: expected name -> {'data': ..., 'encoding': ...}")
            what = f"files[{name!r}]"
            files[name] = decode_text(entry.get("data"), entry.get("encoding"), what, what)
            executable = entry.get("executable", False)
            if not isinstance(executable, bool):
                raise ValueError(f"{what}['executable']: expected bool, got {shown(executable)}")
            if executable:
                executables.add(name)
        return cls(
            status=status,
            returncode=_int_or_none(data, "returncode"),
            signal=_int_or_none(data, "signal"),
            stdout=_stream(data, "stdout"),
            stderr=_stream(data, "stderr"),
            stdout_truncated=_field(data, "stdout_truncated", bool),
            stderr_truncated=_field(data, "stderr_truncated", bool),
            wall_time=_seconds(data, "wall_time"),
            cpu_time=_seconds(data, "cpu_time"),
            max_rss=_field(data, "max_rss", int),
            files=files,
            files_truncated=_field(data, "files_truncated", bool),
            executables=frozenset(executables),
            queued_time=_seconds(data, "queued_time") if "queued_time" in data else 0.0,
            displays=_displays(data.get("displays", [])),
            displays_truncated=_flag(data, "displays_truncated"),
            processes_exceeded=_flag(data, "processes_exceeded"),
            files_not_collected=_flag(data, "files_not_collected"),
        )

    def check(self) -> Result:
        """Return the result itself when the status is ``OK``, else raise ``SandboxFailure``.

        The message gives the verdict, the exit code or signal, the CPU and wall time and
        the last ``CHECK_TAIL_LINES`` lines of stdout and of stderr (decoded with
        replacement), so ``run(...).check().stdout`` reads well in a test and a failing
        pytest test shows what the program did: the test's own line, not this method's
        (``__tracebackhide__``).  A run that reached the process cap says so
        (``processes_exceeded``); one that did and still ended ``OK`` passes.
        """
        __tracebackhide__ = True
        if self.status is Status.OK:
            return self
        capped = "; process limit reached" if self.processes_exceeded else ""
        message = (
            f"sandboxed program failed: {self.status.name}, "
            f"{ending(self.returncode, self.signal)}{capped}; "
            f"CPU {self.cpu_time:.3f} s, wall {self.wall_time:.3f} s\n{output_tails(self)}"
        )
        raise SandboxFailure(message, self)

    def _repr_pretty_(self, printer: Pretty, cycle: bool) -> None:
        """IPython's text form: verdict, numbers, files, folded output (``display``)."""
        pretty(printer, result_text(self), cycle, "Result")

    def _repr_html_(self) -> str:
        """Jupyter's HTML form: verdict, numbers, files, escaped output (``display``)."""
        return result_html(self)


def _displays(listed: object) -> tuple[Bundle, ...]:
    """``to_dict``'s ``displays``, each bundle checked again; ``ValueError`` else."""
    from .rich import Bundle  # only where displays are read: ``pysandbox run`` never

    if not isinstance(listed, list):
        raise ValueError(f"displays: expected a list, got {shown(listed)}")
    return tuple(Bundle.from_json(entry) for entry in listed)


class SandboxFailure(AssertionError):
    """``Result.check`` found a run that did not end ``OK``, or ``CallResult.check`` a
    call that raised or did not finish; ``result`` is that run (a ``Result``) or call
    (a ``CallResult``).

    An ``AssertionError``, so pytest reports it as a failed check, with the message:
    the verdict, the exit code or signal, the times and the tails of stdout and stderr.
    Named ``pysandbox.SandboxFailure`` in tracebacks and pickles, as it is imported.
    """

    __module__ = "pysandbox"

    def __init__(self, message: str, result: Failed) -> None:
        super().__init__(message, result)
        #: The run or call that failed.
        self.result = result

    def __str__(self) -> str:
        return str(self.args[0])
