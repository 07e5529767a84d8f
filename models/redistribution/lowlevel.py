"""Low-level MPI-style collectives on device assignments (paper §6, Fig. 10, multi-axis §7.1).

A device assignment ``⟨φ, T⟦τ⟧⟩`` is held as an :class:`Assignment`: the type
``τ`` and ``coords = φ⁻¹`` (mesh coordinates of each physical device).  ALLGATHER
and ALLTOALL may act on axes anywhere in a dimension: the device map is first
changed to ``φ'`` so that the axes become minor-most while every device keeps its
tile (``β'∘φ'⁻¹ = β∘φ⁻¹``; :func:`relabel`), then the rule of Fig. 8 applies.
:func:`replay` is the solver-free checker every planned program goes through.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.redistribution.steps import (
    AllGather, AllPermute, AllToAll, DynSlice, Step, apply_strict)
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.offsets import base_offsets, dim_tile_index
from meshplan.models.redistribution.types import Dim, DistType, check_well_formed

__all__ = ["Assignment", "relabel", "apply_lowlevel", "groups", "replay", "check_program"]


@dataclass(frozen=True, slots=True, eq=False)
class Assignment:
    """``⟨φ, T⟦type⟧⟩_H`` with ``coords[d, a]`` = coordinate of device ``d`` on axis ``a``."""

    type: DistType
    coords: np.ndarray

    def offsets(self, mesh: Mesh) -> np.ndarray:
        """The base offsets of every device's tile under this assignment on ``mesh``."""
        return base_offsets(mesh, self.type, self.coords)


def relabel(mesh: Mesh, state: Assignment, dim: int, axes: tuple[str, ...]) -> Assignment:
    """``⟨φ', β'⟩`` with ``axes`` moved (in this order) to the minor-most positions of ``dim``.

    The tile number along ``dim`` of every device is kept and re-read in the new
    axis order, so ``β'∘φ'⁻¹ = β∘φ⁻¹`` (precondition of ALLGATHER/ALLTOALL, Fig. 10).
    """
    t = state.type
    if not 0 <= dim < t.rank:
        raise ModelError(f"dimension {dim} is out of range for {t}")
    d = t.dims[dim]
    missing = [a for a in axes if a not in d.axes]
    if missing:
        raise ModelError(f"axis {missing[0]} does not partition dimension {dim} of {t}")
    order = tuple(axes) + tuple(a for a in d.axes if a not in axes)
    if order == d.axes:
        return state
    v = dim_tile_index(mesh, d, state.coords)
    coords = state.coords.copy()
    for a in order:
        k = mesh.size(a)
        coords[:, mesh.index(a)] = v % k
        v = v // k
    return Assignment(t.replace(dim, Dim(d.local, order, d.size)), coords)


def apply_lowlevel(mesh: Mesh, state: Assignment, step: Step, coords0: np.ndarray) -> Assignment:
    """One transition ``⇒^step`` of Fig. 10 (multi-axis); ``coords0`` is the initial ``φ⁻¹``."""
    if isinstance(step, AllGather):
        s = relabel(mesh, state, step.dim, step.axes)
        return Assignment(apply_strict(mesh, s.type, step), s.coords)
    if isinstance(step, AllToAll):
        s = state
        for i, j, ax in step.moves:   # a multi-pair all-to-all: its moves in order (§7.1, one collective)
            s = relabel(mesh, s, i, ax)
            s = Assignment(apply_strict(mesh, s.type, AllToAll(i, j, ax)), s.coords)
        return s
    if isinstance(step, DynSlice):
        return Assignment(apply_strict(mesh, state.type, step), state.coords)
    if isinstance(step, AllPermute):
        target = apply_strict(mesh, state.type, step)
        if step.source is None or sorted(step.source) != list(range(state.coords.shape[0])):
            raise ModelError("a lowered allpermute needs a permutation `source` of all devices")
        offsets = state.offsets(mesh)
        want = base_offsets(mesh, target, coords0)
        if not np.array_equal(offsets[list(step.source)], want):
            raise ModelError(f"PERMUTE: the permutation does not deliver the tiles of {target}")
        if step.holders is not None:   # split among the replicas (split.py): every chunk from a holder of it
            if len(step.holders) != len(step.source):
                raise ModelError("a split allpermute needs the holders of every device")
            for d, h in enumerate(step.holders):
                if not all(0 <= s < len(step.source) for s in h) or len(set(h)) != len(h):
                    raise ModelError(f"PERMUTE: device {d} has invalid holders {h}")
                if not h and not np.array_equal(offsets[d], want[d]):
                    raise ModelError(f"PERMUTE: device {d} receives nothing but lacks its tile of {target}")
                if h and not np.array_equal(offsets[list(h)], np.broadcast_to(want[d], (len(h), want.shape[1]))):
                    raise ModelError(f"PERMUTE: a holder {h} of device {d} does not hold its tile of {target}")
                if h and state.type.localsize % len(h):
                    raise ModelError(f"PERMUTE: {len(h)} chunks do not divide the tile of device {d}")
        return Assignment(target, coords0)
    raise ModelError(f"unknown collective {step!r}")


