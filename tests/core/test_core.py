# SPDX-License-Identifier: MIT
"""The C core (pysandbox._sandbox) on its own, with plain programs: its facts and its
failure modes.  No bwrap needed: these are the invariants the sandbox is built on."""

from __future__ import annotations

import errno
import os
import resource
import sys
import threading

import pytest
from support.processes import children_of
from support.sanitizers import UNDER_ASAN
from support.timing import KILL_LATENCY, PROMPTLY, cpu_overshoot

from pysandbox import _sandbox

pytestmark = pytest.mark.no_bwrap
SH = "/bin/sh"


def sh(script: str, **options: object) -> _sandbox.RawResult:
    options.setdefault("timeout", 10.0)
    return _sandbox.run([SH, "-c", script], [], **options)  # type: ignore[arg-type]


def test_plain_run_reports_facts() -> None:
    raw = sh("echo out; echo err >&2; exit 3")
    assert raw["status_known"]
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == 3
    assert (raw["stdout"], raw["stderr"]) == (b"out\n", b"err\n")
    assert not (raw["timed_out"] or raw["stdout_truncated"] or raw["killed_on_cap"])
    assert 0 < raw["wall_time"] < PROMPTLY
    assert raw["max_rss"] > 0


def test_explicit_environment_only() -> None:
    raw = _sandbox.run(["/usr/bin/env"], ["ONLY=this"], timeout=10.0)
    assert raw["stdout"] == b"ONLY=this\n"


@pytest.mark.parametrize("size", [0, 1, 4095, 65536, 65537, 300_000])
def test_caps_are_exact_at_the_byte(size: int) -> None:
    cap = 65536
    raw = sh(
        f"head -c {size} /dev/zero; head -c {size} /dev/zero >&2", stdout_cap=cap, stderr_cap=cap
    )
    kept = min(size, cap)
    assert len(raw["stdout"]) == kept and len(raw["stderr"]) == kept
    assert raw["stdout_truncated"] == raw["stderr_truncated"] == (size > cap)
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == 0, "truncation must not kill"


def test_kill_on_cap_stops_an_endless_writer() -> None:
    raw = sh("while :; do echo yyyyyyyy; done", stdout_cap=1000, kill_on_cap=True)
    assert raw["killed_on_cap"] and raw["stdout_truncated"]
    assert len(raw["stdout"]) == 1000
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == -9


def test_timeout_kills_and_is_bounded() -> None:
    raw = sh("sleep 30", timeout=0.3)
    assert raw["timed_out"]
    assert 0.3 <= raw["wall_time"] < 0.3 + KILL_LATENCY


def test_large_stdin_and_stdout_at_once_do_not_deadlock() -> None:
    data = os.urandom(1 << 20) * 16
    raw = _sandbox.run(["/bin/cat"], [], stdin=data, timeout=30.0)
    assert raw["stdout"] == data


def test_child_closing_stdin_early_is_not_an_error() -> None:
    raw = sh("exec 0<&-; echo done", stdin=b"x" * (4 << 20))
    assert raw["stdout"] == b"done\n"


def test_interactive_stdin_callback() -> None:
    replies: list[bytes | None] = [b"second\n", None]
    seen: list[bytes] = []

    def on_stdout(chunk: bytes) -> bytes | None:
        seen.append(chunk)
        return replies.pop(0) if replies else b""

    raw = sh(
        "echo first; read a; echo got:$a; read b || echo eof",
        stdin=b"",
        stdin_callback=on_stdout,
    )
    assert raw["stdout"] == b"first\ngot:second\neof\n"
    assert b"".join(seen) == raw["stdout"]


def test_output_hooks_see_every_kept_byte_before_the_stdin_callback() -> None:
    calls: list[tuple[str, bytes]] = []

    def answer(chunk: bytes) -> bytes | None:
        calls.append(("stdin", chunk))
        return b"reply\n" if b"first" in chunk else b""

    raw = sh(
        "echo first; read a; echo got:$a; head -c 200000 /dev/zero >&2; head -c 3000 /dev/zero",
        stdin=b"",
        stdin_callback=answer,
        on_stdout=lambda chunk: calls.append(("out", chunk)),
        on_stderr=lambda chunk: calls.append(("err", chunk)),
        stdout_cap=2000,
    )
    shown = {kind: b"".join(c for k, c in calls if k == kind) for kind in ("out", "err")}
    assert (shown["out"], shown["err"]) == (raw["stdout"], raw["stderr"])
    assert len(raw["stdout"]) == 2000 and raw["stdout_truncated"]
    assert raw["stderr"] == bytes(200000)
    assert all(chunk for _, chunk in calls)
    assert calls[:2] == [("out", b"first\n"), ("stdin", b"first\n")]


