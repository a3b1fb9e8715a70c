# SPDX-License-Identifier: MIT
"""Matplotlib and fontconfig inside the sandbox (issue 23): a plot leaves no cache file in
the working directory and no ``Fontconfig error``, the host's font configuration is
readable, matplotlib's font list is built once on the host and read, not rebuilt, by each
sandbox, the stored list is refused when hostile, and the cache directory is bounded.

Sandboxed code that imports matplotlib gets ``PLOT_LIMITS``: CI is a busy 2-core
machine, and matplotlib's import on Python 3.13 takes more than a second of CPU there.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.callers import Caller
from support.timing import slow

import pysandbox
from pysandbox import Limits, Runner, Session, Status, Template
from pysandbox._api import fontlist
from pysandbox._api.call import Call
from pysandbox._api.run import build_plan, python_fontlist
from pysandbox._launch import bwrap

pytest.importorskip("matplotlib")

PLOT_LIMITS = Limits(cpu_time=30, wall_time=slow(30), memory=512 * 2**20)

PLOT = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
plt.savefig("p.png")
plt.close("all")
"""

#: Prints, as one JSON line, what the plot left and how matplotlib got its font list:
#: its log says "Using fontManager instance from PATH" when it read the list, and
#: "generated new fontManager" when it built one.
REPORT = (
    """
import json, logging, os, sys
logging.basicConfig(stream=sys.stderr, level=logging.DEBUG, format="%(name)s: %(message)s")
for name in ("PIL", "matplotlib.pyplot", "matplotlib.backends"):
    logging.getLogger(name).setLevel(logging.WARNING)
"""
    + PLOT
    + """
left = sorted(os.path.relpath(os.path.join(top, name), "/sandbox")
              for top, dirs, files in os.walk("/sandbox") for name in dirs + files)
cache = sorted(os.path.relpath(os.path.join(top, name), "/cache")
               for top, dirs, files in os.walk("/cache") for name in dirs + files)
print(json.dumps({"left": left, "cache": cache, "fonts": os.listdir("/etc/fonts")
                  if os.path.isdir("/etc/fonts") else None}))
"""
)


@pytest.fixture(autouse=True)
def _prebuilt() -> Iterator[None]:
    """Each test finds the font list as a fresh process would (the store on disk)."""
    fontlist._fontlist.cache_clear()
    yield
    fontlist._fontlist.cache_clear()


def _read_from_cache(stderr: bytes) -> bool:
    """Whether matplotlib's log says it read its font list from the sandbox's cache
    directory, and did not build one."""
    text = stderr.decode(errors="replace")
    used = f"Using fontManager instance from {bwrap.MPLCONFIGDIR}/fontlist-v" in text
    return used and "generated new fontManager" not in text


def _check_clean(stdout: bytes, stderr: bytes) -> dict[str, object]:
    """The report of ``REPORT``, checked: no Fontconfig text, nothing but the plot (and
    the code) in the working directory, nothing in the cache but the font list."""
    assert b"Fontconfig" not in stderr, stderr
    report = json.loads(stdout.decode().splitlines()[-1])
    assert report["left"] in (["main.py", "p.png"], ["p.png"]), report
    assert all(not name.startswith(".cache") for name in report["left"])
    assert [n for n in report["cache"] if not n.startswith("matplotlib")] == [], report
    if os.path.isdir("/etc/fonts"):
        assert sorted(report["fonts"]) == sorted(os.listdir("/etc/fonts"))
    return report


def test_a_plot_leaves_only_the_png() -> None:
    result = pysandbox.run_python(REPORT, limits=PLOT_LIMITS)
    assert result.status is Status.OK, result.stderr
    assert list(result.files) == ["p.png"]
    assert result.files["p.png"].startswith(b"\x89PNG")
    _check_clean(result.stdout, result.stderr)


#: fontconfig's own tool, where the host has it: finds a font through the host's
#: configuration, writes no cache (the host's are shown), and says nothing on stderr.
FONTCONFIG = """
import json, os, shutil, subprocess, sys
found = None
if shutil.which("fc-match"):
    done = subprocess.run(["fc-match", "sans"], capture_output=True)
    sys.stderr.buffer.write(done.stderr)
    found = done.returncode == 0 and bool(done.stdout)
print(json.dumps({"found": found, "fonts": os.listdir("/etc/fonts")
                  if os.path.isdir("/etc/fonts") else None,
                  "left": sorted(os.listdir("/sandbox")), "cache": os.listdir("/cache")}))
"""


