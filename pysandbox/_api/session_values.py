# SPDX-License-Identifier: MIT
"""``Session.push`` and ``Session.pull``: a session's variables in and out, in the value
codec's format (``_model/value_codec.py``), never pickled.

Each is a call of the session with no code: a push's variables travel with it on the
call pipe and are set before it (it) runs; a pull's names travel with it and the values
come back on the display pipe as one frame, bounded by ``Limits.values``, parsed by the
bounded JSON parser and rebuilt by the codec's checks (``Reply._take_values``).  Both
are committed calls: a push's variables are part of the state from then on, and a push
that fails (numpy missing in the sandbox) is rolled back whole.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._model.errors import SandboxError
from .._model.session_result import CellResult
from .._model.value_codec import ValueCodec
from .session_channel import Values
from .session_reply import Reply

if TYPE_CHECKING:
    from .session import Session

__all__ = ["pull_values", "push_values"]

#: Variables one push or pull may name.
NAMES_MAX = 256
#: Why the keeper says variables did not come back, as the exception raised.
_PULL_ERRORS: dict[str, type[Exception]] = {
    "missing": NameError,
    "type": TypeError,
    "value": ValueError,
}


def _values_call(session: Session, values: Values) -> tuple[CellResult, Reply]:
    """A call of ``session`` that only sets or sends back variables."""
    reply = Reply(session.limits)
    reply.expects_values = bool(values.pull)
    return session._locked_call("", [], None, reply, values), reply


def _checked_names(names: Iterable[object], what: str) -> list[str]:
    """``names`` as identifiers of Python variables, or a ``TypeError``/``ValueError``
    naming ``what``."""
    checked = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{what}: a variable's name must be str, not {type(name).__name__}")
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"{what}: {name!r} is not a Python variable name")
        checked.append(name)
    if not checked:
        raise ValueError(f"{what}: no variable named")
    if len(checked) > NAMES_MAX:
        raise ValueError(f"{what}: at most {NAMES_MAX} variables at once, got {len(checked)}")
    return checked


def push_values(session: Session, values: dict[str, object]) -> None:
    """Set ``values`` in ``session`` (``Session.push``)."""
    _checked_names(values, "push")
    try:
        data = ValueCodec.encode(values, max_bytes=session.limits.values, name="push")
    except ValueError as exc:
        raise ValueError(f"{exc} (Limits.values is {session.limits.values} bytes)") from None
    result, _ = _values_call(session, Values(push=data))
    if result.error is not None:
        raise SandboxError(
            f"the session could not set the variables: {result.error.type}: {result.error.message}"
        )
    if not result:
        raise SandboxError(f"the session could not set the variables: {result.reason}")


def pull_values(session: Session, names: tuple[object, ...]) -> dict[str, object]:
    """The variables ``names`` of ``session`` (``Session.pull``)."""
    wanted = _checked_names(names, "pull")
    result, reply = _values_call(session, Values(pull=tuple(wanted)))
    if not result:
        raise SandboxError(f"the session could not send the variables: {result.reason}")
    if reply.values_error is not None:
        kind, reason = reply.values_error
        raise _PULL_ERRORS.get(kind, SandboxError)(reason)
    if reply.values is None or sorted(reply.values) != sorted(set(wanted)):
        raise SandboxError("pull: the session sent back other variables than asked for")
    return reply.values
