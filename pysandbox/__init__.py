"""pysandbox: run untrusted Python code under bubblewrap with hard limits, from a C core.

>>> from pysandbox import eval_in_sandbox
>>> eval_in_sandbox("print(6 * 7)").stdout
'42'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._errors import Cancelled, SandboxError, SandboxFailure
from ._eval import eval_in_sandbox
from ._file import File
from ._job import Job
from ._limits import Limits
from ._outcome import Outcome
from ._run import run, run_python
from ._selftest import Check, SelftestReport, selftest
from ._types import ProcessOutput, Result, Status

if TYPE_CHECKING:
    from ._async import run_async, run_python_async
    from ._ipython import load_ipython_extension
    from ._runner import Runner

__all__ = [
    "Cancelled",
    "Check",
    "File",
    "Job",
    "Limits",
    "Outcome",
    "ProcessOutput",
    "Result",
    "Runner",
    "SandboxError",
    "SandboxFailure",
    "SelftestReport",
    "Status",
    "__version__",
    "eval_in_sandbox",
    "load_ipython_extension",
    "run",
    "run_async",
    "run_python",
    "run_python_async",
    "selftest",
]

__version__ = "0.1.0"

#: Imported on first use: asyncio alone costs a command-line call about 30 ms of start-up
#: (the Runner's async forms and map's thread pool need it), and IPython's extension is
#: only for IPython.
_LAZY = {
    "Runner": "._runner",
    "run_async": "._async",
    "run_python_async": "._async",
    "load_ipython_extension": "._ipython",
}


def __getattr__(name: str) -> object:
    """The attributes of ``_LAZY``, imported when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
