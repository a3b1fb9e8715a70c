# SPDX-License-Identifier: MIT
"""Print the record of what a change of the code's shape must leave as it is.

Usage: .venv/bin/python scripts/surface.py [--tests] [--wheel] > surface.txt

Run before and after a restructuring and compare the two files (``diff``): every public
name of ``pysandbox`` and ``pysandbox.pytest_plugin`` with its signature, its class
members and their signatures (the ``__module__`` of each on a line of its own, so a
deliberate re-homing is easy to tell from a change); every ``--help`` text of the
command line; the modules outside ``pysandbox`` that ``import pysandbox`` and
``pysandbox --help`` load (and how many of its own); with ``--tests``, the test ids
pytest collects; with ``--wheel``, the files of the wheel ``pip wheel`` builds.  It runs
no sandbox.
"""

from __future__ import annotations

import enum
import inspect
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Prints the modules loaded once the statement given as argv[1] has run.
LOADED = """
import atexit, sys
def report():
    names = sorted(sys.modules)
    own = [n for n in names if n == "pysandbox" or n.startswith("pysandbox.")]
    print("own modules:", len(own))
    for name in names:
        if name not in own:
            print(name)
atexit.register(report)
exec(sys.argv[1])
"""


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(no signature)"


def _members(cls: type) -> list[str]:
    lines = []
    if issubclass(cls, enum.Enum):
        return [f"  {member.name} = {member.value!r}" for member in cls]
    for name, value in sorted(vars(cls).items()):
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        if isinstance(value, property):
            lines.append(f"  {name}: property")
        elif isinstance(value, (staticmethod, classmethod)):
            lines.append(f"  {name}{_signature(value.__func__)} {type(value).__name__}")
        elif callable(value):
            lines.append(f"  {name}{_signature(value)}")
        else:
            lines.append(f"  {name} = {value!r}")
    return lines


def public_surface() -> list[str]:
    import pysandbox
    import pysandbox.pytest_plugin as plugin

    lines = []
    for module, names in ((pysandbox, pysandbox.__all__), (plugin, _public(plugin))):
        for name in sorted(names):
            obj = getattr(module, name)
            where = f"{module.__name__}.{name}"
            if isinstance(obj, type):
                bases = ", ".join(base.__qualname__ for base in obj.__bases__)
                lines.append(f"class {where}({bases}){_signature(obj)}")
                lines.append(f"  __module__ = {obj.__module__}")
                lines.extend(_members(obj))
            elif callable(obj):
                lines.append(f"def {where}{_signature(obj)}")
                lines.append(f"  __module__ = {getattr(obj, '__module__', None)}")
            else:
                lines.append(f"{where} = {obj!r}")
    return lines


def _public(module: object) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == getattr(module, "__name__", None)
    ]


def _run(argv: list[str], label: str = "") -> str:
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tempfile.gettempdir())
    shown = label or " ".join(argv[1:])
    return f"$ {shown} (exit {done.returncode})\n{done.stdout}{done.stderr}"


def help_texts() -> list[str]:
    python = sys.executable
    top = _run([python, "-m", "pysandbox", "--help"])
    texts = [top]
    listed = top.split("  COMMAND\n", 1)[-1].split("\n\n", 1)[0]
    for command in re.findall(r"^    ([a-z][a-z-]*) ", listed, re.MULTILINE):
        texts.append(_run([python, "-m", "pysandbox", command, "--help"]))
    return texts


def loaded_modules() -> list[str]:
    python = sys.executable
    return [
        _run([python, "-c", LOADED, "import pysandbox"], "import pysandbox"),
        _run(
            [
                python,
                "-c",
                LOADED,
                "import runpy, sys; sys.argv = ['pysandbox', '--help']\n"
                "try:\n    runpy.run_module('pysandbox', run_name='__main__')\n"
                "except SystemExit:\n    pass",
            ],
            "pysandbox --help",
        ),
    ]


def test_ids() -> list[str]:
    # The venv's pytest script, not ``python -m pytest``: -m would put the checkout's
    # root first on sys.path and import the uncompiled source package.
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("pytest")),
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return sorted(line for line in done.stdout.splitlines() if "::" in line)


def wheel_files() -> list[str]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, str(ROOT)],
            check=True,
            capture_output=True,
        )
        (wheel,) = Path(out).glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            return sorted(archive.namelist())


def main(argv: list[str]) -> None:
    sections = [
        ("public surface", public_surface()),
        ("--help texts", help_texts()),
        ("modules loaded", loaded_modules()),
    ]
    if "--tests" in argv:
        sections.append(("test ids", test_ids()))
    if "--wheel" in argv:
        sections.append(("wheel files", wheel_files()))
    for title, lines in sections:
        print(f"## {title}")
        for line in lines:
            print(line.rstrip("\n"))


if __name__ == "__main__":
    main(sys.argv[1:])
