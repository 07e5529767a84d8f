"""The one value protocol: frozen values, their JSON and their short repr (DESIGN.md, "The capability spine").

Every problem, plan and result of meshplan is a frozen dataclass declared with :func:`value`:

* its JSON is *derived* from its fields by :func:`jsonify` (fields declared with :func:`library_field` are left
  out: they hold the library objects a value was built from; fields declared with :func:`optional_field` are
  left out while they are None), so ``--json`` prints ``value.to_json()`` and no module builds a dict by hand;
* its ``repr`` is short (at most :data:`REPR_LIMIT` characters, long fields abbreviated), so a value with a
  thousand placements still prints as one line;
* ``type(v).json_keys()`` are the keys of ``v.to_json()``, in field order.

:func:`jsonify` is the protocol for everything inside a value: values and other dataclasses become objects of
their JSON fields, a value's own ``to_json`` wins when it defines one, enums become their value, tuples, lists
and sets become lists, mappings become objects, numpy scalars and arrays become numbers and lists.
"""

from __future__ import annotations

import dataclasses
import enum
import reprlib
from collections.abc import Mapping
from collections.abc import Iterator
from typing import Any, TypeVar

__all__ = ["Value", "value", "library_field", "optional_field", "jsonify", "json_fields", "short_repr", "freeze",
           "FrozenMap", "REPR_LIMIT"]

#: the longest ``repr`` of a value (characters)
REPR_LIMIT = 300

T = TypeVar("T")


def library_field(default: Any = None) -> Any:
    """A field holding the library object a value was built from: not part of the JSON, of ``==`` or of the
    repr."""
    return dataclasses.field(default=default, compare=False, repr=False, metadata={"json": False})


def optional_field(default: Any = None, *, required: bool = False) -> Any:
    """A field whose key the JSON leaves out while it is None (``run`` before a plan ran, ``name`` of a system
    without one); ``required=True`` gives it no default (so it may precede required fields)."""
    if required:
        return dataclasses.field(metadata={"omit_none": True})
    return dataclasses.field(default=default, metadata={"omit_none": True})


def json_fields(obj_or_cls: Any) -> tuple[dataclasses.Field, ...]:
    """The fields of a dataclass (instance or class) that are part of its JSON, in order."""
    return tuple(f for f in dataclasses.fields(obj_or_cls) if f.metadata.get("json", True))


def jsonify(obj: Any) -> Any:
    """``obj`` as JSON-ready data (see the module docstring); :class:`TypeError` for what has no JSON form."""
    if obj is None or isinstance(obj, (bool, str)) and not isinstance(obj, enum.Enum):
        return obj
    if isinstance(obj, enum.Enum):
        return jsonify(obj.value)
    if isinstance(obj, (int, float)):
        return obj
    to_json = getattr(obj, "to_json", None)
    if to_json is not None and callable(to_json) and not isinstance(obj, type):
        return to_json()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _fields_json(obj)
    if isinstance(obj, Mapping):
        return {(k if isinstance(k, str) else str(jsonify(k))): jsonify(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonify(x) for x in obj]
    tolist = getattr(obj, "tolist", None)  # numpy scalars and arrays
    if tolist is not None:
        return tolist()
    raise TypeError(f"{type(obj).__name__} has no JSON form")


class FrozenMap(Mapping):
    """A read-only mapping, equal to the dict it was made from, that pickles (``types.MappingProxyType`` does
    not, and users send plans to their ranks)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping | None = None) -> None:
        object.__setattr__(self, "_items", dict(items or {}))

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __setattr__(self, name: str, val: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __reduce__(self) -> tuple:
        return (FrozenMap, (self._items,))

    def __repr__(self) -> str:
        return repr(self._items)


def freeze(obj: Any) -> Any:
    """JSON-ready data made read-only: lists become tuples and dicts read-only mappings (:class:`FrozenMap`,
    equal to the dicts they wrap), for the few fields that hold a free-form document (a schedule's
    placements)."""
    if isinstance(obj, (list, tuple)):
        return tuple(freeze(x) for x in obj)
    if isinstance(obj, Mapping):
        return FrozenMap({k: freeze(v) for k, v in obj.items()})
    return obj


class _Repr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxtuple, self.maxlist, self.maxdict, self.maxset = 2, 4, 4, 3, 4
        self.maxstring, self.maxother, self.maxlong = 40, 60, 24

    def repr_FrozenMap(self, obj, level):  # noqa: D102,N802 - frozen documents print like dicts
        return self.repr_dict(dict(obj), level)

    def repr_instance(self, obj, level):  # noqa: D102 - nested values keep their own short repr
        text = repr(obj) if isinstance(obj, Value) else reprlib.Repr.repr_instance(self, obj, level)
        return text if len(text) <= self.maxother else text[: self.maxother - 4] + "…" + text[-3:]


_REPR = _Repr()


def short_repr(obj: Any, limit: int = REPR_LIMIT) -> str:
    """``Name(field=…, …)`` of a dataclass value with every field abbreviated, at most ``limit`` characters."""
    name = type(obj).__name__
    parts = []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        parts.append(f"{f.name}={_REPR.repr(getattr(obj, f.name))}")
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def _fields_json(obj: Any) -> dict[str, Any]:
    out = {}
    for f in json_fields(obj):
        v = getattr(obj, f.name)
        if v is None and f.metadata.get("omit_none"):
            continue
        out[f.name] = jsonify(v)
    return out


class Value:
    """Base of every value declared with :func:`value`: derived JSON, JSON keys and a short repr."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """This value as JSON: its fields (library fields left out, optional ones while None), by
        :func:`jsonify`."""
        return _fields_json(self)

    @classmethod
    def json_keys(cls) -> tuple[str, ...]:
        """The keys of :meth:`to_json`, in order."""
        return tuple(f.name for f in json_fields(cls))

    def __repr__(self) -> str:
        return short_repr(self)


def value(cls: type[T] | None = None, /, *, eq: bool = True) -> Any:
    """Declare a frozen value: ``@dataclass(frozen=True, slots=True)`` with :class:`Value`'s short repr (a
    class that subclasses :class:`Value` gets its JSON protocol too)."""

    def wrap(c: type[T]) -> type[T]:
        out = dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=eq)(c)
        if "__repr__" not in c.__dict__:
            out.__repr__ = Value.__repr__  # type: ignore[method-assign]
        return out

    return wrap if cls is None else wrap(cls)
