# SPDX-License-Identifier: MIT
"""Issue 7 item 5: no network means no socket family a network namespace leaves open.

A network namespace isolates only the families that are namespace-aware: ``AF_VSOCK``
binds ports in the host's own vsock space, and the other families only widen the kernel
surface the program can reach (and make the kernel load their modules).  The syscall
filter lets ``socket`` and ``socketpair`` make ``AF_UNIX``, ``AF_INET`` and ``AF_INET6``
sockets only, and refuses every other family with ``EAFNOSUPPORT``.  Of ``AF_UNIX`` it
leaves only the connected stream and seqpacket pairs of ``socketpair`` (issue 18 item 1,
``test_readable_inert.py``): what still works below uses those.

The sandboxed code tries each family (and a family hidden in the high bits of the
register) through ``run_python`` and ``eval_in_sandbox``, as root and as a non-root
caller; the host checks that a vsock port the sandbox tried to take is still free; and
ordinary programs that use the allowed families keep working.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from collections.abc import Mapping
from pathlib import Path

import pytest
from support.callers import run_unprivileged
from support.describe import describe
from support.timing import cpu, eval_cpu

from pysandbox import Limits, Status, eval_in_sandbox, run_python

#: Each refused family, as ``(number, socket type, protocol)``: the type and protocol a
#: real program would use, so that without the filter the kernel would get that far.
FAMILIES: dict[str, tuple[int, int, int]] = {
    "AF_VSOCK": (40, int(socket.SOCK_STREAM), 0),
    "AF_PACKET": (17, int(socket.SOCK_RAW), 0x0300),  # htons(ETH_P_ALL)
    "AF_NETLINK": (16, int(socket.SOCK_RAW), 0),  # NETLINK_ROUTE
    "AF_BLUETOOTH": (31, int(socket.SOCK_STREAM), 3),  # BTPROTO_RFCOMM
    "AF_ALG": (38, int(socket.SOCK_SEQPACKET), 0),
    "AF_KEY": (15, int(socket.SOCK_RAW), 2),  # PF_KEY_V2
    "AF_XDP": (44, int(socket.SOCK_RAW), 0),
    "AF_CAN": (29, int(socket.SOCK_RAW), 1),  # CAN_RAW
    "AF_TIPC": (30, int(socket.SOCK_RDM), 0),
    "AF_RDS": (21, int(socket.SOCK_SEQPACKET), 0),
    "AF_QIPCRTR": (42, int(socket.SOCK_DGRAM), 0),
}
#: AF_VSOCK (40) with bit 32 set: the kernel reads the family as an int, without bit 32.
HIGH_BITS_VSOCK = 0x1_0000_0028
#: AF_UNIX (1) with bit 32 set: the same int to the kernel, so its pair must still work.
HIGH_BITS_UNIX = 0x1_0000_0001
#: ``socket`` and ``socketpair`` syscall numbers, for the calls with high bits set.
SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}.get(platform.machine())
#: A uid with no other process on this host, for a non-root caller made by the test.
UNPRIVILEGED_CALLER = 54321

PRELUDE = """
import ctypes, errno, json, os, socket, sys

report = {}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def outcome(action):
    # What action() got: "done", or the errno name of its failure.
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "done"

def syscall(nr, *args):
    # A raw syscall with every argument a full 64-bit register; -1 raises OSError.
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result
"""

PROBE = """
def make_socket(family, kind, proto):
    socket.socket(family, kind, proto).close()

def make_pair(family, kind, proto):
    for end in socket.socketpair(family, kind, proto):
        end.close()

def raw_socket(domain):
    os.close(syscall(SOCKET_CALLS[0], domain, socket.SOCK_STREAM, 0))

def raw_pair(domain):
    fds = (ctypes.c_int * 2)()
    syscall(SOCKET_CALLS[1], domain, socket.SOCK_STREAM, 0, ctypes.addressof(fds))
    os.close(fds[0])
    os.close(fds[1])

for name, (family, kind, proto) in FAMILIES.items():
    report["socket " + name] = outcome(lambda: make_socket(family, kind, proto))
    report["socketpair " + name] = outcome(lambda: make_pair(family, kind, proto))
if SOCKET_CALLS:
    report["socket high bits"] = outcome(lambda: raw_socket(HIGH_BITS_VSOCK))
    report["socketpair high bits"] = outcome(lambda: raw_pair(HIGH_BITS_VSOCK))
