# SPDX-License-Identifier: MIT
"""The file record stream: strict encoding of the caller's files, hostile-proof decoding."""

from __future__ import annotations

import random
import struct
import time
import types

import pytest

from pysandbox import File
from pysandbox._model.filestream import (
    MAX_COMPONENT_BYTES,
    MAX_NAME_BYTES,
    MODE_EXECUTABLE,
    decode_files,
    encode_files,
    name_problem,
)

pytestmark = pytest.mark.no_bwrap

END = b"E\x00"
#: A cap on the count of files that no stream of these tests reaches.
MANY = 10**6


def record(
    name: bytes,
    data: bytes,
    *,
    mode: int = 0,
    name_len: int | None = None,
    data_len: int | None = None,
) -> bytes:
    """One file record, with a mode byte and sizes that may lie."""
    name_len = len(name) if name_len is None else name_len
    data_len = len(data) if data_len is None else data_len
    header = b"F" + bytes([mode]) + struct.pack("<I", name_len)
    return header + name + struct.pack("<Q", data_len) + data


def decoded(stream: bytes) -> tuple[dict[str, bytes], bool]:
    """``decode_files`` of a stream that has no executable file: the files and the flag."""
    files, executables, lost = decode_files(stream, MANY)
    assert executables == frozenset()
    return files, lost


SAMPLE = {
    "a.txt": b"hello",
    "empty": b"",
    "dir/sub/deep.bin": bytes(range(256)) * 3,
    "žluťoučký kůň 🐍.txt": "ü".encode(),
    "E": b"F\x00\x00E\x01",  # contents that look like records
    ".hidden/..a/a..": b"\n",
}
#: Names at the edges of what is allowed: 17 components of 240 bytes are 4096 bytes.
LONGEST = "/".join(["x" * 240] * 17)
WIDEST = "y" * MAX_COMPONENT_BYTES


# --- encoding ------------------------------------------------------------------------


def test_format_is_pinned() -> None:
    assert encode_files({"ab": b"xyz"}) == (
        b"F\x00\x02\x00\x00\x00ab\x03\x00\x00\x00\x00\x00\x00\x00xyzE\x00"
    )
    assert encode_files({}) == END


def test_round_trip_keeps_names_contents_and_order() -> None:
    files, truncated = decoded(encode_files(SAMPLE))
    assert files == SAMPLE and list(files) == list(SAMPLE)
    assert truncated is False


@pytest.mark.parametrize("name", [LONGEST, WIDEST, "a b", "a\\b", "-rf", "a\nb", "main.py", "é"])
def test_edge_names_accepted_and_round_trip(name: str) -> None:
    assert name_problem(name) is None
    assert decoded(encode_files({name: b"1"})) == ({name: b"1"}, False)


def test_longest_name_is_exactly_the_limit() -> None:
    assert len(LONGEST.encode()) == MAX_NAME_BYTES == 4096


@pytest.mark.parametrize("value", [bytearray(b"ab"), memoryview(b"ab"), memoryview(b"xaby")[1:3]])
def test_bytes_like_values_become_bytes(value: bytes) -> None:
    stream = encode_files({"f": value})
    assert decoded(stream) == ({"f": b"ab"}, False)


def test_any_mapping_is_accepted() -> None:
    assert encode_files(types.MappingProxyType({"f": b"1"})) == encode_files({"f": b"1"})


@pytest.mark.parametrize("files", [[("a", b"1")], "a", None, b"x", 3])
def test_files_must_be_a_mapping(files: object) -> None:
    with pytest.raises(TypeError, match=r"^files "):
        encode_files(files)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [b"a", 1, None, ("a",)])
def test_names_must_be_str(name: object) -> None:
    with pytest.raises(TypeError, match=r"^files: names must be str"):
        encode_files({name: b"1"})  # type: ignore[dict-item]


@pytest.mark.parametrize("value", ["text", 1, None, [1], (b"a",)])
def test_values_must_be_bytes_like(value: object) -> None:
    with pytest.raises(TypeError, match=r"^files: the content of 'f'"):
        encode_files({"f": value})  # type: ignore[dict-item]


