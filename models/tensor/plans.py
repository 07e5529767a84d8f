"""Index arithmetic of the tensor primitives as pure functions (DistDL paper, sections 2.2 and 3.2).

Every primitive is a set of :class:`Transfer` s — "rank ``src`` sends global box ``box`` to rank ``dst``"
— so its bytes are known before anything runs, and its adjoint moves the same boxes back (adding where
the forward copied, section 2.1.4).

* Repartition ``T_{P_x→P_y}`` (3.2.4): box ``owned_x(i) ∩ owned_y(j)`` from ``P_x[i]`` to ``P_y[j]``.
* Broadcast ``B_{P_x→P_y}`` (3.2.1): allowed when ``P_x[k] ∈ {1, P_y[k]}``; grid index ``j`` of ``P_y``
  receives the whole block of ``P_x``'s index ``src(j)`` (``src(j)_k = j_k`` where the part counts agree,
  0 where ``P_x[k] = 1``).  Sum-reduce ``R_{P_x→P_y}`` (3.2.2) is the same pattern reversed
  (``P_y[k] ∈ {1, P_x[k]}``), summing into ``dst``.
* All-sum-reduce ``A_P`` over ``axes`` (3.2.3): groups of grid indices that agree outside ``axes``.
* All-gather / reduce-scatter over ``axes``: each member's block goes to every other member of its group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from meshplan.models.core.errors import ModelError
from meshplan.models.tensor.partition import (Box, CartesianPartition, box_intersect, box_is_empty,
                                              box_volume)

__all__ = ["Transfer", "Runs", "bytes_sent", "repartition_transfers", "broadcast_sources", "check_broadcast",
           "check_sumreduce", "broadcast_transfers", "sumreduce_transfers", "allsumreduce_groups",
           "gathered_box", "allgather_transfers"]


#: per dimension, the sorted disjoint ``[start, stop)`` runs of global indices a transfer selects
Runs = tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True, slots=True)
class Transfer:
    """Rank ``src`` sends the elements of global box ``box`` to rank ``dst`` (``src == dst``: a local copy).

    ``runs`` (None = the whole box) restricts the transfer to the product of per-dimension runs inside
    ``box`` (a halo whose window skips inputs sends only the inputs read); ``box`` is then their hull."""

    src: int
    dst: int
    box: Box
    runs: Runs | None = None

    @property
    def volume(self) -> int:
        if self.runs is None:
            return box_volume(self.box)
        n = 1
        for rr in self.runs:
            n *= sum(b - a for a, b in rr)
        return n

    def reversed(self) -> "Transfer":
        """The same elements moved from ``dst`` back to ``src`` (the adjoint's transfer)."""
        return Transfer(self.dst, self.src, self.box, self.runs)


def bytes_sent(transfers: Sequence[Transfer], itemsize: int = 8) -> dict[int, int]:
    """Bytes each rank hands to MPI (local copies excluded)."""
    out: dict[int, int] = {}
    for t in transfers:
        out.setdefault(t.src, 0)
        out.setdefault(t.dst, 0)
        if t.src != t.dst:
            out[t.src] += t.volume * itemsize
    return out


def _same_order(px: CartesianPartition, py: CartesianPartition, what: str) -> None:
    if px.ndim != py.ndim:
        raise ModelError(f"{what}: P_x {px.shape} and P_y {py.shape} have different numbers of dimensions; "
                         "pad the smaller one with parts of 1")


def repartition_transfers(px: CartesianPartition, py: CartesianPartition,
                          global_shape: Sequence[int]) -> tuple[Transfer, ...]:
    _same_order(px, py, "Repartition")
    g = px.check_tensor(global_shape)
    ybl = py.blocks(g)
    out = []
    for i, bx in enumerate(px.blocks(g)):
        if box_is_empty(bx):
            continue
        for j, by in enumerate(ybl):
            box = box_intersect(bx, by)
            if not box_is_empty(box):
                out.append(Transfer(px.ranks[i], py.ranks[j], box))
    return tuple(out)


def _check_parts(px: CartesianPartition, py: CartesianPartition, what: str, single: str, section: str) -> None:
    """Part counts agree or the ``single`` side ("P_x" or "P_y") has 1, in every dimension."""
    _same_order(px, py, what)
    one = px.shape if single == "P_x" else py.shape
    bad = [k for k, (a, b) in enumerate(zip(px.shape, py.shape)) if a != b and one[k] != 1]
    if bad:
        raise ModelError(f"{what} from P_x {px.shape} to P_y {py.shape}: dimension(s) {bad} need {single}[k] == 1 "
                         f"or P_x[k] == P_y[k] (section {section})")


def check_broadcast(px: CartesianPartition, py: CartesianPartition) -> None:
    _check_parts(px, py, "Broadcast", "P_x", "3.2.1")


def check_sumreduce(px: CartesianPartition, py: CartesianPartition) -> None:
    _check_parts(px, py, "SumReduce", "P_y", "3.2.2")


def broadcast_sources(px: CartesianPartition, py: CartesianPartition) -> tuple[int, ...]:
    """For each grid index ``j`` of ``P_y``, the grid index of ``P_x`` whose block it receives."""
    check_broadcast(px, py)
    return tuple(px.index_of_coords(tuple(c if a == b else 0 for c, a, b in zip(py.coords(j), px.shape, py.shape)))
                 for j in range(py.size))


def broadcast_transfers(px: CartesianPartition, py: CartesianPartition,
                        global_shape: Sequence[int]) -> tuple[Transfer, ...]:
    """``global_shape`` is the shape of the tensor ``x`` partitioned by ``P_x``."""
    g = px.check_tensor(global_shape)
    src = broadcast_sources(px, py)
    out = []
    for j in range(py.size):
        box = px.block(g, src[j])
        out.append(Transfer(px.ranks[src[j]], py.ranks[j], box))
    return tuple(out)


def sumreduce_transfers(px: CartesianPartition, py: CartesianPartition,
                        global_shape: Sequence[int]) -> tuple[Transfer, ...]:
    """``global_shape`` is the shape of the result ``y`` partitioned by ``P_y``; every ``P_x`` index sends a
    block of that shape to the ``P_y`` index it reduces into."""
    check_sumreduce(px, py)
    return tuple(t.reversed() for t in broadcast_transfers(py, px, global_shape))


def allsumreduce_groups(p: CartesianPartition, axes: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Groups of grid indices summed together (agree on every coordinate outside ``axes``)."""
    ax = p.check_axes(axes)
    seen: dict[tuple[int, ...], list[int]] = {}
    for i in range(p.size):
        key = tuple(c for k, c in enumerate(p.coords(i)) if k not in ax)
        seen.setdefault(key, []).append(i)
    return tuple(tuple(v) for v in seen.values())


def gathered_box(p: CartesianPartition, global_shape: Sequence[int], index: int, axes: Sequence[int]) -> Box:
    """The block of ``index`` with the dimensions in ``axes`` made whole (what all-gather assembles)."""
    ax = p.check_axes(axes)
    g = p.check_tensor(global_shape)
    blk = p.block(g, index)
    return tuple((0, g[k]) if k in ax else blk[k] for k in range(len(g)))


def allgather_transfers(p: CartesianPartition, global_shape: Sequence[int],
                        axes: Sequence[int]) -> tuple[Transfer, ...]:
    """Every member's block to every member of its group (itself included as a local copy); the adjoint
    (reduce-scatter) moves the same boxes back and adds."""
    g = p.check_tensor(global_shape)
    out = []
    for grp in allsumreduce_groups(p, axes):
        for i in grp:
            box = p.block(g, i)
            if box_is_empty(box):
                continue
            for j in grp:
                out.append(Transfer(p.ranks[i], p.ranks[j], box))
    return tuple(out)