"""


def source(code: str, **params: object) -> str:
    """``code`` after the prelude and the module's constants, printing ``report``."""
    constants = {
        "FAMILIES": FAMILIES,
        "HIGH_BITS_VSOCK": HIGH_BITS_VSOCK,
        "HIGH_BITS_UNIX": HIGH_BITS_UNIX,
        "SOCKET_CALLS": SOCKET_CALLS,
        **params,
    }
    assignments = "".join(f"{name} = {value!r}\n" for name, value in constants.items())
    return PRELUDE + assignments + code + "\nprint(json.dumps(report), flush=True)\n"


def last_json(text: str) -> dict[str, object]:
    """The JSON object on the last line of ``text``."""
    lines = text.strip().splitlines()
    assert lines, "the sandboxed code printed no report"
    report = json.loads(lines[-1])
    assert isinstance(report, dict)
    return report


def run_report(code: str, **params: object) -> dict[str, object]:
    """Run ``code`` with ``run_python``; it must end normally; its report."""
    result = run_python(source(code, **params), limits=Limits(wall_time=30, cpu_time=cpu(10)))
    assert result.status is Status.OK, describe(result)
    return last_json(result.stdout.decode())


def eval_report(code: str, **params: object) -> dict[str, object]:
    """Run ``code`` with ``eval_in_sandbox``; it must exit 0; its report."""
    output = eval_in_sandbox(
        source(code, **params), cpu_max_time_sec=eval_cpu(10), timeout_max_time_sec=30
    )
    assert output.returncode == 0, output.stderr
    return last_json(output.stdout)


def expected_refusals() -> dict[str, str]:
    """Every attempt of ``PROBE``, each refused as a kernel without the family would."""
    keys = [f"{call} {name}" for name in FAMILIES for call in ("socket", "socketpair")]
    if SOCKET_CALLS:
        keys += ["socket high bits", "socketpair high bits"]
    return dict.fromkeys(keys, "EAFNOSUPPORT")


# --------------------------------------------------------------------------- refused


def test_other_families_are_refused_in_run_python() -> None:
    assert run_report(PROBE) == expected_refusals()


def test_other_families_are_refused_in_eval_in_sandbox() -> None:
    assert eval_report(PROBE) == expected_refusals()


NON_ROOT_DRIVER = """
import json, os, sys
sys.path.insert(0, SHARED)
from pysandbox import Limits, eval_in_sandbox, run_python
ran = run_python(CODE, limits=Limits(wall_time=30, cpu_time=CPU))
evaluated = eval_in_sandbox(CODE, cpu_max_time_sec=EVAL_CPU, timeout_max_time_sec=30)
print(json.dumps({
    "uid": os.getuid(),
    "run": ran.stdout.decode(errors="replace"),
    "run stderr": ran.stderr.decode(errors="replace")[-2000:],
    "eval": evaluated.stdout,
    "eval stderr": evaluated.stderr[-2000:],
}))
"""


def test_other_families_are_refused_for_a_non_root_caller(
    unprivileged_pysandbox: tuple[str, Path],
) -> None:
    """A non-root caller's sandbox (bwrap's user namespace) runs under the same filter."""
    python, shared = unprivileged_pysandbox
    params = {
        "SHARED": str(shared),
        "CODE": source(PROBE),
        "CPU": cpu(10),
        "EVAL_CPU": eval_cpu(10),
    }
    driver = "".join(f"{k} = {v!r}\n" for k, v in params.items()) + NON_ROOT_DRIVER
    out = run_unprivileged(python, driver, uid=UNPRIVILEGED_CALLER, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    outcome = json.loads(out.stdout.strip().splitlines()[-1])
    assert outcome["uid"] == UNPRIVILEGED_CALLER
    assert last_json(outcome["run"]) == expected_refusals(), outcome["run stderr"]
    assert last_json(outcome["eval"]) == expected_refusals(), outcome["eval stderr"]


def host_vsock_missing() -> str | None:
    """Why this host cannot make AF_VSOCK sockets, or None when it can."""
    family = getattr(socket, "AF_VSOCK", None)
    if family is None:
        return "this Python has no socket.AF_VSOCK"
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
    except OSError as exc:
        return f"the host has no AF_VSOCK ({exc.strerror}): nothing to take a port from"
    return None


VSOCK_SQUAT = """
held = []

def squat():
    # Kept open until stdin closes: the host tries the same port meanwhile.
    server = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    held.append(server)
    server.bind((socket.VMADDR_CID_ANY, PORT))
    server.listen()

def reach_the_hypervisor():
    # CID 2 is the machine this host runs on, when the host is a virtual machine.
    with socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM) as client:
        client.settimeout(2)
        client.connect((socket.VMADDR_CID_HOST, PORT))

report["bind the host's port"] = outcome(squat)
report["connect to the hypervisor"] = outcome(reach_the_hypervisor)
print("ready", flush=True)
sys.stdin.read()
"""


def test_vsock_port_of_the_sandbox_stays_free_on_the_host() -> None:
    """The sandbox tries to take a vsock port (and to reach the hypervisor); the host then
    binds that port itself, which failed with EADDRINUSE before the filter refused vsock."""
    if reason := host_vsock_missing():
        pytest.skip(f"host side only (the refusal tests above still run): {reason}")
    with socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM) as probe:
        probe.bind((socket.VMADDR_CID_ANY, socket.VMADDR_PORT_ANY))
        port = probe.getsockname()[1]
    host_bind: list[str] = []

    def on_stdout(chunk: bytes) -> bytes | None:
        if b"ready" not in chunk:
            return b""
        with socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM) as mine:
            try:
                mine.bind((socket.VMADDR_CID_ANY, port))
                host_bind.append("bound")
            except OSError as exc:
                host_bind.append(os.strerror(exc.errno or 0))
        return None

    result = run_python(
        source(VSOCK_SQUAT, PORT=port),
        stdin=on_stdout,
        limits=Limits(wall_time=30, cpu_time=cpu(1)),
    )
    assert result.status is Status.OK, describe(result)
    assert host_bind == ["bound"], "the sandbox held a port of the host's vsock space"
    assert last_json(result.stdout.decode()) == {
        "bind the host's port": "EAFNOSUPPORT",
        "connect to the hypervisor": "EAFNOSUPPORT",
    }


