# SPDX-License-Identifier: MIT
"""A notebook file read as hostile input (``parse_notebook``), its IPython-only lines
made Python (``translate_cell``), and a notebook run's record (``NotebookResult``)."""

from __future__ import annotations

import json

import pytest

from pysandbox import CellError, CellResult, Limits, NotebookCellResult, NotebookResult, Status
from pysandbox._model.ipython_lines import Translated, translate_cell
from pysandbox._model.notebook_file import MAX_NOTEBOOK_BYTES, NotebookCell, parse_notebook


def notebook(*cells: object, nbformat: object = 4) -> bytes:
    return json.dumps({"nbformat": nbformat, "nbformat_minor": 5, "cells": list(cells)}).encode()


def test_cells_are_read_in_order_with_their_index_and_joined_source() -> None:
    data = notebook(
        {"cell_type": "markdown", "source": "# Title", "metadata": {}},
        {"cell_type": "code", "source": ["x = 1\n", "x"], "outputs": [{"any": "thing"}]},
        {"cell_type": "raw", "source": []},
    )
    assert parse_notebook(data) == (
        NotebookCell(0, "markdown", "# Title"),
        NotebookCell(1, "code", "x = 1\nx"),
        NotebookCell(2, "raw", ""),
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", "not JSON"),
        (b"[" * 100 + b"]" * 100, "nested 100 levels deep"),
        (b'{"nbformat": 4, "cells": [], "n": 1' + b"0" * 400 + b"}", "out of range"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[]", "must be a JSON object"),
        (notebook(nbformat=3), "nbformat 4, not nbformat 3"),
        (notebook(nbformat="4"), "nbformat 4, not nbformat '4'"),
        (b'{"nbformat": 4}', "cells must be a list, not None"),
        (notebook("x = 1"), "cell 0: must be a JSON object"),
        (notebook({"cell_type": "code"}), "cell 0: has no source"),
        (notebook({"cell_type": "python", "source": ""}), "cell 0: cell_type must be one of"),
        (
            notebook({"cell_type": "markdown", "source": ""}, {"cell_type": "code", "source": 7}),
            "cell 1: source must be a str or a list of str, not 7",
        ),
        (notebook({"cell_type": "code", "source": ["a", None]}), "cell 0: source must be"),
        (notebook({"cell_type": "code", "source": "x = '\0'"}), "cell 0: source must not"),
        (notebook({"cell_type": "code", "source": "'\ud800'"}), "cell 0: source is not UTF-8"),
    ],
    ids=[
        "not-json",
        "nesting-bomb",
        "huge-number",
        "not-utf8",
        "not-an-object",
        "nbformat-3",
        "nbformat-str",
        "no-cells",
        "cell-not-object",
        "no-source",
        "bad-cell-type",
        "source-int",
        "source-list-of-none",
        "nul",
        "surrogate",
    ],
)
def test_a_malformed_notebook_is_refused_with_what_and_where(data: bytes, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_notebook(data)
    assert message in str(refused.value), refused.value


def test_an_oversized_notebook_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(ValueError, match=f"larger than {MAX_NOTEBOOK_BYTES} bytes"):
        parse_notebook(b" " * (MAX_NOTEBOOK_BYTES + 1))


def test_plain_python_is_left_exactly_as_it_is() -> None:
    source = 'x = {"a": 1}  # a dict?\nif x != 2:\n    print("100%")\ny = x["a"] % 2\n'
    assert translate_cell(source) == Translated(source, ())


def test_magics_and_help_become_pass_line_for_line_with_a_note() -> None:
    translated = translate_cell("%matplotlib inline\nfor i in range(2):\n    %time f(i)\nlen?\nx")
    assert translated.code == "pass\nfor i in range(2):\n    pass\npass\nx"
    assert translated.notes == (
        "line 1: '%matplotlib inline' is IPython's: skipped",
        "line 3: '%time f(i)' is IPython's: skipped",
        "line 4: 'len?' is IPython's: skipped",
    )


def test_shell_lines_run_the_command_and_capture_its_lines() -> None:
    translated = translate_cell("!echo 'hi' \\\n  there\nfiles = !ls /")
    assert translated.code is not None
    first, second, third = translated.code.split("\n")
    assert "subprocess').run(\"echo 'hi' \\\\\\n  there\", shell=True)" in first
    assert first.startswith("if ") and first.endswith(": pass")
    assert second == ""
    assert third.startswith("files = __import__('subprocess').run('ls /', shell=True, stdout=-1")
    assert [note.split(":")[0] for note in translated.notes] == ["line 1", "line 3"]


def test_lines_inside_strings_brackets_and_continuations_are_not_ipython() -> None:
    source = 'text = """\n%not a magic\nreally?\n"""\nvalues = [\n    1,\n]\nx = 1 + \\\n!2'
    assert translate_cell(source).code == source
    assert translate_cell(source).notes == ()


def test_a_cell_magic_skips_the_whole_cell() -> None:
    translated = translate_cell("\n%%bash\necho hi")
    assert translated.code is None
    assert translated.notes == ("the cell magic '%%bash' is IPython's: the cell was skipped",)


def _cell(index: int, result: CellResult | None, code: str | None = "x") -> NotebookCellResult:
    return NotebookCellResult(index, "x", code, (), result)


def test_a_result_counts_its_cells_and_is_bounded_as_json() -> None:
    ok = CellResult("committed", Status.OK, stdout=b"a" * 100 + b"\xff", value="1")
    raised = CellResult(
        "committed", Status.OK, error=CellError("ZeroDivisionError", "division by zero", "tb")
    )
    looped = CellResult("rolled_back", Status.CPU_TIME_EXCEEDED, reason="the call passed")
    notebook_result = NotebookResult(
        (_cell(1, ok), _cell(2, raised), _cell(3, looped), _cell(4, None, None), _cell(5, None)),
        Limits(cpu_time=0.5),
        1.5,
    )
    assert not notebook_result and not notebook_result.ok
    assert notebook_result.counts == {
        "ok": 1,
        "error": 1,
        "rolled_back": 1,
        "lost": 0,
        "skipped": 1,
        "not_run": 1,
    }
    shown = notebook_result.to_dict(text_cap=10)
    json.dumps(shown, allow_nan=False)
    first = shown["cells"][0]
    assert first["stdout"] == "aaaaaaaaa\ufffd" and first["stdout_cut"] == 91
    assert shown["cells"][1]["error"] == {
        "type": "ZeroDivisionError",
        "message": "on by zero",
        "message_cut": 6,
        "traceback": "tb",
    }
    assert shown["cells"][2]["status"] == "cpu_time_exceeded"
    assert shown["cells"][3] == {"index": 4, "state": "skipped", "source": "x", "notes": []}
    assert shown["limits"] == {"cpu_time": 0.5, "wall_time": 10.0}
    assert NotebookResult((_cell(1, ok), _cell(2, None, None)), Limits())
