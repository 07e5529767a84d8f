"""Pieces the factorization rank programs share: the block-cyclic layout of one rank, batched
point-to-point exchanges on the counting communicator, and the small dense kernels (GEPP row
selection by LAPACK getrf, triangular solves by BLAS trsm, Cholesky of a block) with breakdown detection (thesis 4.7.2–4.7.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from mpi4py import MPI
from scipy.linalg import blas, lapack

from meshplan.models.factorization.problem import FactorGrid

__all__ = ["Layout", "Pending", "post", "exchange", "reduce_column", "gepp", "solve_upper_right",
           "solve_unit_lower_right", "solve_lower_transposed_right", "chol_block", "copy_tiles"]


def copy_tiles(dst: np.ndarray, src: np.ndarray, block: int = 64) -> None:
    """``dst[...] = src`` (cast as ``np.copyto(..., casting="unsafe")``) through ``block`` x ``block`` tiles when
    the two memory orders differ: numpy's whole-array copy from row- into column-major strides through one of
    the two arrays and runs 4-5x slower than a copy whose tiles both fit in cache."""
    if dst.ndim != 2 or dst.flags.c_contiguous == src.flags.c_contiguous:
        np.copyto(dst, src, casting="unsafe")
        return
    m, n = dst.shape
    for i in range(0, m, block):
        for j in range(0, n, block):
            np.copyto(dst[i:i + block, j:j + block], src[i:i + block, j:j + block], casting="unsafe")


@dataclass
class Layout:
    """The rows and columns one rank ``(px, py, pz)`` owns (block-cyclic, block ``v``), and the dtype
    the factorization computes and communicates in."""

    N: int
    grid: FactorGrid
    rank: int
    dtype: np.dtype = np.dtype(np.float64)

    def __post_init__(self) -> None:
        g = self.grid
        self.px, self.py, self.pz = g.coords(self.rank)
        idx = np.arange(self.N)
        self.rows = idx[(idx // g.v) % g.Px == self.px]
        self.cols = idx[(idx // g.v) % g.Py == self.py]
        self.lrow = np.full(self.N, -1, dtype=np.int64)
        self.lrow[self.rows] = np.arange(len(self.rows))
        self.lcol = np.full(self.N, -1, dtype=np.int64)
        self.lcol[self.cols] = np.arange(len(self.cols))

    def px_of(self, i):
        return (np.asarray(i) // self.grid.v) % self.grid.Px

    def py_of(self, j):
        return (np.asarray(j) // self.grid.v) % self.grid.Py

    def cols_from(self, c: int) -> slice:
        """Local column positions of global columns ``≥ c``."""
        return slice(int(np.searchsorted(self.cols, c)), len(self.cols))

    def rows_from(self, r: int) -> slice:
        return slice(int(np.searchsorted(self.rows, r)), len(self.rows))


class Pending:
    """Messages posted by :func:`post`: :meth:`wait` completes them and returns the received arrays;
    :meth:`received` completes only the receives (the first ``nrecv`` requests), so that a rank computes on
    what it got while its sends wait for their receivers (a large send completes only when its receiver
    has posted the receive); :meth:`wait` completes the rest later."""

    __slots__ = ("out", "reqs", "keep", "nrecv")

    def __init__(self, out: list, reqs: list, keep: list, nrecv: int | None = None) -> None:
        self.out, self.reqs, self.keep = out, reqs, keep
        self.nrecv = len(reqs) if nrecv is None else nrecv

    def wait(self) -> list[np.ndarray]:
        if self.reqs:
            MPI.Request.Waitall(self.reqs)
            self.reqs, self.nrecv = [], 0
        return self.out

    def received(self) -> list[np.ndarray]:
        if self.nrecv:
            MPI.Request.Waitall(self.reqs[:self.nrecv])
            self.reqs, self.nrecv = self.reqs[self.nrecv:], 0
        return self.out


def post(comm, sends, recvs, tag: int, dtype=np.float64) -> Pending:
    """Post every receive ``(src, shape)`` and send ``(dest, array)`` (empty ones skipped) without waiting
    (so that computation overlaps them, thesis section 3.7.3)."""
    reqs, out = [], []
    for src, shape in recvs:
        buf = np.empty(shape, dtype=dtype)
        out.append(buf)
        if buf.size:
            reqs.append(comm.Irecv(buf, source=src, tag=tag))
    nrecv = len(reqs)
    keep = []
    for dest, arr in sends:
        a = np.ascontiguousarray(arr, dtype=dtype)
        if a.size:
            keep.append(a)
            reqs.append(comm.Isend(a, dest=dest, tag=tag))
    return Pending(out, reqs, keep, nrecv)


def exchange(comm, sends, recvs, tag: int, dtype=np.float64, faults: list | None = None) -> list[np.ndarray]:
    """Post every receive ``(src, shape)`` and send ``(dest, array)`` (empty ones skipped), wait for all;
    returns the received arrays (of ``dtype``) in the order of ``recvs`` (empty arrays for empty shapes).
    With a list ``faults`` (on a communicator that returns errors) an MPI error of the wait — a receive
    longer than its buffer — is appended to it and the remaining requests are completed (the received
    arrays then hold garbage) instead of raised."""
    pending = post(comm, sends, recvs, tag, dtype)
    if faults is None:
        return pending.wait()
    try:
        return pending.wait()
    except MPI.Exception as err:
        faults.append(err)
        for req in pending.reqs:  # mpi4py nulls the completed ones; MPI completes a truncated receive
            try:
                req.Wait()
            except MPI.Exception as more:
                faults.append(more)
        pending.reqs = []
        return pending.out


def reduce_column(comm, lay: Layout, A: np.ndarray, rows, c0: int, vt: int, z0: int, tag: int,
                  tri: int = 0, inplace: bool = False) -> np.ndarray:
    """Algorithm 2 line 1 on a rank of the grid column holding block column ``[c0, c0+vt)``: the local
    ``rows`` of it, summed over the ``Pz`` layers onto layer ``z0`` (the other layers send theirs).
    The first block column (``c0 = 0``) is not reduced: the layers ``z > 0`` still hold zeros.  With
    ``tri`` the first ``tri`` rows are a diagonal block of which only the lower triangle is reduced
    (Cholesky: its strict upper part is left as layer ``z0``'s own partial sum).  A copy, or with ``inplace``
    the block column of ``A`` itself: layer ``z0`` sums into it, the other layers zero it once sent."""
    g = lay.grid
    jl = lay.cols_from(c0).start
    blk = A[rows, jl:jl + vt]
    if not inplace:
        blk = blk.copy()
    if g.Pz > 1 and c0 > 0:
        sel = np.ones(blk.shape, dtype=bool)
        sel[:tri, :tri] = np.tri(tri, dtype=bool)
        if lay.pz != z0:
            exchange(comm, [(g.rank(lay.px, lay.py, z0), blk[sel])], [], tag, lay.dtype)
            if inplace:
                blk[...] = 0
        else:
            srcs = [(g.rank(lay.px, lay.py, z), (int(sel.sum()),)) for z in range(g.Pz) if z != z0]
            for part in exchange(comm, [], srcs, tag, lay.dtype):
                blk[sel] += part
    return blk


def gepp(M: np.ndarray, k: int, tol: float = 0.0):
    """Gaussian elimination with partial pivoting on the first ``k`` columns of a copy of ``M`` (LAPACK
    ``getrf`` through ``scipy.linalg.lapack``; the columns right of ``k`` get the row swaps, ``U12`` and
    the Schur complement).

    Returns ``(order, LU, bad)``: the row order (the first ``k`` rows are the pivots, in pivot
    order), the eliminated matrix in that order (``L`` below, ``U`` on and above the diagonal) and
    the first column whose pivot was ``≤ tol`` in magnitude (``None`` if none)."""
    A = np.array(M, dtype=np.float64, copy=True, order="F")
    m, n = A.shape
    k = min(k, m, n)
    order = np.arange(m)
    if k == 0:
        return order, A, None
    lu, piv, _info = lapack.dgetrf(A[:, :k], overwrite_a=True)
    for c, r in enumerate(piv[:k]):  # LAPACK's interchanges (0-based) as one row order
        if r != c:
            order[[c, r]] = order[[r, c]]
    A[:, :k] = lu
    if n > k:  # the rest of the rows, reordered, then U12 = L11^-1 A12 and A22 -= L21 U12
        A[:, k:] = np.asarray(M, dtype=np.float64)[order, k:]
        A[:k, k:] = blas.dtrsm(1.0, lu[:k, :k], A[:k, k:], side=0, lower=1, diag=1)
        A[k:, k:] -= lu[k:, :k] @ A[:k, k:]
    d = np.abs(np.diagonal(lu[:k, :k]))
    small = np.flatnonzero(~(d > tol))
    return order, A, (int(small[0]) if len(small) else None)


def _trsm_right(B: np.ndarray, T: np.ndarray, **kind) -> np.ndarray:
    """``X`` with ``X·op(T) = B`` by BLAS ``trsm`` on the right; ``kind`` its ``lower``/``trans_a``/``diag``."""
    if B.size == 0:
        return np.array(B, dtype=np.float64)
    n = B.shape[1]
    return blas.dtrsm(1.0, np.asarray(T, dtype=np.float64)[:n, :n], np.asarray(B, dtype=np.float64), side=1,
                      **kind)


def solve_upper_right(B: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``X`` with ``X·U = B`` for upper-triangular ``U`` (BLAS ``trsm``)."""
    return _trsm_right(B, U, lower=0, diag=0)


def solve_unit_lower_right(B: np.ndarray, L: np.ndarray) -> np.ndarray:
    """``X`` with ``X·L = B`` for unit lower-triangular ``L`` (strict lower part given; BLAS ``trsm``)."""
    return _trsm_right(B, L, lower=1, diag=1)


def solve_lower_transposed_right(B: np.ndarray, L: np.ndarray) -> np.ndarray:
    """``X`` with ``X·Lᵀ = B`` for lower-triangular ``L`` (BLAS ``trsm``; Cholesky's ``L10 = A10·L00⁻ᵀ``)."""
    return _trsm_right(B, L, lower=1, trans_a=1, diag=0)


def chol_block(A: np.ndarray):
    """Lower Cholesky factor of a small SPD block; returns ``(L, bad)`` with ``bad`` the first column
    whose diagonal was not positive (then the factor continues with ``|d|`` so the run ends cleanly).
    LAPACK ``potrf`` when the block is positive definite; the column loop only to name a breakdown."""
    n = A.shape[0]
    if n:
        L, info = lapack.dpotrf(np.array(A, dtype=np.float64), lower=1, clean=1)
        if info == 0:
            return L, None
    L = np.tril(np.array(A, dtype=np.float64, copy=True))
    bad = None
    for c in range(n):
        d = L[c, c] - L[c, :c] @ L[c, :c]
        if not d > 0:
            bad = c if bad is None else bad
            d = abs(d) if d != 0 else 1.0
        L[c, c] = np.sqrt(d)
        L[c + 1:, c] = (L[c + 1:, c] - L[c + 1:, :c] @ L[c, :c]) / L[c, c]
    return L, bad