# --------------------------------------------------------------------------- other ABIs

OTHER_ABIS = """
import mmap, signal, struct

# int 0x80 from 64-bit code enters the i386 ABI.  SysV passes (nr, a, b, c) in rdi, rsi,
# rdx, rcx; i386 wants eax, ebx, ecx, edx:
#   push rbx; mov eax, edi; mov ebx, esi; xchg ecx, edx; int 0x80; pop rbx;
#   movsxd rax, eax; ret
CODE = bytes.fromhex("53 89f8 89f3 87d1 cd80 5b 4863c0 c3")
MAP_32BIT = 0x40  # i386 pointers are 32 bits: socketcall's argument block must fit
page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_32BIT,
                 prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page[: len(CODE)] = CODE
page[64:76] = struct.pack("<3I", 40, socket.SOCK_STREAM, 0)  # AF_VSOCK for socketcall
base = ctypes.addressof(ctypes.c_char.from_buffer(page))
long = ctypes.c_long
int80 = ctypes.CFUNCTYPE(long, long, long, long, long)(base)

def x32(nr, *args):
    result = libc.syscall(long(0x40000000 | nr), *[long(a) for a in args])
    return -ctypes.get_errno() if result == -1 else result

def in_child(call):
    # call() in a forked child: "done", an errno name, or the signal that killed it.
    pid = os.fork()
    if pid == 0:
        result = call()
        os._exit(255 if result >= 0 else min(-result, 254))
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    code = os.WEXITSTATUS(status)
    return "done" if code == 255 else errno.errorcode.get(code, str(code))

report["i386 getpid"] = in_child(lambda: int80(20, 0, 0, 0))
report["i386 socketcall(SYS_SOCKET, AF_VSOCK)"] = in_child(lambda: int80(102, 1, base + 64, 0))
report["i386 socket(AF_VSOCK)"] = in_child(lambda: int80(359, 40, socket.SOCK_STREAM, 0))
report["x32 socket(AF_VSOCK)"] = in_child(lambda: x32(41, 40, socket.SOCK_STREAM, 0))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 and x32 are x86_64's ABIs")
def test_other_abis_cannot_make_sockets() -> None:
    """The filter refuses every syscall of another ABI: i386 (and with it socketcall,
    whose arguments in memory no filter can read) and x32.  A kernel without the i386 ABI
    kills the int 0x80 caller with SIGSEGV, which is accepted, not the filter's SIGSYS."""
    report = run_report(OTHER_ABIS)
    i386 = {key: value for key, value in report.items() if key.startswith("i386")}
    assert set(i386.values()) in ({"EPERM"}, {"SIGSEGV"}), report
    assert report["x32 socket(AF_VSOCK)"] == "EPERM", report


# --------------------------------------------------------------------------- still works

