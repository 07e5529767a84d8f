"""Element owners of the two user-visible layouts, and the exact volume of converting between them.

A COSMA run can start from and end in ScaLAPACK's 2-D block-cyclic layout (so it can stand in for
``pdgemm``): A and B are moved from block-cyclic to COSMA's blocked pieces (section 3.7.6) before the
schedule and C back after it, each by one all-to-all.  :func:`blocked_owners` and
:func:`block_cyclic_owners` give the rank that holds every element; :func:`conversion_words` the words each
rank receives from other ranks in the three conversions (exact: an element moves iff its two owners differ).

The block-cyclic layout is ScaLAPACK's array descriptor (the one ``pdgemm`` reads): a matrix in ``mb×nb``
blocks dealt round-robin over a ``pr×pc`` process grid whose ranks are numbered row-major, source process
(0, 0); a ``block`` argument is ``nb`` (square blocks) or ``(mb, nb)``.  :func:`scalapack_block` is the
default block size, :func:`cyclic_indices` the global rows (or columns) a process holds (ScaLAPACK's
``numroc`` counts them) and :func:`check_layout` the one check of a ``layout`` name.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.core.errors import ModelError, quote
from meshplan.models.matmul.problem import Grid, MatmulProblem, split

__all__ = ["part_index", "blocked_owner", "blocked_owners", "block_cyclic_owner", "block_cyclic_owners", "conversion_words", "cyclic_indices",
           "scalapack_block", "check_block", "check_layout", "LAYOUTS"]

#: the layouts a distributed matmul takes and returns: COSMA's blocked pieces, or ScaLAPACK's block-cyclic ones
LAYOUTS = ("blocked", "scalapack")


def check_layout(layout: object) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`, else :class:`ModelError` naming the parameter."""
    if layout not in LAYOUTS:
        raise ModelError(f"unknown layout {quote(layout)}; use {' or '.join(LAYOUTS)}", param="layout")
    return str(layout)


def check_block(block: object) -> tuple[int, int]:
    """``(mb, nb)`` from ``block`` (an int for square blocks, or a pair), each a positive integer."""
    bad = ModelError(f"block must be (mb, nb), two positive integers, got {quote(block)}", param="block")
    whole = lambda v: not isinstance(v, bool) and hasattr(v, "__index__")  # noqa: E731
    pair = (block, block) if whole(block) else block
    try:
        mb, nb = pair  # type: ignore[misc]
    except (TypeError, ValueError):
        raise bad from None
    if not (whole(mb) and whole(nb)) or min(int(mb), int(nb)) < 1:
        raise bad
    return int(mb), int(nb)


