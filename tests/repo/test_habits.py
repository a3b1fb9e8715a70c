# SPDX-License-Identifier: MIT
"""The habits of a well-kept extension hold: one list of tasks, pre-commit hooks at the
pinned versions, a changelog, editor rules, typing examples, the design notes and the
VM lab in the repository.  Each test reads the repository's own files (a checkout, as
``.ci/run`` has) and names the file to fix when it fails."""

from __future__ import annotations

import ast
import fnmatch
import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.mypy import mypy_strict
from support.sdist import sdist_names

import pysandbox

if sys.version_info >= (3, 11):
    import tomllib
else:  # build, of the test extra, needs tomli below 3.11
    import tomli as tomllib

#: The checkout: the nearest folder above with a pyproject.toml, so the file may move
#: into a folder of tests unchanged.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
#: The typing examples mypy checks.
EXAMPLES = ROOT / "tests" / "repo" / "typing_examples.py"
pytestmark = pytest.mark.no_bwrap


def _make() -> str:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed (apt-get install make)")
    return make


def _makefile_targets() -> list[str]:
    """The Makefile's rules, in order (not its variables or special targets)."""
    text = (ROOT / "Makefile").read_text()
    return re.findall(r"^([a-z0-9][a-z0-9-]*):(?!=)", text, re.MULTILINE)