def test_fontconfig_is_clean_for_every_caller(caller: Caller) -> None:
    """Root and non-root callers alike (a non-root caller's code runs as its own uid,
    a root caller's as a uid of the sandbox's own): the host's font configuration is
    readable (bwrap would make its parents 0700 for a root caller), fontconfig finds a
    font with no complaint, and leaves no cache in ``/sandbox`` or ``/cache``."""
    result = caller.run_python(FONTCONFIG)
    assert result.status is Status.OK, result.stderr
    assert result.stderr == b""
    report = json.loads(result.stdout)
    assert report["found"] in (None, True)
    assert report["left"] in (["main.py"], [])
    assert report["cache"] == ["matplotlib"]
    if os.path.isdir("/etc/fonts"):
        assert sorted(report["fonts"]) == sorted(os.listdir("/etc/fonts"))


def test_a_fresh_sandbox_reads_the_prebuilt_font_list() -> None:
    """The list is built once (or was already stored); the next fresh sandboxes read it
    from their cache directory, and do not build one: after the plot it is still the
    host's, byte for byte, and matplotlib's log says it used it."""
    built = python_fontlist(b"")
    assert built is not None
    check = (
        REPORT
        + f"""
import hashlib
with open("/cache/matplotlib/{built[0]}", "rb") as stream:
    print(hashlib.sha256(stream.read()).hexdigest())
"""
    )
    for _ in range(2):
        result = pysandbox.run_python(check, limits=PLOT_LIMITS)
        assert result.status is Status.OK, result.stderr
        assert _read_from_cache(result.stderr), result.stderr
        assert result.stdout.splitlines()[-1].decode() == hashlib.sha256(built[1]).hexdigest()


def test_a_session_plots_twice_cleanly() -> None:
    with Session(limits=PLOT_LIMITS) as session:
        for call in range(2):
            cell = session.run(REPORT, cpu_time=30, wall_time=slow(30))
            assert cell.status is Status.OK, cell.stderr
            report = _check_clean(cell.stdout, cell.stderr)
            assert report["left"] == ["p.png"]
            # The second call's matplotlib is the first's, loaded already.
            assert _read_from_cache(cell.stderr) is (call == 0), cell.stderr


def test_warm_and_copied_sandboxes_plot_cleanly_each_in_a_cache_of_its_own() -> None:
    """A warm sandbox and a template's copy get the font list, and a cache directory of
    their own: what one call wrote there, the next does not see."""
    code = REPORT + "\nopen('/cache/mine', 'w').close()\n"
    for template in (None, Template(copies=True)):
        with Runner(warm=1, limits=PLOT_LIMITS, template=template) as runner:
            for _ in range(2):
                result = runner.run_python(code)
                assert result.status is Status.OK, result.stderr
                assert list(result.files) == ["p.png"]
                assert _read_from_cache(result.stderr), result.stderr
                assert "mine" not in _check_clean(result.stdout, result.stderr)["cache"]


def test_the_cache_directory_is_bounded_and_leaves_nothing_behind() -> None:
    """Writing past ``CACHE_SIZE`` fails inside (so the host holds at most that much for
    it, counted in the sandbox's memory), and the file is nowhere on the host after."""
    name = f"pysandbox-cache-{os.getpid()}"
    code = f"""
import errno, os
written = 0
try:
    with open("/cache/{name}", "wb") as out:
        while written < {2 * bwrap.CACHE_SIZE}:
            written += out.write(b"x" * 65536)
            out.flush()
except OSError as exc:
    print(exc.errno == errno.ENOSPC, written <= {bwrap.CACHE_SIZE})
"""
    result = pysandbox.run_python(code, limits=Limits(memory=256 * 2**20))
    assert result.stdout == b"True True\n", result.stderr
    assert list(result.files) == []
    assert not os.path.exists(f"/cache/{name}")
    store = Path(fontlist.store())
    assert not store.exists() or not list(store.rglob(f"*{name}*"))


def test_files_in_the_cache_directory_count_against_the_disk_inodes() -> None:
    """Empty files cost no page but an inode each: those of the cache directory are
    counted with the working directory's, and past them the sandbox is killed."""
    code = "import os\nfor i in range(100000):\n    open(f'/cache/{i}', 'w').close()\n"
    result = pysandbox.run_python(code, limits=Limits(disk=2**20, wall_time=slow(20)))
    assert result.status is Status.DISK_EXCEEDED, (result.status, result.stderr)


