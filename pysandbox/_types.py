"""Result records."""

from __future__ import annotations

import dataclasses

__all__ = ["ProcessOutput"]


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
