# SPDX-License-Identifier: MIT
"""The one launch path: every public API builds a ``Plan`` and reads the ``Facts``.

This module is the only caller of ``_sandbox.run``.  It owns what every sandbox gets,
whichever API asked for it, so that a safety default is added here once (with the
records in ``plan.py``, the command line and the passed fds in ``command.py``, the
always-on limits in ``rlimits.py`` and the errors in ``failures.py``):

* the fds inside bwrap, numbered by ``plan.FdLayout``: the syscall filter, the lifeline
  (the sandbox ends when this process does, see ``lifeline.py``), the API's payloads,
  bwrap's status pipe, the init's report pipe, the API's own captures;
* the bwrap command line around the API's part: the cached base options (namespaces,
  filter, read-only system, ``/proc``, devices, the init), bwrap's status report, the
  read-only root, the init with its identity and its report;
* the always-on resource limits (``rlimits.ALWAYS_RLIMITS``) and the clamp of a
  non-root caller's limits to its own hard limits;
* the process and memory caps of the whole sandbox (``confine``: a cgroup, or
  ``RLIMIT_NPROC``), the cgroup's CPU counter for the C core's watcher, and its v2
  group's directory, which the C core creates bwrap in;
* a failed spawn, a sandbox bwrap could not build and a program the init could not
  start raised as ``failures.py``'s ``SandboxError``, naming the cause and the fix.

``eval_in_sandbox`` and ``run``/``run_python`` differ only in their ``Plan`` (mounts,
payloads, pump options) and in how they read the ``Facts``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from .. import _sandbox
from .._cgroups.usage import CgroupUsage
from .._model.cancel import Cancelled
from .._model.errors import SandboxError, errno_text, process_wide_fix
from .._model.escape import escape_report
from .._model.record import record, replace
from .command import command_line, open_pass_fds
from .confine import Confinement, confine
from .failures import bwrap_exited, init_failure, parse_init_report, setup_failure, spawn_failure
from .lifeline import lifeline
from .plan import CLIENT_INIT_PIDFD, INIT_REPORT_CAP, REPORT_CAP, Facts, Plan
from .rlimits import within_own_limits

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    from .._model.cancel import CancelEvent
    from .codefile import CodeFile
    from .copies import AsCopy, AsTemplate
    from .waiter import Handover, WaiterEnds

    _Reply = TypeVar("_Reply")
    _Core = TypeVar("_Core")

__all__ = ["Launched", "launch", "start"]


class _HookRaised(Exception):
    """What one of a plan's callbacks raised, carried through the C core.

    The core raises ``OSError`` for its own faults, which ``launch`` maps to a
    ``SandboxError``; a callback's own ``OSError`` (a closed pipe it writes to) must
    reach the caller unchanged instead, so every callback's exception travels in this
    wrapper and is unwrapped once the core has killed and reaped the sandbox.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


def _guarded(hook: Callable[[bytes], _Reply] | None) -> Callable[[bytes], _Reply] | None:
    """``hook`` with whatever it raises wrapped in ``_HookRaised`` (None stays None)."""
    if hook is None:
        return None
    call = hook

    def guarded(chunk: bytes) -> _Reply:
        try:
            return call(chunk)
        except BaseException as error:  # KeyboardInterrupt too: unwrapped by launch
            raise _HookRaised(error) from None

    return guarded


