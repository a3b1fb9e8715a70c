"""Socket buffers count against the sandbox's memory cap (issue 7, item 4).

The sandboxed code opens many loopback connections in its own network namespace and fills
their kernel buffers: it asks for the largest ``SO_SNDBUF``/``SO_RCVBUF`` the kernel grants
(twice ``net.core.wmem_max``/``rmem_max``) and sends without ever reading.  On cgroup v1
the kernel charges socket buffers only to a group that has a TCP limit
(``memory.kmem.tcp.limit_in_bytes``), and to a counter of their own: without that limit,
40 connections held 385 MB against a cap (``memory + disk``) of 104 MiB here, and 100 UDP
sockets took 1.5 GiB from the host.  cgroup v2 charges them to ``memory.max``.

The program sees the cap as back-pressure, never as an error: a non-blocking TCP ``send``
fails with ``EAGAIN`` (a blocking one waits), as on a full pipe, and a datagram that does
not fit is dropped, as UDP may always do.  So the run ends as the program ends (here
``OK``); had it failed after hitting the cap, the group's failure counter would make it
``MEMORY_EXCEEDED``.

The HOST measures, at the moment the program says its buffers are full (it then waits
for the host on stdin; ``eval_in_sandbox``, which has no stdin, holds them for a second
while a host thread samples): it sums the queues of every socket in the sandbox's network
namespace from ``/proc/<pid>/net/{tcp,tcp6,udp,udp6}`` of a process inside.  Those are
bytes of data (TCP) or of buffers (UDP, ``sk_rmem_alloc``); the kernel charges at least
that much, so the sum may never pass the cap.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from conftest import pids_with_marker, unique_marker

from pysandbox import Limits, Result, Status, eval_in_sandbox, run_python
from pysandbox._cgroup import probe as cgroup_probe

MiB = 2**20
#: A cap far below what the attacks hold without it (about 385 MB for TCP here).
LIMITS = Limits(memory=96 * MiB, disk=8 * MiB, wall_time=60, cpu_time=20)
CAP = LIMITS.memory + LIMITS.disk
#: Larger than any ``net.core.[rw]mem_max``: the kernel grants its own maximum.
BUFFER = 2**30
#: What may pass the cap, per socket: the kernel charges a TCP socket's first buffer of
#: each direction even past the cap, so that every connection can make progress; one
#: loopback buffer (a 64 KiB segment and its overhead) is below 256 KiB.
SLACK_PER_SOCKET = 256 * 2**10
TCP_CONNECTIONS = 40
UDP_RECEIVERS = 100

TCP_FLOOD = """
import json, socket, sys, time
connections, buffer = int(sys.argv[2]), int(sys.argv[3])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)  # inherited by accept()
server.bind(("127.0.0.1", 0))
server.listen(connections)
pairs = []
for _ in range(connections):
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
    client.connect(server.getsockname())
    pairs.append((client, server.accept()[0]))
    client.setblocking(False)
chunk = b"x" * 65536
held, refused = 0, {}
for client, _ in pairs:
    while True:
        try:
            held += client.send(chunk)
        except BlockingIOError:
            break
        except OSError as exc:
            refused[exc.errno] = refused.get(exc.errno, 0) + 1
            break
print(json.dumps({"held": held, "refused": refused}), flush=True)
sys.stdin.read()  # run_python: until the host has measured; eval_in_sandbox: no stdin
time.sleep(float(sys.argv[4]))
"""

UDP_FLOOD = """
import json, socket, sys
receivers, buffer = int(sys.argv[2]), int(sys.argv[3])
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
sender.setblocking(False)
sinks, sent, refused = [], 0, {}
datagram = b"x" * 60000
for _ in range(receivers):
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    sink.bind(("127.0.0.1", 0))
    sinks.append(sink)
    for _ in range(200):
        try:
            sent += sender.sendto(datagram, sink.getsockname())
        except OSError as exc:
            refused[exc.errno] = refused.get(exc.errno, 0) + 1
            break
print(json.dumps({"sent": sent, "refused": refused}), flush=True)
sys.stdin.read()
"""


def queued_bytes(pid: int) -> int:
    """Bytes in the queues of every TCP and UDP socket of ``pid``'s network namespace
    (listening sockets left out: their queue field counts connections)."""
    total = 0
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/{pid}/net/{table}") as lines:
            next(lines)  # the header
            for line in lines:
                fields = line.split()
                state, queues = fields[3], fields[4]
                if table.startswith("tcp") and state == "0A":  # TCP_LISTEN
                    continue
                tx_queue, rx_queue = queues.split(":")
                total += int(tx_queue, 16) + int(rx_queue, 16)
    return total


def queued_bytes_of_marked(pid: int, marker: str) -> int | None:
    """``queued_bytes`` of ``pid`` only while it is certainly the process with ``marker``:
    pinned with a pidfd, its command line checked after pinning and the process still
    alive after the read, so a pid reused by another process (of another network
    namespace) is never measured.  None when it exited meanwhile."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if marker.encode() not in cmdline.read():
                return None
        queued = queued_bytes(pid)
        signal.pidfd_send_signal(pidfd, 0)
        return queued
    except OSError:
        return None
    finally:
        os.close(pidfd)


