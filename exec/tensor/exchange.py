"""Run a set of :class:`~meshplan.models.tensor.plans.Transfer` s on MPI (DistDL paper, section 2.2.1:
every primitive is send-receive pairs, its adjoint the same pairs reversed with an add).

An :class:`Exchange` is built once per primitive and direction: every box a rank sends or receives
becomes a committed MPI derived datatype over the local array (a subarray, or nested indexed types
when a halo selects runs of a dimension), so nothing is packed or unpacked in Python — MPI reads the
boxes from the input and, when copying, writes them straight into the output.  Adding receives (an
adjoint) land in one preallocated buffer and are added afterwards.  Sparse plans (fewer remote boxes
than ranks, e.g. halos) post one ``Isend``/``Irecv`` per box; dense plans (a repartition's all-to-all)
make one ``Alltoallw`` over the communicator — every rank takes the same decision, from the plan alone.
A transfer to itself is a local copy.  Received boxes are added in the plan's order, so sums are
deterministic, and the bytes handed to MPI are exactly the transfers' volumes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import from_numpy_dtype

from meshplan.models.tensor.partition import Box, box_shape, box_volume
from meshplan.models.tensor.plans import Transfer

__all__ = ["Exchange", "run_transfers", "reverse", "local_slices", "selection_type"]

_TAG = 0x7E5


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


class Exchange:
    """The transfers of one direction of a primitive, bound to this rank's arrays' boxes (collective
    construction is not needed; :meth:`run` is collective over ``comm``)."""

    def __init__(self, comm, transfers: Sequence[Transfer], src_box: Box | None, dst_box: Box | None, dtype,
                 *, add: bool) -> None:
        self.comm, self.add = comm, add
        self.dtype = np.dtype(dtype)
        me, size = comm.Get_rank(), comm.Get_size()
        base = from_numpy_dtype(self.dtype)
        so = None if src_box is None else [lo for lo, _ in src_box]
        do = None if dst_box is None else [lo for lo, _ in dst_box]
        self.local, self.sends, self.recvs = [], [], []
        remote, pairs, into_me, rvol = 0, set(), 0, 0
        for t in transfers:
            if t.volume == 0:
                continue
            if t.src != t.dst:
                remote += 1
                pairs.add((t.src, t.dst))
            if t.dst == me:
                into_me += t.volume
            if t.src == me and t.dst == me:
                self.local.append((_index(t, so), _index(t, do)))
            elif t.src == me:
                self.sends.append((t.dst, selection_type(base, box_shape(src_box), _local_runs(t, so))))
            elif t.dst == me and add:
                self.recvs.append((t.src, (rvol, _selected_shape(t)), _index(t, do)))
                rvol += t.volume
            elif t.dst == me:
                self.recvs.append((t.src, selection_type(base, box_shape(dst_box), _local_runs(t, do)), None))
        #: the receive buffer of an adding exchange (one, reused by every call)
        self._rbuf = np.empty(rvol, dtype=self.dtype) if add else None
        # every rank decides alike: a dense plan (as many remote boxes as ranks, one per pair) -> Alltoallw
        self.dense = remote >= size > 2 and len(pairs) == remote
        #: whether a copying exchange writes every element of the output (then it needs no initial fill)
        self.covers = (not add) and dst_box is not None and into_me == box_volume(dst_box)
        if self.dense:
            self._w = self._alltoallw_spec(size, base)

    def _alltoallw_spec(self, size: int, base: MPI.Datatype):
        item = base.Get_size()
        sc, sd, st = [0] * size, [0] * size, [base] * size
        rc, rd, rt = [0] * size, [0] * size, [base] * size
        for peer, dt in self.sends:
            sc[peer], st[peer] = 1, dt
        for peer, dt, _ in self.recvs:
            if self.add:
                off, shape = dt
                rc[peer], rd[peer] = int(np.prod(shape)), off * item
            else:
                rc[peer], rt[peer] = 1, dt
        return (sc, sd, st), (rc, rd, rt)

    def run(self, src: np.ndarray | None, dst: np.ndarray | None) -> None:
        """Move every box from ``src`` (C-contiguous, this rank's input block or None) into ``dst``
        (C-contiguous output block or None): copied, or added to what ``dst`` holds."""
        rbuf = self._rbuf if self.add else dst
        if self.dense:
            (sc, sd, st), (rc, rd, rt) = self._w
            dummy = np.empty(1, dtype=self.dtype)
            self.comm.Alltoallw([dummy if src is None or src.size == 0 else src, (sc, sd), st],
                                [dummy if rbuf is None or rbuf.size == 0 else rbuf, (rc, rd), rt])
            self._local(src, dst)
        else:
            reqs = []
            for peer, dt, _ in self.recvs:
                if self.add:
                    off, shape = dt
                    reqs.append(self.comm.Irecv(rbuf[off:off + int(np.prod(shape))], peer, _TAG))
                else:
                    reqs.append(self.comm.Irecv([rbuf, 1, dt], peer, _TAG))
            for peer, dt in self.sends:
                reqs.append(self.comm.Isend([src, 1, dt], peer, _TAG))
            self._local(src, dst)      # overlaps the messages: local boxes never meet received ones
            if reqs:
                MPI.Request.Waitall(reqs)
        if self.add:
            for _, (off, shape), di in self.recvs:
                dst[di] += rbuf[off:off + int(np.prod(shape))].reshape(shape)


    def _local(self, src, dst) -> None:
        for si, di in self.local:
            if self.add:
                dst[di] += src[si]
            else:
                dst[di] = src[si]

    def free(self) -> None:
        """Release the committed datatypes (the exchange cannot run afterwards)."""
        for _, dt in self.sends:
            dt.Free()
        for _, dt, _ in self.recvs:
            if isinstance(dt, MPI.Datatype):
                dt.Free()
        self.sends, self.recvs, self.dense = [], [], False


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
