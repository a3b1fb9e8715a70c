# SPDX-License-Identifier: MIT
"""``selftest()``: attack a real sandbox on this host and report which protections hold.

Each check runs code in a sandbox that tries to break one protection, and looks at the
result (and, for the network, at a listener on the host).  A protection that does not
hold is reported with the fix; nothing here weakens a sandbox to make a check pass.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Callable

from .._cgroups.base import DELEGATION
from .._cgroups.mounts import discover
from .._cgroups.node import PARENT
from .._cgroups.probe import probe
from .._launch.confine import confine
from .._launch.readable import LANDLOCK_FIX, landlock_abi
from .._launch.rlimits import SIGPENDING_BOUND
from .._model.errors import SandboxError
from .._model.limits import Limits
from .._model.selftest_report import Check, SelftestReport
from .._model.status import Status
from .run import run_python

__all__ = ["Check", "SelftestReport", "selftest"]


def _sandboxed(code: str, limits: Limits | None = None) -> str:
    result = run_python(code, limits=limits or Limits(wall_time=20, cpu_time=5))
    return result.stdout_text().strip() + result.stderr_text().strip()[-200:]


_NAMESPACES = """
import os
print(os.getpid(), sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net")
      else [line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]])
"""

_IDENTITY = """
import os
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
print(os.getuid(), status["CapEff"].strip(), status["NoNewPrivs"].strip())
"""

_SYSCALLS = """
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
numbers = {
    "x86_64": {"ptrace": 101, "unshare": 272, "bpf": 321, "keyctl": 250, "mount": 165},
    "aarch64": {"ptrace": 117, "unshare": 97, "bpf": 280, "keyctl": 219, "mount": 40},
}[platform.machine()]
arguments = {"ptrace": (0, 1, 0, 0), "unshare": (0x10000000,), "bpf": (0, 0, 0),
             "keyctl": (0, 0), "mount": (0, 0, 0, 0, 0)}
calls = {name: (numbers[name], *arguments[name]) for name in numbers}
refused = []
for name, (nr, *args) in calls.items():
    if libc.syscall(nr, *args) < 0 and ctypes.get_errno() == errno.EPERM:
        refused.append(name)
if libc.socket(40, 1, 0) < 0 and ctypes.get_errno() == errno.EAFNOSUPPORT:  # AF_VSOCK
    refused.append("vsock")
print(" ".join(refused))
"""

#: Each kernel budget counted per uid or for the whole host, spent for real: the calls
#: that must fail as on a kernel without them, locks that must not be taken (the
#: kernel's own fdinfo lists those an open file holds), a lease on the program's own
#: file, and timers (each holds a queued signal) until the bound refuses one.
_BUDGETS = """
import ctypes, errno, fcntl, os, platform, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# io_setup, inotify_init1, mq_open, memfd_secret (raw: an older libc has mq_open in librt)
numbers = {"x86_64": (206, 294, 240, 447), "aarch64": (0, 26, 180, 447)}[platform.machine()]
context = ctypes.c_ulong(0)
calls = {
    "aio": lambda: libc.syscall(numbers[0], 1, ctypes.addressof(context)),
    "inotify": lambda: libc.syscall(numbers[1], 0),
    "mqueue": lambda: libc.syscall(numbers[2], b"pysandbox-selftest", os.O_CREAT | os.O_RDWR,
                                   0o600, None),
    "memfd_secret": lambda: libc.syscall(numbers[3], 0),
    "sysv": lambda: libc.shmget(0, 1 << 20, 0o1600),
}
unbuilt = [name for name, call in calls.items()
           if call() < 0 and ctypes.get_errno() == errno.ENOSYS]
with open("own", "w") as own:
    own.write("x")
fd = os.open("own", os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0))
with open("/proc/self/fdinfo/%d" % fd) as info:
    locks = sum(line.startswith("lock:") for line in info)
try:
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    lease = "taken"
except OSError as exc:
    lease = errno.errorcode[exc.errno]
timers, timer = 0, ctypes.c_void_p()
while timers < 200000 and libc.timer_create(1, None, ctypes.byref(timer)) == 0:
    timers += 1
print(",".join(unbuilt) or "none", locks, lease, timers)
"""

_FORK_BOMB = """
import os, time
children = 0
try:
    while children < 200:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError:
    pass