def scalapack_block(m: int, n: int, k: int, pr: int, pc: int, cap: int = 64) -> int:
    """The default (square) pdgemm block size: at most ``cap`` (64, the usual choice) and small enough that
    every matrix is spread over the whole pr×pc grid."""
    c = lambda a, b: -(-a // b)  # noqa: E731
    return max(1, min(cap, c(m, pr), c(n, pc), c(k, pc), c(k, pr)))


def cyclic_indices(n: int, block: int, nprocs: int, iproc: int) -> np.ndarray:
    """Global indices (rows or columns) process ``iproc`` holds when ``n`` indices are dealt in blocks of
    ``block`` over ``nprocs`` processes from process 0, in local order (their number is ScaLAPACK's numroc)."""
    idx = np.arange(n, dtype=np.int64)
    return idx[(idx // block) % nprocs == iproc]


def part_index(n: int, parts: int, *, larger_first: bool = True) -> np.ndarray:
    """For every index 0…n−1, the part of ``split(n, parts, larger_first=…)`` that holds it."""
    out = np.empty(n, dtype=np.int64)
    for q, (a, b) in enumerate(split(n, parts, larger_first=larger_first)):
        out[a:b] = q
    return out


def block_cyclic_owners(rows: int, cols: int, block, pr: int, pc: int) -> np.ndarray:
    """Rank (row-major on the pr×pc grid) holding each element in ``mb×nb`` blocks (``block``: nb or
    (mb, nb)), source process 0."""
    return block_cyclic_owner(np.arange(rows)[:, None], np.arange(cols)[None, :], block, pr, pc)


def _part_of(e: np.ndarray, size: np.ndarray, parts: int) -> np.ndarray:
    """For positions ``e`` in ranges of ``size`` indices split larger-first into ``parts``, the part index."""
    base, extra = size // parts, size % parts
    big = extra * (base + 1)
    return np.where(e < big, e // (base + 1), extra + (e - big) // np.maximum(base, 1))


def blocked_owner(prob: MatmulProblem, grid: Grid, matrix: str, gi, gj) -> np.ndarray:
    """Rank holding elements ``(gi, gj)`` (integer arrays, broadcast) of ``matrix`` ("A" or "B" at the start,
    "C" at the end) in COSMA's blocked layout (:mod:`meshplan.models.matmul.problem`); O(m + n + k) work
    besides the elements asked for."""
    gi, gj = np.asarray(gi, dtype=np.int64), np.asarray(gj, dtype=np.int64)
    m, n, k = prob.m, prob.n, prob.k
    if matrix == "A":  # A[M_i, K_l] row pieces j
        ii, ll = part_index(m, grid.pm), part_index(k, grid.pk)
        jj = np.concatenate([part_index(b - a, grid.pn, larger_first=False) for a, b in split(m, grid.pm)])
        return (ii[gi] * grid.pn + jj[gi]) * grid.pk + ll[gj]
    if matrix == "B":  # B[K_l, N_j] column pieces i
        jj, ll = part_index(n, grid.pn), part_index(k, grid.pk)
        ii = np.concatenate([part_index(b - a, grid.pm, larger_first=False) for a, b in split(n, grid.pn)])
        return (ii[gj] * grid.pn + jj[gj]) * grid.pk + ll[gi]
    if matrix == "C":  # C[M_i, N_j] row-major element ranges l
        ii, jj = part_index(m, grid.pm)[gi], part_index(n, grid.pn)[gj]
        r0, nr = (np.array(v, dtype=np.int64) for v in zip(*((a, b - a) for a, b in split(m, grid.pm))))
        c0, nc = (np.array(v, dtype=np.int64) for v in zip(*((a, b - a) for a, b in split(n, grid.pn))))
        e = (gi - r0[ii]) * nc[jj] + (gj - c0[jj])
        return (ii * grid.pn + jj) * grid.pk + _part_of(e, nr[ii] * nc[jj], grid.pk)
    raise ValueError(f"matrix must be A, B or C, not {matrix!r}")


def blocked_owners(prob: MatmulProblem, grid: Grid, matrix: str) -> np.ndarray:
    """Rank holding each element of ``matrix`` ("A" at the start, "B" at the start, "C" at the end) in
    COSMA's blocked layout (:mod:`meshplan.models.matmul.problem`), as a matrix of the global shape."""
    rows, cols = {"A": (prob.m, prob.k), "B": (prob.k, prob.n), "C": (prob.m, prob.n)}.get(matrix, (0, 0))
    return blocked_owner(prob, grid, matrix, np.arange(rows)[:, None], np.arange(cols)[None, :])


def block_cyclic_owner(gi, gj, block, pr: int, pc: int) -> np.ndarray:
    """Rank (row-major on the pr×pc grid) holding elements ``(gi, gj)`` (integer arrays, broadcast) in
    ``mb×nb`` blocks (``block``: nb or (mb, nb)), source process 0."""
    mb, nb = check_block(block)
    return ((np.asarray(gi) // mb) % pr) * pc + (np.asarray(gj) // nb) % pc


def conversion_words(prob: MatmulProblem, grid: Grid, block, pr: int, pc: int) -> list[dict[str, int]]:
    """Per rank: words received converting A and B from block-cyclic (``block`` = nb or (mb, nb), pr×pc) to
    blocked and C back."""
    out = [{"a_in": 0, "b_in": 0, "c_out": 0} for _ in range(prob.p)]
    pairs = (("a_in", block_cyclic_owners(prob.m, prob.k, block, pr, pc), blocked_owners(prob, grid, "A")),
             ("b_in", block_cyclic_owners(prob.k, prob.n, block, pr, pc), blocked_owners(prob, grid, "B")),
             ("c_out", blocked_owners(prob, grid, "C"), block_cyclic_owners(prob.m, prob.n, block, pr, pc)))
    for key, src, dst in pairs:
        moved = dst[src != dst]
        for r, c in zip(*np.unique(moved, return_counts=True)):
            out[int(r)][key] += int(c)
    return out
