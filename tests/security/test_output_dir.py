# SPDX-License-Identifier: MIT
"""Issue 18 item 7: the files written on the host are only the files asked for.

The sandboxed program leaves what a hostile one would: ``.git/hooks/post-commit`` with
mode 0755 (git runs it at the next commit), ``a/.hidden``, an executable, and it tries
``../escape``.  The host writes the result with ``_output_dir.write_files`` (what
``--output-dir`` calls) and checks what landed, where, and with which modes; the command
line refuses a work tree (``--output-dir .``) and writes a fresh directory by the same
rules.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from support.callers import Caller
from support.cli import SCRIPT, TIMEOUT, assert_usage_error, cli

from pysandbox._frontends.output_dir import OutputDirError, prepare, write_files

HOSTILE = """
import os
os.makedirs(".git/hooks")
with open(".git/hooks/post-commit", "w") as hook:
    hook.write("#!/bin/sh\\ntouch /tmp/pwned-by-sandbox\\n")
os.chmod(".git/hooks/post-commit", 0o755)
os.makedirs("a")
open("a/.hidden", "w").write("hidden")
open("tool", "w").write("#!/bin/sh\\necho tool\\n")
os.chmod("tool", 0o755)
open("plain.txt", "w").write("plain")
try:
    open("../escape", "w").write("out")
except OSError as exc:
    print("escape refused:", exc.strerror)
"""


def _tree(root: Path) -> dict[str, int]:
    """Every path below ``root`` (dot names included) and its permission bits."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_a_result_writes_no_dot_name_and_no_executable_bit_unless_asked(
    caller: Caller, tmp_path: Path
) -> None:
    result = caller.run_python(HOSTILE)
    assert result.returncode == 0, result.stderr
    assert set(result.files) >= {".git/hooks/post-commit", "a/.hidden", "tool", "plain.txt"}
    assert "tool" in result.executables and ".git/hooks/post-commit" in result.executables
    out = tmp_path / "out"
    with prepare(str(out)) as directory:
        written = write_files(directory, result.files, result.executables)
    assert dict(written.refused).keys() == {".git/hooks/post-commit", "a/.hidden"}
    assert written.modes_dropped == ("tool",)
    tree = _tree(out)
    assert sorted(tree) == ["plain.txt", "tool"], tree
    assert all(mode & 0o111 == 0 for mode in tree.values()), tree
    assert sorted(os.listdir(tmp_path)) == ["out"]  # nothing beside it: no ../escape
    assert not Path("/tmp/pwned-by-sandbox").exists()

    asked = tmp_path / "asked"
    with prepare(str(asked)) as directory:
        written = write_files(
            directory, result.files, result.executables, dotfiles=True, keep_modes=True
        )
    assert written.refused == () and written.modes_dropped == ()
    tree = _tree(asked)
    assert tree[".git/hooks/post-commit"] & 0o111 and tree["tool"] & 0o111
    assert tree["a/.hidden"] & 0o111 == 0 and tree["plain.txt"] & 0o111 == 0


def test_a_non_empty_directory_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("the host's own")
    with pytest.raises(OutputDirError, match=f"{re.escape(str(tmp_path))} is not empty"):
        prepare(str(tmp_path))
    hidden_only = tmp_path / "hidden-only"
    hidden_only.mkdir()
    (hidden_only / ".keep").write_text("")
    with pytest.raises(OutputDirError, match="is not empty"):
        prepare(str(hidden_only))


def _git(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )


def test_the_command_line_refuses_a_work_tree_and_git_runs_no_hook(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    marker = tmp_path / "hook-ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    program = (
        f"mkdir -p .git/hooks && printf '{hook}' > .git/hooks/post-commit && "
        "chmod 755 .git/hooks/post-commit && mkdir a && echo x > a/.hidden && "
        "echo y > tool && chmod +x tool && echo z > plain.txt; "
        "(echo w > ../escape) 2>/dev/null; true"
    )
    before = _tree(work)
    done = subprocess.run(
        [SCRIPT, "run", "--output-dir", ".", "--", "sh", "-c", program],
        cwd=work,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    err = assert_usage_error(done)
    assert "--output-dir: . is not empty" in err, err
    assert _tree(work) == before

    out = tmp_path / "fresh"
    done = cli("run", "--output-dir", str(out), "--", "sh", "-c", program)
    err = done.stderr.decode()
    assert done.returncode == 125, err
    assert "refused the output file '.git/hooks/post-commit'" in err, err
    assert "refused the output file 'a/.hidden'" in err, err
    assert "wrote 'tool' without its executable bit" in err, err
    assert err.splitlines()[-1].startswith("pysandbox: ok, exit 0"), err  # verdict still last
    assert sorted(_tree(out)) == ["plain.txt", "tool"]
    assert all(mode & 0o111 == 0 for mode in _tree(out).values())
    assert sorted(os.listdir(tmp_path)) == ["fresh", "work"]
    (work / "f").write_text("f")
    _git(work, "add", "f")
    _git(work, "commit", "-q", "-m", "m")
    assert not marker.exists()
