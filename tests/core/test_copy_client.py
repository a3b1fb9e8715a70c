# SPDX-License-Identifier: MIT
"""The copy client (``pysandbox/_copy``, ``src/copy_client.c``) against a hostile
template.  The test holds the template's end of the control socket, takes the client's
request and its link, and answers on the link, where the client's ``hear`` reads each
message, with what a compromised template could send: a hang-up at each step of the
conversation, an empty or unknown message, an oversized hello, an endless reason or one
cut by a NUL, more fds than one message may carry, "built" without its pidfd.  Each time
the client must exit 1 within ``PROMPTLY`` seconds, say why in one bounded line on
stderr and nothing on stdout, keep no fd of a message but the pidfd it keeps on purpose,
and leave no process behind.  The client runs on the host: no bwrap is needed."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from support.processes import children_of, session_of

from pysandbox import SandboxError
from pysandbox._host import programs

pytestmark = pytest.mark.no_bwrap

#: How long the client may take to give up (generous for a busy machine).
PROMPTLY = 10.0
#: The longest stderr the client may write: its messages are read into 512 bytes.
MOST_STDERR = 600
#: A message longer than the client reads (512 bytes) and than a page.
OVERSIZED = 100_000
#: More fds than one message carries (SBX_FDPASS_MAX, 64), under the kernel's 253.
TOO_MANY_FDS = 200
#: Why the client gives up when the link closes first: the whole line.
ENDED = "pysandbox-copy: the copy ended before it reported\n"


@dataclass
class Conversation:
    """A copy client started on a control socket whose template end is the test's."""

    client: subprocess.Popen[bytes]
    #: The template's end of the control socket.
    control: socket.socket
    #: The read end of the client's --status-fd.
    status: int
    #: A pipe whose read end the template sends as each of a message's fds.
    bait: tuple[int, int]
    #: The client's link, taken from its request (``take_request``).
    link: socket.socket | None = None