def test_exception_in_callback_propagates_after_the_child_is_reaped() -> None:
    def boom(chunk: bytes) -> bytes | None:
        raise LookupError("from the callback")

    with pytest.raises(LookupError, match="from the callback"):
        sh("echo hi; sleep 30", stdin_callback=boom)
    assert children_of(os.getpid()) == []


def test_callback_must_return_bytes_or_none() -> None:
    with pytest.raises(TypeError, match="bytes or None"):
        sh("echo hi; sleep 30", stdin_callback=lambda chunk: "text")  # type: ignore[arg-type,return-value]
    assert children_of(os.getpid()) == []


def test_passed_fds_and_report_pipe_are_numbered_after_stdio(tmp_path: object) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"through fd 3")
    os.close(write_end)
    try:
        raw = sh(
            "cat <&3; echo; echo reported >&4; ls /proc/self/fd",
            pass_fds=[read_end],
            captures=[100],
        )
    finally:
        os.close(read_end)
    lines = raw["stdout"].split(b"\n")
    assert lines[0] == b"through fd 3"
    assert raw["captures"] == [b"reported\n"]
    # 0-4 and the fd of ls's own directory listing: nothing else was inherited.
    assert len([line for line in lines[1:] if line]) <= 6


def test_exec_failure_is_an_oserror_naming_the_stage() -> None:
    with pytest.raises(FileNotFoundError) as caught:
        _sandbox.run(["/nonexistent/program"], [], timeout=5.0)
    assert caught.value.strerror.startswith("execve")
    assert caught.value.stage == _sandbox.STAGE_EXEC
    assert children_of(os.getpid()) == []


def test_bad_pass_fd_is_an_oserror_naming_the_stage() -> None:
    with pytest.raises(OSError) as caught:
        _sandbox.run(["/bin/true"], [], pass_fds=[999_999], timeout=5.0)
    assert caught.value.errno == errno.EBADF
    assert "pass_fds" in caught.value.strerror
    assert caught.value.stage == _sandbox.STAGE_PASS_FDS


def test_rlimits_are_applied_in_the_child() -> None:
    raw = sh(
        "ulimit -t; ulimit -c", rlimits=[(resource.RLIMIT_CPU, 7, 7), (resource.RLIMIT_CORE, 0, 0)]
    )
    assert raw["stdout"] == b"7\n0\n"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"rlimits": [[resource.RLIMIT_CPU, 1, 1]]}, TypeError),
        ({"rlimits": 5}, TypeError),
        ({"pass_fds": [-1]}, ValueError),
        ({"timeout": float("inf")}, ValueError),
        ({"timeout": 0.0}, ValueError),
        ({"stdout_cap": -1}, ValueError),
        ({"on_stdout": 42}, TypeError),
        ({"on_stderr": 42}, TypeError),
        ({"stdin_callback": 42}, TypeError),
        ({"disk_inodes": 10}, ValueError),
        ({"disk_inodes": 10, "disk_dir": "sandbox"}, ValueError),
        ({"disk_inodes": 10, "disk_dir": "/sandbox:cache"}, ValueError),
        ({"disk_inodes": 10, "disk_dir": "/sandbox:"}, ValueError),
        ({"disk_inodes": 10, "disk_dir": "/sandbox::/cache"}, ValueError),
    ],
)
def test_bad_arguments_are_rejected(options: dict[str, object], error: type) -> None:
    options.setdefault("timeout", 5.0)
    with pytest.raises(error):
        _sandbox.run(["/bin/true"], [], **options)  # type: ignore[arg-type]


def test_several_tmpfs_to_count_are_taken() -> None:
    """``disk_dir`` names the tmpfs whose inodes count together, ``:`` between them."""
    raw = _sandbox.run(["/bin/true"], [], timeout=5.0, disk_inodes=10, disk_dir="/a:/b")
    assert os.waitstatus_to_exitcode(raw["wait_status"]) == 0 and not raw["disk_exceeded"]


def test_relative_program_and_nul_bytes_are_rejected() -> None:
    with pytest.raises(ValueError, match="absolute"):
        _sandbox.run(["true"], [], timeout=5.0)
    with pytest.raises(ValueError):
        _sandbox.run(["/bin/echo", "a\0b"], [], timeout=5.0)


