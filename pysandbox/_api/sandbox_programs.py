# SPDX-License-Identifier: MIT
"""The Python programs pysandbox runs inside sandboxes, as text: nothing of the package
can be imported there (the interpreter may not see it, and the code there could change
what it imports), so each program is one text joined from files of the package that
import only the standard library.

* the keeper of a session: ``session_keeper.py`` with the display hook
  (``display_hook.py``) and the value codec (``_model/value_codec.py``) joined before
  its main block;
* a one-shot run that asks for displays: the display hook, then a call of its
  ``run_script`` (``python -c PROGRAM FD CAP main.py ARGS``).

Each is read once per process.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["keeper_program", "one_shot_program"]

#: The package's directory.
_PACKAGE = Path(__file__).parent.parent
#: The line that starts the keeper, at the end of its text: what is joined to it goes
#: before.
_KEEPER_MAIN = 'if __name__ == "__main__":\n'
#: What every module of the package starts with, which only a program's first may.
_FUTURE = "from __future__ import annotations\n"


def _text(path: str, *, future: bool = False) -> str:
    """The text of the package's file ``path``, without its ``__future__`` import unless
    ``future`` (the program's first part keeps it)."""
    text = (_PACKAGE / path).read_text("utf-8")
    return text if future else text.replace(_FUTURE, "", 1)


@functools.cache
def keeper_program() -> bytes:
    """The keeper's program, shown to a session's sandbox as its code file."""
    keeper = _text("_api/session_keeper.py", future=True)
    joined = [_text("_api/display_hook.py"), _text("_model/value_codec.py")]
    head, main, tail = keeper.rpartition(_KEEPER_MAIN)
    assert main, "the keeper has no main block"
    return "".join([head, *joined, "\n\n", main, tail]).encode("utf-8")


@functools.cache
def one_shot_program() -> str:
    """The program ``python -c`` runs for a one-shot run that asks for displays."""
    return _text("_api/display_hook.py", future=True) + "\n\nrun_script(sys.argv[1:])\n"