def test_a_hostile_stored_font_list_is_refused_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = python_fontlist(b"")
    assert built is not None
    name, data = built
    (stored,) = Path(fontlist.store()).glob(f"*/{name}")
    assert stored.read_bytes() == data
    assert stored.stat().st_mode & 0o777 == 0o600
    assert stored.parent.stat().st_mode & 0o777 == 0o700
    oversized = data[:-1] + b" " * fontlist.MAX_BYTES + data[-1:]
    for hostile in (b'{"__class__": "FontManager"', b"[" * 100000, oversized):
        stored.write_bytes(hostile)
        fontlist._fontlist.cache_clear()
        again = python_fontlist(b"")  # built anew: its fonts may come in another order
        assert again is not None and again[0] == name and fontlist.valid(*again)
        assert stored.read_bytes() == again[1]


#: Asks for the font list as a process's first run_python does, and says which file
#: (its inode) it found stored then.
FIRST_CALL = """
import glob, os, sys
from pysandbox._api.run import python_fontlist
name, _ = python_fontlist(b"")
(path,) = glob.glob(os.path.join(os.environ["XDG_CACHE_HOME"], "pysandbox/fontlist/*", name))
print(os.stat(path).st_ino)
"""


def test_processes_that_start_at_once_build_the_list_once(tmp_path: Path) -> None:
    """A suite's workers or a service's processes start together: one builds the list
    while the others wait for it, then read it; none writes it again."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-I", "-c", FIRST_CALL], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    found = {process.communicate(timeout=slow(60))[0] for process in processes}
    assert all(process.returncode == 0 for process in processes)
    assert len(found) == 1, found


@pytest.mark.no_bwrap
def test_valid_refuses_what_matplotlib_would_not_have_written() -> None:
    entry = {"__class__": "FontEntry", "fname": "/usr/share/fonts/a.ttf", "weight": 400}
    good = {"__class__": "FontManager", "_version": "3.1", "ttflist": [entry], "afmlist": []}
    assert fontlist.valid("fontlist-v3.1.json", json.dumps(good).encode())
    bad = [
        ("fontlist-v3.2.json", good),
        ("fontlist-v.json", good),
        ("fontlist-v3/../x.json", good),
        ("other.json", good),
        ("fontlist-v3.1.json", {**good, "__class__": "Other"}),
        ("fontlist-v3.1.json", {**good, "ttflist": [{"fname": 1, "__class__": "FontEntry"}]}),
        ("fontlist-v3.1.json", {**good, "afmlist": {}}),
        ("fontlist-v3.1.json", {**good, "ttflist": [{**entry, "weight": 10**40}]}),
    ]
    for name, value in bad:
        assert not fontlist.valid(name, json.dumps(value).encode()), (name, value)
    assert not fontlist.valid("fontlist-v3.1.json", b"\xff" + json.dumps(good).encode())
    # Before matplotlib 3.10 the version is an int (``fontlist-v390.json`` holds 390).
    older = {**good, "_version": 390}
    assert fontlist.valid("fontlist-v390.json", json.dumps(older).encode())
    for version in (391, True, [390], 390.0):
        stray = json.dumps({**good, "_version": version}).encode()
        assert not fontlist.valid("fontlist-v390.json", stray), version


@pytest.mark.no_bwrap
def test_font_config_paths_are_read_from_fontconfig_files() -> None:
    text = """<fontconfig><!-- <dir>/commented/fonts</dir> -->
    <dir>/opt/fonts</dir><dir prefix="xdg">fonts</dir><dir>~/.fonts</dir>
    <dir prefix="default"> /srv/fonts/ </dir><cachedir>/var/cache/fontconfig</cachedir>
    <directory>/not/a/dir</directory></fontconfig>"""
    assert bwrap._named_paths(text) == ["/opt/fonts", "/srv/fonts", "/var/cache/fontconfig"]
    mounts = bwrap.font_mounts()
    sources = [mounts[at + 1] for at, word in enumerate(mounts) if word == "--ro-bind"]
    for path in bwrap.FONT_CONFIG:
        assert (path in sources) == os.path.isdir(path)
    assert all("font" in path for path in sources)


@pytest.mark.no_bwrap
def test_the_cache_directory_is_counted_in_the_sandbox_memory() -> None:
    limits = Limits(memory=100 * 2**20, disk=10 * 2**20)
    plan, _ = build_plan(Call(["true"], limits=limits))
    assert plan.memory_total == limits.memory + limits.disk + bwrap.CACHE_SIZE
    assert list(plan.writable) == [bwrap.WORKDIR, bwrap.CACHE_DIR]
    at = list(plan.options).index(bwrap.CACHE_DIR)
    assert plan.options[at - 3 : at] == ["--size", str(bwrap.CACHE_SIZE), "--tmpfs"]
