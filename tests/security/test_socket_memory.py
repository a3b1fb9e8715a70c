# SPDX-License-Identifier: MIT
"""Socket buffers count against the sandbox's memory cap (issue 7, item 4).

The sandboxed code opens many loopback connections in its own network namespace and fills
their kernel buffers: it asks for the largest ``SO_SNDBUF``/``SO_RCVBUF`` the kernel grants
(twice ``net.core.wmem_max``/``rmem_max``) and sends without ever reading.  Enough
connections for four times the cap: the number follows those two sysctls (40 with this
host's 4 MiB, about 500 with Debian's default of 208 KiB, where 40 connections could hold
only 21 MB, far below any cap, and proved nothing).

The cgroup versions charge socket buffers differently, and the test holds each to its rule:

* cgroup v1 charges them only to a group that has a TCP limit
  (``memory.kmem.tcp.limit_in_bytes``), on a counter of their own: without that limit,
  40 connections held 385 MB against a cap (``memory + disk``) of 104 MiB here, and 100
  UDP sockets took 1.5 GiB from the host.  Past the limit the program sees back-pressure,
  never an error: a non-blocking TCP ``send`` fails with ``EAGAIN`` (a blocking one waits),
  as on a full pipe, and the run ends as the program ends (``OK``).  The kernel still
  charges each connection's first buffer of each direction past the limit, so that every
  connection can make progress: the sum may pass the cap by that much per connection.
* cgroup v2 charges them to ``memory.max`` with everything else.  A TCP send past it
  makes the kernel reclaim, and then the group's OOM killer end a process of the sandbox
  (the flood: ``MEMORY_EXCEEDED``), unless back-pressure came first.  No connection gets
  a buffer past the cap: the sum stays within it (measured in the lab's Debian 12 guest:
  83 MB of 104 MiB held when the flood was killed).  A datagram that does not fit is
  dropped, as UDP may always do, on both versions.

The HOST measures: it sums the queues of every socket in the sandbox's network namespace
from ``/proc/<pid>/net/{tcp,tcp6,udp,udp6}`` of a process inside, at the moment the
program says its buffers are full (it then waits for the host on stdin;
``eval_in_sandbox``, which has no stdin, holds them for a second), and all along in a host
thread, for a flood that is killed before it can say so.  Those are bytes of data (TCP) or
of buffers (UDP, ``sk_rmem_alloc``); the kernel charges at least that much, so the sum may
never pass the cap and its version's slack.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from support.describe import describe
from support.processes import pids_with_marker, unique_marker
from support.timing import cpu, eval_cpu, slow

from pysandbox import Limits, Result, Status, eval_in_sandbox, run_python
from pysandbox._api.eval import OPEN_FILES
from pysandbox._cgroups.mounts import discover
from pysandbox._cgroups.probe import probe as cgroup_probe

MiB = 2**20
#: A cap far below what the attacks hold without it (about 385 MB for TCP here).
LIMITS = Limits(memory=96 * MiB, disk=8 * MiB, wall_time=60, cpu_time=cpu(20))
CAP = LIMITS.memory + LIMITS.disk
#: Larger than any ``net.core.[rw]mem_max``: the kernel grants its own maximum.
BUFFER = 2**30
#: What may pass the cap, per socket: the kernel charges a TCP socket's first buffer of
#: each direction even past the cap, so that every connection can make progress; one
#: loopback buffer (a 64 KiB segment and its overhead) is below 256 KiB.
SLACK_PER_SOCKET = 256 * 2**10
#: The fewest connections of a TCP flood.
TCP_CONNECTIONS = 40
#: A TCP flood could hold this many times its cap, were socket buffers not charged.
TCP_OVERCOMMIT = 4
UDP_RECEIVERS = 100
#: /proc/net/tcp's state of an established connection: the only one whose queues are
#: bytes held.  A connection being torn down (the program's exit, a kill) reports the gap
#: of sequence numbers it no longer holds: 1.8 GB for 800 closing connections here, while
#: the group's TCP counter said 107 MiB.
TCP_ESTABLISHED = "01"

TCP_FLOOD = """
import json, os, socket, sys, time
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
    print("held", os.getpid(), held, flush=True)  # so far: the last word if it is killed
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


def memory_version() -> int:
    """The cgroup version of the memory controller's hierarchy here."""
    return discover()["memory"].version


