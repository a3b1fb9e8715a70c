# SPDX-License-Identifier: MIT
"""Only the interpreter is visible; ``readable`` never shows the host's kernel interfaces.

The sandbox shows the caller's interpreter at its own paths, but only what the interpreter
reads (the executable and the symlinks leading to it, the standard library and
site-packages, libpython, ``pyvenv.cfg``): a virtual environment made at an application's
root (``python -m venv APP``) must not expose ``APP/secret.env``.  Each test starts a real
caller with the interpreter under test, whose sandboxed code looks for what should be
hidden and lists the directories it can see; the host then checks the exact listings and
that no secret came out.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pysandbox
from pysandbox import run, run_python
from pysandbox._launch import bwrap

ROOT = Path(__file__).resolve().parents[2]
#: The directory that holds the installed pysandbox package.
PACKAGE_ROOT = Path(pysandbox.__file__).resolve().parent.parent
IS_ROOT = os.geteuid() == 0
#: A uid with no other process on this host, for a non-root caller made by the test.
UNPRIVILEGED_CALLER = 54322
#: Modules whose import needs the stdlib, lib-dynload and the libraries they link to.
IMPORTS = ("json", "decimal", "ctypes", "ssl", "sqlite3", "zlib")

#: Runs in the sandbox: what the interpreter is, and what it can see of the host.
PROBE = """
import errno, json, os, sys

report = {
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "version": sys.version,
}
for name in IMPORTS:
    try:
        __import__(name)
        report["import " + name] = True
    except ImportError:
        report["import " + name] = False
for path in LIST:
    try:
        report["list " + path] = sorted(os.listdir(path))
    except OSError as exc:
        report["list " + path] = errno.errorcode[exc.errno]
for path in EXISTS:
    report["exists " + path] = os.path.lexists(path)
for path in READ:
    try:
        with open(path) as secret:
            report["read " + path] = secret.read()
    except OSError as exc:
        report["read " + path] = errno.errorcode[exc.errno]
print(json.dumps(report))
"""

#: Runs as the caller, with the interpreter under test: the probe through both APIs.
DRIVER = """
import json, sys
from pysandbox import Limits, eval_in_sandbox, run_python

code, imports = sys.argv[1], json.loads(sys.argv[2])
host = {
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "version": sys.version,
}
for name in imports:
    try:
        __import__(name)
        host["import " + name] = True
    except ImportError:
        host["import " + name] = False
