# SPDX-License-Identifier: MIT
"""The package's shape is a rule, not a habit: seven layers, imports pointing downward.

``pysandbox/`` holds seven private packages, lowest first (``LAYERS``); each says in its
docstring what it is and what it may import.  Read from the source with ``ast``, every
import counts: module-level, inside a function (a lazy import) and under
``TYPE_CHECKING``.  The root files (``__init__``, ``__main__``, ``pytest_plugin``,
``_version``) may import any layer; no layer imports them, except ``_version``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_bwrap

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pysandbox"
LAYERS = ["_model", "_host", "_cgroups", "_launch", "_api", "_runner", "_frontends"]
#: Lazy imports that close a cycle inside one package, each named in that package's
#: docstring: an optional engine loaded on use.
DECLARED_CYCLES = {frozenset({"pysandbox._runner.runner", "pysandbox._runner.dask"})}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(dotted: str) -> str:
    """``"pysandbox._cgroups.group"`` -> ``"_cgroups"``; "" for the root files."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else ""


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class Import:
    """One imported name (or module) of one source file."""

    def __init__(self, path: Path, line: int, target: str, name: str | None, runtime: bool):
        self.path = path
        self.line = line
        #: The module imported from, absolute.
        self.target = target
        #: The name imported from it (None for ``import x.y``).
        self.name = name
        #: False under ``TYPE_CHECKING``.
        self.runtime = runtime

    def __str__(self) -> str:
        what = f"{self.target}:{self.name}" if self.name else self.target
        return f"{self.path.relative_to(ROOT)}:{self.line}: {what}"


def imports(path: Path) -> Iterator[Import]:
    """Every import of ``pysandbox`` code in ``path``, relative ones made absolute."""
    here = module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for inner in node.body:
                typing_only.update(id(sub) for sub in ast.walk(inner))
    for node in ast.walk(tree):
        runtime = id(node) not in typing_only
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "pysandbox":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if _is_module(submodule):
                    yield Import(path, node.lineno, submodule, None, runtime)
                else:
                    yield Import(path, node.lineno, target, alias.name, runtime)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pysandbox":
                    yield Import(path, node.lineno, alias.name, None, runtime)


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of ours (the C core included)."""
    where = PACKAGE.parent / dotted.replace(".", "/")
    return dotted == "pysandbox._sandbox" or where.with_suffix(".py").exists() or where.is_dir()


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_there_are_seven_layers_each_saying_what_it_may_import() -> None:
    found = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert found == sorted(LAYERS)
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
        assert doc and f"Layer {LAYERS.index(layer) + 1}," in doc and "Imports:" in doc, layer


def test_imports_point_downward_only() -> None:
    problems = []
    for path in sources():
        own = layer_of(module_name(path))
        if not own:
            continue
        for item in imports(path):
            theirs = layer_of(item.target)
            if item.target == "pysandbox._sandbox":
                if own != "_launch":
                    problems.append(f"{item}: only _launch imports the C core")
            elif not theirs:
                if item.target != "pysandbox._version":
                    problems.append(f"{item}: a layer imports the package's root")
            elif LAYERS.index(theirs) > LAYERS.index(own):
                problems.append(f"{item}: {own} imports {theirs}, a higher layer")
    assert not problems, "\n".join(problems)


def test_no_underscore_name_crosses_a_package() -> None:
    """What one package uses of another is that package's public name: a leading
    underscore means "this module's own" and must stay so."""
    problems = []
    for path in sources():
        own = layer_of(module_name(path))
        for item in imports(path):
            if (
                item.name is not None
                and item.name.startswith("_")
                and not item.name.startswith("__")
                and layer_of(item.target) != own
            ):
                problems.append(str(item))
    assert not problems, "\n".join(problems)


def _runtime_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sources():
        edges = graph.setdefault(module_name(path), set())
        for item in imports(path):
            if item.runtime and item.target != "pysandbox._sandbox":
                edges.add(item.target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_runtime_import_cycle_but_the_declared_one() -> None:
    """Module-level and lazy imports together form no cycle, except an optional engine's
    (``DECLARED_CYCLES``), which its package's docstring names.  The package's root is
    left out: it imports every layer, and the layers import only ``_version`` of it."""
    graph = {name: edges for name, edges in _runtime_graph().items() if layer_of(name)}
    cycles = [c for c in _cycles(graph) if frozenset(c) not in DECLARED_CYCLES]
    assert not cycles, cycles
    for cycle in DECLARED_CYCLES:
        layer = layer_of(next(iter(cycle)))
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text())) or ""
        for module in cycle:
            assert f"``{module.rsplit('.', 1)[1]}``" in doc, (module, layer)


def test_the_checks_see_what_they_must() -> None:
    """The walk above finds the imports it must, so the rules cannot pass vacuously."""
    launcher = PACKAGE / "_launch" / "launcher.py"
    targets = {item.target for item in imports(launcher)}
    assert "pysandbox._sandbox" in targets and "pysandbox._model.cancel" in targets
    graph = _runtime_graph()
    assert len(graph) > 50
    assert {"pysandbox._runner.dask"} <= graph["pysandbox._runner.runner"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]


def test_tests_mirror_the_layers_and_share_helpers_only_through_support() -> None:
    """Each test folder is a layer's (or security, repo); a test imports helpers from
    ``tests/support`` only, never ``conftest`` or another test module; and test file
    names are unique, since the suite has no ``tests/__init__.py`` on purpose (tests run
    against the installed package, from a scratch directory)."""
    tests = ROOT / "tests"
    folders = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name != "golden")
    assert folders == sorted(
        ["api", "cgroups", "core", "frontends", "model", "repo", "runner", "security", "support"]
    )
    assert not list(tests.glob("test_*.py")), "a test outside the folders"
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)) > 50
    problems = []
    for path in tests.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                if top == "conftest" or top.startswith("test_"):
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}")
    assert not problems, "\n".join(problems)


def _imports_pytest(path: Path) -> bool:
    """Whether ``path`` imports pytest (or its private ``_pytest``) in any way."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(name.split(".")[0] in ("pytest", "_pytest") for name in names):
            return True
    return False


def test_only_the_plugin_and_its_modules_import_pytest() -> None:
    """``import pysandbox`` never imports pytest: only the plugin (``pytest_plugin``)
    and its modules (``_frontends/pytest_*.py``) do, and only the plugin imports them."""
    plugin_modules = {PACKAGE / "pytest_plugin.py", *(PACKAGE / "_frontends").glob("pytest_*.py")}
    importers = {path for path in sources() if _imports_pytest(path)}
    assert importers == plugin_modules, sorted(str(p.relative_to(ROOT)) for p in importers)
    names = {module_name(path) for path in plugin_modules}
    for path in sources():
        if path not in plugin_modules:
            wrong = [str(item) for item in imports(path) if item.target in names]
            assert not wrong, wrong


def test_one_describe_for_every_test() -> None:
    """An account of a result for assertion messages is written once, in
    ``tests/support/describe.py``; a test that wants more passes it as context."""
    homes = []
    for path in (ROOT / "tests").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        homes += [
            f"{path.relative_to(ROOT)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == "describe"
        ]
    assert homes == ["tests/support/describe.py:12"]
