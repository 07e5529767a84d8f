"""Halo geometry of sliding-window layers (DistDL paper, section 3.2.5 and appendix B).

The output of a convolution or pooling is owned by the balanced decomposition of the *output* shape
over the same partition as the input (computational load follows the output, section 3.2.5).  For an
output block ``[o0, o1)`` of a dimension with input length ``n`` and window (kernel ``k``, stride
``s``, padding ``p``, dilation ``d``), output ``i`` reads the (unpadded) inputs ``i·s − p + j·d`` for
``j < k``.  The rank therefore builds a local *extended* array covering ``[o0·s − p, (o1−1)·s − p +
d(k−1) + 1)``; the part inside ``[0, n)`` is the *needed* range and comes from the owners of the
input (itself and any others — a halo may be wider than a neighbour's block, "multi-hop"), the rest
is padding (the needed range is the hull of the inputs actually read).  A stride wider than the window,
or a dilation with few outputs, skips inputs inside that hull: the inputs read along a dimension are
runs (:func:`read_runs`), and the set read is their product over the dimensions (a window is
separable).  A negative halo (appendix B.4) means owned inputs the rank does not need.  The exchange
sends the read elements of each ``owned(src) ∩ needed(dst)`` once, corners included (no nested
per-dimension hops), so the bytes are exactly the number of inputs read from another rank.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import product
from typing import Sequence

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.tensor.partition import (Box, CartesianPartition, balanced_block, box_intersect,
                                              box_is_empty)
from meshplan.models.tensor.plans import Runs, Transfer

__all__ = ["Window", "output_length", "output_shape", "RankHalo", "HaloGeometry", "halo_geometry", "transfer_bound",
           "source_counts",
           "needed_indices",
           "read_runs"]


def _per_dim(value, ndim: int, name: str, minimum: int) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        vals = (value,) * ndim
    else:
        try:
            vals = tuple(int(v) for v in value)
        except (TypeError, ValueError):
            raise ModelError(f"{name} must be an integer or one integer per dimension, got {value!r}") from None
        if len(vals) != ndim:
            raise ModelError(f"{name} {vals} has {len(vals)} entries but the tensor has {ndim} dimensions")
    bad = [v for v in vals if v < minimum]
    if bad:
        raise ModelError(f"{name} must be >= {minimum} in every dimension, got {vals}")
    return vals


@dataclass(frozen=True, slots=True)
class Window:
    """Kernel, stride, padding and dilation per tensor dimension (1, 1, 0, 1 = the identity)."""

    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]

    @classmethod
    def of(cls, ndim: int, kernel=1, stride=1, padding=0, dilation=1) -> "Window":
        return cls(_per_dim(kernel, ndim, "kernel", 1), _per_dim(stride, ndim, "stride", 1),
                   _per_dim(padding, ndim, "padding", 0), _per_dim(dilation, ndim, "dilation", 1))

    @classmethod
    def spatial(cls, ndim: int, n_spatial: int, kernel, stride, padding, dilation) -> "Window":
        """Window of a layer on ``(batch, channel, *spatial)`` tensors: identity on the first
        ``ndim - n_spatial`` dimensions, the given values (int or one per spatial dim) on the rest."""
        lead = ndim - n_spatial
        k = _per_dim(kernel, n_spatial, "kernel_size", 1)
        s = _per_dim(stride, n_spatial, "stride", 1)
        p = _per_dim(padding, n_spatial, "padding", 0)
        d = _per_dim(dilation, n_spatial, "dilation", 1)
        return cls((1,) * lead + k, (1,) * lead + s, (0,) * lead + p, (1,) * lead + d)

    def __post_init__(self) -> None:
        n = len(self.kernel)
        if not (len(self.stride) == len(self.padding) == len(self.dilation) == n):
            raise ModelError("kernel, stride, padding and dilation must have one entry per dimension")

    @property
    def ndim(self) -> int:
        return len(self.kernel)

    def extent(self, k: int) -> int:
        return self.dilation[k] * (self.kernel[k] - 1) + 1


def output_length(n: int, k: int, s: int, p: int, d: int) -> int:
    """``floor((n + 2p − d(k−1) − 1)/s) + 1`` (torch's convolution/pooling output size); may be ≤ 0."""
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def output_shape(global_shape: Sequence[int], window: Window) -> tuple[int, ...]:
    """The output shape, or a :class:`ModelError` naming the dimension that is too small."""
    if len(global_shape) != window.ndim:
        raise ModelError(f"global_shape {tuple(global_shape)} has {len(global_shape)} dimensions but the window "
                         f"has {window.ndim}")
    out = []
    for k, n in enumerate(global_shape):
        m = output_length(n, window.kernel[k], window.stride[k], window.padding[k], window.dilation[k])
        if m < 1 and (window.kernel[k], window.stride[k], window.padding[k]) != (1, 1, 0):
            raise ModelError(f"global_shape[{k}] = {n} is smaller than the window needs: kernel "
                             f"{window.kernel[k]} with dilation {window.dilation[k]} spans {window.extent(k)} "
                             f"inputs but the padded length is {n + 2 * window.padding[k]}")
        out.append(max(m, 0))
    return tuple(out)


def needed_indices(n: int, o0: int, o1: int, k: int, s: int, p: int, d: int) -> set[int]:
    """Brute force: every input index in ``[0, n)`` that some output in ``[o0, o1)`` reads."""
    return {i * s - p + j * d for i in range(o0, o1) for j in range(k)} & set(range(n))


@dataclass(frozen=True, slots=True)
class RankHalo:
    """One grid index's geometry: owned input box, output box, extended (local input) box, needed box
    (the hull of the inputs read) and ``reads``, the runs of inputs read per dimension."""

    index: int
    rank: int
    owned: Box
    out: Box
    extended: Box
    needed: Box
    reads: Runs = ()

    @property
    def halos(self) -> tuple[tuple[int, int], ...]:
        """(left, right) halo width per dimension: needed beyond the owned block (negative = owned inputs
        not needed, appendix B.4); ``(0, 0)`` where nothing is needed."""
        if box_is_empty(self.needed):
            return tuple((0, 0) for _ in self.owned)
        return tuple((x0 - u0, u1 - x1) for (x0, x1), (u0, u1) in zip(self.owned, self.needed))

    @property
    def padding(self) -> tuple[tuple[int, int], ...]:
        """(left, right) padding positions of the extended array per dimension."""
        if box_is_empty(self.out):
            return tuple((0, 0) for _ in self.owned)
        return tuple((max(0, u0 - e0), max(0, e1 - u1)) if u1 > u0 else (e1 - e0, 0)
                     for (e0, e1), (u0, u1) in zip(self.extended, self.needed))


@dataclass(frozen=True, slots=True)
class HaloGeometry:
    partition: CartesianPartition
    global_shape: tuple[int, ...]
    window: Window
    output_shape: tuple[int, ...]
    ranks: tuple[RankHalo, ...]
    transfers: tuple[Transfer, ...]

    def bytes_sent(self, itemsize: int = 8) -> dict[int, int]:
        """Bytes each rank hands to MPI in the forward exchange (local copies excluded)."""
        out = {r: 0 for r in self.partition.ranks}
        for t in self.transfers:
            if t.src != t.dst:
                out[t.src] += t.volume * itemsize
        return out


def _read_hull(n: int, o0: int, o1: int, window: Window, k: int) -> tuple[int, int]:
    """``[min, max + 1)`` of the inputs in ``[0, n)`` that outputs ``[o0, o1)`` read along dimension ``k``
    (``(0, 0)`` if none): per kernel tap ``j`` the first and last output whose read is in range, O(kernel)."""
    s, p, d = window.stride[k], window.padding[k], window.dilation[k]
    lo, hi = n, -1
    for j in range(window.kernel[k]):
        first = max(o0, -((j * d - p) // s))          # smallest i with i*s - p + j*d >= 0
        if first < o1 and first * s - p + j * d < n:
            lo = min(lo, first * s - p + j * d)
        last = min(o1 - 1, (n - 1 + p - j * d) // s)  # largest i with i*s - p + j*d <= n - 1
        if last >= o0 and last * s - p + j * d >= 0:
            hi = max(hi, last * s - p + j * d)
    return (lo, hi + 1) if hi >= lo else (0, 0)


def read_runs(n: int, o0: int, o1: int, window: Window, k: int) -> tuple[tuple[int, int], ...]:
    """The inputs in ``[0, n)`` that outputs ``[o0, o1)`` read along dimension ``k``, as sorted disjoint
    ``[start, stop)`` runs (the brute force :func:`needed_indices`, compressed)."""
    lo, hi = _read_hull(n, o0, o1, window, k)
    if hi <= lo:
        return ()
    kk, s, p, d = window.kernel[k], window.stride[k], window.padding[k], window.dilation[k]
    if (d == 1 and s <= kk) or (o1 - o0 == 1 and d == 1) or (s == 1 and (kk == 1 or o1 - o0 >= d)):
        return ((lo, hi),)                               # windows touch or overlap: no gaps
    idx = (np.arange(o0, o1, dtype=np.int64)[:, None] * s - p + np.arange(kk, dtype=np.int64)[None, :] * d).ravel()
    idx = np.unique(idx[(idx >= 0) & (idx < n)])
    cut = np.nonzero(np.diff(idx) > 1)[0]
    starts = [int(idx[0])] + [int(v) for v in idx[cut + 1]]
    stops = [int(v) + 1 for v in idx[cut]] + [int(idx[-1]) + 1]
    return tuple(zip(starts, stops))


def _clip_runs(runs, lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    return tuple((max(a, lo), min(b, hi)) for a, b in runs if min(b, hi) > max(a, lo))


def _select(reads: Runs, box: Box) -> tuple[Box, Runs | None] | None:
    """The read elements of ``box``: (their hull, runs or None if the hull is all read); None if none."""
    clipped = tuple(_clip_runs(rr, lo, hi) for rr, (lo, hi) in zip(reads, box))
    if any(not rr for rr in clipped):
        return None
    hull = tuple((rr[0][0], rr[-1][1]) for rr in clipped)
    return hull, (None if all(len(rr) == 1 for rr in clipped) else clipped)


def halo_geometry(partition: CartesianPartition, global_shape: Sequence[int], window: Window) -> HaloGeometry:
    """Geometry of every grid index and the transfers of the forward halo exchange.

    O(ranks × dims + transfers): every per-dimension quantity (owned, output and extended ranges, the runs
    read) depends on one grid coordinate only and is computed once per coordinate; a rank's sources are the
    product of the per-dimension coordinate ranges whose blocks meet its needed box (found by bisection), not
    every rank.  The ranks plus the transfers are bounded up front (:func:`transfer_bound`, limit
    ``halo_transfers``, ``MESHPLAN_MAX_HALO_TRANSFERS``), so a huge grid is refused in O(dims × parts)."""
    from meshplan.models.core.limits import check_limit

    g = partition.check_tensor(global_shape)
    if window.ndim != len(g):
        raise ModelError(f"the window has {window.ndim} dimensions but global_shape {g} has {len(g)}")
    out_shape = output_shape(g, window)
    check_limit("halo_transfers", partition.size + math.prod(int(source_counts(p, n, m, window, k).sum())
                                                             for k, (p, n, m) in enumerate(zip(partition.shape, g,
                                                                                               out_shape))),
                f"the halo exchange of {g} on the grid {partition.shape}", param="partition")
    dims = _dimension_tables(partition.shape, g, out_shape, window)
    infos = []
    for idx, coords in enumerate(partition.all_coords()):
        per = [d[c] for d, c in zip(dims, coords)]
        owned = tuple(x.owned for x in per)
        out = tuple(x.out for x in per)
        ext = tuple(x.ext for x in per)
        reads: Runs = tuple(() for _ in g)
        if box_is_empty(out) or any(not x.reads for x in per):
            need = tuple((0, 0) for _ in g)
        else:
            reads = tuple(x.reads for x in per)
            need = tuple((rr[0][0], rr[-1][1]) for rr in reads)
        infos.append(RankHalo(idx, partition.ranks[idx], owned, out, ext, need, reads))
    transfers = []
    for dst, coords in zip(infos, partition.all_coords()):
        if box_is_empty(dst.needed):
            continue
        for src_coords in product(*(range(d[c].src_lo, d[c].src_hi) for d, c in zip(dims, coords))):
            src = infos[partition.index_of_coords(src_coords)]
            sel = _select(dst.reads, box_intersect(src.owned, dst.needed))
            if sel is not None:
                transfers.append(Transfer(src.rank, dst.rank, *sel))
    return HaloGeometry(partition, g, window, out_shape, tuple(infos), tuple(transfers))


@dataclass(frozen=True, slots=True)
class _Coordinate:
    """One grid coordinate ``c`` along one dimension: the owned, output and extended ranges, the runs of
    inputs read, and ``[src_lo, src_hi)``, the coordinates whose owned blocks meet the needed range."""

    owned: tuple[int, int]
    out: tuple[int, int]
    ext: tuple[int, int]
    reads: tuple[tuple[int, int], ...]
    src_lo: int
    src_hi: int


def _dimension_tables(parts: Sequence[int], g: Sequence[int], out_shape: Sequence[int],
                      window: Window) -> list[list[_Coordinate]]:
    return [_dimension_row(k, p, n, m, window) for k, (p, n, m) in enumerate(zip(parts, g, out_shape))]


def _dimension_row(k: int, p: int, n: int, m: int, window: Window) -> list[_Coordinate]:
    """The coordinates of dimension ``k``: ``p`` parts of ``n`` inputs and ``m`` outputs."""
    owned = [balanced_block(n, p, c) for c in range(p)]
    starts, stops = [a for a, _ in owned], [b for _, b in owned]
    row = []
    for c in range(p):
        o0, o1 = balanced_block(m, p, c)
        s, pad = window.stride[k], window.padding[k]
        # an empty output block gets a zero-length extended range (the other dimensions keep theirs, so
        # the local arrays have the right shapes); nothing is needed then
        ext = (o0 * s - pad, (o1 - 1) * s - pad + window.extent(k) if o1 > o0 else o0 * s - pad)
        reads = read_runs(n, o0, o1, window, k) if o1 > o0 else ()
        lo, hi = (reads[0][0], reads[-1][1]) if reads else (0, 0)
        src_lo, src_hi = (bisect_right(stops, lo), bisect_left(starts, hi)) if hi > lo else (0, 0)
        row.append(_Coordinate(owned[c], (o0, o1), ext, reads, src_lo, max(src_lo, src_hi)))
    return row


def source_counts(p: int, n: int, m: int, window: Window, k: int) -> np.ndarray:
    """Per grid coordinate ``c`` of dimension ``k`` (``p`` parts of ``n`` inputs, ``m`` outputs): how many
    coordinates' owned blocks meet the hull of the inputs its outputs read — :func:`_read_hull` and the
    bisection of :func:`_dimension_tables` vectorized over ``c`` (numpy), so a huge grid is refused in
    milliseconds.  Their product over dimensions, summed, is :func:`transfer_bound`."""
    big = 2**60
    if max(n, m, window.padding[k], window.extent(k), window.stride[k]) >= big // max(4, window.kernel[k]):
        # beyond 64-bit integers: the exact Python arithmetic of the tables (p is small for such sizes)
        return np.array([x.src_hi - x.src_lo for x in _dimension_row(k, p, n, m, window)], dtype=object)
    c = np.arange(p, dtype=np.int64)
    q, r = divmod(n, p)
    starts, stops = c * q + np.minimum(c, r), (c + 1) * q + np.minimum(c + 1, r)
    qm, rm = divmod(m, p)
    o0, o1 = c * qm + np.minimum(c, rm), (c + 1) * qm + np.minimum(c + 1, rm)
    s, pad, d = window.stride[k], window.padding[k], window.dilation[k]
    lo, hi = np.full(p, n, dtype=np.int64), np.full(p, -1, dtype=np.int64)
    for j in range(window.kernel[k]):
        first = np.maximum(o0, -((j * d - pad) // s))
        ok = (first < o1) & (first * s - pad + j * d < n)
        lo = np.where(ok, np.minimum(lo, first * s - pad + j * d), lo)
        last = np.minimum(o1 - 1, (n - 1 + pad - j * d) // s)
        ok = (last >= o0) & (last * s - pad + j * d >= 0)
        hi = np.where(ok, np.maximum(hi, last * s - pad + j * d), hi)
    has = (hi >= lo) & (o1 > o0)
    src_lo = np.searchsorted(stops, lo, side="right")
    src_hi = np.searchsorted(starts, hi + 1, side="left")
    return np.where(has, np.maximum(src_hi - src_lo, 0), 0)


def transfer_bound(tables: Sequence[Sequence[_Coordinate]]) -> int:
    """An upper bound on the transfers of the exchange (the pairs of grid indices whose owned and needed boxes
    meet in every dimension): the product over dimensions of the per-coordinate source counts, summed —
    O(dims × parts), before any transfer is built."""
    return math.prod(sum(x.src_hi - x.src_lo for x in row) for row in tables)
