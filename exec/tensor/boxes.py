"""The boxes of a tensor transfer in this rank's arrays (DistDL paper, section 2.2.1: every primitive is
send-receive pairs of boxes): numpy indices of a box (or of the runs a halo selects), whether it is one
contiguous stretch of its array, and the committed MPI datatype that selects it for a strided send or receive
(:mod:`meshplan.exec.tensor.exchange` builds its messages from these).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from mpi4py import MPI

from meshplan.models.tensor.partition import Box, box_shape
from meshplan.models.tensor.plans import Transfer

__all__ = ["local_slices", "local_runs", "box_index", "selected_shape", "selection_type", "free_types", "flat_range"]


def local_slices(box: Box, origin: Sequence[int]) -> tuple[slice, ...]:
    """The slices of global box ``box`` in a local array whose element 0 is global ``origin``."""
    return tuple(slice(lo - o, hi - o) for (lo, hi), o in zip(box, origin))


def local_runs(t: Transfer, origin: Sequence[int]) -> tuple[tuple[tuple[int, int], ...], ...]:
    runs = tuple(((lo, hi),) for lo, hi in t.box) if t.runs is None else t.runs
    return tuple(tuple((a - o, b - o) for a, b in rr) for rr, o in zip(runs, origin))


def box_index(t: Transfer, origin: Sequence[int]):
    """numpy index of the transfer's elements in a local array with element 0 at global ``origin``."""
    if t.runs is None:
        return local_slices(t.box, origin)
    return np.ix_(*[np.concatenate([np.arange(a, b) for a, b in rr]) for rr in local_runs(t, origin)])


def selected_shape(t: Transfer) -> tuple[int, ...]:
    return box_shape(t.box) if t.runs is None else tuple(sum(b - a for a, b in rr) for rr in t.runs)


def selection_type(base: MPI.Datatype, shape: Sequence[int], runs) -> MPI.Datatype:
    """A committed datatype selecting the product of per-dimension ``runs`` (local ``[a, b)``) of a
    C-ordered array of ``shape``: a subarray when every dimension is one run."""
    if all(len(rr) == 1 for rr in runs):
        return base.Create_subarray(list(shape), [b - a for ((a, b),) in runs], [a for ((a, _),) in runs]).Commit()
    item = base.Get_size()
    strides = [item * int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
    made = []
    t = base.Create_indexed([b - a for a, b in runs[-1]], [a for a, _ in runs[-1]])
    for k in range(len(shape) - 2, -1, -1):
        made.append(t)
        row = t.Create_resized(0, strides[k])       # one row of dimension k: copies step row by row
        made.append(row)
        t = row.Create_hindexed([b - a for a, b in runs[k]], [a * strides[k] for a, _ in runs[k]])
    t.Commit()
    for m in made:
        m.Free()
    return t


def free_types(types: list) -> None:
    """Free committed datatypes (each handle becomes ``MPI.DATATYPE_NULL``) and empty the list; nothing
    once MPI is finalized (the handles died with it).  Idempotent: a :class:`Exchange`'s finalizer."""
    if not MPI.Is_finalized():
        for t in types:
            if t != MPI.DATATYPE_NULL:
                t.Free()
    types.clear()


def flat_range(t: Transfer, origin: Sequence[int], shape: Sequence[int]) -> tuple[int, int] | None:
    """``(offset, count)`` of the transfer's elements if they are one contiguous stretch of a C-ordered
    array of ``shape`` (element 0 at global ``origin``); None otherwise."""
    if t.runs is not None:
        return None
    box = [(lo - o, hi - o) for (lo, hi), o in zip(t.box, origin)]
    ext = [hi - lo for lo, hi in box]
    k = next((i for i, e in enumerate(ext) if e > 1), len(ext) - 1)
    if any(box[i] != (0, shape[i]) for i in range(k + 1, len(shape))):
        return None
    off, stride = 0, 1
    for i in range(len(shape) - 1, -1, -1):
        off += box[i][0] * stride
        stride *= shape[i]
    return off, int(np.prod(ext, dtype=np.int64))