print(children)
"""


#: Ten children of 20 ms of CPU each that nobody reaps (SIGCHLD ignored): only a
#: cgroup counts them; samples of the process tree miss them.
_UNREAPED_BURNERS = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
for _ in range(10):
    if os.fork() == 0:
        end = time.process_time() + 0.02
        while time.process_time() < end:
            pass
        os._exit(0)
    time.sleep(0.025)
try:
    os.wait()
except ChildProcessError:
    pass
"""


def _check_namespaces() -> Check:
    pid, interfaces = _sandboxed(_NAMESPACES).split(" ", 1)
    ok = pid == "2" and interfaces == "['lo']"
    detail = f"pid {pid} inside, network interfaces {interfaces}"
    return Check("namespaces (pid, net, mount, ipc, uts)", ok, detail, "bubblewrap 0.8+")


def _check_identity() -> Check:
    uid, caps, no_new_privs = _sandboxed(_IDENTITY).split()
    ok = uid != "0" and caps == "0000000000000000" and no_new_privs == "1"
    detail = f"uid {uid}, effective capabilities {caps}, no_new_privs {no_new_privs}"
    return Check("unprivileged identity", ok, detail, "report this: the init did not drop")


def _check_seccomp() -> Check:
    refused = _sandboxed(_SYSCALLS).split()
    ok = set(refused) == {"ptrace", "unshare", "bpf", "keyctl", "mount", "vsock"}
    return Check("seccomp filter", ok, f"refused: {' '.join(refused) or 'none'}", "libseccomp")


#: Budgets the kernel counts per uid that no mechanism bounds per sandbox when the
#: sandbox runs as the caller's uid: epoll watches, and pipe pages past which every new
#: pipe of the uid gets two pages (pysandbox's own capture pipes too).
_PER_UID_SYSCTLS = ("fs.epoll.max_user_watches", "fs.pipe-user-pages-soft")
_PER_UID_FIX = (
    "run the caller as root: each sandbox then runs as a uid of its own, and spends only "
    "that uid's budgets"
)


def _sysctl(name: str) -> str:
    """The value of sysctl ``name`` (``fs.epoll.max_user_watches``), or "?"."""
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as value:
            return value.read().strip()
    except OSError:
        return "?"


def _check_budgets() -> Check:
    unbuilt, locks, lease, timers = _sandboxed(_BUDGETS).split()
    ok = (
        unbuilt == "aio,inotify,mqueue,memfd_secret,sysv"
        and locks == "0"
        and lease == "EACCES"
        and timers.isdigit()
        and int(timers) <= SIGPENDING_BOUND
    )
    detail = (
        f"refused as on a kernel without them: {unbuilt.replace(',', ' ')}; file "
        f"locks taken: {locks}; a lease: {lease}; timers (queued signals) before a refusal: "
        f"{timers} of {SIGPENDING_BOUND}"
    )
    if not ok:
        return Check(
            "kernel budgets", False, detail, "report this: the filter or a limit is missing"
        )
    if os.geteuid() == 0:
        return Check("kernel budgets", True, detail)
    # The kernel counts these per uid with no per-namespace limit, and a non-root
    # caller's sandbox runs as the caller's uid (docs/security.rst, "Kernel budgets").
    shared = ", ".join(f"{name} {_sysctl(name)}" for name in _PER_UID_SYSCTLS)
    detail += f"; but its sandboxes spend this uid's own per-uid budgets ({shared})"
    return Check("kernel budgets", False, detail, _PER_UID_FIX)


def _check_processes() -> Check:
    with confine(processes=16, memory_total=None, rlimits=[]) as confinement:
        mechanism = confinement.processes_by
        # A root caller's RLIMIT_NPROC counts a uid of the sandbox's own; a non-root
        # caller's counts its uid, which every sandbox of that caller shares.
        own_count = confinement.cgroup is not None or os.geteuid() == 0
    started = _sandboxed(_FORK_BOMB, Limits(processes=16, wall_time=20, cpu_time=5))
    ok = started.isdigit() and int(started) < 16 and own_count
    detail = f"a fork bomb got {started} processes of 16; enforced by {mechanism}"
    return Check("process cap", ok, detail, f"run as root, or {DELEGATION}")