def test_make_help_lists_every_target() -> None:
    targets = _makefile_targets()
    assert {"help", "setup", "test-fast", "test", "lint", "fmt", "clean"} <= set(targets)
    shown = subprocess.run(
        [_make(), "-s", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = [line.split(None, 1) for line in shown.splitlines()]
    assert [entry[0] for entry in listed] == targets, shown
    assert all(len(entry) == 2 and entry[1].strip() for entry in listed), shown
    # A file named like a target (tests/ is one letter away from test) must not stop it.
    phony = re.search(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert phony is not None
    assert set(phony.group(1).split()) == set(targets)


def _doc_pages() -> list[str]:
    """The documentation site's pages, as paths from the checkout's root."""
    return sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.rst"))


def test_every_make_target_the_documents_name_exists() -> None:
    targets = set(_makefile_targets())
    for document in ("CONTRIBUTING.rst", "README.rst", *_doc_pages()):
        text = (ROOT / document).read_text()
        named = set(re.findall(r"``make ([a-z0-9-]+)", text))
        named |= set(re.findall(r"^ +make ([a-z0-9-]+)", text, re.MULTILINE))
        assert named <= targets, (document, sorted(named - targets))
    assert "``make help``" in (ROOT / "CONTRIBUTING.rst").read_text()


def test_every_make_target_calls_files_that_exist() -> None:
    """Each target's commands, printed by ``make -n``, name scripts that are there."""
    for target in _makefile_targets():
        commands = subprocess.run(
            [_make(), "-n", target],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for path in re.findall(r"\b((?:scripts|benchmarks)/[\w.-]+)(?![\w.$-])", commands):
            assert (ROOT / path).is_file(), (target, path)
        if target == "bench":
            for name in re.findall(r"for name in ([\w ]+);", commands)[0].split():
                assert (ROOT / "benchmarks" / f"bench_{name}.py").is_file(), name


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def _test_pins() -> dict[str, str]:
    """``name: version`` of every requirement pinned with ``==`` in the test extra."""
    pins = {}
    for requirement in _pyproject()["project"]["optional-dependencies"]["test"]:
        pinned = re.match(r"([\w.-]+)==([\w.]+)", requirement)
        if pinned:
            pins[pinned.group(1)] = pinned.group(2)
    return pins


def test_pre_commit_hooks_run_the_pinned_tools_from_the_venv() -> None:
    """Each hook is local, runs a tool from ./.venv and names the version pyproject.toml
    pins for it: the hooks and the tests cannot drift apart."""
    pins = _test_pins()
    assert {"ruff", "clang-format", "mypy"} <= set(pins), pins
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    assert re.findall(r"^\s*- repo: (\S+)", config, re.MULTILINE) == ["local"]
    hooks = re.split(r"^\s*- id: ", config, flags=re.MULTILINE)[1:]
    tools = set()
    for hook in hooks:
        fields = dict(re.findall(r"^\s*(name|entry|language): (.*)$", hook, re.MULTILINE))
        assert fields.get("language") == "system", hook
        tool = re.fullmatch(r"\.venv/bin/([\w-]+)( .*)?", fields["entry"])
        assert tool is not None, fields["entry"]
        tools.add(tool.group(1))
        assert f"({tool.group(1)}=={pins[tool.group(1)]})" in fields["name"], fields["name"]
    assert tools == {"ruff", "clang-format", "mypy"}
    # No other version of the three anywhere in the file, comments included.
    for tool, version in re.findall(r"\b(ruff|clang-format|mypy)==([\w.]+)", config):
        assert version == pins[tool], (tool, version)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_changelog_newest_release_is_the_package_version() -> None:
    """Unreleased first, then the releases newest first, the newest the package's."""
    text = (ROOT / "CHANGELOG.rst").read_text()
    headings = re.findall(r"^(\S.*)\n-{3,}$", text, re.MULTILINE)
    assert headings[0] == "Unreleased", headings
    released = []
    for heading in headings[1:]:
        version = re.match(r"(\d+(?:\.\d+)+)\b", heading)
        assert version is not None, f"not a version: {heading!r}"
        released.append(version.group(1))
    assert released, "no released version"
    # The installed distribution's version: pyproject.toml's, whether it is written
    # there or read from the package (dynamic).
    assert released[0] == pysandbox.__version__ == importlib.metadata.version("pysandbox")
    assert sorted(released, key=_version, reverse=True) == released, released
    unreleased = text.split("\nUnreleased\n", 1)[1].split(f"\n{released[0]}", 1)[0]
    assert unreleased.lstrip("-\n").startswith("* Internal modules moved"), unreleased


def _manifest_includes() -> set[str]:
    lines = (ROOT / "MANIFEST.in").read_text().splitlines()
    return {name for line in lines if line.startswith("include ") for name in line.split()[1:]}


def test_sdist_ships_the_documents_and_the_task_list() -> None:
    """Every top-level document, the Makefile and the editor rules are in MANIFEST.in."""
    documents = {path.name for path in ROOT.glob("*.rst")}
    assert {"README.rst", "CONTRIBUTING.rst", "CHANGELOG.rst"} <= documents
    missing = (documents | {"Makefile", "LICENSE", ".editorconfig"}) - _manifest_includes()
    assert not missing, f"add to MANIFEST.in: {sorted(missing)}"


def _editorconfig(name: str) -> dict[str, str]:
    """The properties .editorconfig gives a file of this name (its sections name no
    folder, so they match the base name anywhere; a later section wins)."""
    properties: dict[str, str] = {}
    matches = False
    for line in (ROOT / ".editorconfig").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        section = re.fullmatch(r"\[(.+)\]", line)
        if section:
            glob = section.group(1)
            braces = re.fullmatch(r"(.*)\{(.+)\}(.*)", glob)
            globs = [glob]
            if braces:
                before, choices, after = braces.groups()
                globs = [before + choice + after for choice in choices.split(",")]
            matches = any(fnmatch.fnmatchcase(name, glob) for glob in globs)
        elif matches:
            key, value = (part.strip() for part in line.split("=", 1))
            properties[key] = value
    return properties


def _clang_format() -> dict[str, str]:
    text = (ROOT / ".clang-format").read_text()
    return dict(re.findall(r"^(\w+): *(\S+)$", text, re.MULTILINE))


def test_editorconfig_matches_ruff_and_clang_format() -> None:
    ruff = _pyproject()["tool"]["ruff"]
    for name in ("_run.py", "_sandbox.pyi"):
        python = _editorconfig(name)
        assert python["indent_style"] == "space", name
        assert int(python["indent_size"]) == ruff.get("indent-width", 4), name
        assert int(python["max_line_length"]) == ruff["line-length"], name
    clang = _clang_format()
    assert clang.get("UseTab", "Never") == "Never"
    for name in ("spawn.c", "sandbox.h"):
        c = _editorconfig(name)
        assert c["indent_style"] == "space", name
        assert int(c["indent_size"]) == int(clang["IndentWidth"]), name
        assert int(c["max_line_length"]) == int(clang["ColumnLimit"]), name
    assert _editorconfig("Makefile")["indent_style"] == "tab"


def test_tracked_files_follow_the_editorconfig() -> None:
    """No trailing white space, a final newline, LF endings, tabs only where the rules
    ask for them: what .editorconfig promises an editor is true of the tree."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    problems = []
    for name in listed.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file() or b"\0" in (data := path.read_bytes()):
            continue
        text = data.decode()
        rules = _editorconfig(path.name)
        if text and not text.endswith("\n"):
            problems.append(f"{name}: no final newline")
        for number, line in enumerate(text.split("\n"), 1):
            if line != line.rstrip():
                problems.append(f"{name}:{number}: trailing white space or CR")
            if line.startswith("\t") and rules.get("indent_style") != "tab":
                problems.append(f"{name}:{number}: a tab where .editorconfig says spaces")
    assert not problems, "\n".join(problems[:20])


#: The project's own source files, by glob; the grader example's submissions stand for
#: students' code and carry none.
SPDX_GLOBS = ("*.py", "*.pyi", "*.c", "*.h", "*.sh", "Makefile", ".ci/run", "lab/guest/*")
SPDX_LINE = "SPDX-License-Identifier: MIT"


def test_every_source_file_names_its_licence_in_an_spdx_line() -> None:
    """Each source file says its licence (the one of ``pyproject.toml``) in an SPDX line
    at its top (after a ``#!`` line), so a file copied out of the tree keeps it."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    checked, missing = 0, []
    for name in listed.stdout.decode().split("\0"):
        if not any(
            fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(Path(name).name, glob)
            for glob in SPDX_GLOBS
        ):
            continue
        if name.startswith("examples/grader/submissions/"):
            continue
        checked += 1
        head = (ROOT / name).read_text(encoding="utf-8").split("\n")[:2]
        if not any(SPDX_LINE in line for line in head):
            missing.append(name)
    assert checked > 200 and not missing, missing


def test_every_path_the_documents_name_exists() -> None:
    """A path of the tree that README, CONTRIBUTING, DESIGN or a page of the site names (a
    test, a module, a script, a page) is there: after a move, a document cannot send a
    reader to an old path."""
    named = re.compile(
        r"(?<![\w./])((?:tests|pysandbox|scripts|src|benchmarks|lab|docs)/[\w./-]*\w)"
    )
    built = {"pysandbox/_init", "docs/_build/html"}  # made by setup.py, by make docs
    missing, seen = [], 0
    for document in ("README.rst", "CONTRIBUTING.rst", "DESIGN.rst", *_doc_pages()):
        for path in named.findall((ROOT / document).read_text(encoding="utf-8")):
            seen += 1
            if path not in built and not (ROOT / path).exists():
                missing.append(f"{document}: {path}")
    assert seen > 30 and not missing, missing


def _public_name(revealed: str) -> str:
    """``pysandbox.<private path>.Name`` as ``pysandbox.Name``: the comments of the typing
    examples match the final component only, so the private modules may move."""
    return re.sub(r"\bpysandbox(?:\.\w+)*\.(\w+)", r"pysandbox.\1", revealed)


@pytest.mark.skipif(
    sys.version_info < (3, 10), reason="mypy 2.4 needs Python 3.10+ (the default Python checks)"
)
def test_typing_examples_reveal_the_types_their_comments_name(tmp_path: Path) -> None:
    """``mypy --strict`` on tests/repo/typing_examples.py, from a scratch directory (so that
    the installed package is checked, not the source tree): no error, and each
    ``reveal_type`` line reveals what its ``# R:`` comment says."""
    expected = {}
    for number, line in enumerate(EXAMPLES.read_text().splitlines(), 1):
        if "reveal_type(" in line and not line.lstrip().startswith(("from ", "import ")):
            comment = re.search(r"# R: (.+)$", line)
            assert comment is not None, f"examples.py:{number}: reveal_type without # R:"
            expected[number] = comment.group(1).strip()
    assert len(expected) >= 10
    checked = mypy_strict(EXAMPLES, tmp_path, "-v")
    notes = re.findall(r"^.*?:(\d+): (\w+): (.*)$", checked.stdout, re.MULTILINE)
    assert checked.returncode == 0, checked.stdout
    assert [n for n in notes if n[1] != "note"] == [], checked.stdout
    revealed = {}
    for number, _, message in notes:
        shown = re.fullmatch(r'Revealed type is "(.*)"', message)
        assert shown is not None, message
        revealed[int(number)] = _public_name(shown.group(1))
    assert revealed == expected
    installed = Path(pysandbox.__file__).resolve()
    parsed = re.findall(r"Parsing (\S+) \(pysandbox\)$", checked.stderr, re.MULTILINE)
    assert [Path(path).resolve() for path in parsed] == [installed], parsed


def test_design_names_the_c_files_and_the_python_modules_by_role() -> None:
    """DESIGN.rst names every C file (they are stable) and only files that exist, and
    names no private Python module: those move, so it speaks of their roles and leaves
    the names to CONTRIBUTING.rst, whose layout table a test keeps true."""
    text = (ROOT / "DESIGN.rst").read_text()
    sources = {f"src/{path.name}" for path in (ROOT / "src").glob("*.[ch]")}
    named = set(re.findall(r"``(src/[\w.]+)``", text))
    assert sources <= named, sorted(sources - named)
    assert named <= sources, sorted(named - sources)
    modules = re.findall(r"\b(_[a-z]\w*\.py)\b", text)
    assert modules == [], f"name these by their role: {modules}"
    assert "../shared" not in text
    assert "``DESIGN.rst``" in (ROOT / "CONTRIBUTING.rst").read_text()


@pytest.mark.slow
def test_sdist_has_the_habits_and_not_the_lab(tmp_path: Path) -> None:
    """The sdist carries the documents, the task list and the typing examples; the VM
    lab, a maintainers' harness that builds a guest as root, stays out (and no wheel
    holds anything but the package)."""
    names = sdist_names()
    for required in (
        "CHANGELOG.rst",
        "DESIGN.rst",
        "Makefile",
        ".editorconfig",
        "tests/repo/test_habits.py",
        EXAMPLES.relative_to(ROOT).as_posix(),
    ):
        assert required in names, required
    assert not [name for name in names if name.startswith("lab/")]


LAB = ROOT / "lab"


def test_nothing_points_outside_the_repository_for_the_lab_or_the_design() -> None:
    outside = "../" + "shared"
    for path in [ROOT / "README.rst", ROOT / "CONTRIBUTING.rst", *ROOT.glob("scripts/*")]:
        assert outside not in path.read_text(), path.name
    for path in LAB.rglob("*"):
        assert not path.is_file() or outside not in path.read_text(), path
    contributing = (ROOT / "CONTRIBUTING.rst").read_text()
    assert "``lab/``" in contributing and "``lab/README.rst``" in contributing


def test_every_shell_script_parses() -> None:
    scripts = [*ROOT.glob("scripts/*.sh"), *LAB.rglob("*.sh"), LAB / "guest" / "vmlab-run"]
    assert len(scripts) >= 12
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True)


def _lab(*args: str, state: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``lab/run-in-vm.sh`` with an empty state folder: it stops before any boot."""
    return subprocess.run(
        ["bash", str(LAB / "run-in-vm.sh"), *args],
        env={**os.environ, "VMLAB_STATE": str(state), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_run_in_vm_stops_before_booting_on_help_bad_mode_or_no_image(tmp_path: Path) -> None:
    shown = _lab("--help", state=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Run a command inside the VM lab's guest"), shown.stdout
    for option in ("-p PROJECT", "-m root|user|both", "--shell", "VMLAB_STATE"):
        assert option in shown.stdout, option
    assert "set -euo" not in shown.stdout
    bad = _lab("-m", "nobody", "--", "true", state=tmp_path)
    assert (bad.returncode, bad.stderr) == (125, "vmlab: -m root|user|both\n")
    unbuilt = _lab("--", "true", state=tmp_path)
    assert unbuilt.returncode == 125
    assert f"{tmp_path}/debian.img missing: run build-image.sh" in unbuilt.stderr
    assert list(tmp_path.iterdir()) == []  # no job folder: nothing was started


def test_cgroup_v2_check_finds_the_lab_in_the_repository(tmp_path: Path) -> None:
    """scripts/test-cgroup-v2.sh finds lab/ by default and skips, naming the build
    command, when the image is not built; it skips as well without any lab."""
    script = ["bash", str(ROOT / "scripts" / "test-cgroup-v2.sh")]
    env = {k: v for k, v in os.environ.items() if k != "VMLAB_DIR"}
    found = subprocess.run(
        script,
        env={**env, "VMLAB_STATE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert found.returncode == 0, found.stderr
    assert "skipped: the lab's guest image is not built" in found.stdout, found.stdout
    assert f"bash {LAB}/build-image.sh" in found.stdout, found.stdout
    elsewhere = {**env, "VMLAB_STATE": str(tmp_path), "VMLAB_DIR": str(tmp_path / "none")}
    missing = subprocess.run(
        script, env=elsewhere, capture_output=True, text=True, timeout=60, check=False
    )
    assert missing.returncode == 0, missing.stderr
    assert "skipped: no VM lab at" in missing.stdout, missing.stdout


def test_lab_image_pins_the_test_tools_as_pyproject_does() -> None:
    pins = _test_pins()
    named = re.findall(r"\b([\w.-]+)==([\w.]+)", (LAB / "build-image.sh").read_text())
    assert named, "build-image.sh pins no test tool"
    for tool, version in named:
        assert pins.get(tool) == version, f"lab/build-image.sh: {tool}=={version}, {pins}"


def test_lab_jobs_use_names_the_installed_package_has() -> None:
    """The Python a lab job runs in the guest imports names that exist: the private
    modules it reaches into move with the restructuring, and the lab runs too rarely to
    find out by itself."""
    for job in LAB.glob("jobs/*.sh"):
        for code in re.findall(r"<<'PY'\n(.*?)\nPY\n", job.read_text(), re.DOTALL):
            tree = ast.parse(code)
            modules: dict[str, object] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "pysandbox":
                    for alias in node.names:
                        try:
                            value = importlib.import_module(f"pysandbox.{alias.name}")
                        except ModuleNotFoundError:
                            value = getattr(pysandbox, alias.name, None)
                        assert value is not None, f"{job.name}: pysandbox has no {alias.name}"
                        modules[alias.asname or alias.name] = value
            assert modules, job.name
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in modules
                ):
                    owner = modules[node.value.id]
                    assert hasattr(owner, node.attr), f"{job.name}: {node.value.id}.{node.attr}"


@pytest.mark.parametrize("document", ["CHANGELOG.rst", "DESIGN.rst", "lab/README.rst"])
def test_new_documents_are_valid_restructuredtext(document: str) -> None:
    import docutils.core

    docutils.core.publish_doctree(
        (ROOT / document).read_text(),
        settings_overrides={"report_level": 2, "halt_level": 2},
    )