def measure_when_full(marker: str, seen: dict[str, object]) -> Callable[[bytes], bytes | None]:
    """A stdin callback: once the program's report line arrives, sum the sandbox's socket
    queues (``seen["queued"]``) and close stdin so that the program ends."""
    stdout = bytearray()

    def on_stdout(chunk: bytes) -> bytes | None:
        stdout.extend(chunk)
        if b"\n" not in stdout:
            return b""
        inside = pids_with_marker(marker, bwrap=False)
        measured = [queued_bytes_of_marked(pid, marker) for pid in inside]
        seen["queued"] = max((q for q in measured if q is not None), default=None)
        seen["report"] = json.loads(stdout.split(b"\n", 1)[0])
        return None

    return on_stdout


def needs_memory_cgroup() -> None:
    if not cgroup_probe().memory:
        pytest.skip(
            f"no memory cgroup for this caller, so no total cap to check ({cgroup_probe().reason})"
        )


def flood(code: str, *args: str) -> tuple[Result, dict[str, object]]:
    """Run a flood and return the result and what the host saw when it was full."""
    needs_memory_cgroup()
    marker = unique_marker()
    seen: dict[str, object] = {}
    result = run_python(
        code,
        args=[marker, *args],
        limits=LIMITS,
        stdin=measure_when_full(marker, seen),
    )
    return result, seen


def describe(result: Result, seen: dict[str, object]) -> str:
    return (
        f"{result.status} rc={result.returncode} signal={result.signal} seen={seen} "
        f"stdout={result.stdout[-500:]!r} stderr={result.stderr[-1500:]!r}"
    )


def test_tcp_buffers_are_capped() -> None:
    """40 connections that could hold about 385 MB hold at most the cap."""
    result, seen = flood(TCP_FLOOD, str(TCP_CONNECTIONS), str(BUFFER), "0")
    assert result.status is Status.OK, describe(result, seen)
    report, queued = seen.get("report"), seen.get("queued")
    assert isinstance(report, dict) and isinstance(queued, int), describe(result, seen)
    assert report["refused"] == {}, describe(result, seen)
    # The flood really filled what it was given (so the test attacks something) ...
    assert queued >= CAP // 2, describe(result, seen)
    # ... and that was no more than the cap, as the program saw it and as the host did.
    most = CAP + 2 * TCP_CONNECTIONS * SLACK_PER_SOCKET
    assert report["held"] <= most, describe(result, seen)
    assert queued <= most, (
        f"the sandbox held {queued // MiB} MiB in socket buffers, past its cap of "
        f"{CAP // MiB} MiB and the slack: {describe(result, seen)}"
    )


def test_udp_buffers_are_capped() -> None:
    """100 receivers that could hold 1.5 GiB of datagrams hold at most the cap."""
    result, seen = flood(UDP_FLOOD, str(UDP_RECEIVERS), str(BUFFER))
    assert result.status is Status.OK, describe(result, seen)
    report, queued = seen.get("report"), seen.get("queued")
    assert isinstance(report, dict) and isinstance(queued, int), describe(result, seen)
    assert report["sent"] > 4 * CAP, describe(result, seen)  # offered far past the cap
    assert 0 < queued <= CAP + (UDP_RECEIVERS + 1) * SLACK_PER_SOCKET, (
        f"the sandbox held {queued // MiB} MiB in socket buffers, past its cap of "
        f"{CAP // MiB} MiB and the slack: {describe(result, seen)}"
    )


@contextmanager
def host_samples_queues(marker: str) -> Iterator[dict[str, int]]:
    """While the block runs, a host thread keeps the largest ``queued_bytes`` of the
    processes with ``marker`` (for a sandbox without stdin to say when it is full)."""
    seen = {"max": 0, "samples": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            for pid in pids_with_marker(marker, bwrap=False):
                queued = queued_bytes_of_marked(pid, marker)
                if queued is None:  # it exited meanwhile
                    continue
                seen["max"] = max(seen["max"], queued)
                seen["samples"] += 1

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def test_tcp_buffers_are_capped_for_eval_in_sandbox() -> None:
    """eval_in_sandbox's memory cgroup (``mem_max_mb`` for the whole sandbox) caps them
    too.  The code execs the flood with the marker in its command line, for the host to
    find it, and holds the buffers for a second while the host samples them."""
    needs_memory_cgroup()
    cap = 64 * MiB
    marker = unique_marker()
    args = [marker, str(TCP_CONNECTIONS), str(BUFFER), "1"]
    code = (
        "import os, sys\n"
        f"os.execv(sys.executable, [sys.executable, '-c', {TCP_FLOOD!r}, *{args!r}])\n"
    )
    with host_samples_queues(marker) as seen:
        output = eval_in_sandbox(code, mem_max_mb=cap // MiB, cpu_max_time_sec=10)
    assert output.returncode == 0, output
    report = json.loads(output.stdout)
    most = cap + 2 * TCP_CONNECTIONS * SLACK_PER_SOCKET
    assert report["refused"] == {}, output
    assert cap // 2 <= report["held"] <= most, (output, seen)
    assert seen["samples"] > 0 and seen["max"] <= most, (output, seen)
