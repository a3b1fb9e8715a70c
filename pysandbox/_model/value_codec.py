# SPDX-License-Identifier: MIT
"""Python values into a sandbox and out of it as JSON that carries no code, never pickle.

Unpickling what a sandbox produced would run its code on the host; this codec's format
names only data, and its decoder builds only the types listed here.  The same text runs
on both sides: the host imports it, and the program inside the sandbox (which cannot
import pysandbox) carries it embedded.  So it imports only the standard library at its
top (``base64``, ``binascii``, ``json``, ``math``, ``sys``, ``typing``), numpy and pandas
only inside the functions that meet their values (on encoding, only when the value's
module is already loaded: a value of theirs cannot exist otherwise), defines only
``ValueCodec`` and ``ValueCodecError``, and runs on Python 3.9 to 3.13.

The API, all on ``ValueCodec``:

* ``ValueCodec.encode(value, *, max_bytes, name="value") -> bytes``: the UTF-8 JSON of
  the value's tagged tree.  ``TypeError`` for a type it cannot carry, ``ValueError``
  for a value too big (past ``max_bytes``, checked while walking: an array's size is
  known before its bytes are copied), nested past ``MAX_DEPTH`` or holding itself; each
  message names where, as ``name`` written as Python (``value['a'][3]``).
* ``ValueCodec.decode_tree(tree) -> object``: the value of a tree already parsed (the
  host parses a sandbox's bytes with ``pysandbox._model.untrusted.loads``).  Built for
  hostile trees: anything but the format below is one ``ValueCodecError`` (a
  ``ValueError``); work and memory grow with the tree's size, recursion with its depth
  (refused past ``MAX_DEPTH``); no eval, no pickle, no bytes read as a numpy object
  dtype (an ``$objects`` column is an object array filled with decoded values), and keys
  crafted to share a hash (a quadratic dict) are refused past ``MAX_SAME_HASH``.
* ``ValueCodec.decode(data) -> object``: ``decode_tree(json.loads(data))``, the
  sandbox's side (its input is the host's).

Embedding: the text defines ``ValueCodec``, ``ValueCodecError``, the six modules above
and, as module code does, ``annotations`` (the future import) and ``__doc__``; its future
import must stay the first statement of whatever program carries it.

The format.  ``None``, ``bool``, ``str``, an ``int`` within +-(2**63 - 1) and a finite
``float`` are themselves; a ``list`` is an array.  Every object where a value may stand
is a tag, one key starting with ``$`` (the objects inside a tag are its fields), so no
user data can pass for one.  Nesting: at most ``MAX_DEPTH`` levels of arrays and objects
in all, as the host's parser admits (a list costs 1, a tuple or set 2, a dict or an
array 3):

* ``{"$float": "nan" | "inf" | "-inf"}``; ``{"$int": "-123..."}`` past 2**63 - 1 (at
  most ``MAX_DIGITS`` digits); ``{"$complex": [re, im]}`` (each a float or a ``$float``)
* ``{"$tuple": [...]}``, ``{"$set": [...]}``, ``{"$frozenset": [...]}``,
  ``{"$dict": [[key, value], ...]}`` (keys any hashable value of this list)
* ``{"$bytes": "base64"}``, ``{"$bytearray": "base64"}``
* numpy: ``{"$ndarray": {"dtype": dtype.str, "shape": [...], "data": "base64"}}``, the
  C-order bytes of an array of bools, ints, floats, complex, ``datetime64`` or
  ``timedelta64``; ``{"$npscalar": {"dtype": ..., "data": ...}}`` for their scalars
* pandas: ``{"$dataframe": {"index": I, "columns": I, "data": [C, ...]}}`` and
  ``{"$series": {"name": V, "index": I, "data": C}}``, where an index ``I`` is
  ``{"$rangeindex": {"start": n, "stop": n, "step": n, "name": V}}`` or
  ``{"$index": {"name": V, "data": C}}`` and a column ``C`` an ``$ndarray`` (numpy
  dtypes), ``{"$objects": [V, ...]}`` (``object``) or ``{"$strings": {"na": "nan" |
  "NA", "storage": "python" | "pyarrow", "values": [str or null, ...]}}`` (pandas'
  string dtypes).  An index may also be passed alone.

Types are kept exactly (a tuple stays a tuple, ``np.float32`` stays ``np.float32``); a
subclass of a supported type (an ``IntEnum``, a ``namedtuple``, an ``OrderedDict``, a
numpy ``matrix``) is refused, not turned into its base.  Refused in pandas, each with a
message saying how to convert: ``MultiIndex``, categorical, nullable (``Int64``),
timezone-aware and other extension dtypes; ``attrs`` and an index's ``freq`` are not
carried.  ``longdouble`` and ``clongdouble`` are refused: their size and format differ
by platform, and their padding bytes are whatever memory held (a leak, either way).

It is longer than 500 lines because the sandbox is shown its program as one text and
cannot import pysandbox: the codec and its pandas part are embedded together.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
import typing


class ValueCodecError(ValueError):
    """Encoded data that is not a value of the codec's format; the message says why."""


