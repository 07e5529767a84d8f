"""Run a set of :class:`~meshplan.models.tensor.plans.Transfer` s on MPI (DistDL paper, section 2.2.1:
every primitive is send-receive pairs, its adjoint the same pairs reversed with an add).

An :class:`Exchange` is built once per primitive and direction, with everything a call needs decided and
allocated: contiguous boxes move in place (views of the input and output), strided boxes are packed into
preallocated buffers on the send side and received through a committed MPI derived datatype (a
subarray, or nested indexed types when a halo selects runs of a dimension), adding receives (an adjoint)
land in one preallocated buffer.  One ``Isend``/``Irecv`` per remote box; a transfer to itself is a local
copy, done while the messages are in flight.  Received boxes are added in the plan's order, so sums are
deterministic, and the bytes handed to MPI are exactly the transfers' volumes.
"""

from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import from_numpy_dtype

from meshplan.models.core.errors import ModelError
from meshplan.models.tensor.partition import Box, box_shape, box_volume
from meshplan.models.tensor.plans import Transfer

__all__ = ["Exchange", "run_transfers", "reverse", "local_slices", "selection_type", "free_types", "PACK_LIMIT"]

_TAG = 0x7E5

#: strided send boxes up to this many bytes are packed by numpy (docs/tensor.md, "Benchmark")
PACK_LIMIT = 2 << 20


def local_slices(box: Box, origin: Sequence[int]) -> tuple[slice, ...]:
    """The slices of global box ``box`` in a local array whose element 0 is global ``origin``."""
    return tuple(slice(lo - o, hi - o) for (lo, hi), o in zip(box, origin))


def reverse(transfers: Sequence[Transfer]) -> tuple[Transfer, ...]:
    return tuple(t.reversed() for t in transfers)


def _local_runs(t: Transfer, origin: Sequence[int]) -> tuple[tuple[tuple[int, int], ...], ...]:
    runs = tuple(((lo, hi),) for lo, hi in t.box) if t.runs is None else t.runs
    return tuple(tuple((a - o, b - o) for a, b in rr) for rr, o in zip(runs, origin))


def _index(t: Transfer, origin: Sequence[int]):
    """numpy index of the transfer's elements in a local array with element 0 at global ``origin``."""
    if t.runs is None:
        return local_slices(t.box, origin)
    return np.ix_(*[np.concatenate([np.arange(a, b) for a, b in rr]) for rr in _local_runs(t, origin)])


def _selected_shape(t: Transfer) -> tuple[int, ...]:
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


def _flat_range(t: Transfer, origin: Sequence[int], shape: Sequence[int]) -> tuple[int, int] | None:
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