# CPU time to spare: these tests are about files, and with a cgroup the CPU cap counts
# bwrap's start-up too (the lab's emulated guest under load passed eval's default 1 s).
evaluated = eval_in_sandbox(code, mem_max_mb=1024, cpu_max_time_sec=30, timeout_max_time_sec=60)
ran = run_python(code, limits=Limits(cpu_time=30, wall_time=60))
print(json.dumps({
    "host": host,
    "eval": [evaluated.returncode, evaluated.stdout, evaluated.stderr],
    "run": [ran.returncode, ran.stdout.decode(), ran.stderr.decode(errors="replace")],
}))
"""


class Caller:
    """Who calls pysandbox, and with which interpreter: the host side of every test."""

    def __init__(self, python: str, package_root: Path, user: int | None) -> None:
        #: The interpreter the test bases its venvs and symlinks on.
        self.python = python
        self.package_root = package_root
        self.user = user

    def probe(
        self,
        argv0: str | Path,
        *,
        lists: tuple[str | Path, ...] = (),
        exists: tuple[str | Path, ...] = (),
        reads: tuple[str | Path, ...] = (),
    ) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
        """Start a caller as ``argv0``; return its own view of the interpreter and the
        sandbox's, by API (``eval`` and ``run``)."""
        params = {
            "IMPORTS": list(IMPORTS),
            "LIST": [str(p) for p in lists],
            "EXISTS": [str(p) for p in exists],
            "READ": [str(p) for p in reads],
        }
        code = "".join(f"{k} = {v!r}\n" for k, v in params.items()) + PROBE
        out = subprocess.run(
            [str(argv0), "-c", DRIVER, code, json.dumps(IMPORTS)],
            user=self.user,
            group=self.user,
            extra_groups=[] if self.user is not None else None,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(self.package_root)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        outcome = json.loads(out.stdout)
        seen = {}
        for api in ("eval", "run"):
            returncode, stdout, stderr = outcome[api]
            assert returncode == 0, f"{api}: {stderr[-3000:]}"
            seen[api] = json.loads(stdout)
        return outcome["host"], seen


def _world_readable_tree(path: Path) -> None:
    for item in [path, *path.rglob("*")]:
        if not item.is_symlink():
            item.chmod(0o755 if item.is_dir() or os.access(item, os.X_OK) else 0o644)


@pytest.fixture
def scratch(world_readable_dir: Path) -> Path:
    """A directory that a non-root caller can reach too (pytest's tmp_path is 0700)."""
    return world_readable_dir


@pytest.fixture(params=["root", "non-root"])
def caller(request: pytest.FixtureRequest, scratch: Path) -> Caller:
    """A root caller on this test's own interpreter (a pyenv venv here), or a non-root
    caller on the system interpreter with a world-readable copy of pysandbox."""
    if request.param == "root":
        if not IS_ROOT:
            pytest.skip("the caller is not root here")
        return Caller(sys.executable, PACKAGE_ROOT, None)
    python, shared = request.getfixturevalue("unprivileged_pysandbox")
    return Caller(python, shared, UNPRIVILEGED_CALLER)


def link_chain(path: Path) -> list[Path]:
    """``path`` and every symlink it leads to through its last component, then the file."""
    chain = [path]
    while chain[-1].is_symlink():
        chain.append(Path(os.path.normpath(chain[-1].parent / os.readlink(chain[-1]))))
    return chain


def top_level(api: str, *extra: str) -> list[str]:
    """What the sandbox's ``/`` holds: the system directories the host has, the sandbox's
    own mount points (the code directory of ``eval``, the working and cache directories
    of ``run``), the steps to the host's font configuration, and ``extra``."""
    system = [d for d in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")]
    present = [d for d in system if os.path.lexists(f"/{d}")]
    own = ["home"] if api == "eval" else ["sandbox", "cache"]
    fonts = [path.split("/")[1] for path in bwrap.font_mounts() if path.startswith("/")]
    return sorted({*present, "dev", "proc", ".pysandbox", *own, *fonts, *extra})


def interpreter_facts(report: dict[str, object]) -> dict[str, object]:
    """What the interpreter is and which modules it can import."""
    keys = ("executable", "prefix", "base_prefix", "version")
    return {k: v for k, v in report.items() if k in keys or k.startswith("import ")}


def starting(report: dict[str, object], prefix: str) -> dict[str, object]:
    return {k: v for k, v in report.items() if k.startswith(prefix)}


# --------------------------------------------------------------------------- a venv at an app root


def test_venv_at_an_application_root_shows_only_the_interpreter(
    caller: Caller, scratch: Path
) -> None:
    app = scratch / "APP"
    subprocess.run([caller.python, "-m", "venv", "--without-pip", str(app)], check=True)
    secret = f"TOKEN={uuid.uuid4().hex}"
    (app / "secret.env").write_text(secret)
    (app / "app").mkdir()
    (app / "app" / "settings.py").write_text(f"# {secret}\n")
    (scratch / "neighbour.env").write_text(secret)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(app), "platbase": str(app)}))
    (purelib / "only_in_this_venv.py").write_text("MARK = 'venv-package'\n")
    _world_readable_tree(app)
    executable = app / "bin" / "python"
    hidden = (app / "secret.env", app / "app", app / "include", scratch / "neighbour.env")

    host, seen = caller.probe(
        executable,
        lists=(scratch, app, app / "bin", app / "lib"),
        exists=hidden,
        reads=(
            purelib / "only_in_this_venv.py",
            app / "secret.env",
            app / "app" / "settings.py",
            purelib / ".." / ".." / ".." / "secret.env",
            f"/proc/self/root{app}/secret.env",
        ),
    )
    assert host["prefix"] == str(app)
    for api, report in seen.items():
        # A venv stays a venv: the same interpreter, prefix and modules, its own package.
        assert interpreter_facts(report) == interpreter_facts(host), api
        assert report.pop(f"read {purelib / 'only_in_this_venv.py'}") == "MARK = 'venv-package'\n"
        # Exactly what the interpreter needs, nothing of the application.
        assert report[f"list {scratch}"] == ["APP"], api
        assert report[f"list {app}"] == ["bin", "lib", "pyvenv.cfg"], api
        in_bin = sorted(p.name for p in link_chain(executable) if p.parent == app / "bin")
        assert report[f"list {app / 'bin'}"] == in_bin, api
        assert report[f"list {app / 'lib'}"] == [purelib.parent.name], api
        assert starting(report, "exists ") == {f"exists {p}": False for p in hidden}, api
        assert set(starting(report, "read ").values()) == {"ENOENT"}, report
        assert secret not in json.dumps(report)
    assert (app / "secret.env").read_text() == secret


