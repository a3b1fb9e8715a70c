# SPDX-License-Identifier: MIT
"""Every isolation claim of eval_in_sandbox, attacked for real and checked on the host.

Each test runs code that tries to break out (write to the host, regain privileges, read the
caller's secrets, reach the network, hurt host processes) and then looks at the host to see
that nothing happened.  The sandboxed code reports what it tried as one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.timing import ATTEMPT_SOURCE

from pysandbox import eval_in_sandbox
from pysandbox._host.interpreter import movable

# --------------------------------------------------------------------------- helpers

PRELUDE = (
    """
import errno, json, os, sys

report = {}
"""
    + ATTEMPT_SOURCE
)


def attack(code: str, **params: object) -> dict[str, object]:
    """Run ``code`` in the sandbox with ``params`` as globals; return its ``report`` dict.

    The code runs after ``PRELUDE`` (``report`` and ``attempt`` are defined) and must
    not print; the report is printed for it at the end.
    """
    assignments = "".join(f"{name} = {value!r}\n" for name, value in params.items())
    source = PRELUDE + assignments + code + "\nprint(json.dumps(report))\n"
    result = eval_in_sandbox(source, timeout_max_time_sec=30)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert isinstance(report, dict)
    return report


def unique_name() -> str:
    return f"pysandbox-attack-{uuid.uuid4().hex}"


#: eval_in_sandbox's working directory, which must hold only the code: the files of an
#: interpreter that lives there on the host are shown at the same path below
#: ``/.pysandbox`` (docs/security.rst, What is isolated), unless it could not start from there.
CODE_DIR = "/home"
MOVED = movable(sys.executable, CODE_DIR)


def shown(path: str) -> str:
    """Where eval_in_sandbox shows the host's ``path`` of this interpreter."""
    inside_code_dir = path == CODE_DIR or path.startswith(CODE_DIR + "/")
    return "/.pysandbox" + path if MOVED and inside_code_dir else path


def succeeded(report: dict[str, object]) -> dict[str, object]:
    """The attempts of a report that worked (should be none)."""
    return {key: value for key, value in report.items() if value == "done"}


@pytest.fixture
def host_sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A host process the sandbox would love to kill."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- filesystem


WRITE_EVERYWHERE = """
for directory in DIRS:
    path = os.path.join(directory, NAME)
    attempt("create " + path, lambda: open(path, "x").close())
    attempt("mkdir " + path, lambda: os.mkdir(path + ".d"))
    attempt("symlink " + path, lambda: os.symlink("/", path + ".l"))
attempt("overwrite code.py", lambda: open("/home/code.py", "w").close())
attempt("unlink code.py", lambda: os.unlink("/home/code.py"))
attempt("rename code.py", lambda: os.rename("/home/code.py", "/home/" + NAME))
attempt("mknod", lambda: os.mknod("/dev/" + NAME + ".null", 0o666 | 0o020000, os.makedev(1, 3)))
report["still readable"] = open("/home/code.py").read().startswith("\\nimport errno")
"""

#: Directories the sandbox sees at the same path as the host (bound or recreated).
WRITE_TARGETS = ["/", "/home", "/usr", "/usr/bin", "/tmp", "/dev", "/dev/shm", "/root", "/var"]


def test_writes_anywhere_fail() -> None:
    name = unique_name()
    report = attack(WRITE_EVERYWHERE, DIRS=WRITE_TARGETS, NAME=name)
    still_readable = report.pop("still readable")
    assert succeeded(report) == {}
    assert still_readable is True
    for directory in WRITE_TARGETS:
        for suffix in ("", ".d", ".l", ".null"):
            assert not os.path.lexists(os.path.join(directory, name + suffix))


WRITE_SYSCTL = """
import ctypes

CLONE_NEWNS, CLONE_NEWUSER, MNT_DETACH = 0x00020000, 0x10000000, 2
libc = ctypes.CDLL(None, use_errno=True)

def call(function, *args):
    if function(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))

def write_sysctl():
    with open(SYSCTL, "w") as sysctl:
        sysctl.write(VALUE)

def probes(how):
    attempt("write " + SYSCTL + how, write_sysctl)
    for path in DANGEROUS:
        # Opening for writing changes nothing by itself: a probe, never a write.
        attempt("open for writing " + path + how, lambda: os.close(os.open(path, os.O_WRONLY)))

probes("")
# Second route: a nested user + mount namespace, then peel off whatever covers /proc/sys.
attempt("unshare user+mount namespaces", lambda: call(libc.unshare, CLONE_NEWUSER | CLONE_NEWNS))
if report.pop("unshare user+mount namespaces") == "done":
    attempt("unmount /proc/sys", lambda: call(libc.umount2, b"/proc/sys", MNT_DETACH))
    probes(" from a nested namespace")
"""

