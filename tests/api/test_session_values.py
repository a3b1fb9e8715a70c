# SPDX-License-Identifier: MIT
"""``Session.push`` and ``Session.pull``: variables in and out of a session as copies, in
the value codec's format (never pickled), checked before anything runs; what comes back
is hostile (the session's code can replace the encoder) and cannot harm the host."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest
from support.sessions import watched_session

from pysandbox import Limits, SandboxError, Session

MiB = 2**20
#: numpy and pandas take seconds of CPU to import on a busy machine.
LIMITS = Limits(memory=1024 * MiB, wall_time=120, cpu_time=60)

#: Code that makes the session's encoder send ``FORGED`` (JSON text) instead.
FORGE = """
globals_of_keeper = display.__self__.send_frame.__func__.__globals__
class Forged:
    @staticmethod
    def encode(value, max_bytes, **options):
        return FORGED.encode()
globals_of_keeper["ValueCodec"] = Forged
"""


@pytest.fixture
def session() -> Iterator[Session]:
    with watched_session(LIMITS) as opened:
        yield opened


def test_values_go_in_and_come_back_as_copies(session: Session) -> None:
    sent = {
        "n": 2**70,
        "text": "h\u00e9\0llo",
        "raw": b"\x00\xff",
        "mixed": (1, [2.5, None, True], {"k": {3, 4}, 5: frozenset({b"x"})}),
        "z": 1 - 2j,
    }
    session.push(sent, extra=bytearray(b"ab"))
    result = session.run(
        "kinds = sorted(type(v).__name__ for v in (n, text, raw, mixed, z, extra))"
    )
    assert result, result
    back = session.pull("n", "text", "raw", "mixed", "z", "extra", "kinds")
    assert {key: back[key] for key in sent} == sent
    assert type(back["mixed"]) is tuple and type(back["extra"]) is bytearray
    assert back["kinds"] == ["bytearray", "bytes", "complex", "int", "str", "tuple"]


def test_numpy_arrays_and_pandas_frames_round_trip(session: Session) -> None:
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    grid = np.arange(12, dtype=np.float32).reshape(3, 4)
    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [0.5, 1.5, np.nan]})
    session.push(grid=grid, frame=frame)
    assert session.run("doubled = grid * 2\nframe['d'] = frame['a'] + 1", cpu_time=60)
    back = session.pull("doubled", "frame")
    assert back["doubled"].dtype == np.float32 and (back["doubled"] == grid * 2).all()
    expected = frame.assign(d=frame["a"] + 1)
    assert back["frame"].equals(expected), back["frame"]


def test_a_name_not_defined_is_a_name_error_and_the_session_goes_on(session: Session) -> None:
    session.run("x = 1")
    with pytest.raises(NameError, match="'nothing' is not defined"):
        session.pull("x", "nothing")
    assert session.pull("x") == {"x": 1}


def test_a_value_the_codec_cannot_pass_is_a_type_error_naming_it(session: Session) -> None:
    session.run("class Thing:\n    pass\nbox = {'inner': [Thing()]}")
    with pytest.raises(TypeError, match=r"Thing"):
        session.pull("box")
    with pytest.raises(TypeError, match="push"):
        session.push(f=lambda: 1)
    assert session.run("box['inner'][0].__class__.__name__").value == "'Thing'"


def test_values_over_the_cap_are_refused_both_ways() -> None:
    with Session(limits=Limits(values=MiB, memory=1024 * MiB, cpu_time=10)) as small:
        with pytest.raises(ValueError, match=r"Limits\.values"):
            small.push(big=b"x" * (2 * MiB))
        small.run("big = b'x' * (2 * 2**20)")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(ValueError):
            small.pull("big")
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 16 * 1024
        assert small.pull("__name__") == {"__name__": "__main__"}


@pytest.mark.parametrize(
    ("names", "error"),
    [
        (("1x",), ValueError),
        (("class",), ValueError),
        ((3,), TypeError),
        ((), ValueError),
    ],
)
def test_names_are_checked_before_anything_runs(
    session: Session, names: tuple[object, ...], error: type[Exception]
) -> None:
    with pytest.raises(error, match="pull"):
        session.pull(*names)  # type: ignore[arg-type]
    with pytest.raises(error, match="push"):
        session.push(dict.fromkeys(names, 1))  # type: ignore[arg-type]
    assert session.alive


HOSTILE = {
    "not JSON": "{{{",
    "an object dtype": '{"values": {"$dict": [["x", {"$ndarray": {"dtype": "|O8", '
    '"shape": [1], "data": "AAAAAAAAAAA="}}]]}}',
    "a shape past the data": '{"values": {"$dict": [["x", {"$ndarray": {"dtype": "<f8", '
    '"shape": [1099511627776, 1099511627776], "data": ""}}]]}}',
    "an unknown tag": '{"values": {"$dict": [["x", {"$pickle": "gASV"}]]}}',
    "no dict of names": '{"values": [1, 2]}',
    "other names": '{"values": {"$dict": [["y", 1]]}}',
    "an error of no known kind": '{"error": "boom", "kind": "exec"}',
    "deep nesting": '{"values": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("forged", HOSTILE.values(), ids=list(HOSTILE))
def test_forged_values_cannot_harm_the_host(session: Session, forged: str) -> None:
    """The session's code can replace the keeper's encoder: whatever it sends, the host
    raises, keeps nothing of it, and the session goes on."""
    session.run(f"FORGED = {forged!r}\nx = 1")
    session.run(FORGE)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises((SandboxError, ValueError)):
        session.pull("x")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 16 * 1024
    assert session.run("1 + 1").value == "2"


def test_why_a_variable_did_not_come_back_is_told_whatever_the_cap() -> None:
    """The reason (a name not defined, quoted in full) may be longer than a small
    ``Limits.values``: it still comes back as the right exception."""
    with (
        watched_session(Limits(values=100, cpu_time=5)) as small,
        pytest.raises(NameError, match="is not defined"),
    ):
        small.pull("a" * 300)