def connections_for(cap: int) -> int:
    """TCP connections whose buffers, at the largest the kernel grants, hold
    ``TCP_OVERCOMMIT`` times ``cap``: each has a send buffer of twice
    ``net.core.wmem_max`` and a receive buffer of twice ``rmem_max`` (global sysctls,
    the same in the sandbox's network namespace)."""
    granted = []
    for name in ("wmem_max", "rmem_max"):
        with open(f"/proc/sys/net/core/{name}") as sysctl:
            granted.append(2 * min(BUFFER, int(sysctl.read())))
    return max(TCP_CONNECTIONS, math.ceil(TCP_OVERCOMMIT * cap / sum(granted)))


def tcp_bound(cap: int, connections: int) -> int:
    """The most the host may see queued in a TCP flood of ``connections`` against
    ``cap``, by the rule of this host's cgroup version (module docstring): v1, each
    connection's first buffer of each direction past the cap; v2, only the buffers of
    the connection being filled when the cap is reached."""
    sockets = 2 * connections if memory_version() == 1 else 2
    return cap + sockets * SLACK_PER_SOCKET


def queued_bytes(pid: int) -> int:
    """Bytes in the queues of every established TCP socket and every UDP socket of
    ``pid``'s network namespace (see ``TCP_ESTABLISHED``)."""
    total = 0
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/{pid}/net/{table}") as lines:
            next(lines)  # the header
            for line in lines:
                fields = line.split()
                state, queues = fields[3], fields[4]
                if table.startswith("tcp") and state != TCP_ESTABLISHED:
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
    """A stdin callback: once the program's report line (JSON) arrives, sum the sandbox's
    socket queues (``seen["queued"]``) and close stdin so that the program ends."""
    stdout = bytearray()

    def on_stdout(chunk: bytes) -> bytes | None:
        stdout.extend(chunk)
        lines = stdout.split(b"\n")[:-1]  # the complete ones
        reports = [line for line in lines if line.startswith(b"{")]
        if not reports:
            return b""
        inside = pids_with_marker(marker, bwrap=False)
        measured = [queued_bytes_of_marked(pid, marker) for pid in inside]
        seen["queued"] = max((q for q in measured if q is not None), default=None)
        seen["report"] = json.loads(reports[0])
        return None

    return on_stdout


def needs_memory_cgroup() -> None:
    if not cgroup_probe().memory:
        pytest.skip(
            f"no memory cgroup for this caller, so no total cap to check ({cgroup_probe().reason})"
        )


@contextmanager
def host_samples_queues(marker: str) -> Iterator[dict[str, int]]:
    """While the block runs, a host thread keeps the largest ``queued_bytes`` of the
    processes with ``marker``: for a sandbox without stdin to say when it is full, and
    for a flood that is killed before it can."""
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


def flood(code: str, *args: str, limits: Limits = LIMITS) -> tuple[Result, dict[str, object]]:
    """Run a flood and return the result and what the host saw: when it was full, and
    the most it saw all along (``seen["max"]``)."""
    needs_memory_cgroup()
    marker = unique_marker()
    seen: dict[str, object] = {}
    with host_samples_queues(marker) as sampled:
        result = run_python(
            code,
            args=[marker, *args],
            limits=limits,
            stdin=measure_when_full(marker, seen),
        )
    seen.update(sampled)
    return result, seen


def held_so_far(stdout: str) -> int:
    """What the TCP floods in ``stdout`` said they held when they last spoke: each
    prints ``held PID BYTES`` after each connection it filled, so a flood that is killed
    has said how far it got."""
    last: dict[str, int] = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "held":
            last[words[1]] = int(words[2])
    return sum(last.values())


