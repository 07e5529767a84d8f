"""Element types: the one table of every dtype meshplan knows, and the one place a ``dtype`` is validated.

Each :class:`DType` has a short name (``f32``), its numpy spelling (``float32``), its size in bytes and its kind
(``f`` floating point, ``i`` integer).  Wherever a function takes a ``dtype`` it accepts either spelling (or a
:class:`DType`) and calls :func:`as_dtype`, which names the parameter and the accepted types when the value is
not one of them.  Capabilities restrict the table to what they run (:data:`FLOAT` for the dense kernels,
:data:`RUNNABLE` for data moved on MPI, every type for byte counts) but never copy it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from meshplan.models.core.errors import ModelError, quote

__all__ = ["DType", "DTYPES", "FLOAT", "RUNNABLE", "as_dtype", "dtype_bytes", "DTYPE_BYTES", "NUMPY_NAMES"]


@dataclass(frozen=True, slots=True)
class DType:
    """An element type: ``short`` (``f32``), ``numpy`` (``float32``), ``itemsize`` bytes, ``kind`` (f, i)."""

    short: str
    numpy: str
    itemsize: int
    kind: str

    def __str__(self) -> str:
        return self.short

    def spelled(self, like: str) -> str:
        """This type in the spelling of ``like`` (a short or a numpy name): how a result echoes the user."""
        return self.numpy if like == self.numpy else self.short

    @property
    def numpy_runnable(self) -> str:
        """The numpy type data of this type is held in (``bfloat16`` runs as ``float32``: numpy has none)."""
        return "float32" if self.short == "bf16" else self.numpy


#: every element type, by short name
DTYPES: dict[str, DType] = {d.short: d for d in (
    DType("f16", "float16", 2, "f"), DType("bf16", "bfloat16", 2, "f"), DType("f32", "float32", 4, "f"),
    DType("f64", "float64", 8, "f"), DType("i8", "int8", 1, "i"), DType("i16", "int16", 2, "i"),
    DType("i32", "int32", 4, "i"), DType("i64", "int64", 8, "i"))}
_BY_NAME = {**DTYPES, **{d.numpy: d for d in DTYPES.values()}}

#: the types the dense kernels (matmul, factorization) compute in
FLOAT = ("f64", "f32")
#: the types whose data runs through MPI in the reduction runs (integer-valued data: every sum is exact)
RUNNABLE = ("i64", "i32", "f64", "f32")

#: element sizes of the short names (derived from :data:`DTYPES`)
DTYPE_BYTES = {k: d.itemsize for k, d in DTYPES.items()}
#: the numpy spelling of each short name (derived from :data:`DTYPES`)
NUMPY_NAMES = {k: d.numpy for k, d in DTYPES.items()}


def as_dtype(dtype: Any, *, allowed: Iterable[str] | None = None, what: str = "dtype") -> DType:
    """The :class:`DType` named by ``dtype`` (a short or numpy name, or a DType), one of ``allowed`` (short
    names; default every type); otherwise :class:`ModelError` naming ``what`` and the accepted types."""
    ok = tuple(allowed) if allowed is not None else tuple(DTYPES)
    d = dtype if isinstance(dtype, DType) else _BY_NAME.get(dtype) if isinstance(dtype, str) else None
    if d is None or d.short not in ok:
        names = ", ".join(f"{k} ({DTYPES[k].numpy})" for k in ok)
        why = "is not supported here" if d is not None else "is not an element type"
        raise ModelError(f"{what} {quote(dtype)} {why}; use one of {names}", param=what)
    return d


def dtype_bytes(name: Any) -> int:
    """The size in bytes of the element type ``name`` (any spelling)."""
    return as_dtype(name).itemsize