#: Host-global sysctls whose mere write access would hand the host to the sandbox.
DANGEROUS_SYSCTLS = ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe"]
#: A host-global sysctl that is harmless to change for a moment.
HARMLESS_SYSCTL = "/proc/sys/fs/lease-break-time"


def test_proc_sys_is_read_only() -> None:
    if not os.path.exists(HARMLESS_SYSCTL):
        pytest.skip(f"{HARMLESS_SYSCTL} does not exist on this kernel")
    with open(HARMLESS_SYSCTL) as sysctl:
        original = sysctl.read()
    changed = f"{int(original) + 1}\n"
    try:
        report = attack(
            WRITE_SYSCTL, SYSCTL=HARMLESS_SYSCTL, VALUE=changed, DANGEROUS=DANGEROUS_SYSCTLS
        )
        with open(HARMLESS_SYSCTL) as sysctl:
            after = sysctl.read()
    finally:
        with open(HARMLESS_SYSCTL) as sysctl:
            if sysctl.read() != original and os.access(HARMLESS_SYSCTL, os.W_OK):
                with open(HARMLESS_SYSCTL, "w") as restore:
                    restore.write(original)
    assert after == original, (
        f"the sandbox changed the host's {HARMLESS_SYSCTL}: {original!r} -> {after!r}; {report}"
    )
    assert succeeded(report) == {}, "the sandbox can write the host's sysctls"


# --------------------------------------------------------------------------- privileges


def test_no_capabilities_inside() -> None:
    report = attack(
        """
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("Cap"):
            key, value = line.split(":")
            report[key] = int(value, 16)
"""
    )
    assert report == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}


MOUNT_ATTACK = """
import ctypes

MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
libc = ctypes.CDLL(None, use_errno=True)

def call(function, *args):
    if function(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))

def remount_usr_rw():
    call(libc.mount, None, b"/usr", None, MS_REMOUNT | MS_BIND, None)

def plant():
    with open("/usr/" + NAME, "x") as planted:
        planted.write("EVIL")

attempt("remount /usr rw", remount_usr_rw)
attempt("plant in /usr", plant)
# A nested user namespace grants every capability over a new mount namespace, but the
# sandbox's read-only mounts must stay locked read-only there too.
attempt("unshare user+mount namespaces", lambda: call(libc.unshare, CLONE_NEWUSER | CLONE_NEWNS))
if report["unshare user+mount namespaces"] == "done":
    del report["unshare user+mount namespaces"]
    attempt("remount /usr rw in a nested namespace", remount_usr_rw)
    attempt("plant in /usr from a nested namespace", plant)
"""


def test_cannot_remount_usr_read_write() -> None:
    name = unique_name()
    report = attack(MOUNT_ATTACK, NAME=name)
    assert report["remount /usr rw"] == "EPERM"
    assert succeeded(report) == {}
    assert not os.path.lexists(os.path.join("/usr", name))


PLANT_IN_PREFIX = """
import sysconfig

for directory in DIRS:
    path = os.path.join(directory, NAME)
    attempt("create " + path, lambda: open(path, "x").close())
attempt("open the interpreter for writing", lambda: open(sys.executable, "r+b").close())
attempt("chmod the interpreter", lambda: os.chmod(sys.executable, 0o777))
attempt("touch the interpreter", lambda: os.utime(sys.executable, (0, 0)))
report["prefix"] = sys.prefix
"""


def test_cannot_plant_in_the_interpreter_prefix() -> None:
    name = unique_name()
    # The sandbox binds the caller's interpreter in place (or moved, see ``shown``).
    targets = sorted(
        {
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            os.path.dirname(sys.executable),
            sysconfig.get_paths()["purelib"],
            sysconfig.get_paths()["stdlib"],
        }
    )
    executable = os.stat(sys.executable)
    report = attack(PLANT_IN_PREFIX, DIRS=[shown(target) for target in targets], NAME=name)
    assert report.pop("prefix") == shown(sys.prefix)  # it really ran this interpreter's prefix
    assert succeeded(report) == {}
    for directory in targets:
        assert not os.path.lexists(os.path.join(directory, name))
    after = os.stat(sys.executable)
    assert (after.st_mode, after.st_mtime_ns) == (executable.st_mode, executable.st_mtime_ns)


# --------------------------------------------------------------------------- the caller


READ_ENVIRONMENTS = """
report["os.environ"] = dict(os.environ)
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        with open("/proc/" + pid + "/environ", "rb") as environ:
            report["/proc/" + pid + "/environ"] = environ.read().decode("utf-8", "replace")
    except OSError as exc:
        report["/proc/" + pid + "/environ"] = "unreadable: " + str(exc)
"""


