# SPDX-License-Identifier: MIT
"""``import pysandbox`` and ``pysandbox run`` load no module beyond the lists below.

Every module loaded costs every ``import pysandbox`` and every ``pysandbox run`` its
start-up time (issue 20: the import within 1.3 times ``python -I -c pass``, ``run`` within
3.5 times; ``benchmarks/bench_import.py`` measures both), and a module imported once for
one rarely used feature is soon imported for all.  Each list holds what a fresh
``python -I`` loads beyond what it loads for ``pass``, on every Python the suite runs on
(3.9, this venv's, 3.13), so a module that a newer Python drops costs nothing; the
platform's ``_sysconfigdata_*`` module is left out of the comparison.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Prints, at exit, the modules loaded after its own start; the statement to measure
#: follows it.
DUMP = """
import atexit, sys
_before = set(sys.modules)
atexit.register(lambda: print("\\n".join(sorted(set(sys.modules) - _before))))
"""

#: ``python -I -c "import pysandbox"``: the public names load on first use (PEP 562).
ALLOWED_FOR_IMPORT = frozenset(
    [
        "__future__",
        "pysandbox",
        "pysandbox._errors",
        "pysandbox._file",
        "pysandbox._job",
        "pysandbox._limits",
        "pysandbox._outcome",
        "pysandbox._selftest",
        "pysandbox._types",
        "pysandbox._version",
    ]
)

#: ``pysandbox run -q -- true``, the command line's hot path.
ALLOWED_FOR_RUN = frozenset(
    [
        "__future__",
        "_collections",
        "_functools",
        # collections imports it on 3.9.
        "_heapq",
        "_operator",
        "_struct",
        "_weakrefset",
        "collections",
        "collections.abc",
        "contextlib",
        "enum",
        "errno",
        "functools",
        "heapq",
        "itertools",
        "keyword",
        "math",
        "operator",
        "pysandbox",
        "pysandbox._api",
        "pysandbox._api.call",
        # Facts to a Result, split out of _api.run (which every run needed whole).
        "pysandbox._api.result_of",
        "pysandbox._api.run",
        "pysandbox._cgroups",
        "pysandbox._cgroups.ahead",
        "pysandbox._cgroups.base",
        "pysandbox._cgroups.files",
        "pysandbox._cgroups.group",
        "pysandbox._cgroups.mounts",
        "pysandbox._cgroups.node",
        "pysandbox._cgroups.probe",
        "pysandbox._cgroups.reaper",
        "pysandbox._cgroups.sweep",
        "pysandbox._cgroups.usage",
        "pysandbox._errors",
        "pysandbox._file",
        "pysandbox._frontends",
        "pysandbox._frontends.cli",
        "pysandbox._frontends.cli_run",
        "pysandbox._frontends.options",
        "pysandbox._frontends.run_args",
        "pysandbox._frontends.terminal",
        "pysandbox._host",
        "pysandbox._host.interpreter",
        "pysandbox._host.mountinfo",
        "pysandbox._host.owners",
        "pysandbox._host.programs",
        "pysandbox._host.tokens",
        "pysandbox._job",
        "pysandbox._launch",
        "pysandbox._launch.bwrap",
        "pysandbox._launch.confine",
        "pysandbox._launch.failures",
        "pysandbox._launch.launcher",
        "pysandbox._launch.command",
        "pysandbox._launch.lifeline",
        "pysandbox._launch.plan",
        "pysandbox._launch.readable",
        "pysandbox._launch.rlimits",
        "pysandbox._limits",
        "pysandbox._model",
        "pysandbox._model.cancel",
        "pysandbox._model.classify",
        "pysandbox._model.display",
        "pysandbox._model.errors",
        "pysandbox._model.escape",
        "pysandbox._model.file",
        "pysandbox._model.filestream",
        "pysandbox._model.limits",
        "pysandbox._model.record",
        "pysandbox._model.result",
        "pysandbox._model.status",
        "pysandbox._model.units",
        "pysandbox._model.untrusted",
        "pysandbox._model.verdict",
        "pysandbox._outcome",
        "pysandbox._sandbox",
        "pysandbox._selftest",
        "pysandbox._types",
        "pysandbox._version",
        "reprlib",
        "resource",
        "struct",
        "sysconfig",
        "threading",
        "types",
        # sysconfig imports it on 3.13.
        "warnings",
    ]
)

HOW_TO_UPDATE = (
    "Import it inside the function that needs it (see pysandbox/__init__.py's _LAZY and "
    "the commands in pysandbox/_frontends/cli.py), so that only its users pay for it.  "
    "If the hot path truly needs it, add it to {list} in tests/repo/test_import_cost.py "
    "and say in the commit why it is worth its start-up time "
    "(.venv/bin/python benchmarks/bench_import.py measures it; "
    "python -I -X importtime -c 'import pysandbox' says which import brought it)."
)


def _loaded(statement: str) -> set[str]:
    """The modules a fresh ``python -I`` loads to run ``statement``, beyond its own."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", DUMP + statement],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return {name for name in done.stdout.split() if not name.startswith("_sysconfigdata_")}


def _check(loaded: set[str], allowed: frozenset[str], name: str, what: str) -> None:
    new = sorted(loaded - allowed)
    assert not new, f"{what} now loads {new}, which {name} does not list.  " + HOW_TO_UPDATE.format(
        list=name
    )


@pytest.mark.no_bwrap
def test_import_pysandbox_loads_only_the_allowed_modules() -> None:
    loaded = _loaded("import pysandbox")
    assert "pysandbox" in loaded
    _check(loaded, ALLOWED_FOR_IMPORT, "ALLOWED_FOR_IMPORT", "import pysandbox")


def test_the_run_command_loads_only_the_allowed_modules() -> None:
    loaded = _loaded(
        "from pysandbox._frontends.cli import main\n"
        "status = main(['run', '-q', '--', 'true'])\n"
        "assert status == 0, status"
    )
    assert "pysandbox._sandbox" in loaded
    _check(loaded, ALLOWED_FOR_RUN, "ALLOWED_FOR_RUN", "pysandbox run -q -- true")
