"""Block-cyclic ↔ blocked conversion of one matrix by rectangle copies and one Alltoallv.

The scalapack layout of :class:`~meshplan.exec.matmul.executor.MatmulExecutor` takes ScaLAPACK's 2-D
block-cyclic pieces (the array descriptor ``pdgemm`` reads: ``mb×nb`` blocks dealt round-robin over a
row-major ``pr×pc`` process grid, source process (0, 0); Blackford et al., "ScaLAPACK Users' Guide",
section 4.3) and moves them into COSMA's blocked pieces (Kwasniewski et al., "Red-blue pebbling revisited:
near optimal parallel matrix-matrix multiplication", section 6; thesis section 3.7.6) and C back.

Both sides are made of rectangles.  A blocked piece is one dense global rectangle (A and B) or, for C's
row-major element range, at most three (a partial first row, whole rows, a partial last row): its
*regions*.  A block-cyclic process holds the product of its global rows and columns, both ascending, so
the elements of one region that process q holds form a product ``R × C`` whose local positions in q's
array are ONE rectangle (a slice), while in the region they are tiles: along each axis at most three
pieces (a clipped first tile, equal tiles at stride ``nprocs·block``, a clipped last tile), each a strided
view.  So every message of the conversion is a list of dense ``|R|×|C|`` matrices, one per region, in the
blocked array's memory order; it is packed and unpacked with slice copies built once, at bind (no index
arrays):

* on the block-cyclic side one copy per (peer, region) from or to the caller's array, done in strips of
  :data:`STRIP` along the destination's contiguous axis when the two memory orders differ (a transposition;
  strips keep the strided side's cache lines and pages in use);
* on the blocked side at most nine copies per (peer, region) between 4-D strided views of the message and
  of the blocked array, both in the same memory order.

A message holds exactly the elements both ranks own (an element moves iff its two owners differ), so the
bytes per peer are those of any element-wise conversion; only the order inside a message is this module's.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["Conversion", "Region", "blocked_regions", "cyclic_pieces", "held_before", "STRIP"]

#: the width of the strips in which a transposing copy runs (measured on 1536×768: 64 is 10-15× faster
#: than numpy's one-call transposed copy; 16-256 are all close)
STRIP = 64

#: a dense global rectangle of a blocked piece: rows r0:r1, columns c0:c1, at flat offset ``off`` of the
#: piece, in the piece's memory order
Region = tuple[int, int, int, int, int]


def held_before(x: int, block: int, nprocs: int, iproc: int) -> int:
    """How many of the indices 0…x−1 process ``iproc`` holds when they are dealt in blocks of ``block``
    over ``nprocs`` processes from process 0 (ScaLAPACK's numroc of x)."""
    cycles, rest = divmod(x, block * nprocs)
    return cycles * block + min(max(rest - iproc * block, 0), block)


def cyclic_pieces(x0: int, x1: int, block: int, nprocs: int, iproc: int) -> list[tuple[int, int, int, int, int]]:
    """The indices of x0:x1 that process ``iproc`` holds, as at most three pieces ``(start, count, length,
    stride, at)``: ``count`` runs of ``length`` indices starting at x0 + start, start + stride, …; ``at`` is
    the piece's first position among the held indices of x0:x1 (ascending)."""
    out, at = [], 0
    t = x0 // block
    t += (iproc - t) % nprocs                       # the first tile of iproc that can reach x0:x1
    while t * block < x1:
        a, b = max(t * block, x0), min((t + 1) * block, x1)
        if b - a < block:                           # a clipped tile (first, last, or both)
            out.append((a - x0, 1, b - a, 0, at))
            at, t = at + b - a, t + nprocs
            continue
        count = (x1 // block - 1 - t) // nprocs + 1  # whole tiles t, t + nprocs, … ending by x1
        out.append((a - x0, count, block, nprocs * block, at))
        at, t = at + count * block, t + count * nprocs
    return out


def blocked_regions(rows: tuple[int, int], cols: tuple[int, int], elems: tuple[int, int] | None = None) -> list[Region]:
    """The regions of a blocked piece: the rectangle rows × cols, or, with ``elems`` (a range of the
    row-major elements of that rectangle, C's piece), the up to three rectangles that range covers."""
    (r0, r1), (c0, c1) = rows, cols
    if elems is None:
        return [(r0, r1, c0, c1, 0)] if r1 > r0 and c1 > c0 else []
    e0, e1 = elems
    if e1 <= e0:
        return []
    w = c1 - c0
    (i0, j0), (i1, j1) = divmod(e0, w), divmod(e1, w)
    if i0 == i1:
        return [(r0 + i0, r0 + i0 + 1, c0 + j0, c0 + j1, 0)]
    out, off = [], 0
    if j0:
        out.append((r0 + i0, r0 + i0 + 1, c0 + j0, c1, 0))
        i0, off = i0 + 1, w - j0
    if i1 > i0:
        out.append((r0 + i0, r0 + i1, c0, c1, off))
        off += (i1 - i0) * w
    if j1:
        out.append((r0 + i1, r0 + i1 + 1, c0, c0 + j1, off))
    return out


def _view(mat: np.ndarray, rp: tuple, cp: tuple) -> np.ndarray:
    """The 4-D view ``(row runs, row length, column runs, column length)`` of a 2-D array: ``rp`` and ``cp``
    are ``(start, count, length, stride)`` along its rows and its columns (:func:`cyclic_pieces`)."""
    (r, nr, lr, sr), (c, nc, lc, sc) = rp, cp
    if r + (nr - 1) * sr + lr > mat.shape[0] or c + (nc - 1) * sc + lc > mat.shape[1]:  # as_strided checks nothing
        raise ValueError(f"pieces {rp}, {cp} reach outside a {mat.shape} array")
    s0, s1 = mat.strides
    return as_strided(mat[r:, c:], shape=(nr, lr, nc, lc), strides=(sr * s0, s0, sc * s1, s1))


def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for 2-D arrays; when their memory orders differ, in strips of :data:`STRIP` along
    the destination's contiguous axis (a one-call transposed copy walks the source a page per element)."""
    ax = 1 if abs(dst.strides[1]) <= abs(dst.strides[0]) else 0
    if abs(src.strides[ax]) <= abs(src.strides[1 - ax]) or dst.shape[ax] <= STRIP:
        np.copyto(dst, src)
    elif ax == 1:
        for s in range(0, dst.shape[1], STRIP):
            np.copyto(dst[:, s:s + STRIP], src[:, s:s + STRIP])
    else:
        for s in range(0, dst.shape[0], STRIP):
            np.copyto(dst[s:s + STRIP], src[s:s + STRIP])


class Conversion:
    """One matrix from the block-cyclic layout to the blocked one (``to_blocked``) or back, by one Alltoallv.

    ``block`` (mb, nb) and ``grid`` (pr, pc): the block-cyclic descriptor (source process (0, 0));
    ``regions(r)``: the regions of rank r's blocked piece (:func:`blocked_regions`); ``blocked``: this
    rank's blocked piece (the executor's buffer, kept for the executor's life), whose memory order ``order``
    ("C" or "F") the regions and the messages follow.  :meth:`run` converts a block-cyclic array of this
    rank (any memory order) from or into ``blocked``."""

    def __init__(self, me: int, p: int, block: tuple[int, int], grid: tuple[int, int],
                 regions: Callable[[int], list[Region]], blocked: np.ndarray, order: str, *, to_blocked: bool) -> None:
        (mb, nb), (pr, pc) = block, grid
        self.to_blocked = to_blocked
        self.dtype = blocked.dtype

        def pieces(region: Region, q: int):   # what cyclic rank q holds of a region: row and column pieces
            if q >= pr * pc:
                return [], []
            qr, qc = divmod(q, pc)
            r0, r1, c0, c1, _ = region
            return cyclic_pieces(r0, r1, mb, pr, qr), cyclic_pieces(c0, c1, nb, pc, qc)

        def size(ps) -> int:
            return sum(n * length for _, n, length, _, _ in ps)

        # message sizes per pair: (blocked rank s, cyclic rank q) -> the |R|·|C| of each region of s
        mine = regions(me)
        counts_as_blocked = [sum(size(rp) * size(cp) for rp, cp in (pieces(g, q) for g in mine)) for q in range(p)]
        peers = [regions(s) for s in range(p)]
        counts_as_cyclic = [sum(size(rp) * size(cp) for rp, cp in (pieces(g, me) for g in peers[s]))
                            for s in range(p)]
        self.send_counts, self.recv_counts = ((counts_as_cyclic, counts_as_blocked) if to_blocked
                                              else (counts_as_blocked, counts_as_cyclic))
        self.own = self.recv_counts[me]
        self.send = np.empty(sum(self.send_counts), dtype=self.dtype)
        self.recv = np.empty(sum(self.recv_counts), dtype=self.dtype)
        as_blocked, as_cyclic = (self.recv, self.send) if to_blocked else (self.send, self.recv)
        flat = blocked.reshape(-1, order=order)
        if not np.may_share_memory(flat, blocked) and flat.size:
            raise ValueError(f"the blocked piece must be {order}-contiguous: it is written in place")
        displ = np.concatenate([[0], np.cumsum(counts_as_blocked)]).tolist()
        #: the blocked side: (view of the blocked piece, view of the message) pairs, same memory order
        self.blocked_pairs = []
        for q in range(p):
            at = displ[q]
            for g in mine:
                rp, cp = pieces(g, q)
                h, w = size(rp), size(cp)
                if not h * w:
                    continue
                r0, r1, c0, c1, off = g
                piece = flat[off:off + (r1 - r0) * (c1 - c0)].reshape((r1 - r0, c1 - c0), order=order)
                msg = as_blocked[at:at + h * w].reshape((h, w), order=order)
                for r in rp:
                    for c in cp:
                        self.blocked_pairs.append((_view(piece, r[:4], c[:4]),
                                                   _view(msg, (r[4], r[1], r[2], r[2]), (c[4], c[1], c[2], c[2]))))
                at += h * w
        #: the block-cyclic side: (message as a |R|×|C| matrix, local rows, local columns) per (peer, region)
        self.cyclic_parts = []
        displ = np.concatenate([[0], np.cumsum(counts_as_cyclic)]).tolist()
        if me < pr * pc:
            qr, qc = divmod(me, pc)
            for s in range(p):
                at = displ[s]
                for r0, r1, c0, c1, _ in peers[s]:
                    lr = held_before(r0, mb, pr, qr), held_before(r1, mb, pr, qr)
                    lc = held_before(c0, nb, pc, qc), held_before(c1, nb, pc, qc)
                    h, w = lr[1] - lr[0], lc[1] - lc[0]
                    if h * w:
                        self.cyclic_parts.append((as_cyclic[at:at + h * w].reshape((h, w), order=order),
                                                  slice(*lr), slice(*lc)))
                        at += h * w

    def run(self, ex: Any, key: str, cyclic: np.ndarray) -> None:
        """Convert: from ``cyclic`` (this rank's block-cyclic array) into the blocked piece, or from the
        blocked piece into ``cyclic``; words received from other ranks are added to ``ex.words[key]``."""
        if self.to_blocked:
            for msg, rows, cols in self.cyclic_parts:
                _copy(msg, cyclic[rows, cols])
        else:
            for piece, msg in self.blocked_pairs:
                np.copyto(msg, piece)
        _, r0 = ex.counter.snapshot()
        ex.counted.Alltoallv([self.send, self.send_counts], [self.recv, self.recv_counts])
        _, r1 = ex.counter.snapshot()
        ex.words[key] = ex.words.get(key, 0) + (r1 - r0) // self.dtype.itemsize - self.own
        if self.to_blocked:
            for piece, msg in self.blocked_pairs:
                np.copyto(piece, msg)
        else:
            for msg, rows, cols in self.cyclic_parts:
                _copy(cyclic[rows, cols], msg)
