"""pysandbox: run untrusted Python code under bubblewrap with hard limits, from a C core.

>>> from pysandbox import eval_in_sandbox
>>> eval_in_sandbox("print(6 * 7)").stdout
'42'
"""

from __future__ import annotations

from ._async import run_async, run_python_async
from ._errors import Cancelled, SandboxError, SandboxFailure
from ._eval import eval_in_sandbox
from ._file import File
from ._ipython import load_ipython_extension
from ._limits import Limits
from ._run import run, run_python
from ._selftest import Check, SelftestReport, selftest
from ._types import ProcessOutput, Result, Status

__all__ = [
    "Cancelled",
    "Check",
    "File",
    "Limits",
    "ProcessOutput",
    "Result",
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
