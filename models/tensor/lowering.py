"""Which MPI calls run a primitive, and the bytes each rank hands to MPI under them (DistDL paper,
section 2.2.1: every primitive is send-receive pairs; an MPI collective on a sub-communicator may stand
for a whole group of them).

The choice is a pure function of the partitions and the tensor shape, so every rank takes the same one
at construction and the bytes are known before anything runs:

* ``"bcast"`` — a broadcast whose groups (a source and the ranks receiving its block) are disjoint:
  one ``Bcast`` per group on its sub-communicator.  The root hands its block once.
* ``"reduce"`` — a sum-reduce whose groups (a destination and the ranks summed into it) are disjoint:
  one ``Reduce`` per group.  Every member hands one block (a destination that is not a source
  contributes zeros, in place).
* ``"allgather"`` / ``"reducescatter"`` — the groups of an all-gather when the members' blocks are
  consecutive slabs of the gathered box (one partitioned axis among ``axes`` and nothing but extent-1
  dimensions before it) of one volume in every group: ``Allgather`` (each member hands its block once)
  or ``Reduce_scatter_block`` (each member hands the whole gathered box).  Unequal blocks take the
  transfers: MPICH's ``Allgatherv`` (a ring pipelined in 32 KiB chunks) is 20–40× slower than point-to-point
  messages on this machine (docs/tensor.md, "Benchmark").
* ``"transfers"`` — anything else: the boxes themselves, one ``Isend``/``Irecv`` per box; a rank hands
  the volume of every box it sends to another rank (local copies are not handed to MPI).

A group of one rank is a local copy and hands nothing.  The runtime's ``CountingComm`` counts exactly
these rules (a ``Bcast`` counts the root's buffer, a reduction its send buffer, an ``Allgather`` its
send buffer, an ``Isend`` its buffer or ``count × datatype size``), so the counted bytes equal the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from meshplan.models.tensor.partition import Box, CartesianPartition, box_shape, box_volume
from meshplan.models.tensor.plans import Transfer, allsumreduce_groups, bytes_sent, gathered_box

__all__ = ["Group", "Lowering", "broadcast_lowering", "sumreduce_lowering", "allgather_lowering",
           "reducescatter_lowering", "transfers_lowering"]

Kind = Literal["transfers", "bcast", "reduce", "allgather", "reducescatter"]


@dataclass(frozen=True, slots=True)
class Group:
    """Communicator ranks in sub-communicator order (a rooted collective's root first) and, per member,
    the global box it contributes (its block; the root's for a broadcast)."""

    ranks: tuple[int, ...]
    boxes: tuple[Box, ...]


@dataclass(frozen=True, slots=True)
class Lowering:
    """The MPI calls of a primitive's forward (its adjoint runs the dual call on the same groups)."""

    kind: Kind
    groups: tuple[Group, ...] = ()

    def bytes_sent(self, transfers: Sequence[Transfer], itemsize: int = 8) -> dict[int, int]:
        """Bytes each rank hands to MPI in the forward (see the module docstring)."""
        if self.kind == "transfers":
            return bytes_sent(transfers, itemsize)
        out = bytes_sent(transfers, 0)        # every rank of the plan, at 0
        for g in self.groups:
            for r in g.ranks:
                out.setdefault(r, 0)
            if len(g.ranks) < 2:
                continue
            if self.kind == "bcast":
                out[g.ranks[0]] += box_volume(g.boxes[0]) * itemsize
            elif self.kind == "reducescatter":
                full = _hull(g.boxes)
                for r in g.ranks:
                    out[r] += box_volume(full) * itemsize
            else:                             # reduce, allgather: each member's own block
                for r, b in zip(g.ranks, g.boxes):
                    out[r] += box_volume(b) * itemsize
        return out


def _hull(boxes: Sequence[Box]) -> Box:
    return tuple((min(b[k][0] for b in boxes), max(b[k][1] for b in boxes)) for k in range(len(boxes[0])))


def transfers_lowering() -> Lowering:
    return Lowering("transfers")


def _disjoint(groups: Sequence[Group]) -> bool:
    seen: set[int] = set()
    for g in groups:
        if seen & set(g.ranks):
            return False
        seen |= set(g.ranks)
    return True


def broadcast_lowering(transfers: Sequence[Transfer]) -> Lowering:
    """``Bcast`` per source if the groups {source} ∪ receivers are disjoint, else the transfers."""
    by_src: dict[int, list[Transfer]] = {}
    for t in transfers:
        by_src.setdefault(t.src, []).append(t)
    groups = []
    for src, ts in by_src.items():
        ranks = (src,) + tuple(t.dst for t in ts if t.dst != src)
        groups.append(Group(ranks, (ts[0].box,) * len(ranks)))
    return Lowering("bcast", tuple(groups)) if _disjoint(groups) else transfers_lowering()


def sumreduce_lowering(transfers: Sequence[Transfer]) -> Lowering:
    """``Reduce`` per destination if the groups {destination} ∪ sources are disjoint, else the transfers."""
    b = broadcast_lowering(tuple(t.reversed() for t in transfers))
    return Lowering("reduce", b.groups) if b.kind == "bcast" else b


def _slab_axis(p: CartesianPartition, global_shape: Sequence[int], axes: Sequence[int]) -> int | None:
    """The one partitioned axis among ``axes`` if the members' blocks are consecutive slabs of the
    gathered box in group order; None otherwise."""
    ax = p.check_axes(axes)
    split = [k for k in ax if p.shape[k] > 1]
    if len(split) != 1:
        return None
    a = split[0]
    g = p.check_tensor(global_shape)
    for i in range(p.size):
        lead = box_shape(gathered_box(p, g, i, ax))[:a]
        if any(n > 1 for n in lead):
            return None
    return a


def allgather_lowering(p: CartesianPartition, global_shape: Sequence[int], axes: Sequence[int]) -> Lowering:
    """``Allgather`` per group when the blocks are consecutive slabs of one volume within each group,
    else the transfers."""
    if _slab_axis(p, global_shape, axes) is None:
        return transfers_lowering()
    groups = tuple(Group(tuple(p.ranks[i] for i in grp), tuple(p.block(global_shape, i) for i in grp))
                   for grp in allsumreduce_groups(p, axes))
    if any(len({box_volume(b) for b in g.boxes}) > 1 for g in groups):
        return transfers_lowering()
    return Lowering("allgather", groups)


def reducescatter_lowering(p: CartesianPartition, global_shape: Sequence[int], axes: Sequence[int]) -> Lowering:
    """``Reduce_scatter_block`` per group where :func:`allgather_lowering` takes ``Allgather``, else the
    transfers."""
    low = allgather_lowering(p, global_shape, axes)
    return Lowering("reducescatter", low.groups) if low.kind == "allgather" else low
