"""Result records."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import signal as _signal
from collections.abc import Iterable, Iterator, Mapping

from ._errors import SandboxFailure

__all__ = ["FrozenFiles", "ProcessOutput", "Result", "Status"]

#: How many trailing lines of stdout and of stderr ``Result.check`` quotes.
CHECK_TAIL_LINES = 10


@dataclasses.dataclass
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


class Status(enum.Enum):
    """How a sandboxed run ended, the first that applies in the order below.

    The limits the sandbox enforced come first (it killed the program, so the exit
    status says little); then what the program did by itself.
    """

    #: The program exited with code 0.
    OK = "ok"
    #: The program exited by itself with a code other than 0.
    NONZERO_EXIT = "nonzero_exit"
    #: A signal killed the program, and no limit below explains it (a crash, an abort).
    SIGNALED = "signaled"
    #: The CPU time of the whole process tree passed ``Limits.cpu_time``.
    CPU_TIME_EXCEEDED = "cpu_time_exceeded"
    #: ``Limits.wall_time`` passed; the sandbox was killed.
    WALL_TIME_EXCEEDED = "wall_time_exceeded"
    #: The program failed for lack of memory: a Python ``MemoryError`` ended it, or its
    #: peak RSS came near ``Limits.memory`` (best effort: see ``pysandbox._classify``).
    MEMORY_EXCEEDED = "memory_exceeded"
    #: stdout or stderr passed its cap and ``Limits.truncate_output`` is false; the
    #: sandbox was killed.
    OUTPUT_EXCEEDED = "output_exceeded"


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


def _encode(data: bytes) -> tuple[str, str]:
    """``data`` as JSON text: ``(text, "utf-8")`` when it is valid UTF-8, else base64."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def _decode(text: object, encoding: object, what: str) -> bytes:
    """The inverse of ``_encode``; ``ValueError`` naming ``what`` on anything else."""
    if not isinstance(text, str):
        raise ValueError(f"{what}: expected a string, got {type(text).__name__}")
    if encoding == "utf-8":
        return text.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise ValueError(f"{what}: invalid base64") from exc
    raise ValueError(f"{what}: encoding must be 'utf-8' or 'base64', not {encoding!r}")


def _tail(data: bytes, truncated: bool) -> str:
    """The last ``CHECK_TAIL_LINES`` lines of ``data``, decoded with replacement."""
    lines = data.decode("utf-8", "replace").splitlines()
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


def _signal_name(number: int) -> str:
    """``"SIGKILL"`` for 9; ``"signal 64"`` for a number without a name."""
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclasses.dataclass(frozen=True)
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
    files: Mapping[str, bytes] = dataclasses.field(hash=False)
    #: Some files were left out of ``files`` (over ``Limits.files_out``, or unreadable).
    files_truncated: bool

    def __post_init__(self) -> None:
        """Keep a read-only copy of ``files``: later changes to the caller's do not show."""
        object.__setattr__(self, "files", FrozenFiles(self.files))

    def __bool__(self) -> bool:
        return self.status is Status.OK

    def stdout_text(self, errors: str = "replace") -> str:
        """``stdout`` decoded as UTF-8; ``errors`` as for ``bytes.decode``."""
        return self.stdout.decode("utf-8", errors)

    def stderr_text(self, errors: str = "replace") -> str:
        """``stderr`` decoded as UTF-8; ``errors`` as for ``bytes.decode``."""
        return self.stderr.decode("utf-8", errors)

    def to_dict(self) -> dict[str, object]:
        """The result as a JSON-ready dict (``json.dumps`` takes it as it is).

        Keys: ``status`` (the ``Status`` name, ``"OK"``), ``returncode`` and ``signal``
        (int or None), ``stdout`` and ``stderr`` (str) with ``stdout_encoding`` and
        ``stderr_encoding`` (``"utf-8"`` when the bytes are valid UTF-8 and the text is
        them decoded, else ``"base64"``), ``stdout_truncated`` and ``stderr_truncated``,
        ``wall_time`` and ``cpu_time`` (float seconds), ``max_rss`` (int bytes), ``files``
        (relative path to ``{"data": str, "encoding": "utf-8" | "base64"}``) and
        ``files_truncated``.  ``Result.from_dict`` turns it back into an equal result.
        """
        stdout, stdout_encoding = _encode(self.stdout)
        stderr, stderr_encoding = _encode(self.stderr)
        files: dict[str, dict[str, str]] = {}
        for name, content in self.files.items():
            data, encoding = _encode(content)
            files[name] = {"data": data, "encoding": encoding}
        return {
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Result:
        """The ``Result`` that ``to_dict`` described; ``ValueError`` for a malformed dict."""
        try:
            status = Status[str(data["status"])]
            files_in = data["files"]
            if not isinstance(files_in, Mapping):
                raise ValueError("files: expected a mapping")
            files: dict[str, bytes] = {}
            for name, entry in files_in.items():
                if not isinstance(name, str) or not isinstance(entry, Mapping):
                    raise ValueError("files: expected name -> {'data', 'encoding'}")
                files[name] = _decode(entry["data"], entry["encoding"], f"files[{name!r}]")
            stdout = _decode(data["stdout"], data["stdout_encoding"], "stdout")
            stderr = _decode(data["stderr"], data["stderr_encoding"], "stderr")
            returncode, signal, max_rss = data["returncode"], data["signal"], data["max_rss"]
            wall_time, cpu_time = data["wall_time"], data["cpu_time"]
            flags = [data[k] for k in ("stdout_truncated", "stderr_truncated", "files_truncated")]
        except KeyError as exc:
            raise ValueError(f"missing key {exc.args[0]!r}") from None
        for name, value in (("returncode", returncode), ("signal", signal)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"{name}: expected an int or None, got {value!r}")
        if not isinstance(max_rss, int) or isinstance(max_rss, bool):
            raise ValueError(f"max_rss: expected an int, got {max_rss!r}")
        for name, value in (("wall_time", wall_time), ("cpu_time", cpu_time)):
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ValueError(f"{name}: expected a number, got {value!r}")
        if not all(isinstance(flag, bool) for flag in flags):
            raise ValueError("the *_truncated flags must be booleans")
        assert isinstance(returncode, int | None) and isinstance(signal, int | None)
        assert isinstance(wall_time, int | float) and isinstance(cpu_time, int | float)
        return cls(
            status=status,
            returncode=returncode,
            signal=signal,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=bool(flags[0]),
            stderr_truncated=bool(flags[1]),
            wall_time=float(wall_time),
            cpu_time=float(cpu_time),
            max_rss=max_rss,
            files=files,
            files_truncated=bool(flags[2]),
        )

    def check(self) -> Result:
        """Return the result itself when the status is ``OK``, else raise ``SandboxFailure``.

        The message gives the verdict, the exit code or signal, the CPU and wall time and
        the last ``CHECK_TAIL_LINES`` lines of stdout and of stderr (decoded with
        replacement), so ``run(...).check().stdout`` reads well in a test and a failing
        pytest test shows what the program did.
        """
        if self.status is Status.OK:
            return self
        if self.signal is not None:
            ending = f"killed by {_signal_name(self.signal)} ({self.signal})"
        else:
            ending = f"exit code {self.returncode}"
        message = (
            f"sandboxed program failed: {self.status.name}, {ending}; "
            f"CPU {self.cpu_time:.3f} s, wall {self.wall_time:.3f} s\n"
            f"--- stdout ---\n{_tail(self.stdout, self.stdout_truncated)}\n"
            f"--- stderr ---\n{_tail(self.stderr, self.stderr_truncated)}"
        )
        raise SandboxFailure(message, self)