@contextlib.contextmanager
def talking(fd_3_forwarded: bool) -> Iterator[Conversation]:
    """The copy client with the least command line: its control fd, its status fd, the
    fds it forwards (stdin, and with ``fd_3_forwarded`` a ``/dev/null`` at fd 3, as the
    launch forwards bwrap's seccomp fd there) and a few words.  Skips when the client is
    not built."""
    try:
        client_path = programs.find_copy_client()
    except SandboxError as exc:
        pytest.skip(str(exc))
    template_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    status_read, status_write = os.pipe()
    argv = [client_path, "--control-fd", str(host_end.fileno()), "--status-fd"]
    argv += [str(status_write), "--forward", "0,3" if fd_3_forwarded else "0"]
    argv += ["--", "--keep", "0", "--workdir", "/tmp", "--", "/init"]
    if fd_3_forwarded:
        argv = ["/bin/sh", "-c", 'exec "$@" 3</dev/null', "sh", *argv]
    client = subprocess.Popen(
        argv,
        pass_fds=(host_end.fileno(), status_write),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    host_end.close()
    os.close(status_write)
    talk = Conversation(client, template_end, status_read, os.pipe())
    try:
        yield talk
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(client.pid, signal.SIGKILL)
        if client.returncode is None:
            client.communicate()
        for fd in (status_read, *talk.bait):
            os.close(fd)
        template_end.close()
        if talk.link is not None:
            talk.link.close()


def take_request(talk: Conversation) -> socket.socket:
    """The client's request, as the template receives it: its link is kept (and
    returned), the fds it forwards are closed."""
    talk.control.settimeout(PROMPTLY)
    words, fds, _, _ = socket.recv_fds(talk.control, 1 << 17, 64)
    for fd in fds[1:]:
        os.close(fd)
    assert words.startswith(b"--fds\0") and len(fds) >= 2, (words, fds)
    talk.link = socket.socket(fileno=fds[0])
    talk.link.settimeout(PROMPTLY)
    return talk.link


def send(link: socket.socket, data: bytes, fd: int = -1, copies: int = 1) -> None:
    """One message of ``data`` on the link, with ``copies`` copies of ``fd`` (none when
    ``fd`` is -1)."""
    if fd < 0:
        link.sendmsg([data])
    else:
        socket.send_fds(link, [data], [fd] * copies)


def say_hello(talk: Conversation, data: bytes = b"h", fds: int = 0) -> socket.socket:
    """Take the request, send the hello ``data`` (with ``fds`` copies of the bait) and
    wait for the client's acknowledgement."""
    link = take_request(talk)
    send(link, data, talk.bait[0] if fds else -1, fds)
    assert link.recv(16) == b"k"
    return link


def read_status(talk: Conversation) -> bytes:
    """What the client wrote on its status fd so far, waiting ``PROMPTLY`` for a line."""
    ready, _, _ = select.select([talk.status], [], [], PROMPTLY)
    assert ready, "the client wrote no status"
    return os.read(talk.status, 4096)


def fds_to_bait(talk: Conversation) -> list[int]:
    """The client's fds open to the bait pipe."""
    bait = os.fstat(talk.bait[0])
    found = []
    for entry in os.listdir(f"/proc/{talk.client.pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.stat(f"/proc/{talk.client.pid}/fd/{entry}")
            if (target.st_dev, target.st_ino) == (bait.st_dev, bait.st_ino):
                found.append(int(entry))
    return sorted(found)


def hang_up_unread(talk: Conversation) -> str:
    """The template never reads the request: the client cannot send it, or its link
    goes with the unread message."""
    talk.control.close()
    return "cannot reach the template|" + ENDED


def hang_up_after_the_request(talk: Conversation) -> str:
    """The template takes the request and closes the link before any message."""
    take_request(talk).close()
    return ENDED


def empty_message(talk: Conversation) -> str:
    """An empty message, which the client cannot tell from a hang-up."""
    send(take_request(talk), b"")
    return ENDED


def unknown_message(talk: Conversation) -> str:
    """A first message that is not a hello."""
    send(take_request(talk), b"z")
    return "the copy did not say hello"


def oversized_hello_then_hang_up(talk: Conversation) -> str:
    """The client reads the hello's first 511 bytes and takes it (only "h" counts)."""
    say_hello(talk, b"h" + b"A" * OVERSIZED).close()
    return ENDED


def endless_reason(talk: Conversation) -> str:
    """An error whose reason is longer than the client reads."""
    send(take_request(talk), b"E" + b"x" * OVERSIZED)
    return "the template could not make the copy: xxx"


def reason_cut_by_a_nul(talk: Conversation) -> str:
    """An error whose reason holds a NUL: the client writes what comes before it."""
    send(take_request(talk), b"Ebefore\0after")
    return "the template could not make the copy: before\n"


def endless_reason_with_too_many_fds(talk: Conversation) -> str:
    """An endless error reason carrying more fds than a message may."""
    send(take_request(talk), b"E" + b"y" * OVERSIZED, talk.bait[0], TOO_MANY_FDS)
    return "the template could not make the copy: yyy"


def too_many_fds_then_hang_up(talk: Conversation) -> str:
    """A hello and a "built" of ``TOO_MANY_FDS`` fds each: the client keeps none of
    the hello's and only the first of the other's, as its init's pidfd (fd 3)."""
    link = say_hello(talk, fds=TOO_MANY_FDS)
    assert fds_to_bait(talk) == []
    send(link, b"b", talk.bait[0], TOO_MANY_FDS)
    assert read_status(talk).startswith(b'{ "child-pid": ')
    assert fds_to_bait(talk) == [3]
    link.close()
    return ENDED


def built_without_its_pidfd(talk: Conversation) -> str:
    """A "built" message without the pidfd of the copy's init."""
    send(say_hello(talk), b"b")
    return "the copy did not say it was built"


def hang_up_once_built(talk: Conversation) -> str:
    """The link closes once the copy is built, before it says how it ended: no
    exit-code document is written."""
    link = say_hello(talk)
    send(link, b"b", talk.bait[0])
    assert b"exit-code" not in read_status(talk)
    link.close()
    return ENDED


def unknown_once_built(talk: Conversation) -> str:
    """An oversized message that is not the exit code, once the copy is built."""
    link = say_hello(talk)
    send(link, b"b", talk.bait[0])
    read_status(talk)
    send(link, b"q" * OVERSIZED)
    return "the copy did not say how it ended"


#: Each hostile template: it plays its part and returns the reason the client must give
#: (alternatives split by "|").
TEMPLATES: list[Callable[[Conversation], str]] = [
    hang_up_unread,
    hang_up_after_the_request,
    empty_message,
    unknown_message,
    oversized_hello_then_hang_up,
    endless_reason,
    reason_cut_by_a_nul,
    endless_reason_with_too_many_fds,
    too_many_fds_then_hang_up,
    built_without_its_pidfd,
    hang_up_once_built,
    unknown_once_built,
]


@pytest.mark.parametrize("fd_3_forwarded", [True, False], ids=["fd-3-forwarded", "fd-3-free"])
def test_a_template_that_makes_the_copy_is_followed_to_its_exit_code(
    fd_3_forwarded: bool,
) -> None:
    """The conversation of a copy that is made and exits 7: the client keeps the pidfd
    at fd 3 and reports as bwrap does, whether or not fd 3 was taken when it started
    (free, its link must not land where the pidfd goes)."""
    with talking(fd_3_forwarded) as talk:
        link = say_hello(talk)
        send(link, b"b", talk.bait[0])
        status = read_status(talk)
        assert status == f'{{ "child-pid": {os.getpid()} }}\n'.encode(), status
        assert fds_to_bait(talk) == [3]
        send(link, b"x7")
        stdout, stderr = talk.client.communicate(timeout=PROMPTLY)
        assert talk.client.returncode == 7, stderr
        assert (stdout, stderr) == (b"", b"")
        assert os.read(talk.status, 4096) == b'{ "exit-code": 7 }\n'


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.__name__ for t in TEMPLATES])
def test_a_hostile_template_makes_the_client_give_up(
    template: Callable[[Conversation], str],
) -> None:
    with talking(fd_3_forwarded=True) as talk:
        reasons = template(talk).split("|")
        client = talk.client
        assert children_of(client.pid) == []
        stdout, stderr = client.communicate(timeout=PROMPTLY)
    assert client.returncode == 1, stderr
    assert stdout == b"", stdout
    line = stderr.decode(errors="replace")
    assert len(stderr) <= MOST_STDERR and line.count("\n") == 1, line
    assert line.startswith("pysandbox-copy: ") and line.endswith("\n"), line
    assert any(reason in line for reason in reasons), line
    assert session_of(client.pid) == []
