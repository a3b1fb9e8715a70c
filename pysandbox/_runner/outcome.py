# SPDX-License-Identifier: MIT
"""``Outcome``: how one job of ``Runner.map`` ended, a ``Result`` or an error."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._model.result import Result
from .._model.untrusted import check_int, shown

if TYPE_CHECKING:
    from .._model.schema import OutcomeDict

__all__ = ["ERROR", "Outcome"]

#: The verdict of an outcome without a result (``Outcome.verdict``).
ERROR = "ERROR"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One job's end: its ``id`` and either the ``result`` of its run or the ``error``
    that kept it from one (a bad file name, a host fault, a cancelled run), whose
    exception class is named by ``error_type`` (``"ValueError"``, ``"SandboxError"``).

    Truthy exactly when there is a result and it is ``OK``.  Frozen; pickles, copies,
    and has a JSON form (``to_dict``/``from_dict``).
    """

    #: The job's id (its place in the input when the job had none).
    id: str | int | None
    #: The run's result, or None when the job raised.
    result: Result | None = None
    #: What the job raised, ``str()`` of the exception; None with a result.
    error: str | None = None
    #: The class name of what the job raised; None with a result.
    error_type: str | None = None

    def __post_init__(self) -> None:
        """Exactly one of ``result`` and ``error``, and ``error_type`` with ``error``."""
        if (self.result is None) == (self.error is None):
            raise ValueError("an Outcome has exactly one of result and error")
        if (self.error is None) != (self.error_type is None):
            raise ValueError("error_type goes with error, and only with it")
        if self.result is not None and not isinstance(self.result, Result):
            raise TypeError(f"result must be a Result, not {type(self.result).__name__}")

    @classmethod
    def of_error(cls, job_id: str | int | None, error: BaseException) -> Outcome:
        """The outcome of a job that raised ``error``."""
        return cls(job_id, error=str(error) or repr(error), error_type=type(error).__name__)

    @property
    def verdict(self) -> str:
        """The ``Status`` name of the result (``"OK"``), or ``"ERROR"``."""
        return self.result.status.name if self.result is not None else ERROR

    def __bool__(self) -> bool:
        return self.result is not None and bool(self.result)

    def to_dict(self) -> OutcomeDict:
        """``{"id": ..., **result.to_dict()}``, or ``{"id", "error", "error_type"}``: one
        JSON line of a batch's output (``pysandbox.OutcomeResultDict`` or
        ``pysandbox.OutcomeErrorDict``; ``"error" in`` it tells which)."""
        if self.result is not None:
            return {"id": self.id, **self.result.to_dict()}
        # __post_init__: without a result, both are set
        assert self.error is not None and self.error_type is not None
        return {"id": self.id, "error": self.error, "error_type": self.error_type}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Outcome:
        """The ``Outcome`` that ``to_dict`` described; ``ValueError`` naming the key at
        fault for a malformed dict, or saying it is not a mapping."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an outcome must be a mapping, not {type(data).__name__}")
        job_id = data.get("id")
        if job_id is not None and (not isinstance(job_id, (str, int)) or isinstance(job_id, bool)):
            raise ValueError(f"id: expected a string, an int or null, got {shown(job_id)}")
        check_int(job_id, "id")
        if "error" not in data:
            return cls(job_id, Result.from_dict({k: v for k, v in data.items() if k != "id"}))
        for key in ("error", "error_type"):
            if not isinstance(data.get(key), str):
                raise ValueError(f"{key}: expected a string, got {shown(data.get(key))}")
        extra = set(data) - {"id", "error", "error_type"}
        if extra:
            raise ValueError(f"{sorted(extra)[0]}: not a key of an error outcome")
        return cls(job_id, error=str(data["error"]), error_type=str(data["error_type"]))
