# SPDX-License-Identifier: MIT
"""``Job``: one run described as data, for ``Runner.map`` and JSON lines.

A job is a program (``argv``) or Python code (``code`` with ``args``) and what it gets:
``stdin``, ``files``, ``limits``, ``env``, ``readable``, and which files come back
(``files_include``, ``files_exclude``).  Everything in it pickles and
has a JSON form (``to_dict``/``from_dict``), so a job can cross a process, a cluster
or a file.  What depends on the host that runs it (a ``readable`` path exists, the
files fit the disk) is checked when it runs and becomes an error outcome there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Union

from .._api.run import as_bytes, check_argv, check_env, check_file_filter, check_python
from .._model.file import File
from .._model.filestream import name_problem
from .._model.limits import Limits
from .._model.result import decode_text, encode_text
from .._model.units import LIMIT_OPTIONS
from .._model.untrusted import check_int, shown

__all__ = ["Job", "JobId"]

#: What identifies a job: a string or an int (never a bool).
JobId = Union[str, int]

#: The keys of a job's dict, in the order ``to_dict`` writes them.
KEYS = (
    *("id", "argv", "python", "args", "stdin", "files", "limits", "env", "readable"),
    *("files_include", "files_exclude"),
)
_DEFAULT_LIMITS = Limits()
_LIMIT_PARSERS = {option.field: option.parse for option in LIMIT_OPTIONS}


def _check_id(value: object) -> JobId | None:
    if value is None or (isinstance(value, (str, int)) and not isinstance(value, bool)):
        check_int(value, "id")
        return value
    raise TypeError(f"id must be a str, an int or None, not {type(value).__name__}")


def _check_stdin(value: object) -> bytes | None:
    """``stdin`` as bytes (str as UTF-8): a job's input is data, never a callback."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return as_bytes(value, "stdin")
    raise TypeError(f"stdin must be bytes, str or None, not {type(value).__name__}")


def _check_files(value: object) -> dict[str, File]:
    """``files`` as names to ``File``; names checked as ``run`` checks them."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            f"files must be a mapping of name to bytes or File, not {type(value).__name__}"
        )
    files = {}
    for name, content in value.items():
        if not isinstance(name, str):
            raise TypeError(f"files: names must be str, not {type(name).__name__}")
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(f"files: the name {shown(name)} {problem}")
        files[name] = content if isinstance(content, File) else File(content)
    return files


def _check_readable(value: object) -> tuple[str, ...]:
    """``readable`` as a tuple of absolute paths; whether they exist is the host's
    business when the job runs."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"readable must be a sequence of paths, not {type(value).__name__}")
    for path in value:
        if not isinstance(path, str):
            raise TypeError(f"readable items must be str, not {type(path).__name__}")
        if "\0" in path or not path.startswith("/"):
            raise ValueError(f"readable paths must be absolute: {shown(path)}")
    return tuple(value)


def _check_encodable(job: Job) -> None:
    """``ValueError`` naming the field when a string of ``job`` is not UTF-8 text (a
    lone surrogate, which JSON can escape): it could not reach the sandbox."""
    strings: list[tuple[str, object]] = [("id", job.id), ("code", job.code)]
    strings += [("argv", item) for item in job.argv or ()]
    strings += [("args", item) for item in job.args]
    strings += [("env", item) for pair in job.env.items() for item in pair]
    strings += [("files", name) for name in job.files]
    strings += [("readable", path) for path in job.readable]
    for field, value in strings:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"{field}: {value!r:.60} is not UTF-8 text") from None