def _check_memory() -> Check:
    support = probe()
    if support.memory:
        with confine(processes=16, memory_total=2**30, rlimits=[]) as confinement:
            mechanism = confinement.memory_by
        return Check("total memory cap", True, mechanism)
    detail = f"per-process address space only (RLIMIT_AS): {support.reason}"
    return Check("total memory cap", False, detail, f"run as root, or {DELEGATION}")


#: The extended attributes systemd (251+) sets on a cgroup it delegates (Delegate=yes).
_DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")


def _delegated(path: str) -> bool:
    """Whether systemd marked the group ``path`` as delegated."""
    for name in _DELEGATE_XATTRS:
        try:
            if os.getxattr(path, name).strip(b"\0") in (b"1", b"yes", b"true"):
                return True
        except OSError:
            continue
    return False


def _check_placement() -> Check:
    """Where the groups go, and on cgroup v2 under systemd, that the group is delegated:
    systemd leaves a delegated group's subtree alone and keeps a unit running when the
    kernel OOM-kills a sandbox's process (OOMPolicy= defaults to continue with
    Delegate=yes, to stop without)."""
    name = "cgroup placement"
    fix = f"run as root, or {DELEGATION}"
    support = probe()
    if not (support.pids or support.memory):
        return Check(name, False, "no per-sandbox cgroups (see above)", fix)
    limited = [h for c, h in discover().items() if c in ("pids", "memory")]
    where = ", ".join(sorted({os.path.join(h.home, PARENT) for h in limited}))
    v2 = [h.home for h in limited if h.version == 2]
    unit = v2[0] if v2 and v2[0].endswith((".service", ".scope")) else None
    if unit is None or _delegated(unit) or os.geteuid() != 0:
        delegated = " (a systemd unit's group delegated to this caller)" if unit else ""
        return Check(name, True, f"groups under {where}{delegated}")
    detail = (
        f"groups under {where}, but systemd did not delegate {unit}: it may change that "
        "group's controllers, and stops the unit when the kernel OOM-kills a process of a "
        "sandbox over its memory cap (OOMPolicy=stop, the default without Delegate=yes)"
    )
    unit_fix = "add Delegate=yes (and OOMPolicy=continue) to the unit's [Service] section"
    return Check(name, False, detail, unit_fix)


def _check_cpu() -> Check:
    with confine(processes=16, memory_total=None, rlimits=[]) as confinement:
        exact = confinement.cpu_counter >= 0
    used = run_python(_UNREAPED_BURNERS, limits=Limits(wall_time=20, cpu_time=5)).cpu_time
    counted = used >= 10 * 0.02
    if exact:
        detail = f"cgroup CPU counter: children nobody reaped counted ({used:.2f} s of >= 0.20 s)"
    else:
        detail = (
            f"sampled from /proc every 50 ms ({used:.2f} s of >= 0.20 s counted): short-lived "
            "children that nobody reaps escape; per-process RLIMIT_CPU and the wall time "
            "still bound them"
        )
    fix = f"run as root, or {DELEGATION}"
    return Check("CPU time of the whole tree", exact and counted, detail, fix)


def _check_network() -> Check:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    code = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1); print('connected')\n"
        "except OSError as exc:\n    print('refused')"
    )
    try:
        said = _sandboxed(code)
        try:
            listener.accept()[0].close()
            reached = True
        except OSError:
            reached = False
    finally:
        listener.close()
    ok = said == "refused" and not reached
    seen = "reached" if reached else "not reached"
    return Check("network", ok, f"a listener on the host's 127.0.0.1 was {seen}")


_UNIX_SOCKETS = """
import errno, socket
def attempt(make):
    try:
        make().close()
        return "made"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
      attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)),
      attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]))
"""


def _check_unix_sockets() -> Check:
    said = _sandboxed(_UNIX_SOCKETS)
    ok = said == "EACCES EACCES EACCES"
    detail = (
        f"socket(AF_UNIX) and datagram pairs: {said} (only connected stream and seqpacket "
        "pairs are left, which can address no path)"
    )
    return Check("unix sockets", ok, detail, "report this: the syscall filter did not refuse")