class ValueCodec:
    """The codec's namespace: ``encode``, ``decode_tree``, ``decode`` (module docstring)."""

    #: Levels of JSON arrays and objects, as the host's parser admits them.
    MAX_DEPTH = 32
    #: The largest int written as a JSON number; beyond, a ``$int`` tag.
    MAX_INT = 2**63 - 1
    #: Digits of a ``$int`` (Python's own limit for str and int conversions).
    MAX_DIGITS = 4300
    #: Dimensions of an array.
    MAX_DIMS = 32
    #: Keys of one dict or set that may share a hash (more: a crafted, quadratic build).
    MAX_SAME_HASH = 16
    #: numpy dtype kinds carried as bytes: bool, ints, floats, complex, datetimes.
    KINDS = "biufcmM"
    SUPPORTED = (
        "None, bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, "
        "frozenset, numpy arrays and scalars (bool, number, datetime64, timedelta64), "
        "pandas DataFrame, Series and Index"
    )

    @staticmethod
    def encode(value: object, *, max_bytes: int, name: str = "value") -> bytes:
        """The UTF-8 JSON of ``value`` (module docstring); ``TypeError`` for a type the
        format cannot carry, ``ValueError`` past ``max_bytes``, ``MAX_DEPTH`` or for a
        container holding itself, each naming where in ``value`` (as ``name``)."""
        encoder = ValueCodec._Encoder(max_bytes, name)
        tree = encoder.walk(value, 0)
        try:
            text = json.dumps(tree, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped, still JSON
            data = json.dumps(tree, allow_nan=False, separators=(",", ":")).encode("ascii")
        if len(data) > max_bytes:
            raise ValueError(f"{name}: encoded in {len(data)} bytes, over max_bytes={max_bytes}")
        return data

    @staticmethod
    def decode_tree(tree: object) -> object:
        """The value of the parsed JSON ``tree``; ``ValueCodecError`` for anything that
        is not the format's (module docstring)."""
        return ValueCodec._Decoder().value(tree, 0)

    @staticmethod
    def decode(data: bytes) -> object:
        """``decode_tree`` of the JSON ``data``; ``ValueCodecError`` when it is not JSON."""
        try:
            tree = json.loads(data)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, not UTF-8
            raise ValueCodecError(f"not JSON: {exc}") from None
        return ValueCodec.decode_tree(tree)

    @staticmethod
    def shown(value: object) -> str:
        """``repr(value)`` cut to 40 characters, for a path or an error message."""
        if type(value) is int and value.bit_length() > 64:
            return f"<an int of {value.bit_length()} bits>"
        try:
            text = repr(value)
        except Exception:  # a hostile or broken __repr__
            text = f"<a {type(value).__qualname__}>"
        return text if len(text) <= 40 else text[:37] + "..."

    class _Encoder:
        """One ``encode``: the bytes counted so far, the path to the value at hand and
        the containers being walked (for the ones that hold themselves)."""

        def __init__(self, max_bytes: int, name: str) -> None:
            self.max_bytes = max_bytes
            #: Bytes of output at least, each value counted with a comma after it.
            self.size = -1
            #: Each step: text, or a template and its argument (an int, or a key to show).
            self.path: list[str | tuple[str, object]] = [name]
            self.open: set[int] = set()

        def where(self) -> str:
            return "".join(
                step
                if type(step) is str
                else step[0].format(step[1] if type(step[1]) is int else ValueCodec.shown(step[1]))
                for step in self.path
            )

        def add(self, size: int) -> None:
            """Count ``size`` more bytes of output; ``ValueError`` past the budget."""
            self.size += size
            if self.size > self.max_bytes:
                raise ValueError(
                    f"{self.where()}: the encoded value passes max_bytes={self.max_bytes}"
                )

        def refuse(self, value: object, why: str = "") -> TypeError:
            what = type(value)
            module = "" if what.__module__ == "builtins" else what.__module__ + "."
            named = module + what.__qualname__
            article = "an" if named[0] in "aeiouAEIOU" else "a"
            message = why or f"supported: {ValueCodec.SUPPORTED}"
            return TypeError(f"{self.where()}: {article} {named} cannot be passed; {message}")

        def enter(self, value: object, depth: int, levels: int) -> int:
            """The depth inside ``value``, a container adding ``levels`` of JSON."""
            depth += levels
            if depth > ValueCodec.MAX_DEPTH:
                raise ValueError(
                    f"{self.where()}: nested deeper than {ValueCodec.MAX_DEPTH} levels of "
                    "JSON (a list counts 1, a tuple or set 2, a dict 3, an array 3)"
                )
            if id(value) in self.open:
                raise ValueError(f"{self.where()}: the value contains itself")
            return depth

        def walk(self, value: object, depth: int) -> object:
            """The tree of ``value`` at ``depth`` levels of JSON."""
            kind = type(value)
            if value is None or kind is bool:
                self.add(5)
                return value
            if kind is str:
                text = typing.cast(str, value)
                self.add(len(text) + 3)
                return value
            if kind is int:
                return self.integer(typing.cast(int, value))
            if kind is float:
                return self.real(typing.cast(float, value))
            if kind in (list, tuple, set, frozenset, dict):
                return self.container(value, depth)
            if kind is bytes or kind is bytearray:
                return self.base64("$" + kind.__name__, typing.cast(bytes, value))
            if kind is complex:
                number = typing.cast(complex, value)
                self.add(14)
                return {"$complex": [self.real(number.real), self.real(number.imag)]}
            if "numpy" in sys.modules:
                np: typing.Any = sys.modules["numpy"]
                if kind is np.ndarray or isinstance(value, np.generic):
                    return self.numpy(np, value, depth)
                if isinstance(value, np.ndarray):
                    raise self.refuse(value, "a subclass of numpy.ndarray: pass np.asarray(it)")
            if "pandas" in sys.modules and kind.__module__.startswith("pandas"):
                return ValueCodec._Frames(self).walk(sys.modules["pandas"], value, depth)
            raise self.refuse(value)

        def integer(self, value: int) -> object:
            if -ValueCodec.MAX_INT <= value <= ValueCodec.MAX_INT:
                self.add((value.bit_length() - 1) * 3 // 10 + 2 + (value < 0))  # digits at least
                return value
            too_long = ValueError(f"{self.where()}: an int of more than 4300 digits")
            if value.bit_length() > 14_286:  # 10**4300 has 14_286 bits; str() is quadratic
                raise too_long
            try:
                text = str(value)
            except ValueError:  # the interpreter's own digit limit (3.11+)
                raise too_long from None
            if len(text.lstrip("-")) > ValueCodec.MAX_DIGITS:
                raise too_long
            self.add(len(text) + 12)
            return {"$int": text}

        def real(self, value: float) -> object:
            if math.isfinite(value):
                self.add(len(repr(value)) + 1)
                return value
            self.add(15)
            return {"$float": "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"}

        def container(self, value: typing.Any, depth: int) -> object:
            kind = type(value)
            levels = 1 if kind is list else 3 if kind is dict else 2
            inner = self.enter(value, depth, levels)
            self.open.add(id(value))
            # The brackets and tag: [] {"$tuple":[]} {"$dict":[]} and [,] around each pair.
            self.add(
                2 * len(value) + 12
                if kind is dict
                else 2
                if kind is list
                else len(kind.__name__) + 8
            )
            if kind is dict:
                pairs = []
                for number, (key, item) in enumerate(value.items()):
                    self.path.append(("<key #{}>", number))
                    encoded = self.walk(key, inner)
                    self.path[-1] = ("[{}]", key)
                    pairs.append([encoded, self.walk(item, inner)])
                    self.path.pop()
                tree: object = {"$dict": pairs}
            else:
                items = list(value)
                if not self.scalars(items):
                    form = "[{}]" if kind in (list, tuple) else "<item #{}>"  # sets: no order
                    for number, item in enumerate(value):
                        self.path.append((form, number))
                        items[number] = self.walk(item, inner)
                        self.path.pop()
                tree = items if kind is list else {"$" + kind.__name__: items}
            self.open.discard(id(value))
            return tree

        def scalars(self, items: list[typing.Any]) -> bool:
            """Whether ``items``, only numbers or only strings, all written as they are,
            were counted in C-speed passes (a big list's common case); else (or past the
            budget, to name the item that passes it) they are walked one by one."""
            kinds = set(map(type, items))
            if kinds == {str}:
                size = sum(map(len, items)) + 3 * len(items)
            elif kinds and kinds <= {int, float, bool}:
                try:
                    if not all(map(math.isfinite, items)):
                        return False
                except OverflowError:  # an int past a float's range
                    return False
                if int in kinds and not (
                    -ValueCodec.MAX_INT <= min(items) <= max(items) <= ValueCodec.MAX_INT
                ):
                    return False
                size = sum(map(len, map(repr, items))) + len(items)  # True: as long as true
            else:
                return False
            if self.size + size > self.max_bytes:
                return False
            self.size += size
            return True

        def base64(self, tag: str, data: bytes) -> dict[str, str]:
            """``{tag: base64}``, the budget checked before the text is made."""
            self.add(4 * ((len(data) + 2) // 3) + len(tag) + 8)
            return {tag: base64.b64encode(data).decode("ascii")}

        def numpy(self, np: typing.Any, value: typing.Any, depth: int) -> object:
            """An array (exactly ``np.ndarray``) or a numpy scalar, as bytes."""
            scalar = isinstance(value, np.generic)
            array = np.asarray(value) if scalar else value
            dtype = array.dtype
            if (
                dtype.kind not in ValueCodec.KINDS
                or dtype.fields is not None
                or dtype.itemsize > (16 if dtype.kind == "c" else 8)  # longdouble: padding
            ):
                raise self.refuse(
                    value,
                    f"its dtype {dtype} is not bool, a number up to 64 bits (128 for "
                    "complex), datetime64 or timedelta64 (convert it, or pass a list)",
                )
            if array.ndim > ValueCodec.MAX_DIMS:
                raise ValueError(
                    f"{self.where()}: an array of more than {ValueCodec.MAX_DIMS} dimensions"
                )
            self.enter(value, depth, 2 if scalar else 3)
            # Counted before a byte is copied: a broadcast view's nbytes can be any size.
            self.add(len(dtype.str) + 36 + array.ndim + 4 * ((array.nbytes + 2) // 3))
            data = base64.b64encode(array.tobytes(order="C")).decode("ascii")
            tree: dict[str, object] = {"dtype": dtype.str, "data": data}
            if scalar:
                return {"$npscalar": tree}
            tree["shape"] = list(array.shape)
            return {"$ndarray": tree}

    class _Frames:
        """pandas values for one ``_Encoder``: frames, series, indexes, columns."""

        def __init__(self, encoder: ValueCodec._Encoder) -> None:
            self.encoder = encoder

        def walk(self, pd: typing.Any, value: typing.Any, depth: int) -> object:
            encoder = self.encoder
            kind = type(value)
            if kind is pd.DataFrame:
                inner = encoder.enter(value, depth, 2)
                encoder.add(30)
                encoder.open.add(id(value))  # an object column may hold its frame
                columns = []
                for number, label in enumerate(value.columns):
                    encoder.path.append(("[{}]", label))
                    columns.append(self.column(pd, value.iloc[:, number], inner + 1))
                    encoder.path.pop()
                encoder.open.discard(id(value))
                index = self.index(pd, value.index, inner, ".index")
                labels = self.index(pd, value.columns, inner, ".columns")
                return {"$dataframe": {"index": index, "columns": labels, "data": columns}}
            if kind is pd.Series:
                inner = encoder.enter(value, depth, 2)
                encoder.add(30)
                encoder.path.append(".name")
                name = encoder.walk(value.name, inner)
                encoder.path[-1] = ".values"
                data = self.column(pd, value, inner)
                encoder.path.pop()
                index = self.index(pd, value.index, inner, ".index")
                return {"$series": {"name": name, "index": index, "data": data}}
            if isinstance(value, pd.Index):
                return self.index(pd, value, depth, "")
            raise encoder.refuse(value)

        def index(self, pd: typing.Any, index: typing.Any, depth: int, attr: str) -> object:
            encoder = self.encoder
            encoder.path.append(attr)
            if isinstance(index, pd.MultiIndex):
                raise encoder.refuse(
                    index, "reset_index() (rows) or to_flat_index() (columns) make it one level"
                )
            inner = encoder.enter(index, depth, 2)
            encoder.path.append(".name")
            name = encoder.walk(index.name, inner)
            encoder.path.pop()
            if type(index) is pd.RangeIndex:
                encoder.add(50)
                span = {"start": index.start, "stop": index.stop, "step": index.step}
                tree: object = {"$rangeindex": {**span, "name": name}}
            else:
                tree = {"$index": {"name": name, "data": self.column(pd, index, inner)}}
            encoder.path.pop()
            return tree

        def column(self, pd: typing.Any, values: typing.Any, depth: int) -> object:
            """A Series' or an Index's values: an array, objects or strings."""
            encoder = self.encoder
            dtype = values.dtype
            np: typing.Any = sys.modules["numpy"]
            if isinstance(dtype, np.dtype) and dtype.kind == "O":
                inner = encoder.enter(values, depth, 2)
                items = []
                for number, item in enumerate(values.to_numpy()):
                    encoder.path.append((".iloc[{}]", number))
                    items.append(encoder.walk(item, inner))
                    encoder.path.pop()
                return {"$objects": items}
            if isinstance(dtype, np.dtype):
                return encoder.numpy(np, values.to_numpy(), depth)
            if isinstance(dtype, pd.StringDtype):
                encoder.enter(values, depth, 3)
                encoder.add(len(values) * 3 + 40)  # before the copy: a comma and quotes each
                strings = values.to_numpy(dtype=object, na_value=None).tolist()
                encoder.add(sum(len(text) for text in strings if text is not None))
                na = "NA" if getattr(dtype, "na_value", pd.NA) is pd.NA else "nan"
                body = {"na": na, "storage": str(dtype.storage), "values": strings}
                return {"$strings": body}
            raise encoder.refuse(
                values,
                f"its dtype {dtype} is not carried (convert it with .astype(object), or to a "
                "numpy dtype: categorical, nullable, timezone-aware and other extension "
                "dtypes are refused)",
            )

    class _Decoder:
        """One ``decode_tree``: a handler per tag, numpy and pandas imported at their
        first tag.  Each handler takes the tag's body and the depth of the tag's object."""

        #: The tags that stand for a value, and their handlers.
        VALUES: typing.ClassVar[dict[str, str]] = {
            "$int": "big_int",
            "$float": "real",
            "$complex": "complex_",
            "$tuple": "tuple_",
            "$set": "set_",
            "$frozenset": "set_",
            "$dict": "dict_",
            "$bytes": "bytes_",
            "$bytearray": "bytes_",
            "$ndarray": "ndarray",
            "$npscalar": "ndarray",
            "$dataframe": "dataframe",
            "$series": "series",
            "$index": "index",
            "$rangeindex": "index",
        }
        #: What stands for a pandas column (and an index's values).
        COLUMNS = ("$ndarray", "$objects", "$strings")
        #: A dtype's text (``dtype.str``) that may reach ``np.dtype``.
        DTYPE = (
            r"[<>|=]?(?:b1|[iu][1248]|f[248]|c(?:8|16)"
            r"|[mM]8(?:\[(?:[1-9][0-9]{0,5})?(?:Y|M|W|D|h|m|s|ms|us|ns|ps|fs|as)\])?)"
        )

        @staticmethod
        def down(depth: int) -> int:
            """The depth inside one more array or object."""
            if depth >= ValueCodec.MAX_DEPTH:
                raise ValueCodecError(f"nested deeper than {ValueCodec.MAX_DEPTH} levels")
            return depth + 1

        def value(self, node: object, depth: int) -> object:
            kind = type(node)
            if node is None or kind is bool or kind is int or kind is float or kind is str:
                return node
            if kind is list:
                return self.items(node, depth)
            tag, body, inner = self.tag(node, depth)
            handler = self.VALUES.get(tag)
            if handler is None:
                raise ValueCodecError(f"{ValueCodec.shown(tag)} is not a tag of a value")
            return getattr(self, handler)(tag, body, inner)

        def items(self, node: object, depth: int) -> list[object]:
            if type(node) is not list:
                raise ValueCodecError(f"an array was expected, not a {type(node).__name__}")
            inner = self.down(depth)
            return [self.value(item, inner) for item in typing.cast("list[object]", node)]

        def tag(self, node: object, depth: int) -> tuple[str, object, int]:
            """A tag's name, its body and its depth."""
            if type(node) is not dict:
                raise ValueCodecError(f"a {type(node).__name__} is not JSON")
            pairs = typing.cast("dict[object, object]", node)
            if len(pairs) != 1:
                raise ValueCodecError(
                    f"an object of {len(pairs)} keys is not a tag (one key, $...)"
                )
            ((key, body),) = pairs.items()
            if type(key) is not str or key[:1] != "$":
                raise ValueCodecError(f"an object of the key {ValueCodec.shown(key)} is not a tag")
            return key, body, self.down(depth)

        def fields(self, tag: str, body: object, names: str, depth: int) -> list[object]:
            """The values of the object ``body``, whose keys must be ``names`` exactly."""
            wanted = names.split()
            fields = typing.cast("dict[object, object]", body)
            if (
                type(body) is not dict
                or len(fields) != len(wanted)
                or not all(name in fields for name in wanted)
            ):
                raise ValueCodecError(f"{tag} wants an object of the keys {', '.join(wanted)}")
            self.down(depth)
            return [fields[name] for name in wanted]

        def big_int(self, tag: str, body: object, depth: int) -> int:
            digits = body[1:] if type(body) is str and body[:1] == "-" else body
            if not (type(digits) is str and digits.isascii() and digits.isdigit()):
                raise ValueCodecError(f"{tag} wants a string of decimal digits")
            if len(digits) > ValueCodec.MAX_DIGITS:
                raise ValueCodecError(f"{tag} of {len(digits)} digits (at most 4300)")
            try:
                return int(typing.cast(str, body))
            except ValueError as exc:  # this interpreter's own digit limit is lower
                raise ValueCodecError(f"{tag}: {exc}") from None

        def real(self, tag: str, body: object, depth: int) -> float:
            if tag != "$float" or type(body) is not str or body not in ("nan", "inf", "-inf"):
                raise ValueCodecError(f"{tag} wants nan, inf or -inf")
            return float(body)

        def complex_(self, tag: str, body: object, depth: int) -> complex:
            if type(body) is not list or len(body) != 2:
                raise ValueCodecError(f"{tag} wants [real, imaginary]")
            self.down(depth)
            parts = [
                part if type(part) is float else self.real(*self.tag(part, depth + 1))
                for part in typing.cast("list[object]", body)
            ]
            return complex(parts[0], parts[1])

        def tuple_(self, tag: str, body: object, depth: int) -> tuple[object, ...]:
            return tuple(self.items(body, depth))

        def set_(self, tag: str, body: object, depth: int) -> set[object] | frozenset[object]:
            items = self.items(body, depth)
            self.hashable(tag, items)
            made = set(items) if tag == "$set" else frozenset(items)
            if len(made) != len(items):
                raise ValueCodecError(f"{tag} has an item twice")
            return made

        def dict_(self, tag: str, body: object, depth: int) -> dict[object, object]:
            pairs = self.items(body, depth)  # each pair decoded as a list: [key, value]
            if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
                raise ValueCodecError(f"{tag} wants an array of [key, value] pairs")
            keys = [typing.cast("list[object]", pair)[0] for pair in pairs]
            self.hashable(tag, keys)
            made = {key: typing.cast("list[object]", pair)[1] for key, pair in zip(keys, pairs)}
            if len(made) != len(keys):
                raise ValueCodecError(f"{tag} has a key twice")
            return made

        @staticmethod
        def hashable(tag: str, keys: list[object]) -> None:
            """Each key hashable, and few sharing a hash: keys crafted to collide would
            make the dict's or set's build quadratic."""
            counts: dict[int, int] = {}
            for key in keys:
                try:
                    value = hash(key)
                except TypeError:
                    raise ValueCodecError(
                        f"{tag}: a {type(key).__name__} cannot be a key or an item (unhashable)"
                    ) from None
                counts[value] = counts.get(value, 0) + 1
                if counts[value] > ValueCodec.MAX_SAME_HASH:
                    raise ValueCodecError(f"{tag}: too many keys share one hash")

        def bytes_(self, tag: str, body: object, depth: int) -> bytes | bytearray:
            data = self.base64(tag, body)
            return data if tag == "$bytes" else bytearray(data)

        @staticmethod
        def base64(tag: str, body: object) -> bytes:
            if type(body) is not str or not body.isascii():
                raise ValueCodecError(f"{tag} wants base64 text")
            try:
                return base64.b64decode(body, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueCodecError(f"{tag}: not base64 ({exc})") from None

        @staticmethod
        def needed(name: str) -> typing.Any:
            """numpy or pandas, imported by the first tag that needs it."""
            if name not in sys.modules:
                import importlib

                try:
                    importlib.import_module(name)
                except ImportError:
                    raise ValueCodecError(f"{name} is needed to decode this value") from None
            return sys.modules[name]

        def ndarray(self, tag: str, body: object, depth: int) -> typing.Any:
            """An array (``$ndarray``) or a numpy scalar (``$npscalar``)."""
            np = self.needed("numpy")
            scalar = tag == "$npscalar"
            names = "dtype data" if scalar else "dtype shape data"
            fields = self.fields(tag, body, names, depth)
            dtype = self.dtype(np, tag, fields[0])
            shape = [] if scalar else self.shape(tag, fields[1], depth + 1)
            data = self.base64(tag, fields[-1])
            count = 1
            for size in shape:  # Python ints: no overflow
                count *= size
            if count * dtype.itemsize != len(data):
                raise ValueCodecError(f"{tag}: {len(data)} bytes for {count} items of {dtype}")
            if dtype.kind == "b" and data.translate(None, b"\0\1"):
                raise ValueCodecError(f"{tag}: a bool that is neither 0 nor 1")
            try:
                array = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
            except ValueError as exc:  # a size numpy cannot hold, with no data
                raise ValueCodecError(f"{tag}: {exc}") from None
            return array[()] if scalar else array

        def dtype(self, np: typing.Any, tag: str, text: object) -> typing.Any:
            import re

            if type(text) is not str or not re.fullmatch(self.DTYPE, text, re.ASCII):
                shown = ValueCodec.shown(text)
                raise ValueCodecError(
                    f"{tag}: the dtype {shown} is not bool, a number, datetime64 or timedelta64"
                )
            try:
                dtype = np.dtype(text)
            except (TypeError, ValueError) as exc:  # a size this platform lacks
                raise ValueCodecError(f"{tag}: {exc}") from None
            if dtype.kind not in ValueCodec.KINDS or dtype.hasobject or dtype.fields:
                raise ValueCodecError(f"{tag}: the dtype {text} is refused")
            return dtype

        def shape(self, tag: str, node: object, depth: int) -> list[int]:
            self.down(depth)
            sizes = typing.cast("list[int]", node)
            if (
                type(node) is not list
                or len(sizes) > ValueCodec.MAX_DIMS
                or not all(type(size) is int and 0 <= size <= ValueCodec.MAX_INT for size in sizes)
            ):
                raise ValueCodecError(f"{tag}: the shape is not at most 32 sizes of 0 or more")
            return sizes

        def dataframe(self, tag: str, body: object, depth: int) -> typing.Any:
            pd = self.needed("pandas")
            index, labels, data = self.fields(tag, body, "index columns data", depth)
            index = self.index(*self.tag(index, depth + 1))
            labels = self.index(*self.tag(labels, depth + 1))
            if type(data) is not list:
                raise ValueCodecError(f"{tag} wants an array of columns")
            inner = self.down(depth + 1)
            columns = [self.column(node, inner) for node in typing.cast("list[object]", data)]
            if len(columns) != len(labels):
                raise ValueCodecError(f"{tag}: {len(columns)} columns for {len(labels)} labels")
            if any(len(column) != len(index) for column in columns):
                raise ValueCodecError(f"{tag}: a column's length is not the index's")
            return self.pandas_made(
                tag,
                lambda: self.frame(pd, index, labels, columns),
            )

        @staticmethod
        def frame(
            pd: typing.Any, index: object, labels: object, columns: list[typing.Any]
        ) -> typing.Any:
            if not columns:
                return pd.DataFrame(index=index, columns=labels)
            series = {n: pd.Series(c, dtype=c.dtype, copy=False) for n, c in enumerate(columns)}
            made = pd.DataFrame(series, copy=False)
            made.index = index
            made.columns = labels
            return made

        def series(self, tag: str, body: object, depth: int) -> typing.Any:
            pd = self.needed("pandas")
            name, index, data = self.fields(tag, body, "name index data", depth)
            name = self.value(name, depth + 1)
            index = self.index(*self.tag(index, depth + 1))
            column = self.column(data, depth + 1)
            if len(column) != len(index):
                raise ValueCodecError(f"{tag}: {len(column)} values for an index of {len(index)}")

            def made() -> typing.Any:
                series = pd.Series(column, dtype=column.dtype, copy=False)
                series.index = index
                series.name = name
                return series

            return self.pandas_made(tag, made)

        def index(self, tag: str, body: object, depth: int) -> typing.Any:
            """An index: ``$rangeindex`` or ``$index`` (``tag`` says which, or is the
            field that wants an index)."""
            pd = self.needed("pandas")
            if tag == "$rangeindex":
                *span, name = self.fields(tag, body, "start stop step name", depth)
                if not all(type(n) is int and abs(n) <= ValueCodec.MAX_INT for n in span):
                    raise ValueCodecError(f"{tag}: start, stop and step must be ints")
                if span[2] == 0:
                    raise ValueCodecError(f"{tag}: a step of 0")
                name = self.value(name, depth + 1)
                return self.pandas_made(tag, lambda: pd.RangeIndex(*span, name=name))
            if tag != "$index":
                raise ValueCodecError(f"the {tag} of a frame or series wants $index or $rangeindex")
            name, data = self.fields(tag, body, "name data", depth)
            name = self.value(name, depth + 1)
            column = self.column(data, depth + 1)
            return self.pandas_made(
                tag, lambda: pd.Index(column, dtype=column.dtype, name=name, copy=False)
            )

        def column(self, node: object, depth: int) -> typing.Any:
            """A column's values: a 1-d array, or a pandas array of strings."""
            tag, body, inner = self.tag(node, depth)
            if tag not in self.COLUMNS:
                raise ValueCodecError(f"a column wants {', '.join(self.COLUMNS)}, not {tag}")
            pd, np = self.needed("pandas"), self.needed("numpy")
            if tag == "$ndarray":
                array = self.ndarray(tag, body, inner)
                if array.ndim != 1:
                    raise ValueCodecError(f"a column's $ndarray has {array.ndim} dimensions")
                return array
            if tag == "$objects":
                items = self.items(body, inner)
                array = np.empty(len(items), dtype=object)
                for number, item in enumerate(items):
                    array[number] = item  # one object each, a list included
                return array
            na, storage, values = self.fields(tag, body, "na storage values", inner)
            if na not in ("nan", "NA") or storage not in ("python", "pyarrow"):
                raise ValueCodecError(f"{tag}: na is nan or NA, storage python or pyarrow")
            if type(values) is not list or not all(
                type(text) is str or text is None for text in values
            ):
                raise ValueCodecError(f"{tag} wants an array of strings and nulls")
            dtype = self.strings(pd, np, na, storage)
            return self.pandas_made(tag, lambda: pd.array(values, dtype=dtype))

        @staticmethod
        def strings(pd: typing.Any, np: typing.Any, na: object, storage: object) -> typing.Any:
            """The string dtype: its storage, else pandas' own; on a pandas that lacks
            ``na_value`` (before 2.3), ``string`` for NA and ``object`` for nan."""
            missing = np.nan if na == "nan" else pd.NA
            for kind in (storage, "python"):
                try:
                    return pd.StringDtype(storage=kind, na_value=missing)
                except ImportError:  # no pyarrow
                    continue
                except TypeError:
                    break
            return pd.StringDtype() if na == "NA" else np.dtype(object)

        @staticmethod
        def pandas_made(tag: str, make: typing.Callable[[], typing.Any]) -> typing.Any:
            """What ``make`` returns, pandas' refusal (any exception) turned into ours."""
            try:
                return make()
            except Exception as exc:
                raise ValueCodecError(f"{tag}: pandas refused it: {exc}") from None
