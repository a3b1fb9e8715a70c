# SPDX-License-Identifier: MIT
"""The value codec: Python values into a sandbox and out of it as JSON that carries no
code.  Round trips keep each type exactly, refusals name where in the value, the budget
stops the walk before the bytes are made, and hostile trees are one ``ValueCodecError``."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysandbox._model import untrusted, value_codec
from pysandbox._model.value_codec import ValueCodec, ValueCodecError

pytestmark = pytest.mark.no_bwrap

MB = 1 << 20


def round_trip(value: object, max_bytes: int = MB) -> Any:
    """The value back through the host's bounded parser, as a sandbox's reply is read."""
    data = ValueCodec.encode(value, max_bytes=max_bytes)
    inside = ValueCodec.decode(data)  # the sandbox's side
    back = ValueCodec.decode_tree(untrusted.loads(data, max_bytes=max_bytes))
    assert type(inside) is type(back)
    return back


def same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down (nan equal to nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(typing_float(b))
    if isinstance(a, complex):
        return same(a.real, typing_complex(b).real) and same(a.imag, typing_complex(b).imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        pairs = list(b.items())  # type: ignore[attr-defined]
        return list(a) == [k for k, _ in pairs] and all(
            same(k1, k2) and same(v1, v2) for (k1, v1), (k2, v2) in zip(a.items(), pairs)
        )
    return a == b


def typing_float(value: object) -> float:
    assert isinstance(value, float)
    return value


def typing_complex(value: object) -> complex:
    assert isinstance(value, complex)
    return value


def kind_of(value: object) -> str:
    """A test id that is the same in every process: a set's ``repr`` is not (its order
    follows the hash seed), and pytest-xdist needs the same ids in each worker."""
    return type(value).__name__


PLAIN = [
    None,
    True,
    False,
    0,
    -(2**63) + 1,
    2**63 - 1,
    2**63,
    -(10**4299),
    1.5,
    -0.0,
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    'héllo\n"\\\u2028',
    "a lone \ud800 surrogate",
    b"",
    b"\x00\xff" * 10,
    bytearray(b"abc"),
    1 + 2j,
    complex(float("nan"), float("-inf")),
    [],
    (),
    (1,),
    {},
    set(),
    frozenset(),
    {1, "a", (2, b"x"), None, frozenset({3})},
    frozenset({1.5, "b"}),
    [1, [2, (3, {"k": [b"v", {4}]})]],
    {"a": 1, 2: "b", 2.5: None, True: [], None: (), (1, "t"): {}, b"k": 1, frozenset({1}): 2},
    {"$dict": 1, "$int": "7"},  # user data that looks like tags stays data
    ["$tuple", {"$tuple": []}],
]


@pytest.mark.parametrize("value", PLAIN, ids=kind_of)
def test_plain_values_round_trip_with_their_exact_types(value: object) -> None:
    assert same(round_trip(value), value)


def test_nested_containers_keep_tuple_set_and_bytearray_types() -> None:
    value = {"t": (1, (2, [3])), "b": bytearray(b"x"), "s": {(1, 2)}, "f": frozenset({b"z"})}
    back = round_trip(value)
    assert type(back["t"]) is tuple and type(back["t"][1]) is tuple
    assert type(back["t"][1][1]) is list
    assert type(back["b"]) is bytearray and type(back["f"]) is frozenset
    assert back == value


def test_the_format_is_the_documented_json() -> None:
    data = ValueCodec.encode({"a": (1, float("nan"), 2**64, b"\x01")}, max_bytes=MB)
    assert json.loads(data) == {
        "$dict": [
            ["a", {"$tuple": [1, {"$float": "nan"}, {"$int": str(2**64)}, {"$bytes": "AQ=="}]}]
        ]
    }
    assert ValueCodec.encode([1.0, "x"], max_bytes=MB) == b'[1.0,"x"]'


class Foo:
    pass


@pytest.mark.parametrize(
    ("value", "where", "what"),
    [
        (Foo(), "value: ", "a test_value_codec.Foo cannot be passed; supported: None, bool"),
        ({"a": [0, 1, 2, Foo()]}, "value['a'][3]: ", "Foo cannot be passed"),
        ({"a": {Foo(): 1}}, "value['a']<key #0>: ", "Foo cannot be passed"),
        ([{1, 2, print}], "value[0]<item #", "builtin_function_or_method cannot be passed"),
        ((1, {"k": object}), "value[1]['k']: ", "a type cannot be passed"),
        ([10 ** (4301)], "value[0]: ", "an int of more than 4300 digits"),
        ([2 ** (10**6)], "value[0]: ", "an int of more than 4300 digits"),
    ],
)
def test_refusals_name_where_in_the_value(value: object, where: str, what: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        ValueCodec.encode(value, max_bytes=MB)
    assert str(caught.value).startswith(where), caught.value
    assert what in str(caught.value)


def test_unsupported_types_are_type_errors_and_subclasses_are_refused() -> None:
    import collections
    import enum

    class Colour(enum.IntEnum):
        RED = 1

    for value in (Colour.RED, collections.OrderedDict(a=1), collections.namedtuple("P", "x")(1)):
        with pytest.raises(TypeError, match="cannot be passed"):
            ValueCodec.encode(value, max_bytes=MB)
    with pytest.raises(TypeError, match=r"^x\[0\]: a test_value_codec.Foo"):
        ValueCodec.encode([Foo()], max_bytes=MB, name="x")


def test_a_value_holding_itself_is_refused() -> None:
    looped: list[object] = [1, 2]
    looped.append({"again": looped})
    with pytest.raises(ValueError, match=r"^value\[2\]\['again'\]: the value contains itself"):
        ValueCodec.encode(looped, max_bytes=MB)
    shared = [1]
    assert round_trip([shared, shared, (shared,)]) == [[1], [1], ([1],)]


def nested(levels: int) -> object:
    value: object = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_nesting_is_bounded_as_the_hosts_parser_bounds_it() -> None:
    assert round_trip(nested(32)) == nested(32)
    with pytest.raises(ValueError, match="nested deeper than 32 levels"):
        ValueCodec.encode(nested(33), max_bytes=MB)
    # A tuple costs two levels of JSON ({"$tuple": [...]}), a dict three.
    deep: object = ()
    for _ in range(15):
        deep = (deep,)
    assert round_trip(deep) == deep
    with pytest.raises(ValueError, match=r"^value(\[0\]){16}: nested deeper"):
        ValueCodec.encode((deep,), max_bytes=MB)
    with pytest.raises(ValueCodecError, match="nested deeper than 32 levels"):
        ValueCodec.decode_tree(nested(33))
    assert ValueCodec.decode_tree(nested(32)) == nested(32)


@pytest.mark.parametrize(
    "value",
    [
        ["x" * 100] * 10,
        [1.0 / 3, -1e-300, 2**63 - 1, -(2**63) + 1, True, False, 0],
        ("é" * 10, "\x00\"'", ""),
        {frozenset({1.5, "a"}): [None, 2**64, float("nan"), b"xy", 1j]},
        [[], (), {}, set(), frozenset(), [[[]]]],
        [None],
        None,
    ],
    ids=kind_of,
)
def test_max_bytes_is_the_exact_limit_of_the_encoded_size(value: object) -> None:
    """Counted while walking, the size is never over-estimated: a value that fits is
    never refused."""
    size = len(ValueCodec.encode(value, max_bytes=MB))
    assert len(ValueCodec.encode(value, max_bytes=size)) == size
    with pytest.raises(ValueError, match="max_bytes"):
        ValueCodec.encode(value, max_bytes=size - 1)
    assert same(ValueCodec.decode(ValueCodec.encode(value, max_bytes=size)), value)


def test_max_bytes_names_where_the_walk_stopped() -> None:
    value = ["x" * 100] * 10
    with pytest.raises(ValueError, match=r"^value\[\d\]: the encoded value passes max_bytes=500"):
        ValueCodec.encode(value, max_bytes=500)
    with pytest.raises(ValueError, match=r"^value: .*max_bytes=10"):
        ValueCodec.encode(b"x" * 100, max_bytes=10)


def test_a_shared_value_repeated_many_times_stops_at_the_budget() -> None:
    """2**30 references to one list: the walk stops after about max_bytes of them."""
    value: list[object] = ["abc"]
    for _ in range(30):
        value = [value, value]
    with pytest.raises(ValueError, match="passes max_bytes=100000"):
        ValueCodec.encode(value, max_bytes=100_000)


def test_the_module_runs_embedded_and_defines_only_its_names() -> None:
    text = Path(value_codec.__file__).read_text(encoding="utf-8")
    names: dict[str, object] = {"__name__": "embedded"}
    exec(compile(text, "<embedded codec>", "exec"), names)
    modules = {"base64", "binascii", "json", "math", "sys", "typing"}
    assert set(names) == {"__name__", "__builtins__", "__doc__", "annotations"} | modules | {
        "ValueCodec",
        "ValueCodecError",
    }
    codec: Any = names["ValueCodec"]
    assert codec.decode(codec.encode({"a": (1, b"x")}, max_bytes=100)) == {"a": (1, b"x")}
    assert issubclass(codec.decode_tree.__globals__["ValueCodecError"], ValueError)


def test_the_module_runs_without_pysandbox_numpy_or_pandas(tmp_path: Path) -> None:
    """``-I -S``: neither pysandbox nor site-packages importable; an array's tag asks for
    numpy, and the rest works."""
    program = tmp_path / "embedded.py"
    program.write_text(
        Path(value_codec.__file__).read_text(encoding="utf-8")
        + "\nfor name in ('pysandbox', 'numpy', 'pandas'):\n"
        "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
        "    else:\n        raise SystemExit(name + ' is importable')\n"
        "data = ValueCodec.encode({'a': (1, 2.5, {b'x'})}, max_bytes=1000)\n"
        "assert ValueCodec.decode(data) == {'a': (1, 2.5, {b'x'})}, data\n"
        "try:\n    ValueCodec.decode(b'{\"$ndarray\": {}}')\n"
        "except ValueCodecError as exc:\n    print(exc)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-I", "-S", str(program)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "numpy is needed to decode this value\n"


def test_the_source_keeps_the_embedding_rules() -> None:
    """The future import first, the standard library at the top, numpy, pandas and two
    more modules only inside functions, no relative import, no ``__main__`` block."""
    import ast

    text = Path(value_codec.__file__).read_text(encoding="utf-8")
    tree = ast.parse(text)
    first = tree.body[1]
    assert isinstance(first, ast.ImportFrom) and first.module == "__future__"
    top = [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names]
    assert top == ["base64", "binascii", "json", "math", "sys", "typing"]
    inner = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module == "__future__", node.lineno
        if isinstance(node, ast.Import):
            inner |= {alias.name for alias in node.names}
        assert not isinstance(node, ast.If) or "__name__" not in ast.unparse(node.test)
    assert inner - set(top) == {"importlib", "re"}  # numpy and pandas: by importlib
    called = {
        node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    assert not {"eval", "exec", "compile", "__import__"} & called
    assert not [name for name in called if "pickle" in name or name.split(".")[-1] == "load"]
    keywords = {
        k.arg for node in ast.walk(tree) if isinstance(node, ast.Call) for k in node.keywords
    }
    assert "allow_pickle" not in keywords


@st.composite
def json_trees(draw: st.DrawFn) -> object:
    """JSON-ish trees, biased toward the format's tags, fields and dtypes."""
    texts = st.one_of(
        st.text(max_size=8),
        st.sampled_from(
            [
                "nan",
                "inf",
                "-inf",
                "-12",
                "9" * 30,
                "AA==",
                "AQID",
                "!!",
                "<f8",
                "|b1",
                "<M8[ns]",
                "<m8[10ms]",
                "O",
                "|O8",
                "<U5",
                "V8",
                "<f3",
                "python",
                "NA",
            ]
        ),
    )
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(),
        texts,
    )
    keys = st.one_of(
        st.sampled_from([*ValueCodec._Decoder.VALUES, "$objects", "$strings", "$nope"]),
        st.sampled_from(
            [
                "dtype",
                "shape",
                "data",
                "index",
                "columns",
                "name",
                "start",
                "stop",
                "step",
                "na",
                "storage",
                "values",
            ]
        ),
        st.text(max_size=4),
    )
    return draw(
        st.recursive(
            leaves,
            lambda inner: st.one_of(
                st.lists(inner, max_size=4),
                st.dictionaries(keys, inner, max_size=4),
                st.dictionaries(keys, inner, min_size=1, max_size=1),
            ),
            max_leaves=30,
        )
    )


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_trees())
def test_decode_tree_of_any_tree_is_a_value_or_a_codec_error(tree: object) -> None:
    pytest.importorskip("pandas")
    with contextlib.suppress(ValueCodecError):
        ValueCodec.decode_tree(tree)


