# SPDX-License-Identifier: MIT
"""A Runner call's warm form: the plan of the sandbox that can wait for it
(``waiter.waiting_plan``: its kind), and what is handed to that sandbox when the call
takes it (``waiter.Handover``).

What a call brings that the interpreter does not read as it starts is handed over, not
part of the kind: the code, its ``args``, its input files, the environment variables
that ``waiter.starts_up`` does not name, and its ``files_include`` and
``files_exclude`` (the init reads them from the hand-over).  So calls that differ only in those
share warm sandboxes.  A ``Template``'s imports, set-up and files are part of the kind,
and with a template so is the call's whole ``env`` (its modules read theirs as they
are imported).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import resource

from .._api.call import Call
from .._api.run import build_plan, check_file_filter
from .._launch.bwrap import MAIN_PATH
from .._launch.plan import Plan
from .._launch.waiter import Handover, encode_template, starts_up, waiting_plan
from .._model.limits import Limits
from .._model.template import Template

__all__ = ["eval_form", "python_form"]


def _check_apart(call: Call, template: Template) -> None:
    """``ValueError`` naming ``files`` when a call's input file would be one of the
    template's (or a directory of one, or below one)."""
    for name in call.files or {}:
        for kept in template.files or {}:
            if name == kept or name.startswith(kept + "/") or kept.startswith(name + "/"):
                raise ValueError(f"files: {name!r} clashes with the template's file {kept!r}")


def python_form(call: Call, template: Template | None, files: bytes = b"") -> tuple[Plan, Handover]:
    """The warm form of a ``run_python`` call (``call.code`` set, the Runner's defaults
    merged, ``call.program`` ``[python, FLAGS..., MAIN_PATH, ARGS...]``), with
    ``template`` run before the sandbox waits; ``files``: the call's input files as a
    stream (its fresh plan's payload: they are encoded once)."""
    if template is not None:
        _check_apart(call, template)
    env = dict(call.env or {})
    # A template's modules read their variables as they are imported (OpenBLAS reads
    # OMP_NUM_THREADS): with one, the whole env is the kind's.
    kept = env if template is not None else {k: v for k, v in env.items() if starts_up(k)}
    program = tuple(call.program)
    code_at = program.index(MAIN_PATH)
    limits = call.limits if call.limits is not None else Limits()
    kind = _kind_plan(
        limits, tuple(call.readable), tuple(kept.items()), program[:code_at], template
    )
    include, exclude = check_file_filter(call.files_include, call.files_exclude)
    handover = Handover(
        program=program,
        code_at=code_at,
        env=tuple((key, value) for key, value in env.items() if key not in kept),
        files=files,
        files_include=include,
        files_exclude=exclude,
    )
    return kind, handover


@functools.lru_cache(maxsize=64)
def _kind_plan(
    limits: Limits,
    readable: tuple[str, ...],
    env: tuple[tuple[str, str], ...],
    head: tuple[str, ...],
    template: Template | None,
) -> Plan:
    """The warm plan of a kind, built once (a template's files are encoded once, not at
    every call): the interpreter and its flags ``head``, the limits, the readable paths,
    the variables kept in the kind."""
    plan, _ = build_plan(
        Call(
            [*head, MAIN_PATH],
            code=b"",
            limits=limits,
            readable=readable,
            env=dict(env),
            files=template.files if template is not None else None,
        ),
        waiter=True,
        client=template is not None and template.copies,
    )
    if template is None:
        return waiting_plan(plan)
    if template.copies:
        payload = encode_template(template.imports, template.setup, plan.layout.client[0])
        return dataclasses.replace(
            waiting_plan(_cpu_for_setup(plan, template), payload), copies=True
        )
    payload = encode_template(template.imports, template.setup)
    return waiting_plan(_cpu_for_setup(plan, template), payload)


def _cpu_for_setup(plan: Plan, template: Template) -> Plan:
    """``plan`` with its ``RLIMIT_CPU`` backstop raised by the template's set-up time:
    the set-up's CPU is the sandbox's before the call, which the C core's watcher does
    not count but the per-process limit would."""
    extra = math.ceil(template.timeout)
    rlimits = [
        (kind, soft + extra, hard + extra) if kind == resource.RLIMIT_CPU else (kind, soft, hard)
        for kind, soft, hard in plan.rlimits
    ]
    return dataclasses.replace(plan, rlimits=rlimits)


def eval_form(plan: Plan) -> tuple[Plan, Handover]:
    """The warm form of an ``eval_in_sandbox`` plan built with its waiter's fds
    (``eval_plan(waiter=True)``; no files, no environment, no arguments: only its code
    is handed over)."""
    program = tuple(plan.program)
    return waiting_plan(plan), Handover(program, list(program).index(plan.code_path or ""))
