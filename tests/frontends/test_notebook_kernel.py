# SPDX-License-Identifier: MIT
"""A notebook run end to end through a real Jupyter kernel (ipykernel, driven by nbclient):
``%load_ext pysandbox``, a ``%%sandbox`` cell, a kernel interrupt while a sandbox spins,
and the cells after it; a session's cells and an interrupt of one of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from support.processes import children_of, pids_with_marker, survivors, unique_marker

import pysandbox

with warnings.catch_warnings():
    # jupyter_core before 5.8 (the one Python 3.9 gets) warns when imported unless
    # JUPYTER_PLATFORM_DIRS is set; the test sets it for the kernel.
    warnings.filterwarnings("ignore", "Jupyter is migrating its paths", DeprecationWarning)
    import nbformat
    from nbclient import NotebookClient

#: Seconds any cell may take: far below the interrupted cell's 60 s wall limit, so a
#: sandbox the interrupt did not end fails the test with a timeout.
CELL_TIMEOUT = 40
#: CPU seconds the spinning program burns before the interrupt: it printed long before.
SPUN = 0.3

#: The kernel's own children that are bwrap, read from /proc (nothing to import).
BWRAP_CHILDREN = """
import os
def bwrap_children():
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            comm = open(f"/proc/{entry}/comm").read().strip()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and comm == "bwrap":
            found.append(int(entry))
    return found
print("bwrap children:", bwrap_children())
"""


def _kernel_spec(root: Path) -> str:
    """A kernel spec under ``root`` that starts this very interpreter (the venv's, with
    the installed pysandbox); ``JUPYTER_PATH`` must name ``root``."""
    spec = root / "kernels" / "pysandbox-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "pysandbox test", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return spec.name


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spinning(marker: str) -> bool:
    """Whether a process of the sandbox started with ``marker`` has burnt ``SPUN`` s."""
    pending = pids_with_marker(marker)
    while pending:
        pid = pending.pop()
        if _cpu_seconds(pid) >= SPUN:
            return True
        pending += children_of(pid)
    return False


def _interrupt_when_spinning(client: NotebookClient, marker: str, done: threading.Event) -> None:
    """Interrupt the kernel as Jupyter's stop button does, once the sandbox spins."""
    deadline = time.monotonic() + CELL_TIMEOUT
    while not done.is_set() and time.monotonic() < deadline:
        if _spinning(marker):
            asyncio.run(client.km.interrupt_kernel())
            return
        time.sleep(0.05)


def _text(cell: nbformat.NotebookNode, name: str = "stdout") -> str:
    return "".join(o["text"] for o in cell.outputs if o.get("name") == name)


def _run_notebook(
    root: Path, monkeypatch: pytest.MonkeyPatch, cells: list[str], marker: str, raising: int
) -> list[nbformat.NotebookNode]:
    """Run ``cells`` in a real kernel, the kernel interrupted once the sandbox started
    with ``marker`` spins; cell ``raising`` may end with an error.  Its cells after."""
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")  # no migration DeprecationWarning
    monkeypatch.setenv("JUPYTER_PATH", str(root))
    monkeypatch.setenv("IPYTHONDIR", str(root / "ipython"))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.cells[raising].metadata["tags"] = ["raises-exception"]
    client = NotebookClient(
        notebook,
        kernel_name=_kernel_spec(root),
        timeout=CELL_TIMEOUT,
        startup_timeout=120,
        resources={"metadata": {"path": str(root)}},
    )
    done = threading.Event()
    interrupter = threading.Thread(target=_interrupt_when_spinning, args=(client, marker, done))
    interrupter.start()
    try:
        client.execute()
    finally:
        done.set()
        interrupter.join()
    return list(notebook.cells)


def test_a_notebook_runs_sandboxed_cells_and_survives_an_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = unique_marker()
    cells = [
        "%load_ext pysandbox\nimport pysandbox\nprint(pysandbox.__file__)",
        "%%sandbox --result first\nimport sys\nprint('hello from', sys.argv[0])",
        f"%%sandbox --wall-time 60 --cpu-time 60 --env MARKER={marker}\n"
        "print('spinning', flush=True)\nwhile True:\n    pass",
        f"print(first.status.name)\n{BWRAP_CHILDREN}",
        "%%sandbox\nprint('after the interrupt')",
    ]
    loaded, hello, spun, after_it, last = _run_notebook(tmp_path, monkeypatch, cells, marker, 2)

    assert _text(loaded).strip() == pysandbox.__file__  # the installed package
    assert _text(hello) == "hello from /sandbox/main.py\n"
    (verdict,) = [o for o in hello.outputs if o["output_type"] == "display_data"]
    assert verdict["data"]["text/plain"].startswith("pysandbox: ok, exit 0, cpu ")

    assert _text(spun) == "spinning\n"  # shown live: the cell never returned a result
    (error,) = [o for o in spun.outputs if o["output_type"] == "error"]
    assert error["ename"] == "KeyboardInterrupt"
    assert survivors(marker) == []

    assert _text(after_it) == "OK\nbwrap children: []\n"
    assert _text(last) == "after the interrupt\n"


def _displayed(cell: nbformat.NotebookNode) -> list[str]:
    return [o["data"]["text/plain"] for o in cell.outputs if o["output_type"] == "display_data"]