# --------------------------------------------------------------------------- in a home directory

#: eval_in_sandbox's working directory, which holds only the code, and where the sandbox
#: shows instead the interpreter's files that live there on the host (docs/security.rst).
CODE_DIR = Path("/home")
MOVED_ROOT = Path("/.pysandbox")


def moved(path: Path) -> Path:
    """Where eval_in_sandbox shows the host's ``path`` under ``CODE_DIR``."""
    return MOVED_ROOT / path.relative_to("/")


@pytest.fixture
def home_scratch() -> Iterator[Path]:
    """A fresh directory in ``/home``, where a user's venv lives, that a non-root caller
    can reach too."""
    try:
        path = Path(tempfile.mkdtemp(prefix="pysandbox-home-", dir=CODE_DIR))
    except OSError as exc:
        pytest.skip(f"cannot make a directory in {CODE_DIR}: {exc.strerror}")
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path)


def _link_or_copy(source: str, target: str) -> None:
    """A hard link (the same file, at no cost), or a copy across filesystems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def install_base_copy(python: str, target: Path) -> Path:
    """A base installation of ``python`` at ``target``: its real executable in ``bin``
    and its standard library in ``lib`` (without the test suite and site-packages),
    which the interpreter finds from where it is; returns the executable.  ``lib`` is
    named as on the host (``lib64`` on some distributions)."""
    facts = json.loads(
        subprocess.run(
            [
                python,
                "-c",
                "import json, os, sys, sysconfig; print(json.dumps([os.path.realpath("
                "sys._base_executable), sysconfig.get_paths()['stdlib']]))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    real, stdlib = facts
    (target / "bin").mkdir(parents=True)
    executable = target / "bin" / os.path.basename(real)
    _link_or_copy(real, str(executable))
    shutil.copytree(
        stdlib,
        target / Path(stdlib).parent.name / Path(stdlib).name,
        copy_function=_link_or_copy,
        ignore=shutil.ignore_patterns("test", "site-packages", "__pycache__"),
        symlinks=True,
    )
    _world_readable_tree(target)
    return executable


def test_venv_in_a_home_directory_is_shown_outside_it(caller: Caller, home_scratch: Path) -> None:
    """A user's venv in ``/home`` (its base installation elsewhere): eval_in_sandbox runs
    it below ``/.pysandbox``, its ``/home`` holds the code alone, and nothing of the
    user's directory but the interpreter's files is visible; run shows it in place."""
    app = home_scratch / "APP"
    subprocess.run([caller.python, "-m", "venv", "--without-pip", str(app)], check=True)
    secret = f"TOKEN={uuid.uuid4().hex}"
    (app / "secret.env").write_text(secret)
    (home_scratch / "neighbour.env").write_text(secret)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(app), "platbase": str(app)}))
    (purelib / "only_in_this_venv.py").write_text("MARK = 'venv-package'\n")
    _world_readable_tree(home_scratch)
    executable = app / "bin" / "python"

    host, seen = caller.probe(
        executable,
        lists=(CODE_DIR, MOVED_ROOT, moved(CODE_DIR), moved(home_scratch), moved(app)),
        exists=(
            home_scratch,
            app,
            moved(app / "secret.env"),
            moved(home_scratch / "neighbour.env"),
        ),
        reads=(moved(purelib / "only_in_this_venv.py"), moved(app / "secret.env")),
    )
    assert host["prefix"] == str(app)
    report = seen["eval"]
    assert interpreter_facts(report) == {
        **interpreter_facts(host),
        "executable": str(moved(executable)),
        "prefix": str(moved(app)),
    }
    assert (
        report.pop(f"read {moved(purelib / 'only_in_this_venv.py')}") == "MARK = 'venv-package'\n"
    )
    assert report[f"list {CODE_DIR}"] == ["code.py"]
    assert report[f"list {MOVED_ROOT}"] == [CODE_DIR.name, "init"]
    assert report[f"list {moved(CODE_DIR)}"] == [home_scratch.name]
    assert report[f"list {moved(home_scratch)}"] == ["APP"]
    assert report[f"list {moved(app)}"] == ["bin", "lib", "pyvenv.cfg"]
    assert set(starting(report, "exists ").values()) == {False}, report
    assert set(starting(report, "read ").values()) == {"ENOENT"}, report
    assert secret not in json.dumps(report)
    assert interpreter_facts(seen["run"]) == interpreter_facts(host)


def test_venv_and_its_base_in_a_home_directory(caller: Caller, home_scratch: Path) -> None:
    """A venv whose base installation lives in ``/home`` too (pyenv, uv in a user's home):
    eval_in_sandbox shows both below ``/.pysandbox`` and serves the venv a ``pyvenv.cfg``
    whose ``home`` says where its base is shown, so the interpreter runs on the moved
    base, not on whatever its build prefix finds."""
    base = home_scratch / "base"
    python = install_base_copy(caller.python, base)
    app = home_scratch / "APP"
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(app)], check=True)
    _world_readable_tree(home_scratch)

    host, seen = caller.probe(
        app / "bin" / "python", lists=(CODE_DIR, moved(home_scratch), moved(base))
    )
    assert (host["prefix"], host["base_prefix"]) == (str(app), str(base))
    report = seen["eval"]
    assert interpreter_facts(report) == {
        **interpreter_facts(host),
        "executable": str(moved(app / "bin" / "python")),
        "prefix": str(moved(app)),
        "base_prefix": str(moved(base)),
    }
    assert report[f"list {CODE_DIR}"] == ["code.py"]
    assert report[f"list {moved(home_scratch)}"] == ["APP", "base"]
    assert report[f"list {moved(base)}"] == sorted(path.name for path in base.iterdir())
    assert interpreter_facts(seen["run"]) == interpreter_facts(host)


# --------------------------------------------------------------------------- symlink chains


def test_interpreter_reached_through_a_chain_of_symlinks(caller: Caller, scratch: Path) -> None:
    """``a -> b -> alias/python``, ``alias -> store`` (a directory link), ``store/python ->``
    the caller's interpreter (itself a venv's chain for the root caller): both APIs run
    the program as it was called, and nothing else in those directories is visible."""
    chain_dir, store = scratch / "chain", scratch / "store"
    chain_dir.mkdir()
    store.mkdir()
    (scratch / "alias").symlink_to(store)
    (store / "python").symlink_to(caller.python)
    (chain_dir / "b").symlink_to(scratch / "alias" / "python")
    (chain_dir / "a").symlink_to("b")
    for directory in (chain_dir, store):
        (directory / "private.txt").write_text("private\n")
    _world_readable_tree(scratch)

    host, seen = caller.probe(
        chain_dir / "a",
        lists=(scratch, chain_dir, store),
        exists=(scratch / "alias",),
        reads=(chain_dir / "private.txt", store / "private.txt"),
    )
    assert host["executable"] == str(chain_dir / "a")
    for api, report in seen.items():
        assert interpreter_facts(report) == interpreter_facts(host), api
        assert report[f"list {scratch}"] == ["alias", "chain", "store"], api
        assert report[f"list {chain_dir}"] == ["a", "b"], api
        assert report[f"list {store}"] == ["python"], api
        assert report[f"exists {scratch / 'alias'}"] is True, api
        assert set(starting(report, "read ").values()) == {"ENOENT"}, report


# --------------------------------------------------------------------------- other interpreters


def _pyenv_interpreter(minor: str) -> str | None:
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(os.path.join(root, "versions", f"{minor}.*", "bin", "python")))
    return found[-1] if found else None


@pytest.fixture(scope="session")
def build_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """pysandbox as installed here, copied for another interpreter of the same ABI; once
    per interpreter.  A Python of another version needs a build of its own, which the
    test suite cannot make offline: scripts/test.sh runs the whole suite on those."""
    built: dict[str, Path] = {}

    def build(python: str) -> Path:
        if python not in built:
            suffix = subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            if suffix != sysconfig.get_config_var("EXT_SUFFIX"):
                pytest.skip(
                    f"{python} has another ABI ({suffix}): pysandbox would need a build of "
                    "its own (scripts/test.sh runs the whole suite on Python 3.9 and 3.13)"
                )
            target = tmp_path_factory.mktemp("target")
            shutil.copytree(Path(pysandbox.__file__).parent, target / "pysandbox")
            built[python] = target
        return built[python]

    return build


OTHER_INTERPRETERS: dict[str, Callable[[], str | None]] = {
    "pyenv-3.9": lambda: _pyenv_interpreter("3.9"),
    "pyenv-3.13": lambda: _pyenv_interpreter("3.13"),
    "pyenv-this-version": lambda: _pyenv_interpreter(
        f"{sys.version_info.major}.{sys.version_info.minor}"
    ),
    "system": lambda: shutil.which("python3", path="/usr/bin"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OTHER_INTERPRETERS))
def test_other_interpreters_run_with_only_their_own_files(
    name: str, build_for: Callable[[str], Path]
) -> None:
    """pyenv's oldest and newest Pythons called directly (``bin/python``, a symlink), and
    the system's: each runs inside as itself, with its stdlib and extension modules, and
    of its installation only ``bin/`` (the executable and its link) and ``lib/``."""
    if not IS_ROOT:
        pytest.skip("the interpreters here are root's")
    python = OTHER_INTERPRETERS[name]()
    if python is None or not os.access(python, os.X_OK):
        pytest.skip(f"no {name} interpreter on this host")
    info = subprocess.run(
        [python, "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    prefix = Path(info.stdout.strip())
    host, seen = Caller(python, build_for(python), None).probe(
        python, lists=("/", prefix, prefix / "bin")
    )
    for api, report in seen.items():
        assert interpreter_facts(report) == interpreter_facts(host), api
        assert report["import json"] is True and report["import decimal"] is True
        if str(prefix) == "/usr":
            # Everything is under /usr: nothing else of the host appears at the top.
            assert report["list /"] == top_level(api), api
            continue
        assert report["list /"] == top_level(api, prefix.parts[1]), api
        assert report[f"list {prefix}"] == ["bin", "lib"], api
        in_bin = sorted(p.name for p in link_chain(Path(python)) if p.parent == prefix / "bin")
        assert report[f"list {prefix / 'bin'}"] == in_bin, api


# --------------------------------------------------------------------------- readable


@pytest.mark.parametrize(
    "path",
    ["/", "/proc", "/proc/1", "/proc/self/root", "/sys", "/sys/kernel", "/dev", "/dev/null"],
)
def test_readable_kernel_interfaces_are_refused(path: str) -> None:
    """``readable=["/proc"]`` used to show the host's processes with their command lines."""
    with pytest.raises(ValueError, match=f"^readable path {re.escape(repr(path))} would "):
        run(["cat", "/proc/1/cmdline"], readable=[path])


