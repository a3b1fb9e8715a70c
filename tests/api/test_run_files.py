# SPDX-License-Identifier: MIT
"""Files in and out of ``pysandbox.run`` / ``run_python``, and what ``readable`` shows.

The sandboxed code really plants what an attacker would (symlinks to host files, a FIFO, a
socket, hard links, a symlink loop, a file over the cap); the host checks what comes back
in ``Result.files`` and that the call finished.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from support.describe import describe
from support.timing import PROMPTLY

import pysandbox._model.filestream
from pysandbox import Limits, Status, run, run_python
from pysandbox._model.filestream import check_fits_tmpfs, tmpfs_footprint, tmpfs_inodes

MiB = 2**20


@pytest.fixture
def host_secret(tmp_path: Path) -> Path:
    """A host file with unique content, in a directory the sandbox may read."""
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o755)
    secret = directory / "secret.txt"
    secret.write_bytes(f"host-secret-{uuid.uuid4().hex}\n".encode())
    secret.chmod(0o644)
    return secret


# --------------------------------------------------------------------------- in and out


def test_files_in_and_out_with_run_python() -> None:
    data = bytes(range(256)) * 4
    code = (
        "import os\n"
        "print(os.getcwd())\n"
        "data = open('in.txt', 'rb').read()\n"
        "nested = open('data/deep/in2.txt', 'rb').read()\n"
        "open('out.txt', 'wb').write(data[::-1])\n"
        "os.makedirs('sub')\n"
        "open('sub/x.txt', 'wb').write(nested + b'!')\n"
    )
    result = run_python(code, files={"in.txt": data, "data/deep/in2.txt": b"nested"})
    assert result.status is Status.OK, describe(result)
    assert result.stdout == b"/sandbox\n"
    assert result.files["out.txt"] == data[::-1]
    assert result.files["sub/x.txt"] == b"nested!"
    assert "main.py" not in result.files
    assert not result.files_truncated


def test_files_of_run_are_every_regular_file_left() -> None:
    data = b"line one\nline two\n"
    script = "cat in.txt > copy.txt && mkdir -p a/b && printf deep > a/b/c.txt"
    result = run(["/bin/sh", "-c", script], files={"in.txt": data})
    assert result.status is Status.OK, describe(result)
    assert dict(result.files) == {"in.txt": data, "copy.txt": data, "a/b/c.txt": b"deep"}
    assert not result.files_truncated


def test_input_files_are_writable_by_the_program() -> None:
    code = "open('in.txt', 'ab').write(b' more')\n"
    result = run_python(code, files={"in.txt": b"some"})
    assert result.status is Status.OK, describe(result)
    assert result.files["in.txt"] == b"some more"


def test_main_py_is_not_returned_even_when_rewritten() -> None:
    code = "import os\nos.chmod('main.py', 0o644)\nopen('main.py', 'w').write('x')\n"
    result = run_python(code)
    assert "main.py" not in result.files, describe(result)


# --------------------------------------------------------------------------- what is not returned

PLANT = """
import errno, json, os, stat

def attempt(action):
    try:
        action()
        return "done"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