def test_caller_environment_is_invisible(monkeypatch: pytest.MonkeyPatch) -> None:
    name, secret = f"PYSANDBOX_SECRET_{uuid.uuid4().hex}", uuid.uuid4().hex
    monkeypatch.setenv(name, secret)
    assert os.environ[name] == secret
    report = attack(READ_ENVIRONMENTS)
    assert "/proc/1/environ" in report  # bwrap's own environment was read
    text = json.dumps(report)
    assert name not in text
    assert secret not in text
    # Cleared: only what bwrap (PWD) and Python's locale coercion (LC_CTYPE) add back.
    assert set(report["os.environ"]) <= {"LC_CTYPE", "PWD"}, report["os.environ"]


SEE_CALLER = """
for path in PATHS:
    report["exists " + path] = os.path.lexists(path)
for path in LISTS:
    try:
        report["list " + path] = sorted(os.listdir(path))
    except OSError as exc:
        report["list " + path] = errno.errorcode[exc.errno]
for path in ("/etc/shadow", "/root/.ssh", "/proc/1/root/etc/shadow", "/proc/self/root/etc/shadow"):
    attempt("read " + path, lambda: open(path, "rb").read())
report["cwd"] = os.getcwd()
"""

#: The repository this test file belongs to.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _executable_chain() -> list[str]:
    """``sys.executable`` and every path its symlinks lead to, as real paths."""
    chain, path = [], os.path.abspath(sys.executable)
    while True:
        chain.append(os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path)))
        if not os.path.islink(path):
            return chain
        path = os.path.join(os.path.dirname(path), os.readlink(path))


def test_caller_files_are_invisible(tmp_path: Path) -> None:
    """The repository's files, the caller's working directory and everything next to the
    interpreter's environment stay on the host.  The environment's ancestors exist inside
    only as directories that lead to what the interpreter needs: each lists exactly the
    names on the way to the prefixes and to the executable's chain of links.  ``/home``
    lists the code alone, also when the interpreter lives there (moved, see ``shown``)."""
    (tmp_path / "caller-secret.txt").write_text("secret")
    hidden = [
        str(tmp_path),
        os.path.join(REPOSITORY, "README.rst"),
        os.path.join(REPOSITORY, "setup.py"),
        os.path.join(REPOSITORY, "tests"),
        os.path.join(REPOSITORY, "src"),
        os.path.abspath(__file__),
        "/root/.ssh",
    ]
    paths = sorted({*hidden, *(shown(path) for path in hidden)})
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
    prefixes = {p for p in prefixes if not any(_within(p, d) for d in SYSTEM_DIRS)}
    needed = [*prefixes, *_executable_chain()]
    # Every directory above a prefix lists only the names on the way to what is needed.
    listings: dict[str, set[str]] = {CODE_DIR: {"code.py"}}
    for prefix in prefixes:
        parent = os.path.dirname(prefix)
        while parent != "/" and not any(_within(parent, d) for d in SYSTEM_DIRS):
            listings.setdefault(shown(parent), set()).update(
                os.path.relpath(p, parent).split("/")[0] for p in needed if _within(p, parent + "/")
            )
            parent = os.path.dirname(parent)
    if any(shown(path) != path for path in needed):
        listings["/.pysandbox"] = {CODE_DIR.strip("/"), "init"}
    # A prefix itself shows its executables and libraries, and a venv its pyvenv.cfg.
    for prefix in prefixes:
        venv = prefix == os.path.realpath(sys.prefix) != os.path.realpath(sys.base_prefix)
        listings[shown(prefix)] = {
            "bin",
            "lib",
            sys.platlibdir,
            *(["pyvenv.cfg"] if venv else []),
        }
    report = attack(SEE_CALLER, PATHS=paths, LISTS=sorted(listings))
    assert report.pop("cwd") == "/home"
    assert {key: value for key, value in report.items() if key.startswith("exists")} == {
        f"exists {path}": False for path in paths
    }
    assert {key: value for key, value in report.items() if key.startswith("list")} == {
        f"list {path}": sorted(names) for path, names in listings.items()
    }
    assert succeeded(report) == {}


def test_stdin_is_closed() -> None:
    report = attack(
        """
try:
    input()
    report["input"] = "returned"
except EOFError:
    report["input"] = "EOFError"
report["read"] = sys.stdin.read()
"""
    )
    assert report == {"input": "EOFError", "read": ""}


TTY_SCRIPT = """
import fcntl, json, os, termios
from pysandbox import eval_in_sandbox

# Give this process a controlling terminal the sandbox could type into with TIOCSTI.
master, slave = os.openpty()
os.setsid()
fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
os.close(os.open("/dev/tty", os.O_RDWR))

code = '''
import errno, fcntl, os, termios
try:
    fd = os.open("/dev/tty", os.O_RDWR)
except OSError as exc:
    print(errno.errorcode[exc.errno])
else:
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"#")
        print("injected")
    except OSError as exc:
        print("opened, TIOCSTI", errno.errorcode[exc.errno])
'''
result = eval_in_sandbox(code)
os.set_blocking(slave, False)
try:
    typed = os.read(slave, 100).decode()
except BlockingIOError:
    typed = ""
print(json.dumps({"result": result.__dict__, "typed": typed}))
"""


