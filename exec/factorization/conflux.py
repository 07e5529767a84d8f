"""COnfLUX on one rank (thesis Algorithm 2, sections 4.7.2–4.7.4): 2.5-D LU with tournament pivoting
and row masking.

Rank ``(px, py, pz)`` holds the block-cyclic tile of its rows and columns; layer 0 starts with ``A``,
the other layers with zeros (partial sums).  Step ``t`` (block column ``J``, held by grid column
``py_t = t mod Py``, reduced onto layer ``z0 = t mod Pz``):

1. reduce the active rows of ``J`` over the layers onto ``[:, py_t, z0]`` (not at step 0, when the
   layers ``z > 0`` still hold zeros; nor the pivot rows of line 5);
2. tournament pivoting among those ``Px`` ranks: local GEPP picks ``v`` candidate rows, then
   butterfly rounds exchange ``v×(v+1)`` candidates (values and row indices) and keep the GEPP
   winners of the stacked ``2v×v`` block; with ``Px`` not a power of two the extra ranks fold into
   partners first and receive the result last;
3. the ``v`` pivot indices go to every other rank (a NaN index marks a singular matrix: all stop);
5. each pivot row ``k`` (columns right of ``J``) is reduced over the layers onto the layer ``z(k)``
   whose part ``s_z`` of the inner index holds ``k``; 10. those rows go to the ``Px - 1`` other ranks
   of that layer and grid column;
7. the holders of ``J`` solve ``L10 = A10·U00⁻¹`` and form ``W = L10·L00⁻¹``; 8. each rank receives the
   columns ``s_z`` of ``W`` for its rows, if its grid column still owns trailing columns;
11. every layer updates its partial sums ``A11 -= W[:, s_z]·A01[s_z, :]`` (``W·A01 = L10·U01``);
    pivot rows are masked out, never swapped.

``U01 = L00⁻¹·A01`` itself is never formed: no rank needs it for the update, and the solve
(:mod:`meshplan.exec.factorization.solve`) uses ``lu00`` and the reduced pivot rows ``A01`` directly.  Every message is a
point-to-point buffer on the counting communicator; the words match
:func:`meshplan.models.factorization.cost.conflux_cost` exactly.
"""

from __future__ import annotations

import numpy as np

from meshplan.exec.factorization.common import Layout, exchange, gepp, post, reduce_column
from meshplan.exec.factorization.kernels import gemm_update, trsm_inplace
from meshplan.models.factorization.cost import cyclic_count
from meshplan.models.factorization.problem import layer_slices

__all__ = ["conflux_lu", "tournament"]

T_COL, T_TOUR, T_PIV, T_ROWS, T_BC, T_W = 11, 12, 13, 14, 15, 16


def _select(block: np.ndarray, vt: int) -> np.ndarray:
    """The ``vt`` GEPP winners of a stacked ``m×(vt+1)`` candidate block (last column = row index)."""
    order, _lu, _bad = gepp(block[:, :vt], vt)
    return block[order[:vt]]


def tournament(comm, lay: Layout, cand: np.ndarray, vt: int, py_t: int, z0: int) -> np.ndarray:
    """Butterfly tournament among the ``Px`` ranks ``[:, py_t, z0]`` on ``vt×(vt+1)`` candidates."""
    g, px = lay.grid, lay.px
    P = g.Px
    if P == 1:
        return cand
    q = 1 << (P.bit_length() - 1)
    peer = lambda x: g.rank(x, py_t, z0)  # noqa: E731
    shape, dt = cand.shape, lay.dtype
    if px >= q:  # fold in, wait for the result
        exchange(comm, [(peer(px - q), cand)], [], T_TOUR, dt)
        return exchange(comm, [], [(peer(px - q), shape)], T_TOUR, dt)[0]
    if px < P - q:
        other = exchange(comm, [], [(peer(px + q), shape)], T_TOUR, dt)[0]
        cand = _select(np.vstack([cand, other]), vt)
    r = 1
    while r < q:
        mate = px ^ r
        other = exchange(comm, [(peer(mate), cand)], [(peer(mate), shape)], T_TOUR, dt)[0]
        lo, hi = (cand, other) if px < mate else (other, cand)
        cand = _select(np.vstack([lo, hi]), vt)
        r <<= 1
    if px < P - q:
        exchange(comm, [(peer(px + q), cand)], [], T_TOUR, dt)
    return cand


def _plan_swaps(prow: np.ndarray, s: int, perm: np.ndarray, where: np.ndarray) -> list[tuple[int, int]]:
    """The row swaps (position pairs) that bring the local rows ``prow``, in order, to positions ``s, s+1, …``;
    ``perm`` (position → row) and ``where`` (row → position) are updated as if they were done."""
    swaps = []
    for i, r in enumerate(prow):
        a, b = int(where[r]), s + i
        if a != b:
            swaps.append((a, b))
            rb = perm[b]
            perm[a], perm[b] = rb, r
            where[rb], where[r] = a, b
    return swaps


