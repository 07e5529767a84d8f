"""A permutation split among the replicas of each tile (an extension of the step model of "Memory-efficient
array redistribution through portable collective communication", Rink, Kwasniewski et al., §6).

The paper's ``allpermute`` hands each device that moves the whole tile of one source device.  When the type
before it is replicated over ``ρ`` devices (mesh axes that partition no dimension), every tile has ``ρ``
holders, and a device lacking a tile can take ``1/ρ`` of it from each of them.  The bytes all devices send
together stay the same; the busiest device sends ``m/ρ`` of a tile instead of a whole one, where ``m ≤ ρ`` is
the number of devices lacking its tile (both types have the same local and global type, so each tile is held
``ρ`` times before and needed ``ρ`` times after).

:func:`split_holders` chooses the holders: for a tile ``T`` with holders ``h_0 < … < h_{ρ−1}`` and lacking
devices ``r_0 < … < r_{m−1}``, device ``r_j`` takes chunk ``k`` (of ``ρ`` equal chunks of its flattened
tile, C order) from ``h_{(j+k) mod ρ}``.  In each chunk index ``k`` every holder then sends at most one
chunk and every receiver takes one, so chunk ``k`` of all tiles could move in one permutation.  A tile that
``ρ`` does not divide is not split.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.lowlevel import Assignment
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.offsets import base_offsets
from meshplan.models.redistribution.steps import AllPermute

__all__ = ["split_holders", "split_permute", "exchange", "exchange_counts"]


def _tiles(offsets: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row) for row in offsets]


def split_holders(mesh: Mesh, state: Assignment, step: AllPermute,
                  coords0: np.ndarray) -> tuple[tuple[int, ...], ...] | None:
    """The holders of every device's chunks for ``step`` from ``state`` (module docstring), or ``None`` when
    the tiles have one holder each, when ``ρ`` does not divide the tile, or when no device lacks its tile."""
    have = _tiles(state.offsets(mesh))
    want = _tiles(base_offsets(mesh, step.target, coords0))
    holding: dict[tuple[int, ...], list[int]] = {}
    for d, t in enumerate(have):
        holding.setdefault(t, []).append(d)
    rho = {len(h) for h in holding.values()}
    if len(rho) != 1:
        raise ModelError(f"internal: tiles of {state.type} are held by different numbers of devices {sorted(rho)}")
    rho = rho.pop()
    lacking: dict[tuple[int, ...], list[int]] = {}
    for d, t in enumerate(want):
        if t not in holding:
            raise ModelError(f"PERMUTE: no device holds the tile at {t} that device {d} needs")
        if have[d] != t:
            lacking.setdefault(t, []).append(d)
    if rho < 2 or state.type.localsize % rho or not lacking:
        return None
    out: list[tuple[int, ...]] = [()] * len(want)
    for t, receivers in lacking.items():
        h = holding[t]
        if len(receivers) > rho:
            raise ModelError(f"internal: {len(receivers)} devices lack the tile at {t}, held by only {rho}")
        for j, d in enumerate(receivers):
            out[d] = tuple(h[(j + k) % rho] for k in range(rho))
    return tuple(out)


def split_permute(mesh: Mesh, state: Assignment, step: AllPermute, coords0: np.ndarray) -> AllPermute:
    """``step`` with its transfer split among the replicas (:func:`split_holders`), or ``step`` itself when
    splitting sends no fewer elements from the busiest device."""
    holders = split_holders(mesh, state, step, coords0)
    if holders is None:
        return step
    split = AllPermute(step.target, step.source, holders)
    n = state.type.localsize
    return split if split.wire_elements(n) < step.wire_elements(n) else step


def exchange(step: AllPermute, device: int, localsize: int
             ) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    """What ``device`` sends and receives in a split ``step`` for tiles of ``localsize`` elements:
    ``(sends, receives)``, each a tuple of ``(peer, lo, hi)`` (a chunk ``[lo, hi)`` of the flattened tile),
    sorted by peer."""
    if step.holders is None:
        raise ModelError("only a split allpermute exchanges chunks")
    sends, recvs = [], []
    for d, h in enumerate(step.holders):
        c = localsize // len(h) if h else 0
        for k, s in enumerate(h):
            if s == device:
                sends.append((d, k * c, (k + 1) * c))
            if d == device:
                recvs.append((s, k * c, (k + 1) * c))
    return tuple(sorted(sends)), tuple(sorted(recvs))


def exchange_counts(step: AllPermute, device: int, localsize: int) -> tuple[np.ndarray, ...]:
    """:func:`exchange` as an ``Alltoallv``'s arguments over all devices: send counts, send displacements,
    receive counts, receive displacements (elements of the flattened tile)."""
    sends, recvs = exchange(step, device, localsize)
    out = [np.zeros(len(step.holders), dtype=np.int64) for _ in range(4)]
    for (count, displ), pairs in ((out[:2], sends), (out[2:], recvs)):
        for peer, lo, hi in pairs:
            count[peer], displ[peer] = hi - lo, lo
    return tuple(out)
