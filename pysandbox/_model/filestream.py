# SPDX-License-Identifier: MIT
"""The file record stream that carries files into the sandbox and back out.

One record per file, then one end record::

    b"F" + u8(mode) + u32le(len(name)) + name + u64le(len(data)) + data
    b"E" + u8(flags)

The name is relative and UTF-8.  The mode byte has one bit, ``MODE_EXECUTABLE`` (1): in,
the init creates the file 0755 rather than 0644 (less the umask); out, the file's owner
may execute it.  No other bit of a file's mode travels, so no setuid, setgid or sticky
bit can be asked for or reported; the init refuses a stream with other bits set.  The end
record's flag ``FLAG_LEFT_OUT`` (1) says some files were left out.

``encode_files`` checks the caller's files and raises; ``decode_files`` reads what the
in-sandbox init wrote, which the sandboxed program may have disturbed (it can kill the
init mid-stream), so it never raises on any input, keeps only what is sound, and keeps
no more files than asked: the init stops at ``Limits.files_out_count`` files, and the
host holds it to that whatever the stream says.  ``stream_cap`` is the most bytes a
stream of files within both caps can take, the cap of the pipe that carries it.
``check_fits_tmpfs`` tells, before anything runs, whether the input files fit on the
working directory's tmpfs, in the units the tmpfs counts.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping

from .file import File
from .limits import DISK_BYTES_PER_INODE

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Union

    #: What ``files=`` maps a name to: the content, or a ``File`` that also gives its mode.
    FileValue = Union[bytes, bytearray, memoryview, File]

__all__ = [
    "FLAG_LEFT_OUT",
    "MAX_COMPONENT_BYTES",
    "MAX_NAME_BYTES",
    "MODE_EXECUTABLE",
    "RECORD_ROOM",
    "check_fits_tmpfs",
    "decode_files",
    "encode_files",
    "name_problem",
    "stream_cap",
    "tmpfs_footprint",
    "tmpfs_inodes",
]

#: The end record's flag bit: some files were left out (over the cap, or unreadable).
FLAG_LEFT_OUT = 1
#: A file record's mode bit: the file is executable (created 0755; owner-execute set).
MODE_EXECUTABLE = 1
#: Longest name, in bytes of UTF-8 (Linux's ``PATH_MAX``).
MAX_NAME_BYTES = 4096
#: Longest component of a name, in bytes of UTF-8 (Linux's ``NAME_MAX``).
MAX_COMPONENT_BYTES = 255

#: Bytes of a file stream's room per file for its record's header (14 bytes) and name:
#: names of 242 bytes on average fit.  A stream of longer names is cut at
#: ``stream_cap`` (the last files are lost, ``files_truncated`` says so).
RECORD_ROOM = 256

_FILE_TAG = b"F"
_END_TAG = b"E"
_NAME_LEN = struct.Struct("<I")
_DATA_LEN = struct.Struct("<Q")


def name_problem(name: str) -> str | None:
    """What makes ``name`` unfit as a file's path in the working directory, or None.

    A fit name is a non-empty relative path of non-empty components, none of them
    ``.`` or ``..``, without NUL, encodable as UTF-8 in at most ``MAX_NAME_BYTES`` bytes
    with no component over ``MAX_COMPONENT_BYTES`` bytes.  Backslashes, newlines and
    other characters are ordinary file name characters on Linux and are allowed.
    """
    if not name:
        return "is empty"
    if "\0" in name:
        return "contains NUL"
    if name.startswith("/"):
        return "is absolute"
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not encodable as UTF-8"
    if len(encoded) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    for component in encoded.split(b"/"):
        if component in (b"", b".", b".."):
            return "has an empty, '.' or '..' component"
        if len(component) > MAX_COMPONENT_BYTES:
            return f"has a component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def _checked_name(name: object) -> bytes:
    """``name`` as UTF-8, or a ``TypeError``/``ValueError`` naming ``files``."""
    if not isinstance(name, str):
        raise TypeError(f"files: names must be str, not {type(name).__name__}")
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(f"files: the name {name!r} {problem}")
    return name.encode("utf-8")


def _checked_data(name: str, data: object) -> tuple[bytes, int]:
    """``data`` as bytes and its mode byte, or a ``TypeError`` naming ``files``."""
    if isinstance(data, File):
        return data.content, MODE_EXECUTABLE if data.executable else 0
    if isinstance(data, bytes):
        return data, 0
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data), 0
    raise TypeError(
        f"files: the content of {name!r} must be bytes, bytearray, memoryview or File, "
        f"not {type(data).__name__}"
    )


def _size(data: FileValue) -> int:
    """Bytes of content in ``data``, a value of ``files`` checked by ``encode_files``."""
    return len(data.content) if isinstance(data, File) else memoryview(data).nbytes


def _check_no_file_is_a_directory(names: list[str]) -> None:
    """Refuse ``a`` next to ``a/b``: ``a`` cannot be both a file and a directory.

    Sorted with ``/`` as NUL (which no checked name contains), a name that is the
    directory of others comes right before the first of them, so comparing neighbours
    is enough: O(n log n) comparisons and no more memory than the names.
    """
    keys = sorted(name.replace("/", "\0") for name in names)
    for shorter, longer in zip(keys, keys[1:]):
        if longer.startswith(shorter + "\0"):
            file, other = shorter.replace("\0", "/"), longer.replace("\0", "/")
            raise ValueError(f"files: {file!r} is a file and cannot be the directory of {other!r}")


def encode_files(files: Mapping[str, FileValue]) -> bytes:
    """The record stream of ``files`` (name to content or ``File``), end record included.

    Names must be fit (see ``name_problem``); no name may be the directory of another.
    Contents are bytes, bytearray or memoryview, or a ``File`` (executable or not).
    Every problem raises ``TypeError`` or ``ValueError`` naming ``files``, before
    anything is written.  No name is reserved here; the caller refuses the names it
    keeps for itself.
    """
    if not isinstance(files, Mapping):
        raise TypeError(
            f"files must be a mapping of str to bytes or File, not {type(files).__name__}"
        )
    parts: list[bytes] = []
    names: list[str] = []
    for name, data in files.items():
        encoded = _checked_name(name)
        content, mode = _checked_data(name, data)
        names.append(name)
        parts += [_FILE_TAG, bytes([mode]), _NAME_LEN.pack(len(encoded)), encoded]
        parts += [_DATA_LEN.pack(len(content)), content]
    _check_no_file_is_a_directory(names)
    parts += [_END_TAG, bytes([0])]
    return b"".join(parts)


def _decoded_name(raw: memoryview) -> str | None:
    """The name in ``raw`` if it is valid UTF-8 and fit, else None."""
    if len(raw) > MAX_NAME_BYTES:
        return None
    try:
        name = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return name if name_problem(name) is None else None


def stream_cap(files_out: int, files_out_count: int) -> int:
    """Bytes of a stream of at most ``files_out_count`` files of ``files_out`` bytes in
    all, each name in ``RECORD_ROOM``, and its end record."""
    return files_out + files_out_count * RECORD_ROOM + 2


def decode_files(stream: bytes, max_files: int) -> tuple[dict[str, bytes], frozenset[str], bool]:
    """The files in a record stream, at most ``max_files`` (>= 1) of them, the names of
    those that are executable, and whether any were left out or lost.

    The last value is true when the end record says files were left out, when a record
    follows the ``max_files``-th (it and the rest are dropped), and also when the stream
    is not sound: it stops early or mid-record, a record has an unknown tag, unknown
    mode bits or sizes past the end, the end record has unknown flag bits or bytes
    follow it, or a name is not valid UTF-8 or not fit (see ``name_problem``; such a
    file is skipped).  Every complete record before the first fault is kept.  When a
    name comes twice, the last record wins, mode included (each record counts towards
    ``max_files``).  The executable names are always names of the files returned.
    Linear in the stream's length, and never more files than ``max_files`` however short
    their records; never raises for bytes, bytearray or any other C-contiguous buffer.
    """
    view = memoryview(stream).cast("B")
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    lost = False
    records = 0
    position = 0
    end = len(view)
    while position < end:
        tag = view[position : position + 1]
        if tag == _END_TAG:
            flags = view[position + 1 : position + 2]
            if len(flags) < 1 or position + 2 != end or flags[0] & ~FLAG_LEFT_OUT:
                return files, frozenset(executables), True
            return files, frozenset(executables), lost or bool(flags[0] & FLAG_LEFT_OUT)
        if tag != _FILE_TAG or end - position < 2 + _NAME_LEN.size or records >= max_files:
            break
        records += 1
        mode = view[position + 1]
        if mode & ~MODE_EXECUTABLE:
            break
        (name_len,) = _NAME_LEN.unpack_from(view, position + 2)
        name_at = position + 2 + _NAME_LEN.size
        if end - name_at < name_len + _DATA_LEN.size:
            break
        (data_len,) = _DATA_LEN.unpack_from(view, name_at + name_len)
        data_at = name_at + name_len + _DATA_LEN.size
        if end - data_at < data_len:
            break
        name = _decoded_name(view[name_at : name_at + name_len])
        if name is None:
            lost = True
        else:
            files[name] = bytes(view[data_at : data_at + data_len])
            if mode & MODE_EXECUTABLE:
                executables.add(name)
            else:
                executables.discard(name)
        position = data_at + data_len
    return files, frozenset(executables), True


def tmpfs_footprint(files: Mapping[str, FileValue], page_size: int) -> int:
    """Bytes of a tmpfs's ``size=`` that ``files`` (name to content or ``File``, checked
    by ``encode_files``) take: each file's length rounded up to whole pages.

    A tmpfs charges its size in pages (a one-byte file takes a page) and nothing for a
    directory or an empty file: those take an inode and kernel memory, which the
    sandbox's memory cgroup counts, not ``size=``.  This assumes the tmpfs is mounted
    without huge pages, as bubblewrap mounts it (unless the host boots with
    ``transparent_hugepage_tmpfs=``).
    """
    return sum(-(-_size(data) // page_size) * page_size for data in files.values())


def tmpfs_inodes(files: Mapping[str, FileValue]) -> int:
    """Inodes ``files`` take on a fresh tmpfs, counting its root and one mount point of
    ``run_python``'s code: a file each, and a directory each however many files it
    holds."""
    directories: set[str] = set()
    for name in files:
        parent = name.rpartition("/")[0]
        while parent and parent not in directories:  # its ancestors are in already
            directories.add(parent)
            parent = parent.rpartition("/")[0]
    return len(files) + len(directories) + 2


def _default_tmpfs_inodes() -> int:
    """A tmpfs mounted without ``nr_inodes`` (as bubblewrap's ``--size`` mounts it) holds
    this many inodes: half the pages of the host's RAM (``shmem_default_max_inodes``)."""
    return os.sysconf("SC_PHYS_PAGES") // 2


def check_fits_tmpfs(files: Mapping[str, FileValue], disk: int, disk_inodes: int) -> None:
    """Raise ``ValueError`` unless ``files`` fit on the working directory's tmpfs of
    ``disk`` bytes, in the units it counts (see ``tmpfs_footprint`` and
    ``tmpfs_inodes``), and within the ``disk_inodes`` the C core lets it hold
    (``Limits.disk_inodes``); the message gives the real figure.  ``files`` were
    checked by ``encode_files``."""
    page_size = os.sysconf("SC_PAGE_SIZE")
    footprint = tmpfs_footprint(files, page_size)
    if footprint > disk:
        content = sum(_size(data) for data in files.values())
        raise ValueError(
            f"files: {len(files)} files of {content} bytes take {footprint} bytes of the "
            f"working directory's tmpfs, which counts each file in whole pages of "
            f"{page_size} bytes: more than Limits.disk ({disk}); raise Limits.disk to at "
            f"least {footprint}, or pack the small files into one"
        )
    inodes = tmpfs_inodes(files)
    if inodes > disk_inodes:
        raise ValueError(
            f"files: {len(files)} files and their directories take {inodes} inodes of the "
            f"working directory's tmpfs, more than Limits.disk ({disk}) allows at "
            f"{DISK_BYTES_PER_INODE} bytes each ({disk_inodes}); raise Limits.disk to at "
            f"least {inodes * DISK_BYTES_PER_INODE}, or pack them into fewer files"
        )
    most = _default_tmpfs_inodes()
    if inodes > most:
        raise ValueError(
            f"files: {len(files)} files and their directories take {inodes} inodes of the "
            f"working directory's tmpfs, which holds {most} on this host (half its pages "
            f"of RAM); pack them into fewer files"
        )