@dataclasses.dataclass(frozen=True)
class Job:
    """One run for ``Runner.map``: exactly one of ``argv`` (a program, as for ``run``)
    and ``code`` (Python source, as for ``run_python``, with ``args``).

    Checked when made: a ``TypeError`` or ``ValueError`` names the argument.  ``stdin``
    is kept as bytes (a str as UTF-8) and each of ``files`` as a ``File``, so a job
    equals its JSON round trip.  ``limits``, ``env`` and ``readable`` combine with the
    ``Runner``'s as a call's arguments do.  Frozen; pickles and copies.
    """

    #: The job's name in its outcome; ``Runner.map`` numbers a job without one by its
    #: place in the input (0, 1, ...).
    id: JobId | None = None
    #: The program and its arguments (``run``'s ``argv``), or None for ``code``.
    argv: tuple[str, ...] | None = None
    #: Python source (``run_python``'s ``code``), or None for ``argv``.
    code: str | None = None
    #: ``sys.argv[1:]`` of ``code``.
    args: tuple[str, ...] = ()
    #: Fed to the program's stdin, then closed; None: closed at once.
    stdin: bytes | str | None = None
    #: Input files in ``/sandbox`` by relative path.
    files: Mapping[str, bytes | File] = dataclasses.field(default_factory=dict, hash=False)
    #: The job's limits; None: the ``Runner``'s.
    limits: Limits | None = None
    #: Variables added to the ``Runner``'s environment (the job's win).
    env: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    #: Host paths readable besides the ``Runner``'s.
    readable: tuple[str, ...] = ()
    #: Glob patterns: only the files one matches come back (``run``'s); None: all.
    files_include: tuple[str, ...] | None = None
    #: Glob patterns: no file one matches comes back (``run``'s); None: none excluded.
    files_exclude: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Check every field and keep the normalised forms."""
        _check_id(self.id)
        if (self.argv is None) == (self.code is None):
            raise ValueError("a Job needs exactly one of argv (a program) and code (Python)")
        if self.argv is not None:
            object.__setattr__(self, "argv", tuple(check_argv(self.argv)))
            if self.args:
                raise ValueError("args go with code; put a program's arguments in argv")
        else:
            object.__setattr__(self, "args", tuple(check_python(self.code, self.args)[1]))
        object.__setattr__(self, "stdin", _check_stdin(self.stdin))
        object.__setattr__(self, "files", _check_files(self.files))
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise TypeError(f"limits must be a Limits or None, not {type(self.limits).__name__}")
        check_env(self.env)
        object.__setattr__(self, "env", dict(self.env or {}))
        object.__setattr__(self, "readable", _check_readable(self.readable))
        include, exclude = check_file_filter(self.files_include, self.files_exclude)
        if self.files_include is not None:
            object.__setattr__(self, "files_include", include)
        if self.files_exclude is not None:
            object.__setattr__(self, "files_exclude", exclude)
        _check_encodable(self)

    def to_dict(self) -> dict[str, object]:
        """The job as a JSON-ready dict: ``id``, then ``argv`` or ``python``, then only the
        keys that differ from the defaults (docs/graders.rst, *Many jobs*, has the schema).
        ``Job.from_dict`` turns it back into an equal job."""
        data: dict[str, object] = {"id": self.id}
        if self.argv is not None:
            data["argv"] = list(self.argv)
        else:
            data["python"] = self.code
        if self.args:
            data["args"] = list(self.args)
        if self.stdin is not None:
            assert isinstance(self.stdin, bytes)  # kept as bytes by __post_init__
            text, encoding = encode_text(self.stdin)
            data["stdin"] = text if encoding == "utf-8" else {"data": text, "encoding": encoding}
        if self.files:
            data["files"] = {name: _file_dict(file) for name, file in self.files.items()}
        if self.limits is not None:
            data["limits"] = {
                field.name: getattr(self.limits, field.name)
                for field in dataclasses.fields(Limits)
                if getattr(self.limits, field.name) != getattr(_DEFAULT_LIMITS, field.name)
            }
        if self.env:
            data["env"] = dict(self.env)
        if self.readable:
            data["readable"] = list(self.readable)
        if self.files_include is not None:
            data["files_include"] = list(self.files_include)
        if self.files_exclude is not None:
            data["files_exclude"] = list(self.files_exclude)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Job:
        """The ``Job`` a dict describes (``to_dict``'s, or one written by hand: ``limits``
        may give sizes and times with units, ``"256M"``, ``"500ms"``).

        Raises ``ValueError`` whose message starts with the key at fault
        (``limits.memory: ...``) for an unknown key or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a job must be a JSON object, not {type(data).__name__}")
        for key in data:
            if key not in KEYS:
                raise ValueError(f"{key}: unknown key; a job has {', '.join(KEYS)}")
        if ("argv" in data) == ("python" in data):
            raise ValueError("argv/python: a job has exactly one of argv (a program) and python")
        if "argv" in data and "args" in data:
            raise ValueError("args: goes with python; put a program's arguments in argv")
        fields = {
            field: _keyed(key, convert, data[key])
            for key, (field, convert) in _FROM_JSON.items()
            if key in data and data[key] is not None
        }
        try:
            return cls(**fields)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:  # each key was checked: a bug if it happens
            raise ValueError(f"job: {exc}") from exc


def _keyed(key: str, convert: Callable[[object], object], value: object) -> object:
    """``convert(value)``, its ``TypeError``/``ValueError`` a ``ValueError`` naming ``key``."""
    try:
        return convert(value)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        raise ValueError(message if message.startswith(f"{key}") else f"{key}: {message}") from None


