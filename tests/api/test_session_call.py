# SPDX-License-Identifier: MIT
"""``Session.call``: a function of the session's code called with copies of host values,
its return value back as a Python value and its output apart, its exception as data with
its own frames only; a value that cannot cross, a loop or a memory hog costs only the
call, and the namespace keeps nothing of the harness.

One session serves the module (a session starts in about 100 ms): the tests that need
a state of their own make names no other test reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from support.sessions import watched_session
from support.timing import slow

from pysandbox import CallResult, Limits, SandboxError, SandboxFailure, Session, Status
from pysandbox._model.call_result import CALL_TEXT_MAX, call_text

LIMITS = Limits(wall_time=slow(5), cpu_time=1)

SOLUTION = b"""\
import sys

calls = []

def add(a, b):
    print("adding", a, "and", b)
    print("careful", file=sys.stderr)
    calls.append((a, b))
    return a + b

def echo(*args, **kwargs):
    return args, kwargs

def divide(a, b):
    return ratio(a, b)

def ratio(a, b):
    return a / b

def count():
    yield 1

class Point:
    pass

def point():
    return Point()

def nested():
    return {"ok": [1, (2, count())]}

def big(n):
    return b"x" * n

def spin():
    calls.append("spin")
    while True:
        pass

def hog():
    calls.append("hog")
    return bytearray(512 * 2**20)

def called():
    return list(calls)

class Shapes:
    class Square:
        @staticmethod
        def area(side):
            return side * side