def _apply_swaps(M: np.ndarray, swaps: list[tuple[int, int]], offset: int = 0, c: int = 0) -> None:
    """Swap the rows ``a - offset``, ``b - offset`` of ``M`` (its columns from ``c`` on) for every pair, in
    order: the rows they touch are moved at once (one gather, one scatter)."""
    if not swaps:
        return
    pos = sorted({p for pair in swaps for p in pair})
    at = {p: i for i, p in enumerate(pos)}
    src = list(pos)  # src[i]: the row that ends at position pos[i]
    for a, b in swaps:
        ia, ib = at[a], at[b]
        src[ia], src[ib] = src[ib], src[ia]
    dst = np.asarray(pos, dtype=np.int64) - offset
    M[dst, c:] = M[np.asarray(src, dtype=np.int64) - offset, c:]


def conflux_lu(comm, lay: Layout, A: np.ndarray, tol: float):
    """Factor in place; returns ``(F, steps, diag, breakdown)`` — ``F`` the entries this rank finalized
    (L10 / L00\\U00 / reduced A01 rows), ``steps`` the pivot lists, ``diag`` the factored ``lu00`` of the
    steps ``t`` whose holder ``[t mod Px, t mod Py, t mod Pz]`` this rank is (what the solve needs), and
    ``breakdown`` ``(t, k)`` if the matrix is singular to working precision.

    The local domain (section 4.7, Algorithm 2): the working tile ``A`` (row-major, so that a row swap is two
    contiguous copies; the trailing update is one BLAS ``gemm`` on a view,
    :func:`~meshplan.exec.factorization.kernels.gemm_update`) keeps its active rows contiguous — each step
    swaps this rank's pivot rows to the top of the active rows (a local row order ``perm``, the same on every
    rank of a grid row), so ``A[s:, c:]`` is the trailing matrix and no row is gathered or scattered.  ``F``
    keeps the original local row order.

    Look-ahead (overlap of communication and computation, section 3.7.3): a rank of the grid column that
    holds the next block column updates that block column first and leaves the rest of its update for
    after the next step's panel (reduction, tournament, pivots, ``W`` posted without waiting), so the next
    panel is on its way while the other ranks finish their updates.  The messages are the same."""
    g, N, dt = lay.grid, lay.N, lay.dtype
    Px, Py, Pz, v = g.Px, g.Py, g.Pz, g.v
    px, py, pz = lay.px, lay.py, lay.pz
    F = np.zeros(A.shape, dtype=A.dtype)
    nrow = len(lay.rows)
    perm = np.arange(nrow)   # perm[position] = local row held there
    where = np.arange(nrow)  # where[local row] = its position
    s = 0                    # positions < s hold finished pivot rows; the active rows are A[s:]
    steps, diag = [], {}
    coords = [g.coords(r) for r in range(g.p)]
    deferred = None          # the part of the last step's update left for after this step's panel

    def finish_deferred():
        nonlocal deferred
        if deferred is not None:
            gemm_update(*deferred)
            deferred = None

    for t in range(-(-N // v)):
        c0 = t * v
        vt = min(v, N - c0)
        c1 = c0 + vt
        py_t, z0 = t % Py, t % Pz
        holder = py == py_t and pz == z0
        jl = lay.cols_from(c0).start
        rc = lay.cols_from(c1)
        ncr = rc.stop - rc.start
        blk = None
        w_sent = None
        # 1. reduce the block column over the layers
        if py == py_t:
            blk = reduce_column(comm, lay, A, slice(s, nrow), c0, vt, z0, T_COL)
        # 2. tournament pivoting, 3. pivot indices to everyone
        if holder:
            gidx = lay.rows[perm[s:]].astype(np.float64)
            order, _lu, _bad = gepp(blk, vt)
            n = min(vt, nrow - s)
            cand = np.zeros((vt, vt + 1), dtype=dt)
            cand[:n, :vt] = blk[order[:n]]
            cand[:n, vt] = gidx[order[:n]]
            cand[n:, vt] = -1
            win = tournament(comm, lay, cand, vt, py_t, z0)
            order, lu00, bad = gepp(win[:, :vt], vt, tol)
            piv = win[order, vt]
            if px == t % Px:
                diag[t] = lu00
            if bad is not None or np.any(piv < 0):
                piv = np.full(vt, np.nan, dtype=dt)
                steps.append({"t": t, "bad": 0 if bad is None else int(bad)})
            if px == 0:
                dests = [r for r in range(g.p) if not (coords[r][1] == py_t and coords[r][2] == z0)]
                exchange(comm, [(d, piv) for d in dests], [], T_PIV, dt)
        else:
            finish_deferred()
            piv = exchange(comm, [], [(g.rank(0, py_t, z0), (vt,))], T_PIV, dt)[0]
        if np.isnan(piv).any():
            return F, steps, diag, (t, steps[-1]["bad"] if holder else None)
        piv = piv.astype(np.int64)
        steps.append({"t": t, "pivots": piv.tolist()})
        sl = layer_slices(vt, Pz)
        zk = np.repeat(np.arange(Pz), [hi - lo for lo, hi in sl])
        ownpx = lay.px_of(piv)
        mine = np.flatnonzero(ownpx == px)
        prow = lay.lrow[piv[mine]]  # my pivot rows (local rows, in pivot order)
        at = np.full(vt, -1, dtype=np.int64)
        at[mine] = where[prow]      # their positions in A (before this step's swaps), by pivot number
        s_old = s
        swaps = _plan_swaps(prow, s, perm, where)  # my pivot rows to the top of the active rows
        s += len(prow)
        lo, hi = sl[pz]
        # 7./8. L10, W = L10·L00⁻¹ on the holders, its parts s_z to every rank of the grid row (posted)
        if holder:
            _apply_swaps(blk, swaps, s_old)
            lu00 = np.asarray(lu00, dtype=dt)
            L10 = blk[len(prow):]  # contiguous rows of the reduced copy: BLAS trsm in place, no copies
            trsm_inplace(L10, lu00, left=False, lower=False, trans=False)          # L10 = A10·U00⁻¹
            W = L10.copy()
            trsm_inplace(W, lu00, left=False, lower=True, trans=False, unit=True)  # W = L10·L00⁻¹
            sends = [(g.rank(px, y, z), W[:, sl[z][0]:sl[z][1]]) for y in range(Py) for z in range(Pz)
                     if (y, z) != (py_t, z0) and nrow > s and cyclic_count(c1, N, v, Py, y)]
            w_sent = post(comm, sends, [], T_W, dt)
            Wz = W[:, lo:hi]
            finish_deferred()
        # 5. reduce pivot rows onto layer z(k)
        #    (at step 0 the layers z > 0 hold zeros: only layer 0 sends, i.e. a copy, not a sum)
        if Pz > 1 and ncr:
            sends = [(g.rank(px, py, z), A[at[mine[zk[mine] == z]], rc])
                     for z in range(Pz) if z != pz and (t > 0 or pz == 0)]
            ks = mine[zk[mine] == pz]
            recvs = [(g.rank(px, py, z), (len(ks), ncr)) for z in range(Pz) if z != pz and (t > 0 or z == 0)]
            got = exchange(comm, sends, recvs if len(ks) else [], T_ROWS, dt)
            for part in got:
                A[at[ks], rc] += part
        # 10. the reduced rows of my layer's part to the other ranks of [:, py, pz]
        A01 = np.empty((hi - lo, ncr), dtype=dt)
        if hi > lo and ncr:
            ks = mine[zk[mine] == pz]
            rows_k = A[at[ks], rc]
            F[lay.lrow[piv[ks]], rc] = rows_k
            A01[ks - lo] = rows_k
            sends = [(g.rank(x, py, pz), rows_k) for x in range(Px) if x != px and len(ks)]
            theirs = [(x, np.flatnonzero((ownpx == x) & (zk == pz))) for x in range(Px) if x != px]
            got = exchange(comm, sends, [(g.rank(x, py, pz), (len(k2), ncr)) for x, k2 in theirs], T_BC, dt)
            for (x, k2), part in zip(theirs, got):
                A01[k2 - lo] = part
        _apply_swaps(A, swaps, 0, jl)
        if holder:  # the finished block column (F in the original local row order)
            F[perm[s:], jl:jl + vt] = L10
            F[prow, jl:jl + vt] = lu00[mine]
        if not holder and ncr:
            Wz = exchange(comm, [], [(g.rank(px, py_t, z0), (nrow - s, hi - lo))], T_W, dt)[0]
        # 11. Schur update of this layer's partial sums, in place on the trailing view; a rank of the next
        #     block column's grid column updates that block column now and the rest after the next panel
        if nrow > s and ncr and hi > lo:
            nxt = min(v, N - c1) if (t + 1) % Py == py else 0
            gemm_update(A[s:, rc.start:rc.start + nxt], Wz, A01[:, :nxt])
            deferred = (A[s:, rc.start + nxt:rc.stop], Wz, A01[:, nxt:])
            if not nxt:
                finish_deferred()
        if w_sent is not None:
            w_sent.wait()
    return F, steps, diag, None