def test_arguments_mutated_during_conversion_do_not_crash() -> None:
    argv: list[object] = []

    class Sneaky:
        def __fspath__(self) -> str:
            argv.clear()
            return "x"

    argv.extend(["/bin/echo", Sneaky(), "y"])
    raw = _sandbox.run(argv, [], timeout=5.0)  # type: ignore[arg-type]
    assert raw["stdout"] == b"x y\n"


def test_works_from_a_thread_with_a_small_stack() -> None:
    results: list[bytes] = []
    old = threading.stack_size(64 * 1024)
    try:
        thread = threading.Thread(target=lambda: results.append(sh("echo small")["stdout"]))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    assert results == [b"small\n"]


def test_lost_exit_status_is_reported_not_invented() -> None:
    """With SIGCHLD ignored the kernel reaps the child: the core says so."""
    import subprocess

    script = (
        "import signal, os; signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "from pysandbox import _sandbox\n"
        "raw = _sandbox.run(['/bin/sh', '-c', 'exit 5'], [], timeout=5.0)\n"
        "print(raw['status_known'], raw['timed_out'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b" \t\n",
        b"  plain  \n",
        b"\x1c\x1dx\x1e\x1f",
        "\u00a0\u3000 x \u2028".encode(),
        b"a\nb",
    ],
)
def test_text_mode_matches_decode_then_strip(payload: bytes) -> None:
    raw = _sandbox.run(["/bin/cat"], [], stdin=payload, text=True, timeout=10.0)
    assert isinstance(raw["stdout"], str)
    assert raw["stdout"].strip() == payload.decode("utf-8").strip()


def test_text_mode_reports_invalid_utf8_as_none() -> None:
    raw = _sandbox.run(["/bin/cat"], [], stdin=b" \xff ", text=True, timeout=10.0)
    assert raw["stdout"] is None
    assert raw["stderr"] == ""


def test_captures_are_capped_and_independent() -> None:
    raw = sh("printf aaaa >&3; printf bbbbbbbb >&4", captures=[3, 100])
    assert raw["captures"] == [b"aaa", b"bbbbbbbb"]
    assert raw["captures_truncated"] == [True, False]


def test_cpu_limit_counts_the_whole_tree() -> None:
    """Four busy children: the tree passes 0.5 s long before any one of them does.

    Without bwrap there is no pid namespace to end them with the shell: each child
    stops by itself once its parent is gone."""
    busy = "while kill -0 $$ 2>/dev/null; do :; done"
    raw = sh(f"for i in 1 2 3 4; do ( {busy} ) & done; wait", cpu_limit=0.5, timeout=20.0)
    assert raw["cpu_exceeded"]
    assert 0.5 <= raw["tree_cpu_time"] < 0.5 + cpu_overshoot(4)
    assert raw["wall_time"] < PROMPTLY


def test_cancel_kills_and_says_so() -> None:
    class SetAfterAWhile:
        def __init__(self) -> None:
            self.calls = 0

        def is_set(self) -> bool:
            self.calls += 1
            return self.calls > 3

    raw = sh("sleep 30", cancel=SetAfterAWhile())
    assert raw["cancelled"]
    assert raw["wall_time"] < PROMPTLY
    assert children_of(os.getpid()) == []


def test_a_cancel_object_that_raises_propagates_after_the_kill() -> None:
    class Broken:
        def is_set(self) -> bool:
            raise LookupError("is_set failed")

    with pytest.raises(LookupError, match="is_set failed"):
        sh("sleep 30", cancel=Broken())
    assert children_of(os.getpid()) == []


# The capture buffer's sizes (buffer.c): its first heap block, the largest heap block,
# a huge page, and (output.c) the size from which the final object is advised for huge
# pages and a text is copied without the decoder.
FIRST_BLOCK, HEAP_MAX, HUGE_PAGE, HUGE_COPY_MIN = 64 * 1024, 256 * 1024, 2 * 2**20, 4 * 2**20
AROUND_THRESHOLDS = sorted(
    {n + d for n in (FIRST_BLOCK, HEAP_MAX, HUGE_PAGE, HUGE_COPY_MIN) for d in (-1, 0, 1)}
)