class Exchange:
    """The transfers of one direction of a primitive, bound to this rank's arrays' boxes (construction is
    local; :meth:`run` is collective over the ranks of the transfers).

    A box that is one contiguous stretch of its array is sent or received in place (a view: MPICH moves
    large contiguous messages between processes in a single copy, CMA).  A strided box up to
    :data:`PACK_LIMIT` bytes is packed by numpy into a preallocated buffer just before its ``Isend`` (peers
    in rotated order, so packing the next box overlaps the previous message) — measured on this machine,
    faster than handing MPICH the strided datatype, which loses the single-copy path; a larger strided box
    goes as its MPI datatype (MPICH then pipelines pack and unpack through cache-sized cells, faster than a
    pack buffer that no longer fits the cache).  A strided box is received through its MPI datatype.  An adding exchange
    receives into one preallocated buffer and adds in plan order.

    The committed datatypes are freed by :meth:`free`, or when the exchange is garbage-collected
    (``weakref.finalize``), whichever comes first."""

    def __init__(self, comm, transfers: Sequence[Transfer], src_box: Box | None, dst_box: Box | None, dtype,
                 *, add: bool) -> None:
        self.comm, self.add = comm, add
        self.dtype = np.dtype(dtype)
        me, size = comm.Get_rank(), comm.Get_size()
        base = from_numpy_dtype(self.dtype)
        so = None if src_box is None else [lo for lo, _ in src_box]
        do = None if dst_box is None else [lo for lo, _ in dst_box]
        sshape = None if src_box is None else box_shape(src_box)
        dshape = None if dst_box is None else box_shape(dst_box)
        self.local, sends, self.recvs = [], [], []
        #: the committed datatypes this exchange owns (freed once, by :meth:`free` or the finalizer)
        self.types: list[MPI.Datatype] = []
        self._finalizer = weakref.finalize(self, free_types, self.types)
        typ = lambda shape, t, origin: self._own(selection_type(base, shape, _local_runs(t, origin)))
        into_me, rvol = 0, 0
        for t in transfers:
            if t.volume == 0:
                continue
            if t.dst == me:
                into_me += t.volume
            if t.src == me and t.dst == me:
                self.local.append((_index(t, so), _index(t, do)))
            elif t.src == me:
                flat = _flat_range(t, so, sshape)
                if flat is not None:
                    sends.append((t.dst, ("flat",) + flat))
                elif t.volume * self.dtype.itemsize <= PACK_LIMIT:
                    sends.append((t.dst, ("pack", _index(t, so), np.empty(_selected_shape(t), self.dtype))))
                else:
                    sends.append((t.dst, ("type", typ(sshape, t, so))))
            elif t.dst == me and add:
                self.recvs.append((t.src, ("buf", rvol, _selected_shape(t)), _index(t, do)))
                rvol += t.volume
            elif t.dst == me:
                flat = _flat_range(t, do, dshape)
                self.recvs.append((t.src, ("flat",) + flat if flat else
                                   ("type", typ(dshape, t, do)), None))
        #: sends in rotated peer order (stable: boxes to one peer keep the plan's order, as their receives)
        self.sends = sorted(sends, key=lambda s: (s[0] - me) % size)
        #: the receive buffer of an adding exchange (one, reused by every call)
        self._rbuf = np.empty(rvol, dtype=self.dtype) if add else None
        #: whether a copying exchange writes every element of the output (then it needs no initial fill)
        self.covers = (not add) and dst_box is not None and into_me == box_volume(dst_box)

    def _own(self, t: MPI.Datatype) -> MPI.Datatype:
        self.types.append(t)
        return t

    @property
    def closed(self) -> bool:
        """Whether :meth:`free` ran (the exchange cannot run any more)."""
        return not self._finalizer.alive

    def run(self, src: np.ndarray | None, dst: np.ndarray | None) -> None:
        """Move every box from ``src`` (C-contiguous, this rank's input block or None) into ``dst``
        (C-contiguous output block or None): copied, or added to what ``dst`` holds."""
        if self.closed:
            raise ModelError("this exchange was freed (close() or free()); build a new one")
        reqs = []
        for peer, (how, *where), _ in self.recvs:
            if how == "buf":
                off, shape = where
                reqs.append(self.comm.Irecv(self._rbuf[off:off + int(np.prod(shape))], peer, _TAG))
            elif how == "flat":
                off, cnt = where
                reqs.append(self.comm.Irecv(dst.reshape(-1)[off:off + cnt], peer, _TAG))
            else:
                reqs.append(self.comm.Irecv([dst, 1, where[0]], peer, _TAG))
        flat_src = None if src is None else src.reshape(-1)
        for peer, (how, *what) in self.sends:
            if how == "flat":
                off, cnt = what
                reqs.append(self.comm.Isend(flat_src[off:off + cnt], peer, _TAG))
            elif how == "pack":
                index, buf = what
                np.copyto(buf, src[index])
                reqs.append(self.comm.Isend(buf, peer, _TAG))
            else:
                reqs.append(self.comm.Isend([src, 1, what[0]], peer, _TAG))
        for si, di in self.local:      # overlaps the messages: local boxes never meet received ones
            if self.add:
                dst[di] += src[si]
            else:
                dst[di] = src[si]
        if reqs:
            MPI.Request.Waitall(reqs)
        if self.add:
            for _, (_, off, shape), di in self.recvs:
                dst[di] += self._rbuf[off:off + int(np.prod(shape))].reshape(shape)

    def free(self) -> None:
        """Release the committed datatypes (idempotent; the exchange cannot run afterwards)."""
        self._finalizer()


def run_transfers(comm, me: int, transfers: Sequence[Transfer], src: np.ndarray | None, src_origin,
                  dst: np.ndarray | None, dst_origin, *, add: bool) -> None:
    """One-shot: move every box of ``transfers`` from ``src`` (on rank ``t.src``, element 0 at global
    ``src_origin``) into ``dst`` (on rank ``t.dst``), copying (``add=False``) or adding (``add=True``)."""
    box = lambda arr, origin: None if arr is None else tuple((o, o + n) for o, n in zip(origin, arr.shape))
    ex = Exchange(comm, transfers, box(src, src_origin), box(dst, dst_origin),
                  (dst if dst is not None else src if src is not None else np.empty(0)).dtype, add=add)
    try:
        ex.run(None if src is None else np.ascontiguousarray(src), dst)
    finally:
        ex.free()