def groups(mesh: Mesh, state: Assignment, step: Step) -> tuple[np.ndarray, np.ndarray, int]:
    """Device groups of a collective: ``(color, key, n)`` per device, as for ``MPI_Comm_split``.

    Devices that agree on every coordinate except those of the step's axes (after
    :func:`relabel`) form one group of ``n`` devices; ``key`` is the mixed-radix
    value of the step's axes (minor first), i.e. the position of the device's
    piece in the gathered or exchanged dimension (of a multi-pair all-to-all: over
    :attr:`AllToAll.group_axes`, the order of :func:`~meshplan.models.redistribution.pieces.exchange_layout`).
    """
    if isinstance(step, AllGather):
        coords = relabel(mesh, state, step.dim, step.axes).coords
    elif isinstance(step, AllToAll):   # every move's source dimension relabelled, as apply_lowlevel does
        coords = apply_lowlevel(mesh, state, step, state.coords).coords
    else:
        raise ModelError(f"{step.op} has no device groups")
    axes = step.group_axes if isinstance(step, AllToAll) else step.axes
    idx = [mesh.index(a) for a in axes]
    others = [i for i in range(len(mesh.axes)) if i not in idx]
    key = np.zeros(coords.shape[0], dtype=np.int64)
    w = 1
    for i in idx:
        key += coords[:, i] * w
        w *= mesh.sizes[i]
    color = np.zeros(coords.shape[0], dtype=np.int64)
    for i in others:
        color = color * mesh.sizes[i] + coords[:, i]
    return color, key, w


def replay(mesh: Mesh, coords0: np.ndarray, src: DistType, steps: tuple[Step, ...]) -> list[Assignment]:
    """All device assignments of a lowered program, starting at ``⟨φ, T⟦src⟧⟩``."""
    check_well_formed(mesh, src, what="source type")
    states = [Assignment(src, coords0)]
    for k, step in enumerate(steps):
        try:
            states.append(apply_lowlevel(mesh, states[-1], step, coords0))
        except ModelError as err:
            raise VerificationError(f"step {k + 1} ({step}) is ill-typed: {err}") from err
    return states


def check_program(mesh: Mesh, coords0: np.ndarray, src: DistType, dst: DistType,
                  steps: tuple[Step, ...]) -> list[Assignment]:
    """Replay ``steps`` and check every device ends with its tile of ``dst`` (re-check, DESIGN.md)."""
    states = replay(mesh, coords0, src, steps)
    check_well_formed(mesh, dst, what="target type")
    got = states[-1].offsets(mesh)
    want = base_offsets(mesh, dst, coords0)
    if states[-1].type.localtype != dst.localtype or not np.array_equal(got, want):
        raise VerificationError(f"the program does not end in {dst}: it ends in {states[-1].type} with a "
                                "different assignment of tiles to devices")
    return states