HASHABLE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.binary(max_size=5)
    | st.complex_numbers(allow_nan=False),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
VALUES = st.recursive(
    HASHABLE | st.floats() | st.builds(bytearray, st.binary(max_size=5)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(HASHABLE, inner, max_size=4)
        | st.sets(HASHABLE, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_any_value_of_the_plain_types_round_trips(value: object) -> None:
    try:
        data = ValueCodec.encode(value, max_bytes=MB)
    except ValueError as exc:
        assert "nested deeper than 32" in str(exc)
        return
    assert same(ValueCodec.decode_tree(untrusted.loads(data, max_bytes=MB)), value)


def seeds() -> list[object]:
    """Values whose encodings the mutation test damages: every tag at least once."""
    plain: list[object] = [
        {"d": {(1, 2.5): [b"x", bytearray(b"y")], "s": {1, frozenset({2})}}},
        [2**70, float("nan"), 1 + 2j, complex(float("inf"), 0)],
    ]
    try:
        import numpy as np
        import pandas as pd
    except ImportError:
        return plain
    series = pd.Series([1.5, 2.5], index=pd.Index(["a", "b"], name="k"), name="s")
    return [
        *plain,
        np.arange(6, dtype="<i4").reshape(2, 3),
        np.float32(1.5),
        np.array([True, False]),
        series,
        frames()[0],
        frames()[1],
        pd.RangeIndex(0, 4, 2),
    ]


def positions(tree: object) -> list[tuple[Any, Any]]:
    """Each (container, key or index) of a parsed tree, outermost first."""
    found: list[tuple[Any, Any]] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        pairs = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for key, child in pairs:
            found.append((node, key))
            stack.append(child)
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_encodings_decode_to_a_value_or_a_codec_error(data: st.DataObject) -> None:
    """One place of a real encoding replaced (a leaf, a tag's name, a field dropped):
    still only ``ValueCodecError``, never another exception."""
    value = data.draw(st.sampled_from(seeds()))
    tree = json.loads(ValueCodec.encode(value, max_bytes=MB))
    places = positions(tree)
    for _ in range(data.draw(st.integers(1, 3))):
        node, key = data.draw(st.sampled_from(places))
        action = data.draw(st.sampled_from(["replace", "rename", "drop"]))
        if action == "replace":
            node[key] = data.draw(json_trees())
        elif action == "rename" and isinstance(node, dict):
            node[data.draw(st.sampled_from(["$tuple", "$ndarray", "x", "$objects", "shape"]))] = (
                node.pop(key)
            )
        elif isinstance(node, dict):
            node.pop(key)
        else:
            node.pop(key) if key < len(node) else None
        places = positions(tree)
        if not places:
            break
    with contextlib.suppress(ValueCodecError):
        ValueCodec.decode_tree(tree)


HOSTILE = [
    {"$nope": 1},
    {"$tuple": [], "$set": []},
    {"a": 1},
    {},
    {1: 2},
    [1, {"plain": "object"}],
    {"$int": "1" * 10_000},
    {"$int": "12a"},
    {"$int": "١٢"},  # Arabic-Indic digits: int() takes them, the format does not
    {"$int": ""},
    {"$int": 12},
    {"$float": "NaN"},
    {"$float": 1.5},
    {"$complex": [1.0]},
    {"$complex": [1, 2]},
    {"$complex": [{"$int": "1"}, 1.0]},
    {"$tuple": {"a": 1}},
    {"$dict": [[[1], 2]]},
    {"$dict": [[{"$tuple": [[1]]}, 2]]},
    {"$dict": [[1, 2, 3]]},
    {"$dict": [[1, 2], [1, 3]]},
    {"$dict": [{"$tuple": [1, 2]}]},
    {"$set": [[1]]},
    {"$set": [1, 1]},
    {"$frozenset": [{"$bytearray": ""}]},
    {"$bytes": "not base64!"},
    {"$bytes": "AAA"},
    {"$bytes": "é"},
    {"$bytes": None},
    (1, 2),
    b"bytes",
    {"$dataframe": []},
    {"$series": {"name": None}},
    {"$index": {"name": None, "data": [1, 2]}},
    {"$objects": [1]},
]


@pytest.mark.parametrize("tree", HOSTILE, ids=lambda tree: repr(tree)[:50])
def test_hostile_trees_are_codec_errors(tree: object) -> None:
    with pytest.raises(ValueCodecError):
        ValueCodec.decode_tree(tree)


def test_decode_refuses_what_is_not_json() -> None:
    for data in (b"{", b"\xff", b"[" * 100_000):
        with pytest.raises(ValueCodecError):
            ValueCodec.decode(data)


def test_crafted_hash_collisions_are_refused() -> None:
    """Ints equal modulo 2**61 - 1 share a hash: a set of many would build in quadratic
    time."""
    modulus = 2**61 - 1
    tree = {
        "$set": [
            {"$int": str(modulus * n + 5)} if n > 3 else modulus * n + 5 for n in range(1, 100)
        ]
    }
    with pytest.raises(ValueCodecError, match="too many keys share one hash"):
        ValueCodec.decode_tree(tree)
    assert len(ValueCodec.decode_tree({"$set": list(range(1000))})) == 1000  # type: ignore[arg-type]


def test_error_is_a_value_error() -> None:
    assert issubclass(ValueCodecError, ValueError)


# numpy


def ndarray_tag(dtype: str, shape: object, data: bytes = b"") -> dict[str, object]:
    body = {"dtype": dtype, "shape": shape, "data": base64.b64encode(data).decode()}
    return {"$ndarray": body}


ARRAY_DTYPES = [
    "|b1",
    "|i1",
    "<i2",
    ">i4",
    "<i8",
    "|u1",
    "<u2",
    "<u4",
    ">u8",
    "<f2",
    "<f4",
    ">f8",
    "<c8",
    "<c16",
    "<M8[ns]",
    "<M8[D]",
    "<M8",
    "<m8[s]",
    ">m8[10ms]",
]


@pytest.mark.parametrize("dtype", ARRAY_DTYPES)
def test_arrays_of_each_kind_round_trip(dtype: str) -> None:
    np = pytest.importorskip("numpy")
    array = np.arange(24).astype(dtype).reshape(2, 3, 4)
    back = round_trip(array)
    assert type(back) is np.ndarray and back.dtype == array.dtype and back.shape == (2, 3, 4)
    assert back.dtype.str == array.dtype.str  # the byte order kept
    assert np.array_equal(back, array)
    assert back.flags.writeable and back.flags.owndata and back.flags.c_contiguous
    scalar = array.flat[5]
    assert type(round_trip(scalar)) is type(scalar) and round_trip(scalar) == scalar


def test_arrays_of_odd_shapes_and_layouts() -> None:
    np = pytest.importorskip("numpy")
    cases = [
        np.zeros((0,)),
        np.zeros((3, 0, 2), dtype="<i2"),
        np.array(7.5),
        np.arange(12.0).reshape(3, 4).T,  # Fortran order: the bytes are C order
        np.arange(10)[::3],
        np.array([np.nan, np.inf, -0.0]),
        np.array(["2020-01-01", "NaT"], dtype="M8[s]"),
        np.ones((1,) * 29),
    ]
    for array in cases:
        back = round_trip(array)
        assert back.shape == array.shape and back.dtype == array.dtype
        np.testing.assert_array_equal(back, array)
    assert type(round_trip({"a": [np.float32(1.5)]})["a"][0]) is np.float32
    assert type(round_trip(np.bool_(True))) is np.bool_
    assert round_trip(np.datetime64("2020-01-01T00:00:00.000000001")) == np.datetime64(
        "2020-01-01T00:00:00.000000001"
    )


def sub_class() -> type:
    np = pytest.importorskip("numpy")

    class Sub(np.ndarray):  # type: ignore[misc]
        def tobytes(self, order: str = "C") -> bytes:
            raise AssertionError("tobytes was reached")

    return Sub


def test_arrays_past_the_format_are_refused_naming_where() -> None:
    Sub = sub_class()
    np = pytest.importorskip("numpy")
    for array, says in [
        (np.array(["a"]), "dtype <U1 is not bool, a number"),
        (np.array([b"a"]), "dtype |S1"),
        (np.array([1, "a"], dtype=object), "dtype object"),
        (np.zeros(2, dtype=[("a", "<f8")]), "is not bool"),
        (np.zeros(2, dtype="V8"), "is not bool"),
        (np.zeros(2, dtype=np.longdouble), "a number up to 64 bits"),
        (np.clongdouble(1), "a number up to 64 bits"),
        (np.str_("x"), "numpy.str_ cannot be passed"),
        (np.zeros(2).view(Sub), "a subclass of numpy.ndarray"),
    ]:
        with pytest.raises(TypeError, match=r"^value\['k'\]\[1\]: ") as caught:
            ValueCodec.encode({"k": [0, array]}, max_bytes=MB)
        assert says in str(caught.value)
    with pytest.raises(ValueError, match="more than 32 dimensions"):
        ValueCodec.encode(np.zeros((1,) * 33), max_bytes=MB)


def test_a_huge_array_is_refused_before_its_bytes_are_copied() -> None:
    """A 200 MB broadcast view costs 8 bytes; refused at max_bytes=1 MB, the encoding
    allocated nothing near its size (``tobytes`` would have made 200 MB)."""
    np = pytest.importorskip("numpy")
    huge = np.broadcast_to(np.zeros(1), (25_000_000,))
    assert huge.nbytes == 200_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"^value\['x'\]: the encoded value passes"):
            ValueCodec.encode({"x": huge}, max_bytes=MB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MB, peak


@pytest.mark.parametrize(
    ("tree", "says"),
    [
        (ndarray_tag("O", [1], b"\0" * 8), "dtype 'O' is not"),
        (ndarray_tag("|O8", [1], b"\0" * 8), "dtype '|O8' is not"),
        (ndarray_tag("<U5", [1], b"\0" * 20), "dtype '<U5'"),
        (ndarray_tag("V8", [1], b"\0" * 8), "dtype 'V8'"),
        (ndarray_tag("[('a','<f8')]", [1], b"\0" * 8), "is not bool"),
        (ndarray_tag("<f8 ", [1], b"\0" * 8), "is not bool"),
        (ndarray_tag("<M8[xs]", [1], b"\0" * 8), "is not bool"),
        (ndarray_tag("<f3", [1], b"\0" * 3), "<f3"),
        (ndarray_tag("<f16", [1], b"\0" * 16), "is not bool"),
        (ndarray_tag("<c32", [1], b"\0" * 32), "is not bool"),
        (ndarray_tag("<f8", [2**40, 2**40], b"\0" * 8), "8 bytes for 1208925819614629174706176"),
        (ndarray_tag("<f8", [2**62, 0]), "array is too big"),
        (ndarray_tag("<f8", [3], b"\0" * 16), "16 bytes for 3 items"),
        (ndarray_tag("<f8", [-1], b""), "shape"),
        (ndarray_tag("<f8", [1.0], b"\0" * 8), "shape"),
        (ndarray_tag("<f8", [True], b"\0" * 8), "shape"),
        (ndarray_tag("<f8", [1] * 33, b"\0" * 8), "shape"),
        (ndarray_tag("<f8", 1, b"\0" * 8), "shape"),
        (ndarray_tag("|b1", [2], b"\0\2"), "neither 0 nor 1"),
        ({"$ndarray": {"dtype": "<f8", "shape": [1], "data": "AAAA!AAA"}}, "not base64"),
        ({"$ndarray": {"dtype": "<f8", "shape": [1]}}, "wants an object of the keys"),
        ({"$ndarray": {"dtype": "<f8", "shape": [], "data": "", "x": 1}}, "wants an object"),
        ({"$npscalar": {"dtype": "<f8", "shape": [], "data": ""}}, "wants an object"),
        ({"$npscalar": {"dtype": "<f8", "data": "AAAA"}}, "3 bytes for 1 items"),
        ({"$npscalar": {1: "<f8", "data": "AAAA"}}, "wants an object of the keys dtype, data"),
    ],
)
def test_hostile_arrays_are_codec_errors(tree: object, says: str) -> None:
    pytest.importorskip("numpy")
    with pytest.raises(ValueCodecError) as caught:
        ValueCodec.decode_tree(tree)
    assert says in str(caught.value)


# pandas


def frames() -> list[Any]:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    mixed = pd.DataFrame(
        {
            "i": np.arange(4, dtype="int64"),
            "u": np.arange(4, dtype="uint8"),
            "f": [1.5, np.nan, -0.0, np.inf],
            "b": [True, False, True, True],
            "t": pd.to_datetime(["2020-01-01", None, "2021-06-30", "1970-01-01"]),
            "d": pd.to_timedelta([1, 2, 3, 4], unit="s"),
            "s": ["a", None, "c", "é"],
            "o": pd.Series(["x", 1, None, (1, 2)], dtype=object),
        }
    )
    mixed["t"] = mixed["t"].astype("datetime64[ns]")
    dup = pd.DataFrame([[1, 2.5, "x"], [3, 4.5, "y"]], columns=["a", 1, "a"])
    dup.columns.name = "cols"
    labelled = pd.DataFrame({"v": [1, 2, 3]}, index=pd.Index(["r1", "r2", "r1"], name="row"))
    stepped = pd.DataFrame({2.5: [1.0, 2.0], "x": [3, 4]}, index=pd.RangeIndex(10, 0, -5, name="n"))
    dated = pd.DataFrame({"v": [1, 2]}, index=pd.to_datetime(["2020-01-01", "2020-01-02"]))
    return [
        mixed,
        dup,
        labelled,
        stepped,
        dated,
        pd.DataFrame(),
        pd.DataFrame(index=pd.RangeIndex(3)),
        pd.DataFrame({"a": pd.Series([], dtype="float32")}),
        pd.DataFrame({"o": pd.Series(["a", "b"], dtype=object)}),
        pd.DataFrame({"s": pd.Series(["a", None], dtype="string")}),
    ]


def test_frames_round_trip_equal_with_their_dtypes_labels_and_index() -> None:
    pd = pytest.importorskip("pandas")
    for frame in frames():
        back = round_trip(frame)
        assert type(back) is pd.DataFrame
        assert back.equals(frame), (frame, back)
        assert list(back.dtypes) == list(frame.dtypes)
        assert list(back.columns) == list(frame.columns)
        for axis in ("index", "columns"):
            got, want = getattr(back, axis), getattr(frame, axis)
            assert type(got) is type(want) and got.dtype == want.dtype, axis
            assert got.name == want.name and got.equals(want), axis
        pd.testing.assert_frame_equal(back, frame, check_exact=True)


def test_series_and_indexes_round_trip() -> None:
    pd = pytest.importorskip("pandas")
    np = pytest.importorskip("numpy")
    cases = [
        pd.Series([1.5, 2.5], index=["x", "y"], name="s"),
        pd.Series(np.array([1, 2], dtype="int32"), name=("a", 1)),
        pd.Series(["p", None], dtype=object, index=pd.RangeIndex(5, 7)),
        pd.Series([], dtype="bool"),
    ]
    for series in cases:
        back = round_trip(series)
        pd.testing.assert_series_equal(back, series, check_exact=True, check_index_type=True)
    for index in (pd.RangeIndex(0, 10, 3, name="r"), pd.Index([1.5, 2.5]), pd.Index(["a"])):
        back = round_trip(index)
        assert type(back) is type(index) and back.equals(index) and back.dtype == index.dtype
    assert round_trip({"frame": frames()[1], "list": [pd.Series([1])]})["frame"].equals(frames()[1])


def test_pandas_values_past_the_format_are_refused_naming_where() -> None:
    pd = pytest.importorskip("pandas")
    multi = pd.DataFrame({"a": [1]}, index=pd.MultiIndex.from_tuples([(1, 2)]))
    for value, where, says in [
        (multi, "value.index: ", "reset_index()"),
        (multi.T, "value.columns: ", "to_flat_index()"),
        (pd.DataFrame({"c": pd.Categorical(["a"])}), "value['c']: ", "dtype category"),
        (pd.DataFrame({"n": pd.array([1], dtype="Int64")}), "value['n']: ", "Int64"),
        (pd.Series(pd.to_datetime(["2020"]).tz_localize("UTC")), "value.values: ", "UTC"),
        (pd.DataFrame({"o": pd.Series([Foo()], dtype=object)}), "value['o'].iloc[0]: ", "Foo"),
        (pd.Series([1], index=pd.Index([Foo()], dtype=object)), "value.index.iloc[0]: ", "Foo"),
        (pd.NA, "value: ", "NAType cannot be passed"),
    ]:
        with pytest.raises(TypeError) as caught:
            ValueCodec.encode(value, max_bytes=MB)
        assert str(caught.value).startswith(where), caught.value
        assert says in str(caught.value), caught.value


def test_a_frame_holding_itself_is_refused() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"o": pd.Series([1, 2], dtype=object)})
    frame.iloc[1, 0] = frame
    with pytest.raises(ValueError, match=r"^value\['o'\]\.iloc\[1\]: the value contains itself"):
        ValueCodec.encode(frame, max_bytes=MB)


def range_index(stop: int) -> dict[str, object]:
    return {"$rangeindex": {"start": 0, "stop": stop, "step": 1, "name": None}}


def floats(*values: float) -> dict[str, object]:
    """The ``$ndarray`` of a column of float64 ``values``."""
    return ndarray_tag("<f8", [len(values)], struct.pack(f"<{len(values)}d", *values))


@pytest.mark.parametrize(
    ("tree", "says"),
    [
        (
            {
                "$dataframe": {
                    "index": range_index(2),
                    "columns": range_index(2),
                    "data": [floats(1, 2), floats(1)],
                }
            },
            "a column's length is not the index's",
        ),
        (
            {
                "$dataframe": {
                    "index": range_index(1),
                    "columns": range_index(2),
                    "data": [floats(1)],
                }
            },
            "1 columns for 2 labels",
        ),
        (
            {"$dataframe": {"index": floats(1), "columns": range_index(0), "data": []}},
            "wants $index or $rangeindex",
        ),
        (
            {
                "$dataframe": {
                    "index": range_index(1),
                    "columns": range_index(1),
                    "data": [{"$tuple": [1]}],
                }
            },
            "a column wants $ndarray, $objects, $strings",
        ),
        (
            {
                "$dataframe": {
                    "index": range_index(1),
                    "columns": range_index(1),
                    "data": [ndarray_tag("<f8", [1, 1], bytes(8))],
                }
            },
            "2 dimensions",
        ),
        (
            {"$series": {"name": [1], "index": range_index(1), "data": floats(1)}},
            "pandas refused it",
        ),
        (
            {"$series": {"name": None, "index": range_index(2), "data": floats(1)}},
            "1 values for an index of 2",
        ),
        ({"$rangeindex": {"start": 0, "stop": 1, "step": 0, "name": None}}, "a step of 0"),
        ({"$rangeindex": {"start": 0, "stop": 2**64, "step": 1, "name": None}}, "must be ints"),
        ({"$rangeindex": {"start": 0, "stop": True, "step": 1, "name": None}}, "must be ints"),
        ({"$index": {"name": None, "data": ndarray_tag("<f2", [1], bytes(2))}}, "float16"),
        (
            {
                "$index": {
                    "name": None,
                    "data": {"$strings": {"na": "x", "storage": "python", "values": []}},
                }
            },
            "na is nan or NA",
        ),
        (
            {
                "$index": {
                    "name": None,
                    "data": {"$strings": {"na": "NA", "storage": "python", "values": [1]}},
                }
            },
            "an array of strings and nulls",
        ),
    ],
)
def test_hostile_frames_are_codec_errors(tree: object, says: str) -> None:
    pytest.importorskip("pandas")
    with pytest.raises(ValueCodecError) as caught:
        ValueCodec.decode_tree(tree)
    assert says in str(caught.value)