BAD_NAMES = [
    "",
    "/abs",
    "/",
    "..",
    ".",
    "../x",
    "a/../b",
    "a/..",
    "./a",
    "a/./b",
    "a/",
    "a//b",
    "a\0b",
    "\0",
    "\udc80",  # a lone surrogate: not encodable as UTF-8
    LONGEST + "x",
    "é" * 2049,  # 4098 bytes of UTF-8 for 2049 characters
    "z" * (MAX_COMPONENT_BYTES + 1),
    "ok/" + "é" * 128,  # a component of 256 bytes
]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        ("/abs", "is absolute"),
        ("a\0b", "contains NUL"),
        ("a/../b", "has an empty, '.' or '..' component"),
        ("\udc80", "is not encodable as UTF-8"),
    ],
)
def test_name_problems_say_what_is_wrong(name: str, problem: str) -> None:
    assert name_problem(name) == problem


@pytest.mark.parametrize("name", BAD_NAMES)
def test_unfit_names_are_a_value_error(name: str) -> None:
    assert name_problem(name) is not None
    with pytest.raises(ValueError, match=r"^files: the name "):
        encode_files({"fine": b"", name: b"1"})


@pytest.mark.parametrize(
    "names",
    [
        ("a", "a/b"),
        ("a/b", "a"),
        ("a/b", "a/b/c/d"),
        ("x/y/z/w", "x/y"),
        ("q", "q/r/s"),
        # names that sort between "a" and "a/b" as plain strings ("-" < "/" < "0")
        ("a", "a-b", "a.b", "a/b", "a0"),
        ("a/b/c", "a-", "a", "a!"),
    ],
)
def test_a_file_cannot_be_a_directory_too(names: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=r"^files: .* is a file and cannot be the directory of "):
        encode_files(dict.fromkeys(names, b""))


def test_siblings_and_shared_directories_are_fine() -> None:
    files = dict.fromkeys(["a/b", "a/c", "a/d/e", "ab", "a.b/c"], b"1")
    assert decoded(encode_files(files)) == (files, False)


def test_many_deep_names_are_checked_quickly() -> None:
    depth = MAX_NAME_BYTES // 2 - 2
    files = {f"{i}/" + "/".join("a" * depth): b"" for i in range(1000)}
    files["1/a"] = b""  # a directory of the names above that is also a file
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"^files: '1/a' is a file"):
        encode_files(files)
    assert time.monotonic() - started < 20


# --- modes ---------------------------------------------------------------------------


def test_executable_mode_byte_is_pinned() -> None:
    assert MODE_EXECUTABLE == 1
    assert encode_files({"ab": File(b"xyz", executable=True)}) == (
        b"F\x01\x02\x00\x00\x00ab\x03\x00\x00\x00\x00\x00\x00\x00xyzE\x00"
    )


def test_a_file_that_is_not_executable_encodes_as_its_bytes() -> None:
    assert encode_files({"a": File(b"1"), "b": File(bytearray(b"2"))}) == encode_files(
        {"a": b"1", "b": b"2"}
    )


def test_modes_round_trip() -> None:
    files = {"run.sh": File(b"#!/bin/sh\n", executable=True), "data": b"d", "bin/x": File(b"")}
    files["bin/y"] = File(b"\x7fELF", executable=True)
    decoded_files, executables, lost = decode_files(encode_files(files), MANY)
    assert decoded_files == {
        "run.sh": b"#!/bin/sh\n",
        "data": b"d",
        "bin/x": b"",
        "bin/y": b"\x7fELF",
    }
    assert executables == frozenset({"run.sh", "bin/y"}) and lost is False


@pytest.mark.parametrize("mode", [2, 3, 0x04, 0x08, 0x80, 0xFF])
def test_unknown_mode_bits_stop_the_stream(mode: int) -> None:
    stream = record(b"a", b"1", mode=1) + record(b"b", b"2", mode=mode) + record(b"c", b"3") + END
    assert decode_files(stream, MANY) == ({"a": b"1"}, frozenset({"a"}), True)