def test_a_session_keeps_its_state_across_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``%%sandbox --session``: three cells share a live interpreter, a rolled-back cell
    between them; ``%sandbox_close`` leaves no sandbox behind."""
    marker = unique_marker()
    cells = [
        "%load_ext pysandbox",
        f"%%sandbox --session nb --env MARKER={marker}\ncount = 1\nprint('started')",
        "%%sandbox --session nb\ncount += 1\ncount",
        "%%sandbox --session nb --cpu-time 300ms\ncount = 100\nwhile True:\n    pass",
        "%%sandbox --session nb\nprint('count', count)",
        f"%sandbox_close nb\n{BWRAP_CHILDREN}",
    ]
    _, first, second, spun, third, closed = _run_notebook(
        tmp_path, monkeypatch, cells, "no process has this marker", 3
    )

    assert _text(first) == "started\n"
    assert _displayed(first)[0].startswith("pysandbox: committed in session 'nb'; cpu ")
    value, verdict = _displayed(second)
    assert value == "2" and verdict.startswith("pysandbox: committed in session 'nb'; ")
    assert _displayed(spun)[0].startswith("pysandbox: rolled back in session 'nb': cpu_time")
    assert _text(third) == "count 2\n"
    assert _text(closed) == "pysandbox: session 'nb' closed\nbwrap children: []\n"
    assert survivors(marker) == []


def test_an_interrupt_of_a_session_cell_keeps_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop button during a looping session cell rolls that cell back, and the next
    cell still sees the state."""
    marker = unique_marker()
    cells = [
        "%load_ext pysandbox",
        f"%%sandbox --session nb --env MARKER={marker}\ncount = 1",
        "%%sandbox --session nb\ncount += 1",
        "%%sandbox --session nb --wall-time 60 --cpu-time 60\ncount = 100\nwhile True:\n    pass",
        "%%sandbox --session nb\nprint('count', count)",
        "%sandbox_close nb",
    ]
    spun, after_it = _run_notebook(tmp_path, monkeypatch, cells, marker, 3)[3:5]

    assert survivors(marker) == []
    assert _text(spun, "stderr").startswith("pysandbox: interrupted; the cell was rolled back")
    (error,) = [o for o in spun.outputs if o["output_type"] == "error"]
    assert error["ename"] == "KeyboardInterrupt"
    assert _text(after_it) == "count 2\n"  # the interrupted cell's count = 100 rolled back


def test_a_session_cell_shows_figures_and_tables_inline_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A figure shown between two prints comes between them, as a PNG; a DataFrame as a
    cell's last expression comes as its (sanitized) HTML table, once, not again as
    ``Out[]``.  Every cell that imports matplotlib or pandas gets a CPU budget far above
    what it needs: a loaded CI machine takes seconds for them."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("pandas")
    heavy = "--memory 1G --cpu-time 60 --wall-time 120"
    cells = [
        "%load_ext pysandbox",
        f"%%sandbox --session nb {heavy}\n"
        "import matplotlib.pyplot as plt\nprint('before', flush=True)\n"
        "plt.plot([1, 3, 2])\nplt.show()\nprint('after')",
        "%%sandbox --session nb --cpu-time 60 --wall-time 120\nimport pandas as pd\n"
        "pd.DataFrame({'a': [1, 2], 'b': ['<script>x</script>', 'y']})",
        "%sandbox_close nb",
    ]
    _, plotted, table, _ = _run_notebook(tmp_path, monkeypatch, cells, "no such marker", 3)

    seen: list[object] = []  # stdout's text, joined while no display comes between
    for output in plotted.outputs:
        if output.get("name") == "stdout" and seen and isinstance(seen[-1], str):
            seen[-1] += output["text"]
        elif output.get("name") == "stdout":
            seen.append(output["text"])
        elif output["output_type"] == "display_data":
            seen.append(sorted(output["data"]))
    assert seen[:3] == ["before\n", ["image/png", "text/plain"], "after\n"], seen
    (png,) = [o["data"]["image/png"] for o in plotted.outputs if "image/png" in o.get("data", {})]
    assert png.startswith("iVBORw0KGgo")  # base64 of the PNG signature
    shown = [o["data"] for o in table.outputs if o["output_type"] == "display_data"]
    html = [data["text/html"] for data in shown if "<table" in data.get("text/html", "")]
    assert len(html) == 1, shown  # the table once, not again as Out[]
    assert "<script" not in html[0]
    assert shown[-1]["text/plain"].startswith("pysandbox: committed in session 'nb'")


def test_variables_go_into_a_session_and_come_back_with_in_and_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--in`` copies a notebook variable (a numpy array) into the session before the
    cell, ``--out`` copies the session's back after it: real objects, never pickled."""
    pytest.importorskip("numpy")
    cells = [
        "%load_ext pysandbox",
        "import numpy as np\nx = np.arange(5)",
        "%%sandbox --session nb --memory 1G --cpu-time 60 --wall-time 120 --in x --out y\n"
        "y = x * 2\nprint(type(x).__name__)",
        "print(type(y).__name__, y.dtype == x.dtype, y.tolist())",
        "%%sandbox --session nb --out nothing\npass",
        "%sandbox_close nb",
    ]
    _, _, ran, host, missing, _ = _run_notebook(tmp_path, monkeypatch, cells, "no such marker", 4)

    assert _text(ran) == "ndarray\n"
    assert _text(host) == "ndarray True [0, 2, 4, 6, 8]\n"
    (error,) = [o for o in missing.outputs if o["output_type"] == "error"]
    assert error["ename"] == "NameError" and "nothing" in error["evalue"]
