# SPDX-License-Identifier: MIT
"""Running the API through a warm Runner, for the tests that prove the code cannot tell.

``WarmThrough`` has ``eval_in_sandbox`` and ``run_python`` with the module-level
signatures.  Each call makes a ``Runner(warm=1)``, makes one call of the same kind with
code that does nothing (so the pool refills for that kind: stdin, callbacks and cancel
are not part of a kind), waits until a warm sandbox of that kind waits, makes the real
call, checks that the call took that warm sandbox, and closes the Runner, so no warm
sandbox outlives the call and a test that counts the host's processes sees none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import pysandbox
from pysandbox import Runner
from support.timing import slow

_Result = TypeVar("_Result")

#: Keywords of run_python that belong to one call, not to its kind.
_PER_CALL = ("stdin", "on_stdout", "on_stderr", "cancel")


def wait_ready(runner: Runner, count: int = 1) -> None:
    """Wait until ``count`` warm sandboxes of ``runner`` wait (on a busy machine too)."""
    deadline = time.monotonic() + slow(20.0)
    while runner.warm_ready < count:
        assert time.monotonic() < deadline, "the warm pool did not refill"
        time.sleep(0.01)


def through_warm(prime: Callable[[Runner], object], call: Callable[[Runner], _Result]) -> _Result:
    """``call(runner)`` in a warm sandbox of its kind, made ready by ``prime(runner)``.
    Arguments the API refuses are refused by the priming call too: then the real call
    runs as it is, to raise as it would."""
    with Runner(warm=1) as runner:
        pool = runner._pool
        assert pool is not None
        try:
            prime(runner)
        except (TypeError, ValueError):
            return call(runner)
        except pysandbox.SandboxError:
            pass
        wait_ready(runner)
        before = pool.taken
        result = call(runner)
        assert pool.taken == before + 1, "the call did not run in a warm sandbox"
        return result


def eval_in_sandbox(python_code: str, *args: Any, **kwargs: Any) -> pysandbox.ProcessOutput:
    """``pysandbox.eval_in_sandbox`` in a warm sandbox."""
    return through_warm(
        lambda runner: runner.eval_in_sandbox("pass", *args, **kwargs),
        lambda runner: runner.eval_in_sandbox(python_code, *args, **kwargs),
    )


def run_python(code: str, **kwargs: Any) -> pysandbox.Result:
    """``pysandbox.run_python`` in a warm sandbox (files, args, limits, readable and env
    are part of the kind: the priming call gives the same)."""
    kind = {name: value for name, value in kwargs.items() if name not in _PER_CALL}
    return through_warm(
        lambda runner: runner.run_python("pass", **kind),
        lambda runner: runner.run_python(code, **kwargs),
    )