report = {}
report["passwd_link"] = attempt(lambda: os.symlink("/etc/passwd", "passwd_link"))
report["secret_link"] = attempt(lambda: os.symlink(SECRET, "secret_link"))
report["dir_link"] = attempt(lambda: os.symlink(os.path.dirname(SECRET), "dir_link"))
report["root_link"] = attempt(lambda: os.symlink("/", "root_link"))
report["loop"] = attempt(lambda: os.symlink(".", "loop"))
os.mkdir("d")
report["up"] = attempt(lambda: os.symlink("..", "d/up"))
report["fifo"] = attempt(lambda: os.mkfifo("fifo"))
report["sub_fifo"] = attempt(lambda: os.mkfifo("d/fifo"))
# No unix socket can be made (the syscall filter), but a socket's node can.
report["socket"] = attempt(lambda: os.mknod("sock", stat.S_IFSOCK | 0o600))
report["hard_passwd"] = attempt(lambda: os.link("/etc/passwd", "hard_passwd"))
report["hard_secret"] = attempt(lambda: os.link(SECRET, "hard_secret"))
report["secret_readable"] = open(SECRET).read() == open("secret_link").read()
open("ok.txt", "w").write("ok")
print(json.dumps(report))
"""


def test_symlinks_fifos_sockets_and_hardlinks_are_not_returned(host_secret: Path) -> None:
    code = f"SECRET = {str(host_secret)!r}\n" + PLANT
    start = time.monotonic()
    result = run_python(
        code, readable=[str(host_secret.parent)], limits=Limits(wall_time=20, cpu_time=5)
    )
    elapsed = time.monotonic() - start
    assert result.status is Status.OK, describe(result)
    assert elapsed < PROMPTLY, "the call hung on something the program planted"
    report = json.loads(result.stdout)
    # Everything was planted, and the secret really was readable through the link: a
    # walker that followed it would have returned it.
    planted = ("passwd_link", "secret_link", "dir_link", "root_link", "loop", "up")
    assert all(report[key] == "done" for key in (*planted, "fifo", "sub_fifo", "socket"))
    assert report["secret_readable"] is True
    # A hard link across mounts cannot be made; had it been, it would be a regular file.
    assert report["hard_passwd"] != "done" and report["hard_secret"] != "done", report
    assert dict(result.files) == {"ok.txt": b"ok"}, describe(result)
    secret = host_secret.read_bytes()
    passwd = Path("/etc/passwd").read_bytes()
    for name, data in result.files.items():
        assert secret not in data and passwd not in data, name


def test_unreadable_and_unnamable_files_are_left_out_and_flagged() -> None:
    code = (
        "import os\n"
        "open('locked', 'w').write('locked')\n"
        "os.chmod('locked', 0)\n"
        "open(b'\\xff\\xfe.bin', 'wb').write(b'bad name')\n"
        "open('ok.txt', 'w').write('ok')\n"
    )
    result = run_python(code, limits=Limits(wall_time=20))
    assert result.status is Status.OK, describe(result)
    assert result.files["ok.txt"] == b"ok"
    assert "locked" not in result.files
    assert result.files_truncated, describe(result)


def test_oversized_file_sets_files_truncated() -> None:
    big = bytes(range(256)) * (8 * 1024)  # 2 MiB
    code = (
        f"open('big.bin', 'wb').write(bytes(range(256)) * {8 * 1024})\n"
        "open('small.txt', 'wb').write(b'small')\n"
    )
    limits = Limits(files_out=MiB, wall_time=20)
    start = time.monotonic()
    result = run_python(code, limits=limits)
    assert time.monotonic() - start < PROMPTLY
    assert result.status is Status.OK, describe(result)
    assert result.files_truncated, describe(result)
    assert sum(len(data) for data in result.files.values()) <= MiB
    # What is returned is whole: a file is either there with its content or left out.
    expected = {"big.bin": big, "small.txt": b"small"}
    for name, data in result.files.items():
        assert data == expected[name], name


def test_files_exactly_at_files_out_are_not_truncated() -> None:
    code = "open('a.bin', 'wb').write(b'a' * 600)\nopen('b.bin', 'wb').write(b'b' * 400)\n"
    result = run_python(code, limits=Limits(files_out=1000))
    assert result.status is Status.OK, describe(result)
    assert dict(result.files) == {"a.bin": b"a" * 600, "b.bin": b"b" * 400}
    assert not result.files_truncated


# --------------------------------------------------------------------------- limits on writing


def test_disk_limit_is_the_size_of_the_working_dir() -> None:
    code = (
        "import errno\n"
        "try:\n"
        "    with open('fill.bin', 'wb') as f:\n"
        "        for _ in range(8):\n"
        "            f.write(b'x' * 2**20)\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    result = run_python(code, limits=Limits(disk=4 * MiB, file_size=64 * MiB))
    assert result.status is Status.OK, describe(result)
    assert result.stdout == b"ENOSPC\n"


def test_file_size_limit() -> None:
    code = (
        "import errno\n"
        "try:\n"
        "    with open('big.bin', 'wb') as f:\n"
        "        f.write(b'x' * (2 * 2**20))\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    result = run_python(code, limits=Limits(file_size=MiB))
    assert result.status is Status.OK, describe(result)
    assert result.stdout == b"EFBIG\n"


# --------------------------------------------------------------------------- readable


def test_readable_is_read_only_and_at_the_same_path(host_secret: Path) -> None:
    code = (
        "import errno, sys\n"
        "print(open(sys.argv[1]).read(), end='')\n"
        "try:\n"
        "    open(sys.argv[1], 'w').write('overwritten')\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
        "try:\n"
        "    open(sys.argv[1] + '.new', 'w').write('new')\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    before = host_secret.read_bytes()
    result = run_python(code, args=[str(host_secret)], readable=[str(host_secret.parent)])
    assert result.status is Status.OK, describe(result)
    lines = result.stdout.splitlines()
    assert lines[0] == before.rstrip(b"\n")
    assert lines[1:] == [b"EROFS", b"EROFS"], describe(result)
    assert host_secret.read_bytes() == before
    assert sorted(p.name for p in host_secret.parent.iterdir()) == ["secret.txt"]


def test_readable_single_file(host_secret: Path) -> None:
    result = run(["cat", str(host_secret)], readable=[str(host_secret)])
    assert result.status is Status.OK, describe(result)
    assert result.stdout == host_secret.read_bytes()


def test_host_paths_are_invisible_without_readable(host_secret: Path) -> None:
    code = "import os, sys\nprint(os.path.exists(sys.argv[1]))\n"
    result = run_python(code, args=[str(host_secret)])
    assert result.status is Status.OK, describe(result)
    assert result.stdout == b"False\n"


def test_input_files_larger_than_the_disk_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match=r"files: .*Limits\.disk"):
        run(["true"], files={"big": b"x" * (2 * 2**20)}, limits=Limits(disk=2**20))


# --------------------------------------------------------------------------- tmpfs units

PAGE = os.sysconf("SC_PAGE_SIZE")


def test_tmpfs_footprint_counts_whole_pages_per_file() -> None:
    assert tmpfs_footprint({}, 4096) == 0
    assert tmpfs_footprint({"empty": b"", "dir/empty": b""}, 4096) == 0
    assert tmpfs_footprint({"a": b"x", "b": b"x" * 4096, "c/d": b"x" * 4097}, 4096) == 4 * 4096
    assert tmpfs_footprint({"a": bytearray(3), "b": memoryview(b"xy")}, 65536) == 2 * 65536


def test_tmpfs_inodes_count_files_directories_the_root_and_the_code() -> None:
    assert tmpfs_inodes({}) == 2
    assert tmpfs_inodes({"a": b""}) == 3
    files = {"a/b/c": b"", "a/b/d": b"", "a/e": b"", "f/g": b""}
    assert tmpfs_inodes(files) == 4 + 3 + 2  # the directories a, a/b and f


def test_the_sandbox_tmpfs_counts_in_those_units() -> None:
    """What the sandbox's own ``/sandbox`` reports: pages of the host's size, the inodes
    ``tmpfs_inodes`` counts in use, and the inode total the check assumes."""
    files = {"a/b/c": b"x", "a/d": b"", "e": b"y" * (PAGE + 1)}
    code = (
        "import json, os\n"
        "s = os.statvfs('/sandbox')\n"
        "print(json.dumps([s.f_bsize, s.f_blocks - s.f_bfree, s.f_files, s.f_files - s.f_ffree]))\n"
    )
    result = run_python(code, files=files)
    assert result.status is Status.OK, describe(result)
    block, used, inodes, inodes_used = json.loads(result.stdout)
    assert block == PAGE
    assert used * block == tmpfs_footprint(files, PAGE) == 3 * PAGE
    assert inodes_used == tmpfs_inodes(files)
    assert inodes == os.sysconf("SC_PHYS_PAGES") // 2


def test_small_files_that_fit_in_bytes_but_not_in_pages_are_refused_up_front() -> None:
    """17,000 one-byte files are 17,000 bytes, far below the default 64 MiB, but the tmpfs
    gives each a page: the init ran out of space while unpacking them (exit 127)."""
    files = {f"f{i}": b"x" for i in range(17_000)}
    footprint = 17_000 * PAGE
    assert footprint > Limits().disk
    with pytest.raises(ValueError, match=rf"files: 17000 files of 17000 bytes take {footprint} "):
        run_python("pass", files=files)


def test_files_that_exactly_fill_the_tmpfs_are_all_there() -> None:
    """Half the pages are one-byte files, half go to files one byte past a page: the
    footprint is exactly ``Limits.disk``, and one more byte is refused."""
    disk = 256 * PAGE
    files = {f"small/{i}": bytes([i % 256]) for i in range(128)}
    files.update({f"big/{i}": bytes([i]) * (PAGE + 1) for i in range(64)})
    assert tmpfs_footprint(files, PAGE) == disk
    code = (
        "import os\n"
        "names = [f'{d}/{n}' for d in ('small', 'big') for n in os.listdir(d)]\n"
        "print(len(names), sum(os.path.getsize(n) for n in names))\n"
    )
    limits = Limits(disk=disk)
    result = run_python(code, files=files, limits=limits)
    assert result.status is Status.OK, describe(result)
    assert result.stdout == f"192 {128 + 64 * (PAGE + 1)}\n".encode()
    assert result.files == files
    with pytest.raises(ValueError, match=rf"take {disk + PAGE} bytes .*Limits\.disk \({disk}\)"):
        run_python(code, files={**files, "one-more": b"x"}, limits=limits)


def test_more_files_than_the_tmpfs_has_inodes_are_refused_up_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host with little RAM has a few hundred thousand tmpfs inodes; faked small here,
    since making millions of files would take minutes."""
    monkeypatch.setattr(pysandbox._model.filestream, "_default_tmpfs_inodes", lambda: 5)
    check_fits_tmpfs({"a/b": b"", "c": b""}, 1, 100)  # 2 files, 1 directory, root, code
    with pytest.raises(ValueError, match=r"files: 3 files and their directories take 6 inodes"):
        check_fits_tmpfs({"a/b": b"", "c": b"", "d": b""}, 1, 100)


def test_more_files_than_the_disk_allows_inodes_for_are_refused_up_front() -> None:
    """Each file, directory and hard link counts ``DISK_BYTES_PER_INODE`` against
    ``Limits.disk`` (past it the C core would kill the sandbox at once)."""
    limits = Limits(disk=2**20)
    files = {f"d/{i}": b"" for i in range(limits.disk_inodes() - 3)}  # d, root, code
    run_python("", files=files, limits=limits)
    with pytest.raises(ValueError, match=r"more than Limits\.disk \(1048576\) allows"):
        run_python("", files={**files, "one-more": b""}, limits=limits)