WORKS = """
import asyncio, multiprocessing, subprocess
from multiprocessing.connection import Client, Listener

def pair():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"ping")
        return b.recv(4).decode()

def seqpacket_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        a.send(b"pkt")
        return b.recv(4).decode()

def tcp(family, host):
    with socket.create_server((host, 0), family=family) as server:
        with socket.create_connection(server.getsockname()[:2], timeout=10) as client:
            conn, _ = server.accept()
            with conn:
                client.sendall(b"echo")
                conn.sendall(conn.recv(4))
                return client.recv(4).decode()

def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a, \\
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
        b.bind(("127.0.0.1", 0))
        b.settimeout(10)
        a.sendto(b"gram", b.getsockname())
        return b.recv(4).decode()

async def serve():
    async def handle(reader, writer):
        writer.write(await reader.read(4))
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    writer.write(b"aio!")
    data = await reader.read(4)
    writer.close()
    server.close()
    await server.wait_closed()
    return data.decode()

def child_connects():
    # A child process makes its own AF_INET socket and reaches the parent's server.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = "import socket; socket.create_connection(('127.0.0.1', %d)).sendall(b'kid!')"
        subprocess.run([sys.executable, "-c", code % port], check=True, timeout=60)
        conn, _ = server.accept()
        with conn:
            return conn.recv(4).decode()

def double(conn):
    conn.send(conn.recv() * 2)

def call_back(address):
    with Client(address) as conn:
        conn.send("mp")

def multiprocessing_pipe():
    mine, theirs = multiprocessing.Pipe()  # a socketpair
    worker = multiprocessing.Process(target=double, args=(theirs,))
    worker.start()
    mine.send(21)
    answer = mine.recv()
    worker.join()
    return answer

def multiprocessing_listener(family):
    address = ("127.0.0.1", 0) if family == "AF_INET" else None
    with Listener(address, family=family) as listener:
        worker = multiprocessing.Process(target=call_back, args=(listener.address,))
        worker.start()
        with listener.accept() as conn:
            answer = conn.recv()
        worker.join()
        return answer

def high_bits_unix():
    fds = (ctypes.c_int * 2)()
    syscall(SOCKET_CALLS[1], HIGH_BITS_UNIX, socket.SOCK_STREAM, 0, ctypes.addressof(fds))
    os.close(fds[1])
    with socket.socket(fileno=fds[0]) as sock:
        return sock.family.name

report["socketpair"] = pair()
report["socketpair seqpacket"] = seqpacket_pair()
report["tcp 127.0.0.1"] = tcp(socket.AF_INET, "127.0.0.1")
if V6:
    report["tcp ::1"] = tcp(socket.AF_INET6, "::1")
report["udp 127.0.0.1"] = udp()
report["asyncio"] = asyncio.run(serve())
report["subprocess"] = child_connects()
report["multiprocessing pipe"] = multiprocessing_pipe()
report["multiprocessing AF_INET"] = multiprocessing_listener("AF_INET")
if SOCKET_CALLS:
    report["high bits with AF_UNIX"] = high_bits_unix()
# Without AF_NETLINK: getaddrinfo assumes both families, interface names come by ioctl.
gai = socket.getaddrinfo(None, 80, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)
report["getaddrinfo AI_ADDRCONFIG"] = "127.0.0.1" in [entry[4][0] for entry in gai]
report["if_nametoindex lo"] = socket.if_nametoindex("lo")
"""


def host_has_ipv6_loopback() -> bool:
    """Whether ::1 can be bound here (the sandbox's lo is set up like the host's)."""
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        return False
    return True


def expected_working(*, v6: bool) -> Mapping[str, object]:
    expected: dict[str, object] = {
        "socketpair": "ping",
        "socketpair seqpacket": "pkt",
        "tcp 127.0.0.1": "echo",
        "udp 127.0.0.1": "gram",
        "asyncio": "aio!",
        "subprocess": "kid!",
        "multiprocessing pipe": 42,
        "multiprocessing AF_INET": "mp",
        "getaddrinfo AI_ADDRCONFIG": True,
        "if_nametoindex lo": 1,
    }
    if v6:
        expected["tcp ::1"] = "echo"
    if SOCKET_CALLS:
        expected["high bits with AF_UNIX"] = "AF_UNIX"
    return expected


def test_unix_inet_and_inet6_still_work_in_run_python() -> None:
    v6 = host_has_ipv6_loopback()
    report = run_report(WORKS, V6=v6)
    assert report == expected_working(v6=v6)


def test_unix_inet_and_inet6_still_work_in_eval_in_sandbox() -> None:
    """The same under ``eval_in_sandbox``, whose only directory is read-only."""
    v6 = host_has_ipv6_loopback()
    report = eval_report(WORKS, V6=v6)
    assert report == expected_working(v6=v6)
