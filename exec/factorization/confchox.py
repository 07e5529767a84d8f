"""COnfCHOX on one rank (thesis section 4.7.5, Table 4.1): 2.5-D Cholesky, the data flow of COnfLUX
without pivoting and with a lower-half (gemmt-style) Schur update.

Step ``t`` (block column ``J``, grid column ``py_t = t mod Py``, layer ``z0 = t mod Pz``):

1. reduce the rows ``≥ tv`` of ``J`` over the layers onto ``[:, py_t, z0]``, of the diagonal block only
   its lower triangle (not at step 0: the layers ``z > 0`` still hold zeros);
2. the owner of the diagonal block factors it (potrf) and sends ``L00`` (its lower triangle) to the
   other holders of ``J`` that still own trailing rows (a non-positive pivot is recorded with its step and column);
3. the holders solve ``L10 = A10·L00⁻ᵀ``; each rank receives, once, the columns ``s_z`` of its layer
   of the L10 rows it needs (:func:`panel_rows`): the rows of its own rows (the row panel) and of
   its own columns (the column panel, ``L10ᵀ``) that the lower-half update reads;
4. every layer updates the lower half of its partial sums, ``A11 -= L10[:, s_z]·L10[:, s_z]ᵀ``,
   block column by block column from the diagonal down (BLAS gemm on views of the tile).

Look-ahead (overlap, section 3.7.3): a rank of the grid column that holds the next block column updates
that block column first and the rest of its tile after the next step's panel is posted.

Words match :func:`meshplan.models.factorization.cost.confchox_cost` exactly.
"""

from __future__ import annotations

import numpy as np

from meshplan.exec.factorization.common import (Layout, chol_block, exchange, post, reduce_column,
                                                solve_lower_transposed_right)
from meshplan.exec.factorization.kernels import gemm_update
from meshplan.models.factorization.cost import cyclic_count
from meshplan.models.factorization.problem import layer_slices

__all__ = ["confchox", "panel_rows"]

T_COL, T_DIAG, T_W = 21, 22, 23


def panel_rows(N: int, g, x: int, y: int, c1: int) -> np.ndarray:
    """The trailing L10 rows rank column ``(x, y)`` reads in the lower-half update after a step that
    ends at column ``c1``: its rows ``i`` with one of its columns ``j ≤ i``, and its columns ``j``
    with one of its rows ``i ≥ j`` (sorted, each once)."""
    idx = np.arange(c1, N)
    blk = idx // g.v
    rows, cols = idx[blk % g.Px == x], idx[blk % g.Py == y]
    if not len(rows) or not len(cols):
        return idx[:0]
    return np.union1d(rows[rows >= cols[0]], cols[cols <= rows[-1]])


def confchox(comm, lay: Layout, A: np.ndarray):
    """Factor in place; returns ``(F, breakdown)`` — ``F`` the entries of ``L`` this rank finalized,
    ``breakdown`` ``(t, k)`` at the first non-positive pivot (``None`` if the matrix is SPD)."""
    g, N, dt = lay.grid, lay.N, lay.dtype
    Px, Py, Pz, v = g.Px, g.Py, g.Pz, g.v
    px, py, pz = lay.px, lay.py, lay.pz
    F = np.zeros_like(A)
    breakdown = None
    deferred = []  # (view, W rows, W columns) of the last step's update left for after this step's panel
    for t in range(-(-N // v)):
        c0 = t * v
        vt = min(v, N - c0)
        c1 = c0 + vt
        py_t, z0, px_t = t % Py, t % Pz, t % Px
        holder = py == py_t and pz == z0
        ra = lay.rows_from(c0)
        rr = lay.rows_from(c1)
        rc = lay.cols_from(c1)
        sl = layer_slices(vt, Pz)
        lo, hi = sl[pz]
        need = panel_rows(N, g, px, py, c1)
        buf = np.empty((len(need), hi - lo), dtype=dt)
        if py == py_t:
            jl = lay.cols_from(c0).start
            blk = reduce_column(comm, lay, A, ra, c0, vt, z0, T_COL, tri=rr.start - ra.start)
        if holder:
            nd = (rr.start - ra.start)  # rows of J held here (vt on px_t, else 0)
            if px == px_t:
                L00, bad = chol_block(blk[:nd])
                if bad is not None and breakdown is None:
                    breakdown = (t, int(bad))
                low = L00[np.tril_indices(vt)]  # the lower triangle only
                exchange(comm, [(g.rank(x, py, pz), low) for x in range(Px)
                                if x != px and cyclic_count(c1, N, v, Px, x)], [], T_DIAG, dt)
                F[ra.start:rr.start, jl:jl + vt] = L00
            elif rr.stop > rr.start:
                L00 = np.zeros((vt, vt))
                L00[np.tril_indices(vt)] = exchange(comm, [], [(g.rank(px_t, py, pz), (vt * (vt + 1) // 2,))],
                                                    T_DIAG, dt)[0]
            L10 = solve_lower_transposed_right(blk[nd:], L00) if rr.stop > rr.start else np.empty((0, vt))
            F[rr, jl:jl + vt] = L10
            myrows = lay.rows[rr]
            sends = []
            for x in range(Px):
                for y in range(Py):
                    theirs = panel_rows(N, g, x, y, c1)
                    mine = theirs[lay.px_of(theirs) == px]
                    part = L10[np.searchsorted(myrows, mine)]
                    for z in range(Pz):
                        if (x, y, z) != (px, py, pz):
                            sends.append((g.rank(x, y, z), part[:, sl[z][0]:sl[z][1]]))
            own = lay.px_of(need) == px
            buf[own] = L10[np.searchsorted(myrows, need[own])][:, lo:hi]
        # the needed rows held elsewhere come from their holders [px(i), py_t, z0] (one exchange:
        # the holders send and receive at once)
        src = lay.px_of(need)
        recvs = [(x, np.flatnonzero(src == x)) for x in range(Px) if not (holder and x == px)]
        pending = post(comm, sends if holder else [],
                       [(g.rank(x, py_t, z0), (len(k), hi - lo)) for x, k in recvs], T_W, dt)
        for view, Wr, Wc in deferred:  # the rest of the last step's update, while this panel travels
            gemm_update(view, Wr, Wc)
        deferred = []
        got = pending.wait()
        for (x, k), part in zip(recvs, got):
            buf[k] = part
        # lower-half update, one local block column at a time; a rank of the next block column's grid
        # column updates that block column now and the rest once the next panel is on its way
        mycols = lay.cols[rc]
        grow = lay.rows[rr]
        upto = int(np.searchsorted(mycols, grow[-1], side="right")) if len(grow) else 0  # columns ≤ a row
        if hi > lo and upto:
            first = int(np.searchsorted(grow, mycols[0]))  # rows from here meet a column; gathered once
            W_rows = buf[np.searchsorted(need, grow[first:])]
            W_cols = buf[np.searchsorted(need, mycols[:upto])].T.copy()
            ahead = (t + 1) % Py == py
            for b0 in range(0, upto, v):
                b1 = min(b0 + v, upto)
                r0 = int(np.searchsorted(grow, mycols[b0]))
                if r0 < len(grow):  # in place, one BLAS gemm on the view (no temporary)
                    job = (A[rr.start + r0:rr.stop, rc.start + b0:rc.start + b1], W_rows[r0 - first:],
                           W_cols[:, b0:b1])
                    if ahead and b0 > 0:
                        deferred.append(job)
                    else:
                        gemm_update(*job)
    for job in deferred:
        gemm_update(*job)
    return F, breakdown
