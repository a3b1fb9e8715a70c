# SPDX-License-Identifier: MIT
"""pysandbox: run untrusted Python code under bubblewrap with hard limits, from a C core.

>>> from pysandbox import eval_in_sandbox
>>> eval_in_sandbox("print(6 * 7)").stdout
'42'
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, get_type_hints

from ._api.eval import eval_in_sandbox
from ._api.run import run, run_python
from ._api.selftest import Check, SelftestReport, selftest
from ._model import result as _result
from ._model.cancel import Cancelled
from ._model.errors import SandboxError
from ._model.file import File
from ._model.limits import Limits
from ._model.result import ProcessOutput, Result, SandboxFailure
from ._model.status import Status
from ._runner.job import Job
from ._runner.outcome import Outcome
from ._version import __version__

if TYPE_CHECKING:
    from ._api.aio import run_async, run_python_async
    from ._frontends.ipython import load_ipython_extension
    from ._runner.runner import Runner

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

#: Imported on first use: asyncio alone costs a command-line call about 30 ms of start-up
#: (the Runner's async forms and map's thread pool need it), and IPython's extension is
#: only for IPython.
_LAZY = {
    "Runner": "._runner.runner",
    "run_async": "._api.aio",
    "run_python_async": "._api.aio",
    "load_ipython_extension": "._frontends.ipython",
}

#: The public classes and functions say they are ``pysandbox``'s, wherever they are
#: defined inside it, so reprs, documentation and new pickles never depend on the
#: internal layout (the lazy ones when first asked for, in ``__getattr__``).
_PUBLIC = (
    Cancelled,
    Check,
    File,
    Job,
    Limits,
    Outcome,
    ProcessOutput,
    Result,
    SandboxError,
    SandboxFailure,
    SelftestReport,
    Status,
    eval_in_sandbox,
    run,
    run_python,
    selftest,
)
for _public in _PUBLIC:
    if isinstance(_public, type) and sys.version_info >= (3, 10):
        # Resolved while the defining module is still the one named, so that
        # typing.get_type_hints (dataclass tools) works on them from their new home.
        # Python 3.9 cannot evaluate the ``X | None`` annotations at all, wherever the
        # class lives, so there they stay strings.
        _public.__annotations__ = get_type_hints(_public)
    _public.__module__ = __name__

#: Pickles made by 0.1.0 name the flat modules its public classes were defined in
#: (``tests/golden``); those names lead to the classes still.  ``_types`` also held the
#: non-public ``FrozenFiles``, so it leads to its new module; the others to the package.
for _old in ("_errors", "_file", "_job", "_limits", "_outcome", "_selftest"):
    sys.modules.setdefault(f"{__name__}.{_old}", sys.modules[__name__])
sys.modules.setdefault(f"{__name__}._types", _result)
del _public, _old


def __getattr__(name: str) -> object:
    """The attributes of ``_LAZY``, imported when first asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    value.__module__ = __name__
    globals()[name] = value
    return value