@record(frozen=False)
class _Setup:
    """What a sandbox needs around its bwrap: the command line, the confinement, the
    code file, the fds to pass; ``resources`` releases them all."""

    argv: list[str]
    confinement: Confinement
    code_file: CodeFile | None
    pass_fds: list[int]
    resources: contextlib.ExitStack
    waiter: WaiterEnds | None = None
    #: A template's copy's: where its copy client keeps a pidfd of the copy's init.
    init_pidfd_at: int = -1

    def spawn_options(self, plan: Plan) -> dict[str, object]:
        """The C core's spawn keywords for ``plan`` (``_sandbox.start``'s)."""
        confinement = self.confinement
        options: dict[str, object] = {
            "rlimits": within_own_limits(confinement.rlimits),
            "cgroup_procs": confinement.cgroup_procs,
            "cgroup_dir_fd": confinement.cgroup_dir_fd,
            "pass_fds": self.pass_fds,
            "captures": [REPORT_CAP, INIT_REPORT_CAP, *plan.capture_caps],
        }
        if self.init_pidfd_at >= 0:
            options["init_pidfd_at"] = self.init_pidfd_at
        return options

    def pump_options(self, plan: Plan, cpu_baseline: float = 0.0) -> dict[str, object]:
        """The C core's run keywords for ``plan`` (``Sandbox.pump``'s but ``since`` and
        ``release_fd``); the CPU limit counts from ``cpu_baseline``."""
        return {
            "cgroup_cpu_fd": self.confinement.cpu_counter,
            "stdin": plan.stdin,
            "stdin_callback": _guarded(plan.stdin_callback),
            "on_stdout": _guarded(plan.on_stdout),
            "on_stderr": _guarded(plan.on_stderr),
            "stdout_cap": plan.stdout_cap,
            "stderr_cap": plan.stderr_cap,
            "kill_on_cap": plan.kill_on_cap,
            "timeout": plan.timeout,
            "cpu_limit": plan.cpu_limit + cpu_baseline if plan.cpu_limit > 0 else 0.0,
            "cancel": plan.cancel,
            "text": plan.text,
            "disk_inodes": plan.disk_inodes,
            # Each writable place is a tmpfs: the C core counts their inodes together.
            "disk_dir": ":".join(plan.writable) if plan.disk_inodes > 0 else None,
        }


def _set_up(plan: Plan, role: AsTemplate | AsCopy | None = None) -> _Setup:
    """Everything around ``plan``'s bwrap (or, for a template's copy, its copy client:
    ``role``): the code file holding ``plan.code`` (empty for a warm plan, whose
    waiter's fds are made too); on a failure nothing is left."""
    if len(plan.payloads) != len(plan.layout.payloads) or len(plan.capture_caps) != len(
        plan.layout.captures
    ):
        raise ValueError("the plan's payloads and captures do not match its fd layout")
    if (plan.code_path is None) != (plan.layout.code is None):
        raise ValueError("the plan's code path does not match its fd layout")
    if len(plan.channels) != len(plan.layout.channels):
        raise ValueError("the plan's channels do not match its fd layout")
    if len(plan.readable) != len(plan.layout.binds):
        raise ValueError("the plan's readable paths do not match its fd layout")
    if bool(plan.layout.waiter) != (plan.code is None and plan.code_path is not None):
        raise ValueError("a plan waits for its code exactly when its layout has a waiter")
    if bool(plan.layout.client) != (role is not None):
        raise ValueError("a plan has a copy client's fds exactly when it is a template or a copy")
    argv = command_line(plan, role)
    resources = contextlib.ExitStack()
    try:
        code_file = None
        if plan.code_path is not None and not _is_copy(role):
            from .codefile import CodeFile  # tempfile and shutil: only for code to run

            code_file = CodeFile(plan.code_mode, data=plan.code or b"")
            resources.callback(code_file.close)
        waiter = None
        if plan.layout.waiter:
            from .waiter import WaiterEnds  # only for warm sandboxes

            waiter = WaiterEnds(plan.template)
            resources.callback(waiter.close)
        lifeline_read, _lifeline_write = resources.enter_context(lifeline())
        confinement = resources.enter_context(
            confine(processes=plan.processes, memory_total=plan.memory_total, rlimits=plan.rlimits)
        )
        if plan.on_cgroup is not None:
            plan.on_cgroup(confinement.cgroup)
        client, template = (None, False)
        if role is not None:
            client, template = _client_fds(role, confinement)
        pass_fds = open_pass_fds(plan, lifeline_read, code_file, waiter, client, template)
    except BaseException as exc:
        resources.close()
        if isinstance(exc, OSError) and process_wide_fix(exc) is not None:
            # Out of descriptors (or the host's file table full) at any step above.
            text, fix = errno_text(exc), process_wide_fix(exc)
            raise SandboxError(f"cannot set the sandbox up ({text}): {fix}") from exc
        raise
    init_at = -1 if role is None or template else CLIENT_INIT_PIDFD
    return _Setup(argv, confinement, code_file, pass_fds, resources, waiter, init_at)


def _is_copy(role: AsTemplate | AsCopy | None) -> bool:
    """Whether ``role`` starts a template's copy."""
    if role is None:
        return False
    from .copies import AsCopy as Copy  # loaded: ``role`` is one of its records

    return isinstance(role, Copy)


