# SPDX-License-Identifier: MIT
"""``Session.call``: call a function of the session's code and get its return value as a
Python value, its stdout and stderr apart, or the exception it raised.

One call of the session, one round trip: the arguments go in as a push (the value
codec's format, encoded on the host before anything runs, within ``Limits.values``)
under private names; a small generated harness finds the function, calls it, keeps the
return value under a private name and deletes the arguments' names, also when the
function raises; the return value comes back as a pull that takes the name out of the
session as it is sent (``Values.harness``).  So the session's namespace holds after the
call what it held before plus what the function did, and ``_`` is not touched (the
harness has no final expression).  The harness's own frames are left out of a
traceback.

The target: ``"name"`` is a callable of the session's namespace (what a notebook or an
earlier call defined); in ``"a.b.c"``, ``a`` is the namespace's when it is there, else
the longest prefix that imports as a module is imported (``__import__``: no frame of
``importlib`` in a traceback), and the rest are attributes.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._model.call_result import CallResult, call_text
from .._model.cancel import CancelEvent
from .._model.limits import Limits
from .._model.session_result import COMMITTED, CellError, CellResult
from .._model.status import Status
from .._model.value_codec import ValueCodec
from .._model.verdict import limit_hit, size_text
from .session_args import call_order
from .session_channel import Values
from .session_reply import Reply

if TYPE_CHECKING:
    from .session import Session

__all__ = ["TARGET_MAX", "call_function", "check_target"]

#: Characters of a target at most.
TARGET_MAX = 1000
#: The private names of a call's arguments, its harness's helper and its return value.
ARGS, KWARGS, RESOLVE, RETURNED = (
    f"__pysandbox_call_{part}" for part in ("args", "kwargs", "resolve", "value")
)


def harness(target: str) -> str:
    """The code of a call of ``target``, a checked dotted name (put in as a literal)."""
    return f"""\
def {RESOLVE}(target):
    import sys
    names = target.split(".")
    if names[0] in globals():
        found, used = globals()[names[0]], 1
    elif len(names) == 1:
        raise NameError(f"name {{names[0]!r}} is not defined in the session")
    else:
        for used in range(len(names), 0, -1):
            module = ".".join(names[:used])
            try:
                __import__(module)
                break
            except ModuleNotFoundError as exc:
                inside = exc.name and (module + ".").startswith(exc.name + ".")
                if used == 1 or not inside:
                    raise
        found = sys.modules[module]
    for name in names[used:]:
        found = getattr(found, name)
    return found
try:
    {RETURNED} = {RESOLVE}({target!r})(*{ARGS}, **{KWARGS})
finally:
    del {ARGS}, {KWARGS}, {RESOLVE}
"""


#: Why a call did not finish, for the code's author, by the status a limit gave it.
_LIMIT_WORDS = {
    Status.CPU_TIME_EXCEEDED: "CPU time limit of {cpu_time:g} s reached",
    Status.WALL_TIME_EXCEEDED: "wall time limit of {wall_time:g} s reached",
    Status.MEMORY_EXCEEDED: "memory limit of {memory} reached",
}


def check_target(target: object) -> str:
    """``target`` as a dotted name of identifiers, or a ``TypeError``/``ValueError``
    naming it."""
    if not isinstance(target, str):
        raise TypeError(f"target must be str, not {type(target).__name__}")
    if not target:
        raise ValueError("target must name a function, not be empty")
    if len(target) > TARGET_MAX:
        raise ValueError(f"target must be at most {TARGET_MAX} characters, not {len(target)}")
    for name in target.split("."):
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(
                f"target must be a name or dotted names (module.function), not {target!r}"
            )
    return target


def checked_arguments(args: object, kwargs: object) -> tuple[tuple[object, ...], dict[str, object]]:
    """``args`` and ``kwargs`` as a tuple and a dict of str keys, or a ``TypeError``
    naming them."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a sequence of arguments, not {type(args).__name__}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a mapping of str to values, not {type(kwargs).__name__}")
    for name in kwargs:
        if not isinstance(name, str):
            raise TypeError(f"kwargs: a keyword must be str, not {type(name).__name__}")
    return tuple(args), dict(kwargs)


