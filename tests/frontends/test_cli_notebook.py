# SPDX-License-Identifier: MIT
"""``pysandbox notebook``: run as a real subprocess (``python -I -m pysandbox``), its
report cell by cell, its ``--json`` object, its exit statuses and usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.cli import assert_usage_error, cli
from support.timing import cpu

#: ``python -I -m pysandbox``, as a grader's script would start it.
MODULE = (sys.executable, "-I", "-m", "pysandbox")


def write_notebook(path: Path, *sources: str) -> str:
    """An nbformat 4 notebook at ``path``: a markdown cell, then code cells ``sources``."""
    cells = [{"cell_type": "markdown", "source": ["# A title"], "metadata": {}}]
    cells += [{"cell_type": "code", "source": source, "outputs": []} for source in sources]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": cells}))
    return str(path)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A notebook with every kind of cell: fine, looping, raising, printing escapes."""
    return write_notebook(
        tmp_path_factory.mktemp("notebook") / "student.ipynb",
        "%matplotlib inline\nanswer = 41",
        "answer += 1\nwhile True:\n    pass",
        "print('\\x1b[2J' + '\\n'.join(map(str, range(30))))\nanswer += 1\nanswer",
        "def f():\n    raise ValueError('bad input')\nf()",
        "%%bash\necho skipped",
    )


def test_the_report_shows_each_cell_and_exits_1_when_one_failed(graded: str) -> None:
    done = cli("notebook", graded, "--cell-cpu-time", str(cpu(0.5)), entry=MODULE)
    assert done.returncode == 1, done
    out = done.stdout.decode()
    lines = out.splitlines()
    assert lines[0].startswith("[1] ok, wall ") and lines[1].endswith("is IPython's: skipped")
    assert f"[2] cpu_time_exceeded (limit {cpu(0.5):g} s), rolled back" in lines
    third = lines.index(next(line for line in lines if line.startswith("[3] ok")))
    assert lines[third + 1 : third + 3] == ["    value: 42", "    stdout: ... (20 lines before)"]
    assert "    stdout: \\x1b[2J0" not in out and "\x1b" not in out  # escaped, and only the tail
    assert "    stdout: 29" in lines
    assert any(line.startswith("[4] raised ValueError, wall ") for line in lines)
    assert "    error: ValueError: bad input" in lines
    assert "[5] skipped" in lines
    err = done.stderr.decode()
    assert err.startswith("pysandbox: notebook: 5 code cells, wall ")
    assert err.rstrip().endswith(": 2 ok, 1 error, 1 rolled back, 1 skipped")


def test_json_is_one_object_of_the_notebook_result(graded: str) -> None:
    done = cli("notebook", graded, "--json", "--cell-cpu-time", str(cpu(0.5)), entry=MODULE)
    assert done.returncode == 1 and done.stderr == b"", done
    shown = json.loads(done.stdout)
    assert shown["ok"] is False and shown["limits"]["cpu_time"] == cpu(0.5)
    assert shown["counts"] == {
        "ok": 2,
        "error": 1,
        "rolled_back": 1,
        "lost": 0,
        "skipped": 1,
        "not_run": 0,
    }
    assert [cell["index"] for cell in shown["cells"]] == [1, 2, 3, 4, 5]
    assert shown["cells"][2]["value"] == "42" and shown["cells"][2]["stdout"].endswith("29\n")
    assert shown["cells"][3]["error"]["type"] == "ValueError"


def test_every_cell_ok_exits_0_with_stop_on_error_and_files(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("6 7")
    path = write_notebook(
        tmp_path / "fine.ipynb", "a, b = map(int, open('data.txt').read().split())", "a * b"
    )
    done = cli(
        "notebook", path, "--file", str(tmp_path / "data.txt"), "--memory", "256M", entry=MODULE
    )
    assert done.returncode == 0, done
    assert "    value: 42" in done.stdout.decode().splitlines()
    stopped = cli("notebook", path, "--stop-on-error", "--json", entry=MODULE)
    assert stopped.returncode == 1
    assert [cell["state"] for cell in json.loads(stopped.stdout)["cells"]] == ["error", "not_run"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json", "is not JSON that can be read safely"),
        (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}', "cell 0: source must"),
        (b'{"nbformat": 3}', "must be nbformat 4"),
    ],
    ids=["not-json", "source-type", "nbformat-3"],
)
def test_a_malformed_notebook_is_a_usage_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_bytes(content)
    assert message in assert_usage_error(cli("notebook", str(path), entry=MODULE))
    assert message in assert_usage_error(cli("notebook", "-", stdin=content, entry=MODULE))


def test_a_missing_notebook_and_bad_options_are_usage_errors(tmp_path: Path) -> None:
    err = assert_usage_error(cli("notebook", str(tmp_path / "missing.ipynb"), entry=MODULE))
    assert "cannot read" in err and "No such file" in err
    err = assert_usage_error(cli("notebook", "x.ipynb", "--cell-cpu-time", "0", entry=MODULE))
    assert "--cell-cpu-time" in err