def _client_fds(role: AsTemplate | AsCopy, confinement: Confinement) -> tuple[list[int], bool]:
    """New fds for the copy client's slots of a template's or a copy's layout, and
    whether it is a template's."""
    from .copies import AsCopy as Copy  # only where templates are copied
    from .copies import copy_fds, template_fds

    if isinstance(role, Copy):
        return copy_fds(role, confinement.cgroup_dir_fd, confinement.cgroup_procs), False
    return template_fds(role), True


def _close_pass_fds(setup: _Setup) -> None:
    """Close the passed fds of this process once bwrap has its own (the lifeline's read
    end stays with the lifeline)."""
    for fd in setup.pass_fds[:1] + setup.pass_fds[2:]:
        os.close(fd)
    setup.pass_fds = []


def _facts(
    raw: _sandbox.RawResult, setup: _Setup, cpu_baseline: float, counters: bool = True
) -> Facts:
    """The facts of a run that ended, or the ``SandboxError``/``Cancelled`` it means;
    without ``counters``, the cgroup's are left unread (``Facts.usage`` None)."""
    usage = setup.confinement.usage() if counters else None
    if raw["cancelled"]:
        raise Cancelled("the run was cancelled; the sandbox was killed")
    failure = init_failure(raw["captures"][1])
    if failure is not None:
        raise failure
    facts = Facts(
        raw=raw,
        init=parse_init_report(raw["captures"][1]),
        captures=raw["captures"][2:],
        captures_truncated=raw["captures_truncated"][2:],
        usage=usage,
        cpu_baseline=cpu_baseline,
        processes_exceeded=_processes_exceeded(raw, setup, usage),
    )
    if not (raw["reported"] or bwrap_exited(raw["captures"][0]) or facts.killed):
        raise setup_failure(raw)
    return facts


def _processes_exceeded(raw: _sandbox.RawResult, setup: _Setup, usage: CgroupUsage | None) -> bool:
    """Whether the process cap refused a fork or clone: exactly, from a pids cgroup's
    ``pids.events``; without one, from the C core's samples of the tree under bwrap,
    which held as many tasks as ``RLIMIT_NPROC`` allows (``Confinement.tasks_at_cap``).
    A template's copy is not under bwrap, and its uid's count is not its own alone:
    there only a pids cgroup tells."""
    at_cap = setup.confinement.tasks_at_cap
    if at_cap == 0:
        return usage is not None and usage.pids_exceeded
    return setup.init_pidfd_at < 0 and raw["peak_tasks"] >= at_cap


def _run_core(call: Callable[[], _Core]) -> _Core:
    """``call()`` of the C core, its failures mapped: a callback's exception unwrapped
    and raised as it was, the core's own ``OSError`` as a ``SandboxError``."""
    try:
        return call()
    except _HookRaised as raised:
        error = raised.error
    except OSError as exc:
        raise spawn_failure(exc) from exc
    raise error


#: The captures of every run are bwrap's status, the init's report, then the plan's: the
#: only API with captures of its own, ``run``, has one, the file records the init
#: streams after its report.
INIT_REPORT_CAPTURE = 1
FILES_CAPTURE = 2


def _ends_at_report(plan: Plan) -> tuple[int, int]:
    """The pump's ``end_at_report`` and ``end_after_stream``: a warm run ends as soon as
    the init has reported, and has streamed the files out if the plan collects them."""
    if not plan.capture_caps:
        return INIT_REPORT_CAPTURE, -1
    if len(plan.capture_caps) == 1:
        return INIT_REPORT_CAPTURE, FILES_CAPTURE
    return -1, -1


def _shown(said: bytes) -> str:
    """What a warm sandbox's waiter said (bounded by ``READY_CAP``), made inert for the
    people and logs an error message reaches (``escape_report``)."""
    return escape_report(said.decode("utf-8", "replace"))


