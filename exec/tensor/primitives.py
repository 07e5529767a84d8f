"""The DistDL tensor primitives as (forward, adjoint) pairs on numpy blocks (DistDL paper, section 3.2).

Each object is built collectively on every rank of the partitions' communicator from the partitions and
the tensor's global shape; ``forward(x)`` and ``adjoint(y)`` take this rank's block (None where it has
none) and return this rank's block of the result (None where it has none), or write it into ``out=`` (a
preallocated block, reused across calls).  How each primitive runs on MPI is chosen at construction from
the partitions (:mod:`meshplan.models.tensor.lowering`): a ``Bcast`` / ``Reduce`` / ``Allgather`` /
``Reduce_scatter_block`` per group on a cached sub-communicator where the groups allow, else the transfers
with derived datatypes (:mod:`meshplan.exec.tensor.exchange`).  Bytes handed to MPI equal that model
exactly (:mod:`meshplan.models.tensor.plans`, :mod:`meshplan.models.tensor.halo`).

* ``Broadcast(P_x, P_y, shape_x)`` and ``SumReduce(P_x, P_y, shape_y)`` — adjoints of each other (3.2.1–2).
* ``AllSumReduce(P, axes)`` — self-adjoint (3.2.3), an ``Allreduce`` per group.
* ``Repartition(P_x, P_y, shape)`` — its adjoint is the reverse repartition (3.2.4).
* ``HaloExchange(P, shape, kernel, stride, padding, dilation)`` — owned block → the extended local array
  a window needs (padding filled with ``pad_value``); the adjoint adds halo values back into their owners
  (3.2.5).
* ``AllGather(P, axes, shape)`` / ``ReduceScatter(P, axes, shape)`` — adjoints of each other.

Resources: a primitive owns the committed MPI datatypes of its strided boxes; ``close()`` (or leaving a
``with`` block) frees them, and so does garbage collection of the primitive (``weakref.finalize`` on each
exchange), whichever comes first.  A closed primitive raises on ``forward``/``adjoint``.  The
sub-communicators are the runtime's cache (:class:`~meshplan.exec.runtime.comms.SubComms`), shared
between primitives, and are not the primitive's to free.
"""

from __future__ import annotations

import functools
import weakref
from typing import Sequence

import numpy as np
from mpi4py import MPI

from meshplan.exec.tensor.exchange import Exchange, reverse
from meshplan.exec.tensor.lowered import GroupCollective
from meshplan.exec.tensor.partition import Partition, check_local
from meshplan.models.core.errors import ModelError
from meshplan.models.tensor.halo import Window, halo_geometry
from meshplan.models.tensor.lowering import (Lowering, allgather_lowering, broadcast_lowering, reducescatter_lowering,
                                             sumreduce_lowering, transfers_lowering)
from meshplan.models.tensor.partition import box_is_empty, box_shape, box_volume
from meshplan.models.tensor.plans import (Transfer, allgather_transfers, allsumreduce_groups, broadcast_transfers,
                                          gathered_box, repartition_transfers, sumreduce_transfers)



def _same_comm(px: Partition, py: Partition) -> None:
    if getattr(px.comm, "comm", px.comm) != getattr(py.comm, "comm", py.comm):
        raise ModelError("P_x and P_y live on different communicators; build both on the same comm=")


