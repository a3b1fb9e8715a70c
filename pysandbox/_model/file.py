# SPDX-License-Identifier: MIT
"""``File``: a file's content and whether it is executable, for ``files=`` and back."""

from __future__ import annotations

from .record import record

__all__ = ["File"]


@record
class File:
    """A file for ``files=``: its content and whether the program may execute it.

    ``run(..., files={"prog": File(binary, executable=True)})`` creates ``prog`` with
    mode 0755 (0644 when not executable), less the caller's umask, so ``./prog`` runs.
    Only the executable bit travels: no setuid, setgid or sticky bit, in or out.
    ``Result.files_with_modes()`` gives the output files back in this form.

    ``content`` may be bytes, bytearray or memoryview and is kept as bytes; frozen,
    hashable, and it pickles and copies.
    """

    #: The file's bytes.
    content: bytes
    #: Created executable (0755) rather than 0644.
    executable: bool = False

    def __post_init__(self) -> None:
        """Check both fields and keep ``content`` as bytes (a copy of a mutable buffer)."""
        content: object = self.content
        if isinstance(content, (bytearray, memoryview)):
            object.__setattr__(self, "content", bytes(content))
        elif not isinstance(content, bytes):
            raise TypeError(
                f"content must be bytes, bytearray or memoryview, not {type(content).__name__}"
            )
        if not isinstance(self.executable, bool):
            raise TypeError(f"executable must be a bool, not {type(self.executable).__name__}")
