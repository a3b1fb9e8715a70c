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