@pytest.mark.parametrize("size", AROUND_THRESHOLDS)
def test_capture_is_exact_around_the_buffer_sizes(size: int) -> None:
    """Every byte back, in order, whether the cap is above, at or one under the output."""
    data = os.urandom(size)
    for cap in (sys.maxsize, size, size - 1):
        raw = _sandbox.run(["/bin/cat"], [], stdin=data, stdout_cap=cap, timeout=30.0)
        assert raw["stdout"] == data[:cap], f"cap {cap}"
        assert raw["stdout_truncated"] == (cap < size)


def test_capture_past_the_first_mapping_grows_without_loss() -> None:
    # Past 64 MiB the mapping is grown (mremap), with a cap that bounds nothing.
    data = os.urandom(2**20) * 70 + b"end"
    raw = _sandbox.run(["/bin/cat"], [], stdin=data, timeout=60.0)
    assert raw["stdout"] == data and not raw["stdout_truncated"]


def text_payloads() -> list[bytes]:
    """Texts around the size where output.c copies ASCII without the decoder, with a
    non-ASCII character where a chunk of its check starts or ends, and with white space
    to strip that takes a text across that size."""
    chunk, big = 256 * 1024, b"x" * HUGE_COPY_MIN
    payloads = [big, big[:-1] + b"\n", b" " + big + b"\n", big + b"\x00", big + b"abc"]
    for at in (0, chunk - 1, chunk, 3 * chunk + 5, len(big) - 1):
        payloads.append(big[:at] + "é".encode() + big[at + 1 :])
    payloads.append(big + b"xyz" + "\u20ac".encode())
    return payloads


@pytest.mark.parametrize("payload", text_payloads(), ids=lambda p: f"{len(p)}-{p[-4:]!r}")
def test_large_text_matches_decode_then_strip(payload: bytes) -> None:
    raw = _sandbox.run(["/bin/cat"], [], stdin=payload, text=True, timeout=30.0)
    assert isinstance(raw["stdout"], str)
    assert raw["stdout"] == payload.decode("utf-8").strip(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")


@pytest.mark.parametrize("bad_at", [0, 300_000, HUGE_COPY_MIN + 2])
def test_large_text_that_is_not_utf8_is_none(bad_at: int) -> None:
    payload = bytearray(b"x" * (HUGE_COPY_MIN + 3))
    payload[bad_at] = 0xFF
    raw = _sandbox.run(["/bin/cat"], [], stdin=bytes(payload), text=True, timeout=30.0)
    assert raw["stdout"] is None


def status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} missing from /proc/self/status")


def test_large_captures_are_released() -> None:
    """The buffers' mappings are unmapped: neither the resident set nor the address
    space grows over calls that each capture 8 MiB (a leak would add a mapping sized to
    the cap each time)."""
    data = os.urandom(8 * 2**20)
    for _ in range(2):
        assert len(_sandbox.run(["/bin/cat"], [], stdin=data, timeout=30.0)["stdout"]) == len(data)
    rss, size = status_kib("VmRSS"), status_kib("VmSize")
    for _ in range(20):
        raw = _sandbox.run(["/bin/cat"], [], stdin=data, stdout_cap=48 * 2**20, timeout=30.0)
        assert len(raw["stdout"]) == len(data)
        del raw
    assert status_kib("VmRSS") - rss < 32 * 1024
    assert status_kib("VmSize") - size < 128 * 1024


def huge_page_kib_at(address: int) -> int:
    """AnonHugePages of the mapping of this process that holds ``address``."""
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            first = line.split()[0]
            if "-" in first and ":" not in first:
                start, end = (int(part, 16) for part in first.split("-"))
                inside = start <= address < end
            elif inside and first == "AnonHugePages:":
                return int(line.split()[1])
    raise AssertionError(f"no mapping holds {address:#x}")


def transparent_huge_pages() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read()
    except OSError:
        return "[never]"