@pytest.mark.parametrize(
    ("first", "last", "executable"), [(1, 0, False), (0, 1, True), (1, 1, True)]
)
def test_a_name_that_comes_twice_takes_the_last_mode(
    first: int, last: int, executable: bool
) -> None:
    stream = record(b"a", b"1", mode=first) + record(b"a", b"2", mode=last) + END
    files, executables, lost = decode_files(stream, MANY)
    assert files == {"a": b"2"} and ("a" in executables) is executable and lost is False


def test_a_skipped_name_is_never_executable() -> None:
    stream = record(b"../evil", b"x", mode=1) + record(b"ok", b"y", mode=1) + END
    assert decode_files(stream, MANY) == ({"ok": b"y"}, frozenset({"ok"}), True)


def test_executables_truncated_at_every_offset_are_complete_records_only() -> None:
    stream = encode_files({"x": File(b"12", executable=True), "y": b"3", "z": File(b"4", True)})
    for cut in range(len(stream)):
        files, executables, lost = decode_files(stream[:cut], MANY)
        assert executables <= files.keys() and lost is True, cut
    assert decode_files(stream, MANY) == ({"x": b"12", "y": b"3", "z": b"4"}, {"x", "z"}, False)


# --- decoding hostile streams --------------------------------------------------------


def _records_and_ends(files: dict[str, bytes]) -> tuple[bytes, list[tuple[int, str, bytes]]]:
    """A valid stream and, for each record, the offset where it ends."""
    stream = b""
    ends = []
    for name, data in files.items():
        stream += record(name.encode(), data)
        ends.append((len(stream), name, data))
    return stream + END, ends


def test_truncated_at_every_offset_keeps_the_complete_records() -> None:
    stream, ends = _records_and_ends(SAMPLE)
    assert decoded(stream) == (SAMPLE, False)
    for cut in range(len(stream)):
        expected = {name: data for end, name, data in ends if end <= cut}
        assert decoded(stream[:cut]) == (expected, True), cut


def test_end_record_flag_says_files_were_left_out() -> None:
    body = record(b"a", b"1")
    assert decoded(body + b"E\x01") == ({"a": b"1"}, True)
    assert decoded(body + b"E\x00") == ({"a": b"1"}, False)


@pytest.mark.parametrize("flags", [2, 3, 0x80, 0xFF])
def test_unknown_end_flags_are_malformed(flags: int) -> None:
    assert decoded(record(b"a", b"1") + b"E" + bytes([flags])) == ({"a": b"1"}, True)


@pytest.mark.parametrize("tail", [b"\x00", b"E\x00", record(b"b", b"2") + END, b"garbage"])
def test_bytes_after_the_end_record_are_malformed(tail: bytes) -> None:
    assert decoded(record(b"a", b"1") + END + tail) == ({"a": b"1"}, True)


@pytest.mark.parametrize("stream", [b"", b"E", b"F", b"X", b"\x00" * 20, b"e\x00", b"f"])
def test_degenerate_streams(stream: bytes) -> None:
    assert decoded(stream) == ({}, True)


def test_unknown_tag_stops_the_stream() -> None:
    stream = record(b"a", b"1") + b"X" + record(b"b", b"2") + END
    assert decoded(stream) == ({"a": b"1"}, True)


@pytest.mark.parametrize("data_len", [7, 2**31, 2**32, 2**63, 2**63 + 5, 2**64 - 1])
def test_lying_data_sizes_are_truncation(data_len: int) -> None:
    stream = record(b"a", b"1") + record(b"b", b"2345", data_len=data_len) + END
    assert decoded(stream) == ({"a": b"1"}, True)


@pytest.mark.parametrize("name_len", [2, 100, 2**16, 2**31, 2**32 - 1])
def test_name_longer_than_the_stream_is_truncation(name_len: int) -> None:
    stream = record(b"a", b"1") + record(b"b", b"", name_len=name_len) + END
    assert decoded(stream) == ({"a": b"1"}, True)


def test_size_fields_cut_short_are_truncation() -> None:
    assert decoded(b"F\x00\x01\x00") == ({}, True)
    assert decoded(b"F\x00\x01\x00\x00\x00a\x01\x00\x00") == ({}, True)