def _strings(name: str, check: Callable[[object], object]) -> Callable[[object], tuple[str, ...]]:
    """A converter of a JSON list of strings (``argv``, ``args``, ``readable``), each list
    then checked by ``check`` as ``Job`` checks the field."""

    def convert(value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{name}: expected a list of strings, got {shown(value)}")
        check(value)
        return tuple(value)

    return convert


def _code(value: object) -> str:
    """``python``: the source, a string checked as ``run_python`` checks it."""
    check_python(value, ())
    assert isinstance(value, str)
    return value


def _env(value: object) -> dict[str, str]:
    """``env``: an object of string to string."""
    if not isinstance(value, dict):
        raise ValueError(f"env: expected an object of name to value, got {shown(value)}")
    check_env(value)
    return value


def _file_dict(file: bytes | File) -> dict[str, object]:
    """A file as ``Result.to_dict`` writes one: ``data``, ``encoding``, ``executable``."""
    assert isinstance(file, File)  # kept as File by Job.__post_init__
    text, encoding = encode_text(file.content)
    return {"data": text, "encoding": encoding, "executable": file.executable}


def _stdin_from(value: object) -> bytes:
    """``stdin``: a str, or ``{"data": ..., "encoding": "utf-8" | "base64"}``."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if not isinstance(value, Mapping) or set(value) != {"data", "encoding"}:
        raise ValueError(
            f"stdin: expected a string or {{'data': ..., 'encoding': ...}}, got {shown(value)}"
        )
    return decode_text(value["data"], value["encoding"], "stdin.data", "stdin.encoding")


def _files_from(value: object) -> dict[str, File]:
    """``files``: name to ``{"data", "encoding", "executable"}`` (``executable`` optional)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"files: expected an object of name to file, got {shown(value)}")
    files = {}
    for name, entry in value.items():
        what = f"files[{name!r}]"
        if not isinstance(entry, Mapping) or not {"data", "encoding"} <= set(entry) <= {
            "data",
            "encoding",
            "executable",
        }:
            raise ValueError(
                f"{what}: expected {{'data', 'encoding', 'executable'}}, got {shown(entry)}"
            )
        executable = entry.get("executable", False)
        if not isinstance(executable, bool):
            raise ValueError(f"{what}.executable: expected bool, got {shown(executable)}")
        content = decode_text(entry["data"], entry["encoding"], f"{what}.data", f"{what}.encoding")
        files[name] = File(content, executable=executable)
    return _check_files(files)


def _limits_from(value: object) -> Limits:
    """``limits``: field to a number, or to a string with a unit as the command line
    takes it (``"256M"``, ``"500ms"``); ``truncate_output`` a bool."""
    if not isinstance(value, Mapping):
        raise ValueError(f"limits: expected an object of field to value, got {shown(value)}")
    given: dict[str, object] = {}
    for field, raw in value.items():
        if field != "truncate_output" and field not in _LIMIT_PARSERS:
            raise ValueError(f"limits.{field}: no such limit")
        if isinstance(raw, str) and field in _LIMIT_PARSERS:
            try:
                given[field] = _LIMIT_PARSERS[field](raw)
            except ValueError as exc:
                raise ValueError(f"limits.{field}: {exc}") from None
        else:
            check_int(raw, f"limits.{field}")  # before Limits formats a huge int
            given[field] = raw
    try:
        return Limits(**given)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        field = str(exc).split(" ", 1)[0].removeprefix("Limits.")
        raise ValueError(f"limits.{field}: {exc}") from None


#: Each JSON key: the ``Job`` field it fills and how its value is checked and converted.
_FROM_JSON: dict[str, tuple[str, Callable[[object], object]]] = {
    "id": ("id", _check_id),
    "argv": ("argv", _strings("argv", check_argv)),
    "python": ("code", _code),
    "args": ("args", _strings("args", lambda args: check_python("", args))),
    "stdin": ("stdin", _stdin_from),
    "files": ("files", _files_from),
    "limits": ("limits", _limits_from),
    "env": ("env", _env),
    "readable": ("readable", _strings("readable", _check_readable)),
    "files_include": (
        "files_include",
        _strings("files_include", lambda patterns: check_file_filter(patterns, None)),
    ),
    "files_exclude": (
        "files_exclude",
        _strings("files_exclude", lambda patterns: check_file_filter(None, patterns)),
    ),
}
