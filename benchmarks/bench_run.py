# SPDX-License-Identifier: MIT
"""Latency of pysandbox.run and run_python against bubblewrap and Python started from the shell.

Usage: python benchmarks/bench_run.py [--quick]

Eight commands are measured in the same run, interleaved call by call (the order rotates
every round, so no command always runs first or right after another):

* ``pysandbox.run(["/bin/true"])``;
* the bwrap command line pysandbox builds for that call (``pysandbox._launch.launcher.command_line``
  of the plan ``pysandbox._api.run.build_plan`` makes for it), run from ``/bin/sh`` with
  ``exec`` under the same resource limits (``ulimit``), with its status, report and
  files fds sent to ``/dev/null`` and the lifeline's read end from this process, which
  holds the write end as pysandbox's caller does (the init refuses to run without one):
  the same sandbox, without pysandbox's Python layer and C core;
* a minimal ``bwrap --unshare-all`` running ``/usr/bin/true`` from ``/bin/sh``: the floor
  for any sandbox built by bubblewrap;
* ``pysandbox.run_python("pass")``, and its bwrap command line from ``/bin/sh`` in the
  same way (the code file, which pysandbox binds with ``--ro-bind-fd N``, is a file of
  the same mode opened on fd N by the shell's ``N<file`` redirection);
* ``subprocess.run([sys.executable, "-c", "pass"])``: the same interpreter with no
  sandbox at all;
* ``pysandbox.eval_in_sandbox("print(1)")``, and ``bwrap`` with the same sandbox options
  running ``python -I -c pass`` from ``/bin/sh`` (no init, no cgroup, no Python layer).

Every call is checked (status OK, exit code 0, no output), so a sandbox that fails
cannot look fast; before timing, the shell variants are run once with their fds sent to
files to check that bwrap built the sandbox and pysandbox's init saw the program exit 0,
and the shell's limits are compared with pysandbox's.  The script prints the median and
quartiles of each command and the ratios.  It is a measurement, not a test: it exits 0
whatever the figures are, and fails only if a call raises or returns something else.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

from measuring import interleaved, loadavg, quartiles

import pysandbox
from pysandbox import Limits, Result, Status
from pysandbox._api import run as _run
from pysandbox._host import programs
from pysandbox._launch import bwrap as _bwrap
from pysandbox._launch import failures as _failures
from pysandbox._launch import launcher as _launch
from pysandbox._launch import rlimits as _rlimits

SHELL = "/bin/sh"
TRUE_ARGV = ["/bin/true"]
PYTHON_CODE = "pass"
EVAL_CODE = "print(1)"
#: The floor: the smallest bubblewrap sandbox that can run /usr/bin/true.
MINIMAL_BWRAP_OPTIONS = [
    "--unshare-all",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    "--symlink",
    "usr/bin",
    "/bin",
    "/usr/bin/true",
]
#: dash's ``ulimit`` option and unit (bytes per count) for each limit pysandbox sets.
ULIMIT_FLAGS: dict[int, tuple[str, int]] = {
    resource.RLIMIT_AS: ("-v", 1024),
    resource.RLIMIT_NPROC: ("-p", 1),
    resource.RLIMIT_FSIZE: ("-f", 512),
    resource.RLIMIT_NOFILE: ("-n", 1),
    resource.RLIMIT_CPU: ("-t", 1),
    resource.RLIMIT_CORE: ("-c", 512),
    resource.RLIMIT_MEMLOCK: ("-l", 1024),
    resource.RLIMIT_RTPRIO: ("-r", 1),
}
#: Limits pysandbox sets that dash's ``ulimit`` cannot: the shell variants go without
#: them (a limit costs nothing at spawn, so the comparison stays fair).
NO_ULIMIT_FLAG = frozenset(
    {
        resource.RLIMIT_MSGQUEUE,
        resource.RLIMIT_SIGPENDING,
        resource.RLIMIT_RTTIME,
        resource.RLIMIT_NICE,
    }
)
#: bwrap's and the init's options that name an fd the caller must provide: the syscall
#: filter, data served read-only (a moved ``pyvenv.cfg``), the code file, input files.
OUTPUT_FD_FLAGS = ("--json-status-fd", "--report-fd", "--files-out-fd")
INPUT_FD_FLAGS = ("--seccomp", "--ro-bind-data", "--ro-bind-fd", "--files-in-fd")
#: Where every command run here gets the read end of this process's lifeline pipe: above
#: the fds the command lines name (3 to 8), and a single digit, all dash redirects.
LIFELINE_SOURCE_FD = 9


@dataclasses.dataclass(frozen=True)
class Settings:
    warmup: int
    rounds: int


FULL = Settings(warmup=5, rounds=100)
QUICK = Settings(warmup=1, rounds=5)


@dataclasses.dataclass(frozen=True)
class Measure:
    key: str
    label: str
    call: Callable[[], None]


@dataclasses.dataclass(frozen=True)
class ShellCommand:
    """A bwrap command line run from the shell, and the fds it needs."""

    argv: list[str]
    inputs: dict[int, str]
    outputs: list[int]
    lifeline: int

    def script(self, rlimits: Sequence[tuple[int, int, int]], outputs_to: str | None) -> str:
        """``ulimit`` for each limit, then ``exec`` with the fds opened by redirections.

        The lifeline's read end moves from ``LIFELINE_SOURCE_FD`` to its fd first.  The
        output fds go to ``/dev/null``, or with ``outputs_to`` to files in that
        directory named by fd number.
        """
        redirections = [f"{self.lifeline}<&{LIFELINE_SOURCE_FD}"]
        redirections += [f"{fd}<{shlex.quote(path)}" for fd, path in self.inputs.items()]
        for fd in self.outputs:
            target = "/dev/null" if outputs_to is None else os.path.join(outputs_to, str(fd))
            redirections.append(f"{fd}>{shlex.quote(target)}")
        redirections.append(f"{LIFELINE_SOURCE_FD}<&-")
        return "; ".join([*ulimit_commands(rlimits), " ".join(['exec "$@"', *redirections])])


@functools.cache
def lifeline_source() -> int:
    """``LIFELINE_SOURCE_FD``, made once the read end of a pipe whose write end this
    process keeps (close-on-exec) until it exits: the sandboxes' caller never dies."""
    read_fd, _write_fd = os.pipe2(os.O_CLOEXEC)
    os.dup2(read_fd, LIFELINE_SOURCE_FD)
    os.close(read_fd)
    return LIFELINE_SOURCE_FD