"""


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    with watched_session(LIMITS) as opened:
        opened.run("import sys; sys.dont_write_bytecode = True")
        opened.push(solution_source=SOLUTION)
        opened.run("open('solution.py', 'wb').write(solution_source); del solution_source")
        yield opened


def names_of(session: Session) -> list[str]:
    """The session's global names: a call's private ones would show here."""
    session.run("listed = sorted(name for name in globals() if name != 'listed')")
    listed = session.pull("listed")["listed"]
    assert isinstance(listed, list)
    return listed


def test_a_module_function_returns_its_value_with_its_output_apart(session: Session) -> None:
    result = session.call("solution.add", 2, 3)
    assert isinstance(result, CallResult) and result, result
    assert result.value == 5 and type(result.value) is int
    assert result.stdout == b"adding 2 and 3\n" and result.stderr == b"careful\n"
    assert result.committed and result.status is Status.OK and result.error is None
    assert result.target == "solution.add" and result.call == "solution.add(2, 3)"
    assert result.check() is result
    assert session.call("solution.add", "a", b="b").value == "ab"


def test_every_type_of_the_value_format_crosses_both_ways(session: Session) -> None:
    args = (b"\x00\xff", (1, [2.5, None]), {3, 4}, frozenset({b"k"}), 1 - 2j, 2**100)
    kwargs = {"text": "h\u00e9\0llo", "raw": bytearray(b"ab"), "keys": {(1, 2): True}}
    result = session.call("solution.echo", *args, **kwargs)
    assert result, result
    back_args, back_kwargs = result.value  # type: ignore[misc]
    assert back_args == args and back_kwargs == kwargs
    assert [type(value) for value in back_args] == [type(value) for value in args]
    assert type(back_kwargs["raw"]) is bytearray
    nan = session.call("solution.echo", math.nan, -math.inf).value
    assert math.isnan(nan[0][0]) and nan[0][1] == -math.inf  # type: ignore[index]


def test_a_function_of_the_namespace_and_a_nested_attribute_are_targets(
    session: Session,
) -> None:
    session.run("def scaled(x, *, by=2):\n    return [x] * by")
    assert session.call("scaled", "a", by=3).value == ["a", "a", "a"]
    assert session.call("solution.Shapes.Square.area", 7).value == 49
    session.run("import solution as sol_alias")
    assert session.call("sol_alias.Shapes.Square.area", 3).value == 9
    assert session.call("math.gcd", 12, 18).value == 6
    session.run("def refuse(why):\n    raise ValueError(why)")
    refused = session.call("refuse", "no")
    assert refused.error is not None and refused.error.message == "no"
    assert refused.error.traceback.count('  File "') == 1, refused.error.traceback
    assert ", line 2, in refuse\n    raise ValueError(why)" in refused.error.traceback


def test_an_exception_comes_back_with_the_functions_own_frames(session: Session) -> None:
    result = session.call("solution.divide", 1, 0)
    assert result.committed and result.status is Status.OK and not result
    assert result.value is None and result.error is not None
    assert result.error.type == "ZeroDivisionError"
    assert result.error.message == "division by zero"
    trace = result.error.traceback
    assert trace.startswith("Traceback (most recent call last):\n"), trace
    assert 'File "/sandbox/solution.py", line 15, in divide' in trace
    assert "in ratio" in trace and "return a / b" in trace
    assert "<cell-" not in trace and "pysandbox" not in trace and "importlib" not in trace
    with pytest.raises(SandboxFailure) as failed:
        result.check()
    message = str(failed.value)
    assert message.startswith("solution.divide(1, 0) raised ZeroDivisionError: division by zero\n")
    assert "in ratio" in message and "--- stdout ---\n(empty)" in message
    assert failed.value.result is result


def test_a_target_that_is_not_there_is_the_calls_error(session: Session) -> None:
    missing = {
        "no_such_name": ("NameError", "name 'no_such_name' is not defined in the session"),
        "no_such_module.f": ("ModuleNotFoundError", "No module named 'no_such_module'"),
        "solution.nothing": ("AttributeError", "module 'solution' has no attribute 'nothing'"),
    }
    for target, (kind, message) in missing.items():
        result = session.call(target)
        assert result.committed and result.error is not None, result
        assert (result.error.type, result.error.message) == (kind, message)
        assert "<cell-" not in result.error.traceback


def test_a_value_that_cannot_cross_is_the_calls_error_and_the_session_goes_on(
    session: Session,
) -> None:
    generator = session.call("solution.count")
    assert generator.committed and generator.value_refused and not generator
    assert generator.error is not None and generator.error.type == "TypeError"
    assert generator.error.message.startswith(
        "the return value of solution.count() cannot cross the sandbox boundary: "
        "a generator cannot be passed; supported: None, bool, int"
    )
    own_class = session.call("solution.point").error
    assert own_class is not None and "a solution.Point cannot be passed" in own_class.message
    inside = session.call("solution.nested").error
    assert inside is not None and "value['ok'][1][1]: a generator" in inside.message
    with pytest.raises(SandboxFailure, match=r"^the return value of solution.count\(\) cannot"):
        generator.check()
    assert session.call("solution.add", 1, 1).value == 2


def test_a_value_over_the_cap_is_refused_both_ways(session: Session) -> None:
    cap = session.limits.values
    over = session.call("solution.big", cap + 1)
    assert over.value_refused and over.error is not None and over.error.type == "ValueError"
    assert "passes max_bytes" in over.error.message
    with pytest.raises(ValueError, match=r"^args.*Limits.values is"):
        session.call("solution.echo", b"x" * cap)
    assert session.call("solution.big", 3).value == b"xxx"


def test_a_loop_is_rolled_back_and_the_next_call_sees_the_state_before(
    session: Session,
) -> None:
    before = session.call("solution.called").value
    looping = session.call_with("solution.spin", cpu_time=0.5)
    assert looping.rolled_back and looping.status is Status.CPU_TIME_EXCEEDED, looping
    assert looping.reason == "CPU time limit of 0.5 s reached" and looping.value is None
    with pytest.raises(SandboxFailure) as failed:
        looping.check()
    assert str(failed.value).startswith("solution.spin() did not finish: CPU time limit of 0.5 s")
    waited = session.call_with("time.sleep", (30,), wall_time=0.5)
    assert waited.status is Status.WALL_TIME_EXCEEDED
    assert waited.reason == "wall time limit of 0.5 s reached"
    assert session.call("solution.called").value == before


def test_memory_exhaustion_is_rolled_back(session: Session) -> None:
    before = session.call("solution.called").value
    hogging = session.call("solution.hog")
    assert hogging.rolled_back and hogging.status is Status.MEMORY_EXCEEDED, hogging
    assert hogging.reason == "memory limit of 256 MiB reached"
    assert session.call("solution.called").value == before


def test_the_namespace_and_the_last_value_are_left_as_they_were(session: Session) -> None:
    session.run("'the last value'")
    before = names_of(session)
    calls = {"solution.add": (1, 2), "solution.divide": (1, 0), "solution.count": ()}
    for target, args in {**calls, "solution.spin": (), "solution.hog": ()}.items():
        session.call_with(target, args, cpu_time=0.5)
    assert session.run("_").value == "'the last value'"
    assert names_of(session) == before
    assert not [name for name in before if "pysandbox" in name]


def test_bad_targets_and_arguments_are_named_before_anything_runs(session: Session) -> None:
    bad_targets = {
        None: (TypeError, "target must be str, not NoneType"),
        "": (ValueError, "target must name a function"),
        "a..b": (ValueError, "target must be a name or dotted names"),
        "os.system('x')": (ValueError, "target must be a name or dotted names"),
        "import": (ValueError, "target must be a name or dotted names"),
    }
    for target, (error, message) in bad_targets.items():
        with pytest.raises(error, match=message):
            session.call(target)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"args\[1\]: an object cannot be passed"):
        session.call("solution.echo", 1, object())
    with pytest.raises(TypeError, match=r"kwargs\['x'\]\[0\]: a function cannot be passed"):
        session.call("solution.echo", x=[lambda: 1])
    with pytest.raises(TypeError, match="args must be a sequence"):
        session.call_with("solution.echo", "ab")
    with pytest.raises(TypeError, match="kwargs: a keyword must be str"):
        session.call_with("solution.echo", (), {1: 2})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="cpu_time"):
        session.call_with("solution.echo", cpu_time=-1)
    assert session.call("solution.add", 0, 0).value == 0


def test_a_keyword_named_as_an_option_goes_to_the_function(session: Session) -> None:
    result = session.call("solution.echo", target="t", wall_time=1, cpu_time=2)
    assert result.value == ((), {"target": "t", "wall_time": 1, "cpu_time": 2})


def test_call_async_awaits_a_call() -> None:
    import asyncio

    with Session(limits=LIMITS) as session:
        session.run("def twice(x):\n    return 2 * x")
        assert asyncio.run(session.call_async("twice", 21)).value == 42
        session.close()
        with pytest.raises(SandboxError, match="has ended"):
            session.call("twice", 1)


def test_call_text_is_short_python() -> None:
    assert call_text("solution.add", (2, 3)) == "solution.add(2, 3)"
    assert call_text("f", ("a",), {"key": b"x"}) == "f('a', key=b'x')"
    shortened = call_text("f", (list(range(100)), "y" * 200))
    assert shortened == "f([0, 1, 2, 3, 4, 5, ...], 'yyyyyyyyyyyy...yyyyyyyyyyyyy')"
    cut = call_text("f", ("y" * 200,) * 4)
    assert len(cut) == CALL_TEXT_MAX and cut.endswith("...)")