class Launched:
    """A sandbox started ahead of its code (``start``), its interpreter running the
    waiter (``waiter.py``), until ``finish`` runs it to its end or ``close`` ends it
    unrun.  Owns the sandbox, its lifeline, its confinement (cgroup), its code file and
    its waiter's fds; ``close`` releases them all and is idempotent."""

    def __init__(
        self, sandbox: _sandbox.Sandbox, setup: _Setup, code_fd: int | None = None
    ) -> None:
        self._sandbox = sandbox
        self._setup = setup
        #: A template's copy's: where its waiter writes the code (``Handover.code``).
        self._code_fd = code_fd
        self._baseline = 0.0
        self._handed_over = False
        self.started_at = time.monotonic()

    def waiting(self) -> bool:
        """Its interpreter has started (and run its template's set-up) and waits for
        its code."""
        waiter = self._setup.waiter
        return waiter is not None and waiter.said().startswith(b"R")

    def exited(self) -> bool:
        """It ended by itself (or was run or closed): it can run nothing now."""
        return self._sandbox.exited()

    def said(self, seconds: float = 0.0) -> bytes:
        """What its waiter said so far (``R`` once ready, ``X`` and why on a failure),
        waiting up to ``seconds`` for its first word."""
        waiter = self._setup.waiter
        return waiter.said(seconds) if waiter is not None else b""

    def ready_within(self, seconds: float) -> bool:
        """Whether its waiter has said it is ready, waiting up to ``seconds`` for its
        first word (it says ``X`` instead when its template's set-up failed)."""
        waiter = self._setup.waiter
        return waiter is not None and waiter.said(seconds).startswith(b"R")

    def hand_over(
        self,
        code: bytes,
        handover: Handover,
        until: float,
        within: float,
        cancel: CancelEvent | None = None,
    ) -> None:
        """Wait until ``until`` (a ``time.monotonic()`` value) for its waiter to be ready
        (its template's set-up may still run), then write the code into its file and the
        call's part into the waiter's payload; ``finish`` then tells the waiter to go.
        Raises ``SandboxError`` when the sandbox cannot take them (it ended, its
        template's set-up failed: with its traceback, it was not ready in time: the
        message says ``within`` seconds), ``Cancelled`` once ``cancel`` is set while it
        waits; the caller then closes it."""
        code_file, waiter = self._setup.code_file, self._setup.waiter
        assert waiter is not None and (code_file is not None) != (self._code_fd is not None)
        said = waiter.said(max(0.0, until - time.monotonic()), cancel)
        if not said and cancel is not None and cancel.is_set():
            raise Cancelled("the run was cancelled; the sandbox was killed")
        if said.startswith(b"X"):
            raise SandboxError(
                "the template's set-up failed in the sandbox:\n" + _shown(said[1:]).rstrip()
            )
        baseline = self._cpu_time()
        if baseline < 0 or self._sandbox.exited() or not said.startswith(b"R"):
            # Nothing said yet: its time ran out, or its ready pipe closed (it ended).
            if not said and not self._sandbox.exited() and time.monotonic() >= until:
                raise SandboxError(f"the warm sandbox was not ready within {within:g} s")
            raise SandboxError("the warm sandbox ended before its code came" + self._last_words())
        if code_file is not None:
            code_file.write(code)
        else:
            handover = replace(handover, code=(self._code_fd, code))
        waiter.hand(handover.encode())
        self._baseline = baseline
        self._handed_over = True

    def _last_words(self) -> str:
        """What a warm sandbox that ended by itself wrote on stderr (bwrap's, or a copy
        client's reason: ``src/copy_client.c``), at most 2 KiB, made inert; "" when
        none or when it does not end within a second."""
        try:
            raw = self._sandbox.pump(timeout=1.0, stdout_cap=0, stderr_cap=2048)
        except (OSError, RuntimeError):
            return ""
        stderr = raw["stderr"]
        if not isinstance(stderr, bytes) or not stderr.strip():
            return ""
        return ": " + _shown(stderr).strip()

    def _cpu_time(self) -> float:
        """CPU seconds it has used, -1.0 once it ended: its cgroup's counter where it has
        one (every process of a waiting sandbox sleeps, so the counter is exact, and
        cheaper to read than the process tree the C core walks), else the tree's."""
        cgroup = self._setup.confinement.cgroup
        counted = cgroup.cpu_time() if cgroup is not None else None
        if counted is None or self._sandbox.exited():
            return self._sandbox.cpu_time(cgroup_cpu_fd=self._setup.confinement.cpu_counter)
        return counted

    def finish(self, plan: Plan) -> Facts:
        """Run the sandbox, handed its code, to its end under ``plan``'s stdin, callbacks,
        caps, deadline and CPU limit, and return the facts; raises as ``launch`` does.
        The C core starts the clock and only then tells the waiter to go, so the wall
        time and the limits count from there, and no Python code of this process (a
        signal handler) runs between the two.  Raises ``SandboxError`` when the waiter
        could not write the call's input files (the code never ran).  Closes it: once
        the facts are taken, in the closer's thread (``closer.close_soon``)."""
        if not self._handed_over:
            raise RuntimeError("hand_over the code first")
        from .closer import close_soon  # only for warm sandboxes

        setup = self._setup
        end_at_report, end_after_stream = _ends_at_report(plan)
        handed = False
        try:
            waiter = setup.waiter
            assert waiter is not None
            try:
                raw = _run_core(
                    lambda: self._sandbox.pump(
                        **setup.pump_options(plan, self._baseline),  # type: ignore[arg-type]
                        release_fd=waiter.go,
                        end_at_report=end_at_report,
                        end_after_stream=end_after_stream,
                    )
                )
            except SandboxError as exc:
                cause = exc.__cause__
                if getattr(cause, "stage", None) == _sandbox.STAGE_RELEASE:
                    raise SandboxError(
                        f"the warm sandbox could not be handed its code ({cause}); it was "
                        "killed before its code ran"
                    ) from cause
                raise
            said = waiter.said()
            if said.startswith(b"RX"):
                raise SandboxError(f"the sandbox could not start the program: {_shown(said[2:])}")
            # Every process of the code is gone: its counters are final.
            facts = _facts(raw, setup, self._baseline, plan.counters)
            handed = True
            close_soon(setup.resources)
        finally:
            if not handed:
                self.close()
        return facts

    def close(self) -> None:
        """Kill and reap the sandbox if it still runs, then release the rest."""
        self._setup.resources.close()