def ulimit_commands(rlimits: Sequence[tuple[int, int, int]]) -> list[str]:
    """dash ``ulimit`` commands that set ``rlimits``.  Without -S or -H dash sets both
    limits; with them the soft limit comes first, since a hard limit cannot go below it."""
    commands = []
    for which, soft, hard in rlimits:
        if which not in ULIMIT_FLAGS:
            raise RuntimeError(f"no ulimit option for resource {which}")
        flag, unit = ULIMIT_FLAGS[which]
        values = []
        for value in (soft, hard):
            if value == resource.RLIM_INFINITY:
                values.append("unlimited")
            elif value % unit:
                raise RuntimeError(f"limit {value} of resource {which} is not in {unit}s")
            else:
                values.append(str(value // unit))
        if soft == hard:
            commands.append(f"ulimit {flag} {values[0]}")
        else:
            commands += [f"ulimit -S {flag} {values[0]}", f"ulimit -H {flag} {values[1]}"]
    return commands


def fd_after(argv: list[str], flag: str) -> int | None:
    """The fd number given after ``flag``, which must appear at most once."""
    count = argv.count(flag)
    if count == 0:
        return None
    if count > 1:
        raise RuntimeError(f"{flag} appears {count} times in the bwrap command line")
    return int(argv[argv.index(flag) + 1])


def shell_command(argv: list[str], files: dict[str, str]) -> ShellCommand:
    """The fds of ``argv`` that pysandbox's C core would pass or capture; ``files`` names
    the file that feeds each input flag (the seccomp program, the code)."""
    inputs: dict[int, str] = {}
    for flag in INPUT_FD_FLAGS:
        fd = fd_after(argv, flag)
        if fd is not None:
            if flag not in files:
                raise RuntimeError(f"{flag} {fd} needs an input file")
            inputs[fd] = files[flag]
    outputs = [fd for fd in (fd_after(argv, flag) for flag in OUTPUT_FD_FLAGS) if fd is not None]
    if len(outputs) != len(OUTPUT_FD_FLAGS):
        raise RuntimeError(f"the bwrap command line lacks one of {OUTPUT_FD_FLAGS}")
    lifeline = fd_after(argv, "--lifeline-fd")
    if lifeline is None:
        raise RuntimeError("the bwrap command line gives the init no --lifeline-fd")
    if LIFELINE_SOURCE_FD in {lifeline, *inputs, *outputs}:
        raise RuntimeError(f"the bwrap command line names fd {LIFELINE_SOURCE_FD} itself")
    return ShellCommand(argv, inputs, outputs, lifeline)


def run_argv(limits: Limits) -> list[str]:
    """What ``pysandbox.run(TRUE_ARGV)`` hands to the C core."""
    plan, _ = _run.build_plan(_run.Call(list(TRUE_ARGV), limits=limits))
    return _launch.command_line(plan)


def run_python_argv(limits: Limits) -> list[str]:
    """What ``pysandbox.run_python(PYTHON_CODE)`` hands to the C core (the seccomp
    program and the code file are its passed fds)."""
    python = programs.find_python()
    call = _run.Call([python, "-u", _bwrap.MAIN_PATH], limits=limits, code=PYTHON_CODE.encode())
    plan, _ = _run.build_plan(call)
    return _launch.command_line(plan)


def raw_python_argv(python: str) -> list[str]:
    """bwrap with the same sandbox options as pysandbox (namespaces, filter, mounts),
    running ``python -I -c pass`` directly: no init, no cgroup, no Python layer."""
    return [
        programs.find_bwrap(),
        *_bwrap.base_options(python, os.geteuid()),
        python,
        "-I",
        "-c",
        "pass",
    ]


def shell_argv(script: str, argv: list[str]) -> list[str]:
    return [SHELL, "-c", script, "sh", *argv]


def check_result(what: str, res: Result) -> None:
    if res.status is not Status.OK or res.returncode != 0 or res.stdout or res.stderr:
        raise RuntimeError(
            f"{what} returned status={res.status} rc={res.returncode} "
            f"stdout={res.stdout[:200]!r} stderr={res.stderr[-500:]!r}"
        )


def checked_subprocess(argv: list[str], env: dict[str, str] | None) -> None:
    """Run ``argv`` with stdin closed and the lifeline's read end on
    ``LIFELINE_SOURCE_FD``; raise unless it exits 0 without any output."""
    proc = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        pass_fds=(lifeline_source(),),
    )
    if proc.returncode != 0 or proc.stdout or proc.stderr:
        raise RuntimeError(
            f"{shlex.join(argv)[:300]} exited {proc.returncode} "
            f"stdout={proc.stdout[:200]!r} stderr={proc.stderr[-500:]!r}"
        )


def call_run() -> None:
    check_result("pysandbox.run", pysandbox.run(TRUE_ARGV))


def call_run_python() -> None:
    check_result("pysandbox.run_python", pysandbox.run_python(PYTHON_CODE))


def call_eval() -> None:
    out = pysandbox.eval_in_sandbox(EVAL_CODE)
    if out.returncode != 0 or out.stdout != "1" or out.stderr:
        raise RuntimeError(f"pysandbox.eval_in_sandbox returned {out}")


def subprocess_call(argv: list[str], env: dict[str, str] | None) -> Callable[[], None]:
    def call() -> None:
        checked_subprocess(argv, env)

    return call


def verify_limits(rlimits: Sequence[tuple[int, int, int]]) -> None:
    """The shell's ``ulimit`` commands give exactly the limits pysandbox sets."""
    whiches = [which for which, _, _ in rlimits]
    probe = f"import resource, sys; print([resource.getrlimit(w) for w in {whiches!r}], end='')"
    script = "; ".join([*ulimit_commands(rlimits), 'exec "$@"'])
    argv = shell_argv(script, [sys.executable, "-c", probe])
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    expected = repr([(soft, hard) for _, soft, hard in rlimits])
    if proc.returncode != 0 or proc.stdout != expected or proc.stderr:
        raise RuntimeError(
            f"{SHELL}'s ulimit does not reproduce pysandbox's limits: expected {expected}, "
            f"got {proc.stdout!r} (rc={proc.returncode}, stderr={proc.stderr!r})"
        )


def verify_shell_sandbox(
    name: str, command: ShellCommand, rlimits: Sequence[tuple[int, int, int]]
) -> None:
    """Run the shell variant once with its output fds sent to files: bwrap must report
    that it built the sandbox and the program exited 0, and the init must report exit 0."""
    status_fd = fd_after(command.argv, "--json-status-fd")
    report_fd = fd_after(command.argv, "--report-fd")
    with tempfile.TemporaryDirectory(prefix="bench_run-") as out_dir:
        checked_subprocess(shell_argv(command.script(rlimits, out_dir), command.argv), {})
        with open(os.path.join(out_dir, str(status_fd)), "rb") as f:
            status = _failures.bwrap_report(f.read())
        with open(os.path.join(out_dir, str(report_fd)), "rb") as f:
            report = _failures.parse_init_report(f.read())
    if status.get("exit-code") != 0 or report is None or report.wait_status != 0:
        raise RuntimeError(f"{name}: bwrap reported {status}, the init reported {report}")


def bwrap_version(bwrap: str) -> str:
    proc = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def print_commands(commands: list[tuple[str, list[str], dict[str, str] | None]]) -> None:
    print()
    print("commands run (the shell ones with an empty environment, as pysandbox runs bwrap):")
    for key, argv, env in commands:
        prefix = "env -i " if env == {} else ""
        print(f"  {key}: {prefix}{shlex.join(argv)}")


def print_table(measures: list[Measure], samples: list[list[float]], rounds: int) -> None:
    print()
    print(f"{f'latency, {rounds} calls each [ms]':<58} {'median':>8} {'q1':>8} {'q3':>8}")
    print("-" * 85)
    for m, values in zip(measures, samples):
        q1, q2, q3 = (1e3 * q for q in quartiles(values))
        print(f"{m.label:<58} {q2:>8.2f} {q1:>8.2f} {q3:>8.2f}")


def print_ratios(
    pairs: list[tuple[str, str, str]], keys: list[str], samples: list[list[float]]
) -> None:
    by_key = dict(zip(keys, samples))
    print()
    print(f"{'ratio':<58} {'of medians':>11} {'median per round':>17}")
    print("-" * 88)
    for label, num, den in pairs:
        a, b = by_key[num], by_key[den]
        of_medians = statistics.median(a) / statistics.median(b)
        per_round = statistics.median(x / y for x, y in zip(a, b))
        print(f"{label:<58} {of_medians:>11.3f} {per_round:>17.3f}")
    print()
    print("differences of medians:")
    for label, num, den in pairs:
        diff = 1e3 * (statistics.median(by_key[num]) - statistics.median(by_key[den]))
        print(f"  {label.replace(' / ', ' - '):<56} {diff:>+8.2f} ms")


def run(settings: Settings) -> None:
    limits = Limits()
    # The shell variants get the rlimits but no cgroup: their difference from run()
    # includes the per-sandbox cgroup, which is part of what run() costs.
    rlimits = [
        r
        for r in _rlimits.within_own_limits(limits.rlimits())
        if r[0] != resource.RLIMIT_NPROC and r[0] not in NO_ULIMIT_FLAG
    ]
    bwrap = programs.find_bwrap()
    print(f"pysandbox: {pysandbox.__version__} from {os.path.dirname(pysandbox.__file__ or '?')}")
    print(f"bwrap:     {bwrap} ({bwrap_version(bwrap)}), caller euid={os.geteuid()}")
    print(f"shell:     {SHELL} -> {os.path.realpath(SHELL)}")
    print(f"settings:  {settings}")
    verify_limits(rlimits)

    with tempfile.TemporaryDirectory(prefix="bench_run-") as tmp_dir:
        code_path = os.path.join(tmp_dir, _bwrap.MAIN_NAME)
        with open(code_path, "w", encoding="utf-8") as f:
            f.write(PYTHON_CODE)
        os.chmod(code_path, _bwrap.MAIN_MODE)
        seccomp_path = os.path.join(tmp_dir, "seccomp.bpf")
        with open(seccomp_path, "wb") as f:
            f.write(_bwrap.seccomp_program())
        run_sh = shell_command(run_argv(limits), {"--seccomp": seccomp_path})
        run_python_sh = shell_command(
            run_python_argv(limits), {"--seccomp": seccomp_path, "--ro-bind-fd": code_path}
        )
        verify_shell_sandbox("run from sh", run_sh, rlimits)
        verify_shell_sandbox("run_python from sh", run_python_sh, rlimits)

        commands: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("run.sh", shell_argv(run_sh.script(rlimits, None), run_sh.argv), {}),
            ("bwrap.min", shell_argv('exec "$@"', [bwrap, *MINIMAL_BWRAP_OPTIONS]), {}),
            (
                "run_python.sh",
                shell_argv(run_python_sh.script(rlimits, None), run_python_sh.argv),
                {},
            ),
            ("python", [sys.executable, "-c", PYTHON_CODE], None),
            (
                "raw.py",
                shell_argv(
                    f'exec "$@" {_bwrap.SECCOMP_FD}<{shlex.quote(seccomp_path)}',
                    raw_python_argv(programs.find_python()),
                ),
                {},
            ),
        ]
        print_commands(commands)
        calls = {key: subprocess_call(argv, env) for key, argv, env in commands}
        measures = [
            Measure("run", f"pysandbox.run({TRUE_ARGV!r})", call_run),
            Measure("run.sh", "  its bwrap argv from sh (run.sh)", calls["run.sh"]),
            Measure(
                "bwrap.min", "  minimal bwrap /usr/bin/true from sh (bwrap.min)", calls["bwrap.min"]
            ),
            Measure("run_python", f"pysandbox.run_python({PYTHON_CODE!r})", call_run_python),
            Measure(
                "run_python.sh", "  its bwrap argv from sh (run_python.sh)", calls["run_python.sh"]
            ),
            Measure("python", f"  python -c {PYTHON_CODE}, no sandbox (python)", calls["python"]),
            Measure("eval", f"pysandbox.eval_in_sandbox({EVAL_CODE!r})", call_eval),
            Measure("raw.py", "  bwrap ... python -I -c pass from sh (raw.py)", calls["raw.py"]),
        ]
        samples = interleaved(
            [m.call for m in measures], warmup=settings.warmup, rounds=settings.rounds
        )

    print_table(measures, samples, settings.rounds)
    print_ratios(
        [
            ("run / run.sh (pysandbox's own cost)", "run", "run.sh"),
            ("run / bwrap.min (all but the floor)", "run", "bwrap.min"),
            ("run_python / run_python.sh (pysandbox's own cost)", "run_python", "run_python.sh"),
            ("run_python / python (the sandbox's cost for Python)", "run_python", "python"),
            ("eval / raw.py (issue 12 goal: <= 1.10)", "eval", "raw.py"),
        ],
        [m.key for m in measures],
        samples,
    )
    print()
    print(f"loadavg at the end: {loadavg()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args(argv)
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"python:    {platform.python_version()} ({sys.executable}), cpus={os.cpu_count()}")
    print(f"loadavg:   {loadavg()} (other work on the machine skews the figures)")
    run(QUICK if args.quick else FULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