def test_tcp_buffers_are_capped() -> None:
    """Connections that could hold four times the cap (40 here, where they could hold
    about 385 MB) hold at most the cap, by the rule of the cgroup version."""
    connections = connections_for(CAP)
    limits = dataclasses.replace(LIMITS, open_files=2 * connections + 64)
    result, seen = flood(TCP_FLOOD, str(connections), str(BUFFER), "0", limits=limits)
    most = tcp_bound(CAP, connections)
    sampled = seen["max"]
    assert isinstance(sampled, int), describe(result, seen=seen)
    assert sampled <= most, (
        f"the sandbox held {sampled // MiB} MiB in socket buffers, past its cap of "
        f"{CAP // MiB} MiB and the slack: {describe(result, seen=seen)}"
    )
    if result.status is Status.MEMORY_EXCEEDED:
        # cgroup v2's way: the group's OOM killer ended the flood at the cap, after the
        # buffers had filled at least half of it (the flood's last word).
        assert memory_version() == 2, describe(result, seen=seen)
        assert result.signal == signal.SIGKILL, describe(result, seen=seen)
        assert held_so_far(result.stdout.decode()) >= CAP // 2, describe(result, seen=seen)
        return
    assert result.status is Status.OK, describe(result, seen=seen)
    report, queued = seen.get("report"), seen.get("queued")
    assert isinstance(report, dict) and isinstance(queued, int), describe(result, seen=seen)
    assert report["refused"] == {}, describe(result, seen=seen)
    # The flood really filled what it was given (so the test attacks something) ...
    assert queued >= CAP // 2, describe(result, seen=seen)
    # ... and that was no more than the cap, as the program saw it and as the host did.
    assert report["held"] <= most, describe(result, seen=seen)
    assert queued <= most, describe(result, seen=seen)


def test_udp_buffers_are_capped() -> None:
    """100 receivers that could hold 1.5 GiB of datagrams hold at most the cap."""
    result, seen = flood(UDP_FLOOD, str(UDP_RECEIVERS), str(BUFFER))
    assert result.status is Status.OK, describe(result, seen=seen)
    report, queued = seen.get("report"), seen.get("queued")
    assert isinstance(report, dict) and isinstance(queued, int), describe(result, seen=seen)
    assert report["sent"] > 4 * CAP, describe(result, seen=seen)  # offered far past the cap
    assert 0 < queued <= CAP + (UDP_RECEIVERS + 1) * SLACK_PER_SOCKET, (
        f"the sandbox held {queued // MiB} MiB in socket buffers, past its cap of "
        f"{CAP // MiB} MiB and the slack: {describe(result, seen=seen)}"
    )


#: eval_in_sandbox's flood: as many processes as its open-files cap needs (one here,
#: three with Debian's buffer sizes), each exec'ing ``TCP_FLOOD`` with the marker in its
#: command line and printing its report; then the wait status of each, one per line.
EVAL_FLOOD = """
import os, sys
pids = []
for count in COUNTS:
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", FLOOD, MARKER, str(count), BUFFER, "1"])
    pids.append(pid)
for pid in pids:
    print("status", os.waitpid(pid, 0)[1], flush=True)
"""


def test_tcp_buffers_are_capped_for_eval_in_sandbox() -> None:
    """eval_in_sandbox's memory cgroup (``mem_max_mb`` for the whole sandbox) caps them
    too.  The floods hold their buffers for a second while the host samples them."""
    needs_memory_cgroup()
    cap = 64 * MiB
    marker = unique_marker()
    connections = connections_for(cap)
    # Two descriptors a connection, and room for the interpreter's own.
    per_process = (OPEN_FILES - 32) // 2
    counts = [per_process] * (connections // per_process)
    counts += [connections % per_process] if connections % per_process else []
    params = {"FLOOD": TCP_FLOOD, "MARKER": marker, "BUFFER": str(BUFFER), "COUNTS": counts}
    code = "".join(f"{name} = {value!r}\n" for name, value in params.items()) + EVAL_FLOOD
    with host_samples_queues(marker) as seen:
        output = eval_in_sandbox(
            code,
            mem_max_mb=cap // MiB,
            cpu_max_time_sec=eval_cpu(30),
            timeout_max_time_sec=math.ceil(slow(10)),
        )
    most = tcp_bound(cap, connections)
    assert seen["samples"] > 0 and seen["max"] <= most, (output, seen)
    lines = output.stdout.splitlines()
    reports = [json.loads(line) for line in lines if line.startswith("{")]
    statuses = [int(line.split()[1]) for line in lines if line.startswith("status ")]
    if output.returncode == 137 or any(status == signal.SIGKILL for status in statuses):
        # cgroup v2's way: the OOM killer ended a flood (or the program) at the cap,
        # after the buffers had filled at least half of it (the floods' last words).
        assert memory_version() == 2, (output, seen)
        assert held_so_far(output.stdout) >= cap // 2, (output, seen)
        return
    assert output.returncode == 0 and statuses == [0] * len(counts), (output, seen)
    assert [report["refused"] for report in reports] == [{}] * len(counts), output
    assert cap // 2 <= sum(report["held"] for report in reports) <= most, (output, seen)