@pytest.mark.skipif(
    "[never]" in transparent_huge_pages(), reason="no transparent huge pages on this kernel"
)
@pytest.mark.parametrize("text", [False, True])
def test_a_large_capture_lands_in_huge_pages(text: bool) -> None:
    # With THP in "madvise" mode (common) only the advice puts the object there: each
    # 2 MiB of it then costs one page fault instead of 512.  id() is the object's
    # address in CPython; its middle is well inside the object's own pages.
    raw = _sandbox.run(["/bin/cat"], [], stdin=b"x" * (16 * 2**20), text=text, timeout=30.0)
    out = raw["stdout"]
    assert out is not None and len(out) == 16 * 2**20
    assert huge_page_kib_at(id(out) + len(out) // 2) >= 2048


# output.c reads a stream whose cap is in [DIRECT_MIN, DIRECT_MAX] straight into its
# final object, and keeps that object when the result is DIRECT_KEEP_MIN bytes or more.
DIRECT_MIN, DIRECT_MAX, DIRECT_KEEP_MIN = 4 * 2**20, 2**30, 256 * 1024
ASCII_SPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def direct_sizes(cap: int) -> list[int]:
    sizes = {0, 1, DIRECT_KEEP_MIN - 1, DIRECT_KEEP_MIN, DIRECT_KEEP_MIN + 1}
    if cap <= 2 * DIRECT_MIN:
        sizes |= {cap - 1, cap, cap + 1}
    return sorted(sizes)


@pytest.mark.parametrize(
    "cap", [DIRECT_MIN - 1, DIRECT_MIN, DIRECT_MIN + 1, DIRECT_MAX, DIRECT_MAX + 1]
)
def test_direct_capture_is_exact_around_its_thresholds(cap: int) -> None:
    for size in direct_sizes(cap):
        data = os.urandom(size)
        raw = _sandbox.run(
            ["/bin/cat"],
            [],
            stdin=data,
            stdout_cap=cap,
            stderr_cap=cap,
            timeout=30.0,
        )
        assert raw["stdout"] == data[:cap], f"size {size}"
        assert raw["stdout_truncated"] == (size > cap)
        assert raw["stderr"] == b"" and not raw["stderr_truncated"]


@pytest.mark.parametrize("cap", [DIRECT_MIN - 1, DIRECT_MIN, DIRECT_MIN + 1, DIRECT_MAX])
def test_direct_text_is_exact_around_its_thresholds(cap: int) -> None:
    for size in direct_sizes(cap):
        for head, tail in ((b"", b""), (b" \n\t", b""), (b"", b"\r\n "), (b"\x1c ", b"  \n")):
            payload = head + b"y" * size + tail
            raw = _sandbox.run(
                ["/bin/cat"], [], stdin=payload, text=True, stdout_cap=cap, timeout=30.0
            )
            kept = payload[:cap]
            assert raw["stdout"] == kept.decode().strip(ASCII_SPACE), (
                f"size {size} {head!r} {tail!r}"
            )
            assert raw["stdout_truncated"] == (len(payload) > cap)


def test_direct_stderr_is_exact() -> None:
    data = b"e" * (DIRECT_MIN + 7)
    for text in (False, True):
        raw = sh(
            f"head -c {len(data)} /dev/zero | tr '\\0' e >&2", stderr_cap=DIRECT_MIN, text=text
        )
        want = data[:DIRECT_MIN]
        assert raw["stderr"] == (want.decode() if text else want)
        assert raw["stderr_truncated"] and not raw["stdout_truncated"]
        assert raw["stdout"] == ("" if text else b"")


def direct_text_payloads() -> list[bytes]:
    big = b"x" * (DIRECT_MIN // 2)
    return [
        *text_payloads(),
        b"",
        b" \n\t" * 100_000,
        b"\n" + big,
        b" " * DIRECT_KEEP_MIN + big + b" " * DIRECT_KEEP_MIN,
        big + "\u00a0".encode(),  # non-ASCII white space: stripped by Python's str.strip()
        "\u00e9".encode() + big,
        big + b"\xc3",  # a sequence cut short at the end
    ]


@pytest.mark.parametrize("payload", direct_text_payloads(), ids=lambda p: f"{len(p)}-{p[-4:]!r}")
def test_direct_text_matches_decode_then_strip(payload: bytes) -> None:
    raw = _sandbox.run(
        ["/bin/cat"], [], stdin=payload, text=True, stdout_cap=8 * 2**20, timeout=30.0
    )
    try:
        want = payload.decode("utf-8").strip(ASCII_SPACE)
    except UnicodeDecodeError:
        want = None
    assert raw["stdout"] == want
    if want is not None:
        assert type(raw["stdout"]) is str and hash(raw["stdout"]) == hash(want)


@pytest.mark.parametrize("bad_at", [0, 300_000, HUGE_COPY_MIN + 2])
def test_direct_text_that_is_not_utf8_is_none(bad_at: int) -> None:
    payload = bytearray(b"x" * (HUGE_COPY_MIN + 3))
    payload[bad_at] = 0xFF
    raw = _sandbox.run(
        ["/bin/cat"], [], stdin=bytes(payload), text=True, stdout_cap=DIRECT_MAX, timeout=30.0
    )
    assert raw["stdout"] is None


def test_a_big_cap_with_little_output_keeps_memory_flat() -> None:
    """The 1 GiB objects made before each call are never touched beyond the output and
    always released: neither the resident set nor the address space grows."""
    for text in (False, True):
        for _ in range(3):
            sh("echo hi", stdout_cap=DIRECT_MAX, stderr_cap=DIRECT_MAX, text=text)
    rss, size = status_kib("VmRSS"), status_kib("VmSize")
    peak = 0
    for i in range(60):
        raw = sh(
            "echo hi; echo err >&2", stdout_cap=DIRECT_MAX, stderr_cap=DIRECT_MAX, text=i % 2 == 1
        )
        assert raw["stdout"] in (b"hi\n", "hi") and raw["stderr"] in (b"err\n", "err")
        peak = max(peak, status_kib("VmRSS"))
    assert peak - rss < 16 * 1024
    assert status_kib("VmSize") - size < 128 * 1024


def test_a_big_cap_is_released_when_a_callback_raises_or_the_run_is_cancelled() -> None:
    class Stop(Exception):
        pass

    def raising(chunk: bytes) -> None:
        raise Stop

    class Cancelled:
        def is_set(self) -> bool:
            return True

    def runs() -> None:
        with pytest.raises(Stop):
            sh("echo hi; sleep 5", on_stdout=raising, stdout_cap=DIRECT_MAX)
        with pytest.raises(Stop):
            sh("echo hi >&2; sleep 5", on_stderr=raising, stderr_cap=DIRECT_MAX, text=True)
        with pytest.raises(Stop):
            sh("echo hi; sleep 5", stdin_callback=raising, stdout_cap=DIRECT_MAX)
        assert sh("sleep 5", cancel=Cancelled(), stdout_cap=DIRECT_MAX)["cancelled"]

    runs()
    size = status_kib("VmSize")
    for _ in range(10):
        runs()
    # A leaked object would keep 1 GiB of address space per call.
    assert status_kib("VmSize") - size < 256 * 1024
    assert children_of(os.getpid()) == []


@pytest.mark.skipif(UNDER_ASAN, reason="ASan aborts on a refused malloc")
def test_a_direct_object_refused_falls_back_to_the_pumps_buffer() -> None:
    # Under an address-space limit that leaves no room for a 1 GiB object, the capture
    # still works (the pump's own buffer, grown only as needed).
    import subprocess

    code = f"""
import resource
from pysandbox import _sandbox
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) for l in f if l.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + 256 * 2**20, resource.RLIM_INFINITY))
data = b"z" * (5 * 2**20)
for text in (False, True):
    raw = _sandbox.run(
        ["/bin/cat"], [], stdin=data, text=text, stdout_cap={DIRECT_MAX}, timeout=30.0
    )
    assert raw["stdout"] == (data.decode() if text else data), text
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


def test_a_big_cap_under_the_debug_allocator_is_not_filled() -> None:
    # PYTHONMALLOC=debug writes 0xCD over every new block: a 1 GiB object per call
    # would then cost 1 GiB of memory, so the pump's own buffer is used.
    import subprocess

    # VmHWM, not ru_maxrss: that one keeps the forking parent's peak across exec.
    code = f"""
from pysandbox import _sandbox
cap = {DIRECT_MAX}
for text in (False, True):
    for _ in range(3):
        raw = _sandbox.run(["/bin/echo", "hi"], [], text=text, stdout_cap=cap, timeout=30.0)
        assert raw["stdout"] == ("hi" if text else b"hi\\n"), raw
with open("/proc/self/status") as f:
    print(next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")))
"""
    env = {**os.environ, "PYTHONMALLOC": "debug"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 256 * 1024


@pytest.mark.skipif(
    "[never]" in transparent_huge_pages(), reason="no transparent huge pages on this kernel"
)
@pytest.mark.skipif(UNDER_ASAN, reason="ASan's realloc copies the object to a new block")
@pytest.mark.parametrize("text", [False, True])
def test_a_direct_capture_lands_in_huge_pages(text: bool) -> None:
    # The object read into is shrunk in place (glibc realloc of a mapped block is an
    # mremap), so the result is in the huge pages the pump filled.
    raw = _sandbox.run(
        ["/bin/cat"], [], stdin=b"x" * (16 * 2**20), text=text, stdout_cap=17 * 2**20, timeout=30.0
    )
    out = raw["stdout"]
    assert out is not None and len(out) == 16 * 2**20
    assert huge_page_kib_at(id(out) + len(out) // 2) >= 2048