def encode_arguments(args: tuple[object, ...], kwargs: dict[str, object], cap: int) -> bytes:
    """The push of a call's ``args`` and ``kwargs`` (the codec's ``$dict`` of the two
    private names), within ``cap`` bytes; a ``TypeError``/``ValueError`` naming the
    argument that cannot cross (``args[1]``, ``kwargs['x']``)."""
    try:
        positional = ValueCodec.encode(args, max_bytes=cap, name="args")
        named = ValueCodec.encode(kwargs, max_bytes=cap - len(positional), name="kwargs")
    except ValueError as exc:
        raise ValueError(f"{exc} (Limits.values is {cap} bytes for all the arguments)") from None
    parts = (b'{"$dict":[["', ARGS.encode(), b'",', positional, b'],["', KWARGS.encode())
    return b"".join((*parts, b'",', named, b"]]}"))


def call_function(
    session: Session,
    target: object,
    args: object,
    kwargs: object,
    wall_time: float | None = None,
    cpu_time: float | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    truncate_output: bool | None = None,
    cancel: CancelEvent | None = None,
) -> CallResult:
    """``Session.call_with`` (its docstring): everything checked and encoded before
    the one call of the session."""
    name = check_target(target)
    limits, _ = call_order(
        session.limits, "", wall_time, cpu_time, stdout, stderr, truncate_output, None
    )
    positional, named = checked_arguments(args, kwargs)
    push = encode_arguments(positional, named, limits.values)
    text = call_text(name, positional, named)
    reply = Reply(limits)
    reply.expects_values = True
    values = Values(push=push, pull=(RETURNED,), harness=True)
    cell = session._locked_call(harness(name), [], cancel, reply, values)
    value, error = None, cell.error
    if cell.committed and error is None:
        value, error = _returned(text, reply)
    return CallResult(
        target=name,
        call=text,
        outcome=cell.outcome,
        status=cell.status,
        value=value,
        error=error,
        stdout=cell.stdout,
        stderr=cell.stderr,
        stdout_truncated=cell.stdout_truncated,
        stderr_truncated=cell.stderr_truncated,
        reason=_reason(cell, limits),
        wall_time=cell.wall_time,
        cpu_time=cell.cpu_time,
        max_rss=cell.max_rss,
        value_refused=cell.error is None and error is not None,
        processes_exceeded=cell.processes_exceeded,
    )


def _returned(text: str, reply: Reply) -> tuple[object, CellError | None]:
    """The return value that came back, or why it did not, as the call's error."""
    if reply.values_error is not None:
        kind, reason = reply.values_error
        kind = {"type": "TypeError", "value": "ValueError"}.get(kind, "ValueError")
        reason = reason.replace(f"pull[{RETURNED!r}]: ", "", 1)
        reason = reason.replace(f"pull[{RETURNED!r}]", "value", 1)
        message = f"the return value of {text} cannot cross the sandbox boundary: {reason}"
        return None, CellError(kind, message, f"{kind}: {message}\n")
    if reply.values is None or RETURNED not in reply.values:
        message = f"the return value of {text} did not come back from the sandbox"
        return None, CellError("SandboxError", message, f"SandboxError: {message}\n")
    return reply.values[RETURNED], None


def _reason(cell: CellResult, limits: Limits) -> str:
    """Why the call did not finish, with the limit that ended it; "" when committed."""
    if cell.outcome == COMMITTED:
        return ""
    words = _LIMIT_WORDS.get(cell.status)
    if words is not None:
        return words.format(
            cpu_time=limits.cpu_time, wall_time=limits.wall_time, memory=size_text(limits.memory)
        )
    if cell.status is Status.OUTPUT_EXCEEDED:
        return f"output limit reached{limit_hit(cell, limits)}"
    return cell.reason