def test_no_controlling_terminal_inside() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", TTY_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    # No /dev/tty at all (ENOENT), or one that reaches no terminal (ENXIO).
    assert outcome["result"]["returncode"] == 0
    assert outcome["result"]["stdout"] in ("ENOENT", "ENXIO")
    assert outcome["typed"] == ""


# --------------------------------------------------------------------------- network


NETWORK_ATTACK = """
import socket

with open("/proc/net/dev") as dev:
    report["interfaces"] = sorted(line.split(":")[0].strip() for line in dev.readlines()[2:])

def tcp(host):
    with socket.create_connection((host, PORT), timeout=2):
        pass

def udp(host):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1)
        sock.connect((host, UDP_PORT))
        sock.send(b"escaped")
        sock.recv(1)  # ECONNREFUSED from an ICMP unreachable, or nothing at all

def abstract():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(ABSTRACT)

for host in HOSTS:
    attempt("tcp " + host, lambda: tcp(host))
    attempt("udp " + host, lambda: udp(host))
attempt("abstract unix socket", abstract)
"""


def host_addresses() -> list[str]:
    """127.0.0.1 and this host's primary IPv4 address, when it has one."""
    addresses = ["127.0.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent
            addresses.append(probe.getsockname()[0])
        except OSError:
            pass
    return sorted(set(addresses))


def test_no_network() -> None:
    abstract_name = "\0" + unique_name()
    with contextlib.ExitStack() as stack:
        tcp = stack.enter_context(socket.create_server(("0.0.0.0", 0)))
        udp = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        udp.bind(("0.0.0.0", 0))
        unix = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        unix.bind(abstract_name)
        unix.listen()
        for sock in (tcp, udp, unix):
            sock.settimeout(0.2)

        report = attack(
            NETWORK_ATTACK,
            HOSTS=host_addresses(),
            PORT=tcp.getsockname()[1],
            UDP_PORT=udp.getsockname()[1],
            ABSTRACT=abstract_name,
        )

        reached = []
        for sock, what in ((tcp, "tcp accept"), (unix, "unix accept")):
            with contextlib.suppress(TimeoutError, socket.timeout):
                sock.accept()[0].close()
                reached.append(what)
        with contextlib.suppress(TimeoutError, socket.timeout):
            reached.append(f"udp datagram {udp.recv(100)!r}")
    assert report.pop("interfaces") == ["lo"]
    assert succeeded(report) == {}
    assert reached == [], "the sandbox reached a host listener"


# --------------------------------------------------------------------------- processes


KILL_EVERYONE = """
import signal

import subprocess

report["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
attempt("kill host sleeper by pid", lambda: os.kill(SLEEPER, signal.SIGKILL))
attempt("kill host test process by pid", lambda: os.kill(CALLER, signal.SIGKILL))
# A victim of our own, to show that kill(-1) really fires (else it fails with ESRCH).
victim = subprocess.Popen(["/bin/sleep", "300"])
attempt("kill -1", lambda: os.kill(-1, signal.SIGKILL))
report["own victim killed"] = victim.wait() == -signal.SIGKILL
report["survived"] = True
"""


def test_kill_everything_does_not_hurt_the_host(
    host_sleeper: subprocess.Popen[bytes],
) -> None:
    report = attack(KILL_EVERYONE, SLEEPER=host_sleeper.pid, CALLER=os.getpid())
    # Only the sandbox's own processes are visible: bwrap as 1 and the code as 2.
    assert report["pids"] == [1, 2]
    assert report["kill host sleeper by pid"] == "ESRCH"
    assert report["kill host test process by pid"] == "ESRCH"
    assert report["kill -1"] == "done"  # it may signal its own namespace, nothing more
    assert report["own victim killed"] is True
    assert report["survived"] is True
    assert host_sleeper.poll() is None, "the host's sleep process was killed"
    os.kill(os.getpid(), 0)


# --------------------------------------------------------------------------- the code itself


def test_a_one_mebibyte_script_runs() -> None:
    head = "data = '"
    tail = "'\nprint(len(data))\n"
    payload = "x" * (2**20 - len(head) - len(tail))
    code = head + payload + tail
    assert len(code.encode()) == 2**20
    result = eval_in_sandbox(code, timeout_max_time_sec=30)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == str(len(payload))


def test_code_with_nul_is_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        eval_in_sandbox("print('a')\0print('b')")
