# SPDX-License-Identifier: MIT
"""Records: the package's value classes, dataclasses made without ``dataclasses``.

``@record`` makes a class of named fields from its annotations, as
``@dataclasses.dataclass(frozen=True)`` does: an ``__init__`` taking the fields in order
(by position or name, those with a class-level default optional) that ends with the
class's ``__post_init__`` if it has one, ``__eq__`` over the fields, ``__hash__`` over
those not named in ``unhashed``, a ``__repr__`` naming them, and assignment refused with
``dataclasses.FrozenInstanceError``; ``@record(frozen=False)`` leaves assignment alone
and the class unhashable, as ``@dataclasses.dataclass`` does.  The ``dataclasses``
functions work on records: ``__dataclass_fields__`` and ``__dataclass_params__`` are
made on first use by ``dataclasses`` itself, from a class of the same fields, so
``fields``, ``replace``, ``asdict`` and ``is_dataclass`` answer as for a dataclass, and
``inspect.signature`` names the fields.  Type checkers see a dataclass (PEP 681).

Why: ``dataclasses`` (with ``inspect``, ``ast``, ``dis`` and ``tokenize``) costs every
``pysandbox run`` its import and about half a millisecond per class, as it compiles
each method with ``exec``; these methods are shared functions that read the class's
field names, and ``dataclasses`` loads only when its functions are used.
"""

from __future__ import annotations

from collections.abc import Callable

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (type checkers know the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar, overload

    from typing_extensions import dataclass_transform

    _R = TypeVar("_R")
else:

    def dataclass_transform(**_: object) -> Callable[[object], object]:
        """PEP 681's marker, which only type checkers read."""
        return lambda function: function


__all__ = ["record", "replace"]

#: A field with no default.
_REQUIRED = object()


def _init(self: object, *args: object, **kwargs: object) -> None:
    cls = type(self)
    defaults: dict[str, object] = getattr(cls, "_record_defaults")  # noqa: B009
    fields = tuple(defaults)
    if len(args) > len(fields):
        raise TypeError(
            f"{cls.__name__}() takes {len(fields)} positional arguments but {len(args)} were given"
        )
    values = dict(zip(fields, args))
    for name, value in kwargs.items():
        if name not in defaults:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
        if name in values:
            raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
        values[name] = value
    for name in fields:
        value = values.get(name, defaults[name])
        if value is _REQUIRED:
            raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
        object.__setattr__(self, name, value)
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _fields(cls: type) -> tuple[str, ...]:
    return tuple(getattr(cls, "_record_defaults"))  # noqa: B009


def _values(self: object) -> tuple[object, ...]:
    return tuple(getattr(self, name) for name in _fields(type(self)))


def _repr(self: object) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _fields(type(self)))
    return f"{type(self).__qualname__}({shown})"


def _eq(self: object, other: object) -> object:
    if type(other) is not type(self):
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: object) -> int:
    unhashed: frozenset[str] = getattr(type(self), "_record_unhashed")  # noqa: B009
    return hash(tuple(getattr(self, name) for name in _fields(type(self)) if name not in unhashed))


def _refuse_set(self: object, name: str, value: object) -> None:
    import dataclasses  # as a frozen dataclass says it; only on this mistake

    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self: object, name: str) -> None:
    import dataclasses

    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


