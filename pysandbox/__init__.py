# SPDX-License-Identifier: MIT
"""pysandbox: run untrusted Python code under bubblewrap with hard limits, from a C core.

>>> from pysandbox import eval_in_sandbox
>>> eval_in_sandbox("print(6 * 7)").stdout
'42'
"""

from __future__ import annotations

import sys

from ._version import __version__

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import types

    from ._api.aio import run_async, run_python_async
    from ._api.eval import eval_in_sandbox
    from ._api.notebook import run_notebook
    from ._api.run import run, run_python
    from ._api.selftest import Check, SelftestReport, selftest
    from ._api.session import Session
    from ._frontends.ipython import load_ipython_extension, unload_ipython_extension
    from ._model.call_result import CallResult
    from ._model.cancel import Cancelled
    from ._model.errors import SandboxError
    from ._model.file import File
    from ._model.limits import Limits
    from ._model.notebook_result import NotebookCellResult, NotebookResult
    from ._model.result import ProcessOutput, Result, SandboxFailure
    from ._model.rich import Bundle
    from ._model.schema import FileDict, OutcomeErrorDict, OutcomeResultDict, ResultDict
    from ._model.session_result import CellError, CellResult, OutputEvent
    from ._model.status import Status
    from ._model.template import Template
    from ._runner.job import Job
    from ._runner.outcome import Outcome
    from ._runner.runner import Runner

__all__ = [
    "Bundle",
    "CallResult",
    "Cancelled",
    "CellError",
    "CellResult",
    "Check",
    "File",
    "FileDict",
    "Job",
    "Limits",
    "NotebookCellResult",
    "NotebookResult",
    "Outcome",
    "OutcomeErrorDict",
    "OutcomeResultDict",
    "OutputEvent",
    "ProcessOutput",
    "Result",
    "ResultDict",
    "Runner",
    "SandboxError",
    "SandboxFailure",
    "SelftestReport",
    "Session",
    "Status",
    "Template",
    "__version__",
    "eval_in_sandbox",
    "load_ipython_extension",
    "run",
    "run_async",
    "run_notebook",
    "run_python",
    "run_python_async",
    "selftest",
    "unload_ipython_extension",
]

#: Every public name but ``__version__``, imported from its module when first asked for
#: (PEP 562), so that ``import pysandbox`` and the command line load only what they use:
#: asyncio alone costs about 30 ms of start-up, the self-test its attacks, IPython's
#: extension is only for IPython (``tests/repo/test_import_cost.py`` keeps it so).
_LAZY = {
    "Bundle": "._model.rich",
    "CallResult": "._model.call_result",
    "Cancelled": "._model.cancel",
    "CellError": "._model.session_result",
    "CellResult": "._model.session_result",
    "Check": "._api.selftest",
    "File": "._model.file",
    "FileDict": "._model.schema",
    "Job": "._runner.job",
    "Limits": "._model.limits",
    "NotebookCellResult": "._model.notebook_result",
    "NotebookResult": "._model.notebook_result",
    "Outcome": "._runner.outcome",
    "OutcomeErrorDict": "._model.schema",
    "OutcomeResultDict": "._model.schema",
    "OutputEvent": "._model.session_result",
    "ProcessOutput": "._model.result",
    "Result": "._model.result",
    "ResultDict": "._model.schema",
    "Runner": "._runner.runner",
    "SandboxError": "._model.errors",
    "SandboxFailure": "._model.result",
    "SelftestReport": "._api.selftest",
    "Session": "._api.session",
    "Status": "._model.status",
    "Template": "._model.template",
    "eval_in_sandbox": "._api.eval",
    "load_ipython_extension": "._frontends.ipython",
    "run": "._api.run",
    "run_async": "._api.aio",
    "run_notebook": "._api.notebook",
    "run_python": "._api.run",
    "run_python_async": "._api.aio",
    "selftest": "._api.selftest",
    "unload_ipython_extension": "._frontends.ipython",
}

#: Pickles made by 0.1.0 name the flat modules its public classes were defined in
#: (``tests/golden``); those names lead to the classes still.  ``_types`` also held the
#: non-public ``FrozenFiles``, so it leads to its new module (``_OldTypes``); the others
#: to the package.
for _old in ("_errors", "_file", "_job", "_limits", "_outcome", "_selftest"):
    sys.modules.setdefault(f"{__name__}.{_old}", sys.modules[__name__])
del _old


def _module(relative: str) -> types.ModuleType:
    """``importlib.import_module(relative, "pysandbox")``, without importing ``importlib``
    (and ``warnings``) into every ``import pysandbox``."""
    name = __name__ + relative
    __import__(name)
    return sys.modules[name]


def __getattr__(name: str) -> object:
    """A public name, imported when first asked for (PEP 562).

    It says it is ``pysandbox``'s, wherever it is defined inside it, so reprs,
    documentation and new pickles never depend on the internal layout.  A class's
    annotations are resolved first, while its defining module is still the one named,
    so that ``typing.get_type_hints`` (dataclass tools) works on it from its new home;
    Python 3.9 cannot evaluate the ``X | None`` annotations at all, so there they stay
    strings.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_module(module), name)
    if isinstance(value, type) and sys.version_info >= (3, 10):
        from typing import get_type_hints

        value.__annotations__ = get_type_hints(value, localns=_PublicNames())
    value.__module__ = __name__
    globals()[name] = value
    return value


class _PublicNames(dict):  # type: ignore[type-arg]
    """The public names as the locals of an annotation's evaluation: a module may name
    another's class only for type checkers (``Result.displays`` holds ``Bundle``s,
    whose module ``pysandbox run`` never loads), and it is imported when asked."""

    def __missing__(self, name: str) -> object:
        if name not in _LAZY:
            raise KeyError(name)
        return __getattr__(name)


def __dir__() -> list[str]:
    """The module's names, the lazy ones included before they are first used."""
    return sorted({*globals(), *_LAZY})


class _OldTypes(type(sys)):  # type: ignore[misc]
    """``pysandbox._types`` of 0.1.0's pickles: its names, from ``_model/result.py``."""

    def __getattr__(self, name: str) -> object:
        if name in _LAZY:
            return __getattr__(name)
        return getattr(_module("._model.result"), name)


sys.modules.setdefault(f"{__name__}._types", _OldTypes(f"{__name__}._types"))