_HOST_FILES = """
import errno, os, socket
def attempt(action):
    try:
        action()
        return "done"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
def connect():
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(PLACE + "/socket")
print(attempt(lambda: os.close(os.open(PLACE + "/fifo", os.O_WRONLY | os.O_NONBLOCK))),
      attempt(lambda: os.close(os.open(PLACE + "/fifo", os.O_RDONLY | os.O_NONBLOCK))),
      attempt(connect))
"""


#: Makes empty files in the working directory, far past the inode cap, and says how far
#: it got (it is killed before the end when the cap holds).
_MANY_FILES = """
import os
for i in range(200_000):
    open(f"f{i}", "wb").close()
    if i % 500 == 0:
        print(i, flush=True)
print("all", flush=True)
"""


def _check_disk_inodes() -> Check:
    """The C core's watch of the working directory's inodes (statfs through the init's
    root) fails silently when that root cannot be read: a sandbox then makes files
    without end.  Here it must be killed past its cap."""
    limits = Limits(wall_time=20, cpu_time=10, disk=1024 * 2**10)
    result = run_python(_MANY_FILES, limits=limits)
    lines = result.stdout_text().split()
    if "all" in lines:
        made = "all 200000 files made"
    else:
        made = f"killed after {lines[-1]}+ files" if lines else "killed before its first file"
    ok = result.status is Status.DISK_EXCEEDED
    detail = f"{limits.disk_inodes()} inodes allowed, {made} ({result.status.value})"
    return Check("working directory's inode cap", ok, detail, "report this: the watch saw nothing")


def _check_readable_inert() -> Check:
    """A host FIFO (with a reader) and a unix socket listener, world-writable, in a
    readable directory: the sandbox may open neither for writing."""
    name = "readable paths inert"
    abi = landlock_abi()
    if abi < 1:
        detail = (
            "this kernel has no Landlock, so a host FIFO below a readable directory "
            "would be writable: readable directories are refused (SandboxError), regular "
            "files still work"
        )
        return Check(name, False, detail, LANDLOCK_FIX)
    place = tempfile.mkdtemp(prefix="pysandbox-selftest-")
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, place)
        os.chmod(place, 0o755)
        listener = stack.enter_context(socket.socket(socket.AF_UNIX))
        listener.bind(os.path.join(place, "socket"))
        listener.listen(1)
        listener.setblocking(False)
        os.chmod(os.path.join(place, "socket"), 0o777)
        os.mkfifo(os.path.join(place, "fifo"), 0o666)
        os.chmod(os.path.join(place, "fifo"), 0o666)
        reader = os.open(os.path.join(place, "fifo"), os.O_RDONLY | os.O_NONBLOCK)
        stack.callback(os.close, reader)
        code = f"PLACE = {place!r}\n" + _HOST_FILES
        result = run_python(code, readable=[place], limits=Limits(wall_time=20, cpu_time=5))
        write, read, connect = (result.stdout_text().split() + ["?"] * 3)[:3]
        reached = []
        with contextlib.suppress(BlockingIOError):
            listener.accept()[0].close()
            reached.append("the listener accepted")
        with contextlib.suppress(BlockingIOError):
            if os.read(reader, 64):
                reached.append("the FIFO's reader got data")
    ok = write == "EACCES" and connect == "EACCES" and not reached
    opened = "opened" if read == "done" else read
    detail = (
        f"Landlock ABI {abi}: a host FIFO opened for writing {write}, a host unix socket "
        f"connected {connect}, host side {'; '.join(reached) or 'reached by nothing'}; "
        f"left open: a host FIFO opened for reading ({opened}), which no Landlock ABI up to "
        "9 refuses"
    )
    return Check(name, ok, detail, "report this: the program was not confined")


def selftest() -> SelftestReport:
    """Run the attacks (a few seconds) and say which protections hold on this host."""
    checks: list[Callable[[], Check]] = [
        _check_namespaces,
        _check_identity,
        _check_seccomp,
        _check_processes,
        _check_memory,
        _check_cpu,
        _check_placement,
        _check_network,
        _check_unix_sockets,
        _check_readable_inert,
        _check_disk_inodes,
        _check_budgets,
    ]
    results = []
    for check in checks:
        try:
            results.append(check())
        except (SandboxError, ValueError) as exc:
            name = check.__name__.removeprefix("_check_")
            results.append(Check(name, False, str(exc), "see the message"))
    return SelftestReport(tuple(results))