class _Closing:
    """``with`` support: leaving the block calls :meth:`close`."""

    def close(self) -> None:
        """Free what this object owns (see the module docstring); idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Moves(_Closing):
    """A primitive given by transfers from an input layout to an output layout, run as its model's
    :class:`~meshplan.models.tensor.lowering.Lowering` (chosen from the partitions at construction: MPI
    collectives on cached sub-communicators where the groups allow, else the transfers themselves with
    derived datatypes); the adjoint runs the reversed transfers (or the dual collective), adding where
    the forward copied."""

    def __init__(self, P: Partition, transfers: Sequence[Transfer], in_box, out_box, dtype, add_forward: bool,
                 lowering: Lowering | None = None, *, add_adjoint: bool | None = None) -> None:
        self.comm = P.comm
        self.me = P.comm.Get_rank()
        self.transfers = tuple(transfers)
        self.in_box, self.out_box = in_box, out_box
        self.dtype = np.dtype(dtype)
        self.add_forward = add_forward
        self.lowering = transfers_lowering() if lowering is None else lowering
        if self.lowering.kind == "transfers":
            self._fwd = Exchange(self.comm, self.transfers, in_box, out_box, self.dtype, add=add_forward,
                                 staging=P.comms.staging)
            self._adj = Exchange(self.comm, reverse(self.transfers), out_box, in_box, self.dtype,
                                 add=(not add_forward) if add_adjoint is None else add_adjoint,
                                 staging=P.comms.staging)
        else:
            self._fwd = GroupCollective(P.comms, self.lowering, self.me, self.dtype)
            self._adj = self._fwd.dual()
        #: per direction, weak references to the last call's arrays when both were used as given: the next
        #: call with the same ones skips the checks (an ndarray keeps its memory, shape and dtype)
        self._same: dict[int, tuple] = {}

    @property
    def in_shape(self):
        return _shape(self.in_box)

    @property
    def out_shape(self):
        return _shape(self.out_box)

    def close(self) -> None:
        """Free the committed datatypes of both directions (idempotent; the primitive cannot run afterwards)."""
        for ex in (self._fwd, self._adj):
            if isinstance(ex, Exchange):
                ex.free()

    @property
    def datatypes(self) -> tuple[MPI.Datatype, ...]:
        """The committed datatypes this rank's primitive holds now (empty once closed)."""
        return tuple(t for ex in (self._fwd, self._adj) if isinstance(ex, Exchange) for t in ex.types)

    def bytes_sent(self) -> dict[int, int]:
        """Bytes each rank hands to MPI in ``forward``, from the model (the lowering's accounting rule)."""
        return self.lowering.bytes_sent(self.transfers, self.dtype.itemsize)

    def _run(self, runner, x, xbox, ybox, what: str, out, fill: float, regions=None):
        """``regions``: the only parts of the output the runner leaves unwritten (None: maybe all of it); they
        lie outside every box the runner writes, so an :class:`Exchange` fills them while its messages travel."""
        same = self._same.get(id(runner))
        if same is not None and out is not None and same[0]() is x and same[1]() is out:
            if regions is not None:           # the last call's arrays: straight to the exchange's bound call
                runner.run(x, out, (fill, regions) if runner.needs_fill else None)
            else:
                if runner.needs_fill:
                    out.fill(fill)
                runner.run(x, out)
            return out
        if isinstance(runner, Exchange) and runner.closed:
            raise ModelError(f"{type(self).__name__} was closed; build a new one")
        # the common case first, in few attribute reads: with ranks sharing cores, each µs of Python before
        # a collective can cost far more in the collective (docs/tensor.md, "Benchmark")
        if not _ready(x, _shape(xbox), self.dtype):
            x = check_local(x, _shape(xbox), what, self.dtype)
            if x is not None:
                x = np.ascontiguousarray(x)
        if ybox is None:
            y = None
        elif _ready(out, _shape(ybox), self.dtype) and out.flags.writeable:
            y = out
        else:
            y = _output(out, _shape(ybox), self.dtype)
        given = x is not None and y is not None and y is out
        self._fill(runner, y, fill, regions)
        runner.run(x, y)
        if given:
            self._same[id(runner)] = (weakref.ref(x), weakref.ref(out))
        return y

    @staticmethod
    def _fill(runner, y, fill: float, regions) -> None:
        """Fill what ``runner`` leaves unwritten in ``y`` (all of it, or the ``regions``) with ``fill``."""
        if y is not None and runner.needs_fill:
            if regions is None:
                y.fill(fill)
            else:
                for r in regions:
                    y[r] = fill

    def forward(self, x, out=None):
        """This rank's output block (written into ``out`` if given: a C-contiguous array of the block's
        shape and dtype, reused across calls to avoid allocating)."""
        return self._run(self._fwd, x, self.in_box, self.out_box, "x", out, 0)

    def adjoint(self, y, out=None):
        """The adjoint applied to this rank's output-side block (``out`` as in :meth:`forward`)."""
        return self._run(self._adj, y, self.out_box, self.in_box, "y", out, 0)


