"""COnfCHOX on one rank (thesis section 4.7.5, Table 4.1): 2.5-D Cholesky, the data flow of COnfLUX
without pivoting and with a lower-half (gemmt-style) Schur update.

Step ``t`` (block column ``J``, grid column ``py_t = t mod Py``, layer ``z0 = t mod Pz``):

1. reduce the rows ``≥ tv`` of ``J`` over the layers onto ``[:, py_t, z0]``, of the diagonal block only
   its lower triangle (not at step 0: the layers ``z > 0`` still hold zeros);
2. the owner of the diagonal block factors it (potrf) and sends ``L00`` (its lower triangle) to the
   other holders of ``J`` that still own trailing rows (a non-positive pivot is recorded with its step and column);
3. the holders solve ``L10 = A10·L00⁻ᵀ`` (BLAS trsm in place on the panel); each rank receives, once, the
   columns ``s_z`` of its layer of the L10 rows it needs (:func:`panel_rows`): the rows of its own rows (the
   row panel) and of its own columns (the column panel, ``L10ᵀ``) that the lower-half update reads;
4. every layer updates the lower half of its partial sums, ``A11 -= L10[:, s_z]·L10[:, s_z]ᵀ``, in place on
   views of the tile (BLAS gemm, :func:`~meshplan.exec.factorization.kernels.gemm_update`).

The local domain (section 4.7, Algorithm 2).  Every index a step needs — which rows go to which rank, where
they land, the blocks of the update — depends only on ``N``, the grid and the rank, so it is computed once
(:func:`steps`, cached) and a factorization runs no index arithmetic.  The row panel a rank reads is one
message from one holder (its own rows ``i`` all have ``px(i) = px``), received where the update reads it;
the holder sends contiguous slices of its panel where it can.  The tile is column-major, as LAPACK's, and the
lower half of its trailing part is a staircase of block columns, updated one block column at a time
(:func:`block_columns`): a tall gemm of inner dimension ``v`` from the block column's first row down, BLAS's
fast shape in a column-major tile.  Each block column becomes its part of ``L`` in place.

Look-ahead (overlap, section 3.7.3): a rank of the grid column that holds the next block column updates
that block column first and the rest of its tile after the next step's panel is posted; the diagonal block
is sent without waiting, and a step's sends complete at the next step: a rank waits only for what it
receives, not for its receivers to be ready.

Words match :func:`meshplan.models.factorization.cost.confchox_cost` exactly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from meshplan.exec.factorization.common import Layout, chol_block, exchange, post, reduce_column
from meshplan.exec.factorization.kernels import gemm_update, trsm_inplace
from meshplan.models.factorization.cost import cyclic_count
from meshplan.models.factorization.problem import FactorGrid, layer_slices

__all__ = ["block_columns", "confchox", "panel_rows", "steps"]

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


def block_columns(blocks: list[tuple[int, int, int]], R: int) -> list[tuple[int, int, int, int]]:
    """The rectangles ``(r, R, c0, c1)`` of the lower-half update: one per block column ``(c0, c1, r)`` of
    ``blocks``, from its first row ``r`` down (as ScaLAPACK's local update does it).  In a column-major tile each
    is one tall gemm of inner dimension ``v``, BLAS's fast shape (75-80 Gflop/s here, where the 128×128 leaves of a
    recursive staircase of wide rectangles ran at about 40)."""
    return [(r, R, c0, c1) for c0, c1, r in blocks if r < R]


@dataclass(frozen=True, slots=True)
class Step:
    """What one rank does in step ``t`` (local positions; see :func:`steps`)."""

    c0: int
    vt: int
    lo: int                 # this layer's columns s_z = [lo, hi) of the block column
    hi: int
    in_column: bool         # this rank's grid column holds the block column (it takes part in the reduction)
    holder: bool            # ... and this rank is on layer z0: it factors or solves the panel
    diag: bool              # ... and holds the diagonal block
    jl: int                 # local column of the block column (in_column only)
    ra: slice               # local rows ≥ c0
    nd: int                 # rows of the diagonal block held here (holders)
    diag_dests: tuple[int, ...]   # ranks the diagonal owner sends L00 to
    diag_src: int           # the diagonal owner (holders below it), else -1
    sends: tuple            # (rank, start, stop, index or None, z-columns) of the panel to send (holders)
    row_src: int            # the rank that sends this rank's row panel (-1: none; self when a holder)
    row_start: int          # holders: the row panel is the panel's rows from here
    n_rows: int             # rows of the row panel
    col_recvs: tuple        # (rank, count) of the column panel parts from the other holders
    col_own: tuple          # runs (position in W_cols, row of the row panel, length) of the column panel held here
    col_other: tuple        # per received part, its runs (position in W_cols, row of the part, length)
    n_cols: int             # columns updated (the column panel's rows)
    rr0: int                # local row of the row panel's first row
    rc0: int                # local column of the first trailing column
    now: tuple              # rectangles (r0, r1, c0, c1), rows relative to the row panel, columns to rc0
    later: tuple            # the rest (look-ahead: after the next panel is posted)


@functools.lru_cache(maxsize=16)
def steps(N: int, g: FactorGrid, rank: int) -> tuple[Step, ...]:
    """Every step of :func:`confchox` on ``rank``: the index work of the whole factorization, done once."""
    lay = Layout(N, g, rank)
    Px, Py, Pz, v = g.Px, g.Py, g.Pz, g.v
    px, py, pz = lay.px, lay.py, lay.pz
    out = []
    for t in range(-(-N // v)):
        c0 = t * v
        vt = min(v, N - c0)
        c1 = c0 + vt
        py_t, z0, px_t = t % Py, t % Pz, t % Px
        in_column = py == py_t
        holder = in_column and pz == z0
        ra, rr, rc = lay.rows_from(c0), lay.rows_from(c1), lay.cols_from(c1)
        sl = layer_slices(vt, Pz)
        lo, hi = sl[pz]
        nd = rr.start - ra.start
        diag = holder and px == px_t
        diag_dests = tuple(g.rank(x, py, pz) for x in range(Px) if diag and x != px and cyclic_count(c1, N, v, Px, x))
        diag_src = g.rank(px_t, py, pz) if holder and not diag and rr.stop > rr.start else -1
        myrows = lay.rows[rr]
        sends = []
        if holder:
            for x in range(Px):
                for y in range(Py):
                    theirs = panel_rows(N, g, x, y, c1)
                    mine = theirs[lay.px_of(theirs) == px]
                    at = np.searchsorted(myrows, mine)
                    if not len(at):
                        continue
                    contiguous = at[-1] - at[0] + 1 == len(at)
                    for z in range(Pz):
                        if (x, y, z) != (px, py, pz) and sl[z][1] > sl[z][0]:
                            sends.append((g.rank(x, y, z), int(at[0]), int(at[-1]) + 1,
                                          None if contiguous else at, sl[z]))
        # what this rank reads: the row panel (its rows from its first trailing column on, all from the holder
        # of its own px) and the column panel (its columns up to its last row, from the holders of their px)
        grow, mycols = lay.rows[rr], lay.cols[rc]
        upto = int(np.searchsorted(mycols, grow[-1], side="right")) if len(grow) else 0
        first = int(np.searchsorted(grow, mycols[0])) if len(mycols) else len(grow)
        use = hi > lo and upto > 0
        n_rows = len(grow) - first if use else 0
        row_src = g.rank(px, py_t, z0) if use and n_rows else -1
        cols = mycols[:upto] if use else mycols[:0]
        src = lay.px_of(cols)
        own = np.flatnonzero(src == px)
        col_own = _runs(own, np.searchsorted(grow[first:], cols[own]))
        col_recvs, col_other = [], []
        for x in range(Px):
            k = np.flatnonzero(src == x)
            if x == px or not len(k):
                continue
            col_recvs.append((g.rank(x, py_t, z0), len(k)))
            col_other.append(_runs(k, np.arange(len(k))))
        now, later = [], []
        if use:
            # block column b of the local trailing columns is updated from its first row r (≥ its first column)
            blocks = []
            for b0 in range(0, upto, v):
                b1 = min(b0 + v, upto)
                r = int(np.searchsorted(grow, mycols[b0])) - first
                blocks.append((b0, b1, r))
            R = len(grow) - first
            if (t + 1) % Py == py:  # look-ahead: the next block column now, the rest after the next panel
                now, later = block_columns(blocks[:1], R), block_columns(blocks[1:], R)
            else:
                now = block_columns(blocks, R)
        out.append(Step(c0, vt, lo, hi, in_column, holder, diag, lay.cols_from(c0).start if in_column else 0,
                        ra, nd, diag_dests, diag_src, tuple(sends), row_src, first, n_rows, tuple(col_recvs),
                        col_own, tuple(col_other), upto, rr.start + first, rc.start, tuple(now), tuple(later)))
    return tuple(out)


def _runs(pos: np.ndarray, at: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """``W[pos] = src[at]`` as runs ``(pos start, at start, length)`` of consecutive positions."""
    if not len(pos):
        return ()
    cut = np.flatnonzero((np.diff(pos) != 1) | (np.diff(at) != 1)) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(pos)]))
    return tuple((int(pos[a]), int(at[a]), int(b - a)) for a, b in zip(starts, ends))


def _update(A: np.ndarray, st: Step, W_rows: np.ndarray, W_colsT: np.ndarray, rects) -> None:
    for r0, r1, b0, b1 in rects:
        gemm_update(A[st.rr0 + r0:st.rr0 + r1, st.rc0 + b0:st.rc0 + b1], W_rows[r0:r1], W_colsT[:, b0:b1])


def confchox(comm, lay: Layout, A: np.ndarray):
    """Factor in place; returns ``(F, breakdown)`` — ``F`` is ``A``, holding the entries of ``L`` this rank
    finalized and zeros elsewhere, ``breakdown`` ``(t, k)`` at the first non-positive pivot (``None`` if the
    matrix is SPD).  Each block column becomes its part of ``L`` where it lies (as LAPACK's and ScaLAPACK's
    potrf do): the holders factor and solve the reduced panel in place, the other layers and the rows above the
    diagonal block are zeroed; the update never writes a finalized column."""
    g, N, dt = lay.grid, lay.N, lay.dtype
    F = A
    breakdown = None
    deferred = None  # (step, W_rows, W_colsT) of the last step's update left for after this step's panel
    diag_sent = None
    sent: list = []  # the messages of the last step whose sends are still to complete
    for t, st in enumerate(steps(N, g, lay.rank)):
        vt, lo, hi = st.vt, st.lo, st.hi
        w = hi - lo
        panel = None
        sends = []
        if st.in_column:
            blk = reduce_column(comm, lay, A, st.ra, st.c0, vt, t % g.Pz, T_COL, tri=st.nd, inplace=True)
            A[:st.ra.start, st.jl:st.jl + vt] = 0  # above the diagonal block: not L's
        if st.holder:
            nd = st.nd
            L00 = None
            if st.diag:
                L00, bad = chol_block(blk[:nd])
                if bad is not None and breakdown is None:
                    breakdown = (t, int(bad))
                L00 = np.asarray(L00, dtype=dt)
                if st.diag_dests:
                    low = L00[np.tril_indices(vt)]  # the lower triangle only
                    diag_sent = post(comm, [(d, low) for d in st.diag_dests], [], T_DIAG, dt)
                blk[:nd] = L00  # (its strict upper triangle zero)
            elif st.diag_src >= 0:
                L00 = np.zeros((vt, vt), dtype=dt)
                L00[np.tril_indices(vt)] = exchange(comm, [], [(st.diag_src, (vt * (vt + 1) // 2,))], T_DIAG, dt)[0]
            panel = blk[nd:]  # the reduced block column below the diagonal block: L10 = A10·L00⁻ᵀ in place
            if len(panel):
                trsm_inplace(panel, L00, left=False, lower=True, trans=True)
            for dest, a, b, at, (zl, zh) in st.sends:  # transposed: a column-major panel's columns are contiguous
                part = panel[a:b] if at is None else panel[at]
                sends.append((dest, (part if (zl, zh) == (0, vt) else part[:, zl:zh]).T))
        # the row panel (one message from the holder of this rank's px, or the holder's own panel) and the
        # column panel's parts held elsewhere, received where the update reads them
        recvs = [(r, (w, n)) for r, n in st.col_recvs]  # (transposed, as sent)
        if st.row_src >= 0 and not st.holder:
            recvs.insert(0, (st.row_src, (w, st.n_rows)))
        pending = post(comm, sends, recvs, T_W, dt)
        if deferred is not None:  # the rest of the last step's update, while this panel travels
            _update(A, *deferred)
            deferred = None
        got = pending.received()
        # the sends of the last step (its panel, its diagonal block) surely have their receivers by now; this
        # step's complete at the next one, so that a holder updates while its receivers are still busy
        for msgs in sent:
            msgs.wait()
        sent = [pending] + ([diag_sent] if diag_sent is not None else [])
        diag_sent = None
        if not st.now and not st.later:
            continue
        if st.holder:
            W_rows = panel[st.row_start:, lo:hi]
        else:
            W_rows, got = got[0].T, got[1:]
        W_colsT = np.empty((w, st.n_cols), dtype=dt)  # the column panel, transposed: the update's right operand
        for src, runs in zip((W_rows.T, *got), (st.col_own, *st.col_other)):
            for d, a, n in runs:  # block copies: the column panel's rows come in runs of whole blocks
                W_colsT[:, d:d + n] = src[:, a:a + n]
        _update(A, st, W_rows, W_colsT, st.now)
        if st.later:
            deferred = (st, W_rows, W_colsT, st.later)
    if deferred is not None:
        _update(A, *deferred)
    for msgs in sent:
        msgs.wait()
    return F, breakdown