BAD_RAW_NAMES = [
    b"\xff",
    b"\xc3",  # a cut multi-byte sequence
    b"\xed\xb2\x80",  # an encoded surrogate
    b"\xc0\xaf",  # an overlong "/"
    b"../x",
    b"a/../b",
    b"..",
    b".",
    b"/abs",
    b"/",
    b"a\x00b",
    b"",
    b"a//b",
    b"a/",
    b"x" * (MAX_NAME_BYTES + 1),
    b"z" * (MAX_COMPONENT_BYTES + 1),
]


@pytest.mark.parametrize("name", BAD_RAW_NAMES)
def test_unsafe_names_are_skipped_and_flagged(name: bytes) -> None:
    stream = record(b"a", b"1") + record(name, b"evil") + record(b"b", b"2") + END
    assert decoded(stream) == ({"a": b"1", "b": b"2"}, True)


def test_duplicates_last_wins() -> None:
    stream = record(b"a", b"1") + record(b"b", b"x") + record(b"a", b"2") + END
    assert decoded(stream) == ({"a": b"2", "b": b"x"}, False)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_bytes_like_streams_decode_to_independent_bytes(kind: type) -> None:
    source = bytearray(record(b"a", b"123") + END)
    files, truncated = decoded(kind(source))
    source[-5:-2] = b"xxx"  # changing the input afterwards does not reach the result
    assert (files, truncated) == ({"a": b"123"}, False)
    assert type(files["a"]) is bytes


def test_many_tiny_records_decode_in_linear_time() -> None:
    count = 500_000
    stream = record(b"", b"") * count + record(b"last", b"!") + END
    started = time.monotonic()
    assert decoded(stream) == ({"last": b"!"}, True)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("cap", [1, 2, 5])
def test_no_more_files_than_the_cap_whatever_the_stream_says(cap: int) -> None:
    """The init stops at the cap, but a program that kills it mid-stream and writes
    the pipe itself could send more: the host keeps the first ``cap`` records and says
    the rest were lost; exactly ``cap`` files are no loss."""
    names = [f"f{i}".encode() for i in range(cap + 3)]
    stream = b"".join(record(name, b"") for name in names) + END
    files, _, lost = decode_files(stream, cap)
    assert files == {name.decode(): b"" for name in names[:cap]} and lost is True
    exact = b"".join(record(name, b"") for name in names[:cap]) + END
    assert decode_files(exact, cap) == ({name.decode(): b"" for name in names[:cap]}, set(), False)


def test_a_name_that_comes_twice_counts_twice() -> None:
    stream = record(b"a", b"1") + record(b"a", b"2") + record(b"b", b"3") + END
    assert decode_files(stream, 2) == ({"a": b"2"}, frozenset(), True)


def test_a_million_empty_records_keep_only_the_cap() -> None:
    stream = b"".join(record(b"%x" % i, b"") for i in range(1_000_000)) + END
    files, _, lost = decode_files(stream, 16384)
    assert len(files) == 16384 and lost is True


def test_one_huge_file_is_read_once() -> None:
    data = b"\x5a" * (64 * 2**20)
    files, truncated = decoded(record(b"big", data) + END)
    assert files == {"big": data} and truncated is False


def test_random_damage_never_raises() -> None:
    rng = random.Random(20240603)
    valid = encode_files(SAMPLE)
    for _ in range(3000):
        damaged = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(damaged))
            choice = rng.random()
            if choice < 0.4:
                damaged[position] = rng.randrange(256)
            elif choice < 0.7:
                del damaged[position : position + rng.randint(1, 8)]
            else:
                damaged[position:position] = rng.randbytes(rng.randint(1, 8))
        files, executables, truncated = decode_files(bytes(damaged), MANY)
        assert isinstance(truncated, bool) and executables <= files.keys()
        for name, data in files.items():
            assert name_problem(name) is None and type(data) is bytes
    for _ in range(3000):
        noise = rng.randbytes(rng.randint(0, 64))
        files, executables, truncated = decode_files(rng.choice([b"F", b"E", b""]) + noise, MANY)
        assert executables <= files.keys()
        assert all(name_problem(name) is None for name in files)