def start(plan: Plan, role: AsTemplate | AsCopy | None = None) -> Launched:
    """Start ``plan``'s sandbox (a warm plan: ``waiter.waiting_plan``) without its code:
    bwrap, the init and the interpreter begin at once, and the interpreter runs the
    waiter until ``Launched.hand_over`` and ``Launched.finish``; or, with ``role``, the
    template of a kind's copies, or a copy of it (``copies.py``).  Raises
    ``SandboxError`` when bwrap (or the copy client) cannot be started."""
    if not plan.layout.waiter:
        raise ValueError("only a warm plan (waiting_plan) can start before its code")
    setup = _set_up(plan, role)
    try:
        try:
            options = setup.spawn_options(plan)
            sandbox = _run_core(lambda: _sandbox.start(setup.argv, [], **options))  # type: ignore[arg-type]
        finally:
            _close_pass_fds(setup)
        setup.resources.callback(sandbox.kill)
    except BaseException:
        setup.resources.close()
        raise
    return Launched(sandbox, setup, _copy_code_fd(plan, role))


def _copy_code_fd(plan: Plan, role: AsTemplate | AsCopy | None) -> int | None:
    """Where a template's copy's waiter writes its code; None for any other sandbox."""
    return plan.layout.code if _is_copy(role) else None


def launch(plan: Plan) -> Facts:
    """Run ``plan``'s sandbox to its end and return the facts.

    Raises ``SandboxError`` when bwrap cannot be started, when it could not build the
    sandbox (it reports an exit code only for a sandbox it finished building), when the
    init could not start the program (a program that never ran is never blamed), or when
    the exit status was lost and nobody reported it; ``Cancelled`` when ``plan.cancel``
    fired.  An exception from one of the plan's callbacks or a ``KeyboardInterrupt``
    propagates.
    In every case the sandbox is killed and reaped first.
    """
    setup = _set_up(plan)
    with setup.resources:
        try:
            raw = _run_core(
                lambda: _sandbox.run(
                    setup.argv,
                    [],
                    **setup.spawn_options(plan),  # type: ignore[arg-type]
                    **setup.pump_options(plan),  # type: ignore[arg-type]
                )
            )
        finally:
            _close_pass_fds(setup)
    # After the clean-up: the cgroup's counters were read once, when it ended.
    return _facts(raw, setup, 0.0)
