# SPDX-License-Identifier: MIT
"""The package is well formed: formatted, typed, buildable from its sdist."""

from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.sdist import built_wheel, sdist_names

from pysandbox import _sandbox

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.no_bwrap


def _tool(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install '.[test]'")
    return found


def test_python_is_ruff_clean() -> None:
    subprocess.run([_tool("ruff"), "check", "--no-cache", str(ROOT)], check=True)
    subprocess.run([_tool("ruff"), "format", "--check", "--no-cache", str(ROOT)], check=True)


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="mypy 2.4 needs Python 3.10+ (the default Python checks)"
)
def test_python_is_mypy_strict_clean(tmp_path: Path) -> None:
    subprocess.run(
        [_tool("mypy"), "--strict", "--cache-dir", str(tmp_path), str(ROOT / "pysandbox")],
        check=True,
    )


def test_c_is_clang_formatted() -> None:
    sources = sorted(str(p) for d in ("src", "tests/core/c") for p in (ROOT / d).glob("*.[ch]"))
    subprocess.run([_tool("clang-format"), "--dry-run", "-Werror", *sources], check=True)


#: The C files that include Python.h: the module's Python face, nothing that runs in the
#: vfork child or without the GIL.  Their own headers (``args.h``, ``hooks.h``,
#: ``output.h``, ``sandbox_type.h``) use ``PyObject`` without including Python.h, so no
#: other file can include them and compile; ``sandbox.h`` and ``landlock.h`` stay plain C.
PYTHON_FACE = {"module.c", "args.c", "sandbox_type.c", "hooks.c", "output.c"}


def test_c_files_and_functions_stay_short() -> None:
    """No C file over 500 lines, no function over 80 unless its comment says why."""
    sizes = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "c_sizes.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert sizes.returncode == 0, sizes.stdout + sizes.stderr


#: What a module's docstring says when it is longer than 500 lines on purpose, and why.
LONG_MODULE = "longer than 500 lines because"


def test_python_modules_and_functions_stay_short() -> None:
    """No module of the package over 500 lines and no function over 80, unless the
    module's docstring says why (``LONG_MODULE``)."""
    problems = []
    for path in sorted((ROOT / "pysandbox").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        name = path.relative_to(ROOT)
        if text.count("\n") > 500 and LONG_MODULE not in (ast.get_docstring(tree) or ""):
            problems.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 80:
                    problems.append(f"{name}:{node.lineno}: {node.name} has {length} lines")
    assert not problems, "\n".join(problems)


def test_only_the_python_face_includes_python_h() -> None:
    """The compiler can prove the child and the GIL-free loop touch no Python object."""
    for source in (ROOT / "src").glob("*.[ch]"):
        includes_python = "#include <Python.h>" in source.read_text()
        assert includes_python == (source.name in PYTHON_FACE), source.name


def test_extension_exports_only_its_init_function() -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    symbols = subprocess.run(
        [nm, "-D", "--defined-only", _sandbox.__file__], capture_output=True, text=True, check=True
    ).stdout.split()
    exported = [s for s in symbols if s.startswith(("PyInit", "sbx_"))]
    assert exported == ["PyInit__sandbox"]


def _check_signatures(owner: object, nodes: list[ast.stmt]) -> set[str]:
    """Compare each function of a stub body with ``owner``'s; the names compared."""
    functions = {
        node.name: node
        for node in nodes
        if isinstance(node, ast.FunctionDef) and not node.decorator_list
    }
    for name, node in functions.items():
        real = inspect.signature(getattr(owner, name)).parameters
        positional = [a.arg for a in node.args.posonlyargs + node.args.args]
        keyword_only = [a.arg for a in node.args.kwonlyargs]
        assert positional + keyword_only == list(real), name
        kinds = {p.name: p.kind for p in real.values()}
        assert all(kinds[k] is inspect.Parameter.KEYWORD_ONLY for k in keyword_only), name
    return set(functions)


def test_stub_matches_the_extension() -> None:
    stub = ast.parse((ROOT / "pysandbox" / "_sandbox.pyi").read_text())
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    public = {name for name in dir(_sandbox) if not name.startswith("_")}
    functions = _check_signatures(_sandbox, stub.body)
    constants = {
        node.target.id
        for node in stub.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    assert functions | constants | {"Sandbox"} == public
    assert all(isinstance(getattr(_sandbox, name), int) for name in constants)
    # One STAGE_* per enum sbx_stage value, numbered from 0 without a gap.
    stages = sorted(getattr(_sandbox, name) for name in constants if name.startswith("STAGE_"))
    assert stages == list(range(len(stages))) and _sandbox.STAGE_NONE == 0
    sandbox = classes["Sandbox"]
    methods = _check_signatures(_sandbox.Sandbox, sandbox.body)
    properties = {
        node.name
        for node in sandbox.body
        if isinstance(node, ast.FunctionDef) and node.decorator_list
    }
    real = {name for name in dir(_sandbox.Sandbox) if not name.startswith("_")}
    assert methods | properties == real


def test_typed_package() -> None:
    assert (ROOT / "pysandbox" / "py.typed").exists()


@pytest.mark.slow
def test_sdist_builds_and_contains_the_sources() -> None:
    names = sdist_names()
    for required in (
        "src/module.c",
        "src/spawn.c",
        "src/pump.c",
        "src/sandbox.h",
        "pysandbox/_sandbox.pyi",
        "pysandbox/py.typed",
        "tests/conftest.py",
        "tests/core/c/test_init_files.c",
        "tests/core/c/tap.h",
        "examples/grader/conftest.py",
        "examples/grader/submissions/partial/sum.c",
        "setup.py",
        "LICENSE",
        "CONTRIBUTING.rst",
        "scripts/sanitize.sh",
        "pyproject.toml",
        "README.rst",
        "docs/conf.py",
        "docs/index.rst",
        "docs/api.rst",
    ):
        assert required in names, required
    assert built_wheel().name.startswith("pysandbox-")


@pytest.mark.parametrize(
    "document", ["README.rst", "CONTRIBUTING.rst", "examples/grader/README.rst"]
)
def test_documents_are_valid_restructuredtext(document: str) -> None:
    import docutils.core

    docutils.core.publish_doctree(
        (ROOT / document).read_text(),
        settings_overrides={"report_level": 2, "halt_level": 2},
    )


def test_contributing_names_every_module() -> None:
    """The layout tables stay true: every C file, every layer and every module in it is
    named by its path (``_launch/launcher.py``); a new file cannot hide from them."""
    text = (ROOT / "CONTRIBUTING.rst").read_text()
    named = set(re.findall(r"``([\w/]+(?:\.(?:py|c|h)|/))``", text))
    package = ROOT / "pysandbox"
    sources = {p.name for p in (ROOT / "src").glob("*.[ch]")}
    layers = {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}
    modules = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    }
    assert len(layers) == 7 and len(modules) > 40, (layers, modules)
    wanted = sources | layers | modules
    assert wanted <= named, sorted(wanted - named)


def test_readme_names_the_two_commands_that_ci_runs() -> None:
    readme = (ROOT / "README.rst").read_text()
    assert "bash scripts/demo.sh" in readme
    assert "bash scripts/test.sh" in readme
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.slow
def test_demo_command_works_from_the_repository_root() -> None:
    """What scripts/demo.sh runs, from where a newcomer runs it."""
    demo = (ROOT / "scripts" / "demo.sh").read_text().splitlines()[-1]
    assert demo.startswith('exec .venv/bin/python -I -m pysandbox "$@"'), demo
    out = subprocess.run(
        [sys.executable, "-I", "-m", "pysandbox"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("Returncode: 42")
