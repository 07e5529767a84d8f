"""Collective operations and their typing rules (paper Fig. 8 and §7.1, multi-axis).

The steps are plain values.  :func:`apply_strict` is the typing judgement
``H ⊢ p : τ1 → τ2`` of Fig. 8 generalised to a sequence of axes ``x̄`` (§7.1):

* ``allgather(i, x̄)``  removes the minor-most axes ``x̄`` of dimension ``i``   (T-ALLGATHER)
* ``dynslice(i, x̄)``   adds unused axes ``x̄`` as minor-most axes of ``i``     (T-DYNSLICE)
* ``alltoall(i, j, x̄)`` moves the minor-most axes ``x̄`` of ``i`` to the front of ``j`` (T-ALLTOALL)
* ``alltoall(i, j, x̄; k, l, ȳ; …)`` several such moves in one all-to-all over all their axes, applied in
  order; no dimension both gives and receives axes, so every member exchanges equal pieces (XLA's merged
  all-to-all; an extension of the paper's step model, planned under the wire cost only)
* ``allpermute``       any ``τ1 → τ2`` with equal local and global types      (T-PERMUTE)

A bad step raises :class:`ModelError` naming the rule that fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import Dim, DistType, check_well_formed

__all__ = ["AllGather", "AllToAll", "DynSlice", "AllPermute", "Step", "apply_strict", "axes_size"]


def axes_size(mesh: Mesh, axes: tuple[str, ...]) -> int:
    """The number of devices spanned by mesh axes ``axes``."""
    return math.prod(mesh.size(a) for a in axes)


def _check_axes(axes: tuple[str, ...]) -> None:
    if not isinstance(axes, tuple) or not axes:
        raise ModelError("a collective needs a non-empty tuple of axes")
    if len(set(axes)) != len(axes):
        raise ModelError(f"axes {axes} of a collective repeat an axis")


@dataclass(frozen=True, slots=True)
class _OneDim:
    """A collective over the axes ``axes`` of one dimension ``dim`` (allgather, dynslice)."""

    dim: int
    axes: tuple[str, ...]
    op = ""

    def __post_init__(self) -> None:
        _check_axes(self.axes)

    @property
    def dims(self) -> tuple[int, ...]:
        return (self.dim,)

    def __str__(self) -> str:
        return f"{self.op}({self.dim}, {{{','.join(self.axes)}}})"


@dataclass(frozen=True, slots=True)
class AllGather(_OneDim):
    """All-gather of dimension ``dim`` over mesh ``axes`` (§4): the axes leave the dimension."""

    op = "allgather"


@dataclass(frozen=True, slots=True)
class DynSlice(_OneDim):
    """Dynamic slice of dimension ``dim`` over mesh ``axes`` (§4): the axes join the dimension, no communication."""

    op = "dynslice"


@dataclass(frozen=True, slots=True)
class AllToAll:
    """All-to-all over mesh ``axes`` (§4): the axes move from dimension ``src`` to dimension ``dst``.

    ``more`` lists further moves ``(src, dst, axes)`` done by the same collective (a multi-pair all-to-all over
    all the moves' axes, :attr:`group_axes`); the moves apply in order, each by T-ALLTOALL, and no dimension
    may both give and receive axes, so every group member sends each other member an equal piece."""

    src: int
    dst: int
    axes: tuple[str, ...]
    more: tuple[tuple[int, int, tuple[str, ...]], ...] = ()
    op = "alltoall"

    def __post_init__(self) -> None:
        _check_axes(self.axes)
        if self.src == self.dst:
            raise ModelError(f"alltoall moves axes between two different dimensions, got {self.src} twice")
        if not isinstance(self.more, tuple):
            raise ModelError("the further moves of an alltoall must be a tuple of (src, dst, axes)")
        for m in self.more:
            if not (isinstance(m, tuple) and len(m) == 3):
                raise ModelError(f"a move of an alltoall is (src, dst, axes), got {m!r}")
            _check_axes(m[2])
            if m[0] == m[1]:
                raise ModelError(f"alltoall moves axes between two different dimensions, got {m[0]} twice")
        _check_axes(self.group_axes)
        givers, takers = {m[0] for m in self.moves}, {m[1] for m in self.moves}
        if givers & takers:
            raise ModelError(f"a multi-pair alltoall cannot move axes out of and into the same dimension "
                             f"{min(givers & takers)}: its pieces would not be equal")

    @classmethod
    def of(cls, moves) -> "AllToAll":
        """The all-to-all doing ``moves`` (a sequence of ``(src, dst, axes)``) in one collective."""
        moves = tuple((int(i), int(j), tuple(ax)) for i, j, ax in moves)
        if not moves:
            raise ModelError("an alltoall needs at least one move")
        return cls(*moves[0], more=moves[1:])

    @property
    def moves(self) -> tuple[tuple[int, int, tuple[str, ...]], ...]:
        """Every move ``(src, dst, axes)`` of the collective, in order."""
        return ((self.src, self.dst, self.axes),) + self.more

    @property
    def group_axes(self) -> tuple[str, ...]:
        """The axes of the collective's device groups: every move's axes, in order (the first minor)."""
        return tuple(a for _, _, ax in self.moves for a in ax)

    @property
    def dims(self) -> tuple[int, ...]:
        """The dimensions the step touches: ``(src, dst)`` (every move's, in order, for several)."""
        if not self.more:
            return (self.src, self.dst)
        out: list[int] = []
        for i, j, _ in self.moves:
            out += [d for d in (i, j) if d not in out]
        return tuple(out)

    def __str__(self) -> str:
        return "alltoall(" + "; ".join(f"{i}, {j}, {{{','.join(ax)}}}" for i, j, ax in self.moves) + ")"


@dataclass(frozen=True, slots=True)
class AllPermute:
    """``allpermute`` to ``target``; ``source[d]`` is the device whose tile device ``d`` receives
    (set on lowered programs, §6; ``None`` in the strict relation of Fig. 8).

    ``holders`` (optional, a lowered program planned by the wire cost) splits the transfer among the replicas
    of each tile: device ``d`` receives its new tile as ``len(holders[d])`` equal chunks of its flattened
    elements (C order), chunk ``k`` from device ``holders[d][k]``; ``holders[d] == ()`` when ``d`` already
    holds its new tile (:mod:`meshplan.models.redistribution.split`)."""

    target: DistType
    source: tuple[int, ...] | None = None
    holders: tuple[tuple[int, ...], ...] | None = None
    op = "allpermute"

    @property
    def axes(self) -> tuple[str, ...]:
        """An all-permute moves no axis between dimensions: ``()``."""
        return ()

    @property
    def dims(self) -> tuple[int, ...]:
        """An all-permute changes no dimension's axes: ``()``."""
        return ()

    @property
    def moved(self) -> int:
        """Devices that receive a tile from another device."""
        if self.holders is not None:
            return sum(1 for h in self.holders if h)
        if self.source is None:
            return 0
        return sum(1 for d, s in enumerate(self.source) if d != s)

    @property
    def chunks(self) -> int | None:
        """The chunks each receiving device takes (one from each holder) when split, else ``None``."""
        return max(len(h) for h in self.holders) if self.holders else None

    def sent(self, localsize: int) -> tuple[int, ...]:
        """Elements each device sends, from tiles of ``localsize`` elements: a whole tile to each device it
        is the source of, or one chunk to each device it is a holder for."""
        if self.source is None:
            raise ModelError("only a lowered allpermute (with its source map) sends a known amount")
        out = [0] * len(self.source)
        if self.holders is None:
            for d, s in enumerate(self.source):
                if s != d:
                    out[s] += localsize
        else:
            for h in self.holders:
                for s in h:
                    out[s] += localsize // len(h)
        return tuple(out)

    def wire_elements(self, localsize: int) -> int:
        """The wire cost of the step: the most elements one device sends (a whole tile when unsplit, as
        :func:`~meshplan.models.redistribution.cost.op_cost` prices any device that moves)."""
        return localsize if self.holders is None else max(self.sent(localsize), default=0)

    def __str__(self) -> str:
        return "allpermute"


Step = AllGather | AllToAll | DynSlice | AllPermute


def _dim(t: DistType, i: int, rule: str) -> Dim:
    if not isinstance(i, int) or not 0 <= i < t.rank:
        raise ModelError(f"{rule}: dimension {i} is out of range for {t} (rank {t.rank})")
    return t.dims[i]


def apply_strict(mesh: Mesh, t: DistType, step: Step) -> DistType:
    """``τ2`` with ``H ⊢ step : t → τ2`` (Fig. 8, multi-axis); :class:`ModelError` if no rule applies."""
    if isinstance(step, AllGather):
        d = _dim(t, step.dim, "T-ALLGATHER")
        k = len(step.axes)
        if d.axes[:k] != step.axes:
            raise ModelError(f"T-ALLGATHER: axes {{{','.join(step.axes)}}} are not the minor-most axes of "
                             f"dimension {step.dim} of {t}")
        n = axes_size(mesh, step.axes)
        return t.replace(step.dim, Dim(d.local * n, d.axes[k:], d.size))
    if isinstance(step, DynSlice):
        d = _dim(t, step.dim, "T-DYNSLICE")
        for a in step.axes:
            if a not in mesh:
                raise ModelError(f"T-DYNSLICE: axis {a} is not in the mesh {mesh}")
            if a in t.axes:
                raise ModelError(f"T-DYNSLICE: axis {a} already partitions {t}")
        n = axes_size(mesh, step.axes)
        if d.local % n:
            raise ModelError(f"T-DYNSLICE: tile size {d.local} of dimension {step.dim} of {t} is not divisible "
                             f"by {n}, the size of {{{','.join(step.axes)}}}")
        return t.replace(step.dim, Dim(d.local // n, step.axes + d.axes, d.size))
    if isinstance(step, AllToAll) and step.more:
        for i, j, ax in step.moves:
            t = apply_strict(mesh, t, AllToAll(i, j, ax))
        return t
    if isinstance(step, AllToAll):
        di = _dim(t, step.src, "T-ALLTOALL")
        dj = _dim(t, step.dst, "T-ALLTOALL")
        k = len(step.axes)
        if di.axes[:k] != step.axes:
            raise ModelError(f"T-ALLTOALL: axes {{{','.join(step.axes)}}} are not the minor-most axes of "
                             f"dimension {step.src} of {t}")
        n = axes_size(mesh, step.axes)
        if dj.local % n:
            raise ModelError(f"T-ALLTOALL: tile size {dj.local} of dimension {step.dst} of {t} is not "
                             f"divisible by {n}")
        out = t.replace(step.src, Dim(di.local * n, di.axes[k:], di.size))
        return out.replace(step.dst, Dim(dj.local // n, step.axes + dj.axes, dj.size))
    if isinstance(step, AllPermute):
        check_well_formed(mesh, step.target, what="permute target")
        if step.target.globaltype != t.globaltype or step.target.localtype != t.localtype:
            raise ModelError(f"T-PERMUTE: {t} and {step.target} differ in local or global type")
        return step.target
    raise ModelError(f"unknown collective {step!r}")