@functools.lru_cache(maxsize=1024)
def _shape(box) -> tuple[int, ...] | None:
    """The shape of a box (None for none), memoised: the per-call path asks for the same few boxes."""
    return None if box is None else box_shape(box)


def _ready(a, shape, dtype) -> bool:
    """Whether ``a`` is already a C-contiguous ndarray of ``shape`` and ``dtype`` (None: never)."""
    return type(a) is np.ndarray and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous


def _output(out, shape, dtype) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != dtype \
            or not out.flags.c_contiguous or not out.flags.writeable:
        raise ModelError(f"out must be a writeable C-contiguous {np.dtype(dtype)} array of shape {tuple(shape)}, got "
                         f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}")
    return out


class Repartition(_Moves):
    """``T_{P_x→P_y}``: the tensor of ``global_shape`` from the balanced blocks of ``P_x`` to those of ``P_y``."""

    def __init__(self, P_x: Partition, P_y: Partition, global_shape: Sequence[int], dtype=np.float64) -> None:
        _same_comm(P_x, P_y)
        tr = repartition_transfers(P_x.model, P_y.model, global_shape)
        # the reversed boxes tile each input block exactly once: the adjoint copies too
        super().__init__(P_x, tr, P_x.local_box(global_shape), P_y.local_box(global_shape), dtype, False,
                         add_adjoint=False)


class Broadcast(_Moves):
    """``B_{P_x→P_y}`` of a tensor of ``global_shape`` partitioned by ``P_x``: every ``P_y`` rank gets a copy
    of its source block; the adjoint sums the copies back (a sum-reduce).  A source rank that is also a
    destination may pass ``out=x`` to ``forward``: its block is then broadcast in place, without the copy
    into a separate output (as a plain ``Bcast``)."""

    def __init__(self, P_x: Partition, P_y: Partition, global_shape: Sequence[int], dtype=np.float64) -> None:
        _same_comm(P_x, P_y)
        tr = broadcast_transfers(P_x.model, P_y.model, global_shape)
        out = next((t.box for t in tr if t.dst == P_y.rank), None) if P_y.active else None
        super().__init__(P_x, tr, P_x.local_box(global_shape), out, dtype, False, broadcast_lowering(tr))
        #: whether this rank's output block is its own input block (then ``forward(x, out=x)`` is allowed)
        self.in_place_ok = any(t.src == t.dst == self.me and t.volume for t in tr)

    def forward(self, x, out=None):
        if not self.in_place_ok and out is not None and x is not None and isinstance(out, np.ndarray) \
                and isinstance(x, np.ndarray) and np.shares_memory(out, x):
            raise ModelError("out: shares memory with x, but this rank's output block is not its own input "
                             "block (only a source rank that keeps its block may broadcast in place)")
        return super().forward(x, out)


class SumReduce(_Moves):
    """``R_{P_x→P_y}`` into a tensor of ``global_shape`` partitioned by ``P_y``: each ``P_y`` rank receives the
    sum of the blocks of its ``P_x`` group; the adjoint broadcasts back."""

    def __init__(self, P_x: Partition, P_y: Partition, global_shape: Sequence[int], dtype=np.float64) -> None:
        _same_comm(P_x, P_y)
        tr = sumreduce_transfers(P_x.model, P_y.model, global_shape)
        inp = next((t.box for t in tr if t.src == P_x.rank), None) if P_x.active else None
        super().__init__(P_x, tr, inp, P_y.local_box(global_shape), dtype, True, sumreduce_lowering(tr))


class AllGather(_Moves):
    """Every rank of a group (ranks agreeing outside ``axes``) gets the group's blocks assembled."""

    def __init__(self, P: Partition, axes: Sequence[int], global_shape: Sequence[int], dtype=np.float64) -> None:
        tr = allgather_transfers(P.model, global_shape, axes)
        out = None if P.index is None else gathered_box(P.model, global_shape, P.index, axes)
        super().__init__(P, tr, P.local_box(global_shape), out, dtype, False,
                         allgather_lowering(P.model, global_shape, axes))