class _DataclassView:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of a record (``attribute``):
    on first use, ``dataclasses`` makes a dataclass of the record's fields, and its two
    attributes replace both views on the record."""

    def __init__(self, attribute: str) -> None:
        self._attribute = attribute

    def __get__(self, instance: object, owner: type) -> object:
        import dataclasses

        frozen: bool = getattr(owner, "_record_frozen")  # noqa: B009
        unhashed: frozenset[str] = getattr(owner, "_record_unhashed")  # noqa: B009
        namespace: dict[str, object] = {
            "__annotations__": _own_annotations(owner),
            "__module__": owner.__module__,
            "__qualname__": owner.__qualname__,
        }
        defaults: dict[str, object] = getattr(owner, "_record_defaults")  # noqa: B009
        for name, default in defaults.items():
            given = {} if default is _REQUIRED else {"default": default}
            if name in unhashed:
                namespace[name] = dataclasses.field(hash=False, **given)  # type: ignore[call-overload]
            elif given:
                namespace[name] = default
        twin: type = dataclasses.dataclass(frozen=frozen)(type(owner.__name__, (), namespace))
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            setattr(owner, attribute, getattr(twin, attribute))
        return getattr(owner, self._attribute)


class _SignatureView:
    """A record's ``__signature__``, which ``inspect.signature`` reads: its fields, in
    order, with their defaults and annotations, as a dataclass's ``__init__`` shows them."""

    def __get__(self, instance: object, owner: type) -> object:
        import inspect  # loaded already by whoever asks for a signature

        annotations = _own_annotations(owner)
        defaults: dict[str, object] = getattr(owner, "_record_defaults")  # noqa: B009
        return inspect.Signature(
            [
                inspect.Parameter(
                    name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=inspect.Parameter.empty if default is _REQUIRED else default,
                    annotation=annotations[name],
                )
                for name, default in defaults.items()
            ],
            return_annotation=None,
        )


def _own_annotations(cls: type) -> dict[str, object]:
    """The names ``cls`` itself annotates, in order (strings, never evaluated): its
    ``__annotations__`` as the class body left it, up to Python 3.13; from 3.14 on
    (PEP 649) the attribute, which then holds only the class's own."""
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063 - no typing_extensions at run time
    if own is None:
        own = getattr(cls, "__annotations__", {})
    return dict(own)


def _make(cls: type, frozen: bool, unhashed: frozenset[str]) -> None:
    """Give ``cls`` the methods and attributes of a record of its annotated fields."""
    defaults: dict[str, object] = {}
    for name in _own_annotations(cls):
        default = cls.__dict__.get(name, _REQUIRED)
        if default is _REQUIRED and any(value is not _REQUIRED for value in defaults.values()):
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with")
        defaults[name] = default
    if not unhashed <= set(defaults):
        raise TypeError(f"{cls.__name__}: unhashed names no field: {sorted(unhashed)}")
    made: dict[str, object] = {
        "_record_defaults": defaults,
        "_record_frozen": frozen,
        "_record_unhashed": unhashed,
        "__match_args__": tuple(defaults),
        "__init__": _init,
        "__repr__": _repr,
        "__eq__": _eq,
        "__hash__": _hash if frozen else None,
        "__dataclass_fields__": _DataclassView("__dataclass_fields__"),
        "__dataclass_params__": _DataclassView("__dataclass_params__"),
        "__signature__": _SignatureView(),
    }
    if frozen:
        made.update(__setattr__=_refuse_set, __delattr__=_refuse_delete)
    for name, value in made.items():
        setattr(cls, name, value)


if TYPE_CHECKING:

    @overload
    def record(cls: type[_R], /) -> type[_R]: ...

    @overload
    def record(
        *, frozen: bool = True, unhashed: tuple[str, ...] = ()
    ) -> Callable[[type[_R]], type[_R]]: ...


@dataclass_transform(frozen_default=True)
def record(
    cls: type[_R] | None = None, /, *, frozen: bool = True, unhashed: tuple[str, ...] = ()
) -> type[_R] | Callable[[type[_R]], type[_R]]:
    """The class decorator (see the module's docstring): ``@record``, or with options
    ``@record(frozen=False)``, ``@record(unhashed=("files",))``."""

    def make(cls: type[_R]) -> type[_R]:
        _make(cls, frozen, frozenset(unhashed))
        return cls

    return make if cls is None else make(cls)


def replace(instance: _R, **changes: object) -> _R:
    """A copy of the record ``instance`` with ``changes`` to its fields (as
    ``dataclasses.replace``, without loading ``dataclasses``)."""
    cls = type(instance)
    values = {name: getattr(instance, name) for name in _fields(cls)}
    for name in changes:
        if name not in values:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    values.update(changes)
    return cls(**values)