@pytest.mark.parametrize("path", ["/sandbox", "/sandbox/x", "/.pysandbox", "/home"])
def test_readable_over_the_sandboxs_own_mounts_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match=f"^readable path {re.escape(repr(path))} would cover"):
        run(["true"], readable=[path])


@pytest.mark.parametrize("target", ["/proc", "/proc/self/root", "/sys/kernel", "/dev"])
def test_readable_symlink_into_the_kernel_interfaces_is_refused(
    target: str, tmp_path: Path
) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(target)
    message = f"^readable path {re.escape(repr(str(link)))} .* would show the host's"
    with pytest.raises(ValueError, match=message):
        run_python("import os; print(os.listdir('.'))", readable=[str(link)])


@pytest.mark.skipif(not IS_ROOT, reason="mounting a proc needs root")
@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux unshare is missing")
def test_readable_holding_a_proc_mounted_elsewhere_is_refused(tmp_path: Path) -> None:
    """A proc mounted elsewhere (``docker -v /proc:/host/proc``) is refused whether it is
    named, contains the path, or is contained, checked in a mount namespace of the caller's
    own so the host's mount table is untouched."""
    host_dir = tmp_path / "host"
    (host_dir / "proc").mkdir(parents=True)
    driver = f"""
import json, subprocess
subprocess.run(["mount", "-t", "proc", "proc", {str(host_dir / "proc")!r}], check=True)
from pysandbox import run
outcome = {{}}
for path in ({str(host_dir)!r}, {str(host_dir / "proc")!r}, {str(host_dir / "proc" / "1")!r}):
    try:
        result = run(["cat", "/proc/1/cmdline"], readable=[path])
        outcome[path] = "ran: " + result.stdout.decode(errors="replace")
    except ValueError as exc:
        outcome[path] = str(exc)
print(json.dumps(outcome))
"""
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", driver],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    outcome = json.loads(out.stdout)
    for path, message in outcome.items():
        assert message.startswith(f"readable path {path!r}"), outcome
        assert "would show the host's" in message, outcome
    assert not os.path.ismount(host_dir / "proc")


def test_readable_through_a_symlink_still_works(tmp_path: Path) -> None:
    """Refusing the kernel's paths costs nothing to ordinary ones, links included: the
    path inside is the one asked for."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "file.txt").write_text("content\n")
    data.chmod(0o755)
    (data / "file.txt").chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(data)
    result = run(["cat", f"{link}/file.txt"], readable=[str(link)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"content\n"