class ReduceScatter(_Moves):
    """Each rank holds the group-gathered box (full along ``axes``); each ends with the group's sum of its
    own block.  The adjoint of :class:`AllGather`."""

    def __init__(self, P: Partition, axes: Sequence[int], global_shape: Sequence[int], dtype=np.float64) -> None:
        tr = reverse(allgather_transfers(P.model, global_shape, axes))
        inp = None if P.index is None else gathered_box(P.model, global_shape, P.index, axes)
        super().__init__(P, tr, inp, P.local_box(global_shape), dtype, True,
                         reducescatter_lowering(P.model, global_shape, axes))


class HaloExchange(_Moves):
    """Owned block → the extended local input a window needs (the model's :class:`HaloGeometry`), padding
    filled with ``pad_value``; the adjoint adds every halo value back into its owner.  Only the inputs the
    window reads are sent (and written: unread positions of the extended array hold ``pad_value``)."""

    def __init__(self, P: Partition, global_shape: Sequence[int], kernel=1, stride=1, padding=0, dilation=1,
                 *, pad_value: float = 0.0, dtype=np.float64) -> None:
        g = P.model.check_tensor(global_shape)
        self.window = Window.of(len(g), kernel, stride, padding, dilation)
        self.plan = halo_geometry(P.model, g, self.window)
        self.pad_value = pad_value
        me = None if P.index is None else self.plan.ranks[P.index]
        self.out_block = None if me is None else me.out
        super().__init__(P, self.plan.transfers, None if me is None else me.owned,
                         None if me is None else me.extended, dtype, False)
        # when the transfers write all of the needed box, only the padding slabs around it need pad_value
        self._pad = None
        if me is not None and not box_is_empty(me.needed) and \
                sum(t.volume for t in self.plan.transfers if t.dst == P.rank) == box_volume(me.needed):
            self._pad = []
            for k, ((e0, e1), (u0, u1)) in enumerate(zip(me.extended, me.needed)):
                for lo, hi in ((e0, u0), (u1, e1)):
                    if hi > lo:
                        self._pad.append((slice(None),) * k + (slice(lo - e0, hi - e0),))

    def forward(self, x, out=None):
        return self._run(self._fwd, x, self.in_box, self.out_box, "x", out, self.pad_value, self._pad)


class AllSumReduce(_Closing):
    """``A_P`` over ``axes``: every rank ends with the sum of its group's blocks (self-adjoint)."""

    def __init__(self, P: Partition, axes: Sequence[int], dtype=np.float64) -> None:
        groups = allsumreduce_groups(P.model, axes)
        self.P = P
        self.dtype = np.dtype(dtype)
        self.groups = tuple(tuple(P.ranks[i] for i in g) for g in groups)
        self.sub = P.comms.group(self.groups)   # collective over the communicator
        self._checked: set[tuple[int, ...]] = set()

    def bytes_sent(self, block_bytes: int) -> dict[int, int]:
        """Bytes each rank hands to MPI for a block of ``block_bytes`` (groups of one send nothing)."""
        return {r: (block_bytes if len(g) > 1 else 0) for g in self.groups for r in g}

    def forward(self, x, out=None):
        if self.P.index is None:
            return None
        if x is None:
            raise ModelError("x is None on a member rank of the partition")
        x = np.ascontiguousarray(x, dtype=self.dtype)
        out = _output(out, x.shape, self.dtype)
        if self.sub is not None and self.sub.Get_size() > 1 and x.shape not in self._checked:
            # the first call with a block shape checks that the group agrees on it (mismatched counts in an
            # Allreduce are undefined behaviour); later calls with that shape trust it
            shapes = set(self.sub.allgather(x.shape))
            if len(shapes) > 1:
                raise ModelError(f"AllSumReduce: the blocks of one group must have one shape, got {sorted(shapes)}")
            self._checked.add(x.shape)
        if self.sub is None or self.sub.Get_size() == 1:
            out[...] = x
        else:
            self.sub.Allreduce(x, out, MPI.SUM)
        return out

    adjoint = forward


#: the public classes (built from the classes themselves: their names are the paper's primitive names)
__all__ = [c.__name__ for c in (Broadcast, SumReduce, AllSumReduce, Repartition, HaloExchange, AllGather,
                                ReduceScatter)]
