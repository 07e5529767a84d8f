"""Communication models of the factorizations, summed exactly over the steps of the executed schedule.

Words are elements of the matrix dtype (pivot indices travel as one word each).  Every model returns
the *total* words received over all ranks and the mean per rank (total / p); with row masking the
total does not depend on where the pivots lie, so the measured total equals the model exactly.

COnfLUX (Algorithm 2, Table 4.1, Lemma 4.10) — step ``t`` handles the block column
``J = [tv, tv+v_t)``; ``M = N - tv`` rows are still active and ``R = M - v_t`` remain afterwards;
``z0 = t mod Pz`` is the layer and ``py_t = t mod Py`` the grid column that hold ``J``; ``K = n-1-t``
block columns (``n = ⌈N/v⌉``) trail it; ``[t>0]`` is 1 after the first step:

====================  ==============================================  ===========================
phase                 words (sum over ranks)                          Algorithm 2 line
====================  ==============================================  ===========================
``reduce_column``     ``[t>0]·(Pz-1)·M·v_t``                          1 (reduce next block column)
``tournament``        ``m(Px)·v_t·(v_t+1)``                           2 (butterfly, v×v + indices)
``pivots``            ``(p-Px)·v_t``                                  3 (pivot indices to all)
``reduce_rows``       ``(Pz-1)·v_t·R``; step 0: ``(v_t-|s_0|)·R``      5 (reduce v pivot rows)
``send_rows``         ``(Px-1)·v_t·R``                                10 (send data from panel A01)
``send_panel``        ``R·(min(Py,K)·v_t - [K≥Py]·|s_z0|)``           8 (send data from panel A10)
====================  ==============================================  ===========================

``m(P) = 2(P-q) + q·log2 q`` messages (``q`` the largest power of two ≤ P: the ``P-q`` extra ranks
fold into partners before the ``log2 q`` butterfly rounds and receive the result after).  The
Schur update of layer ``z`` uses the part ``s_z`` of the ``v_t`` inner indices.  At step 0 the layers
``z > 0`` still hold their initial zeros, so line 1 moves nothing and line 5 only copies the pivot
rows of the layers ``z > 0`` from layer 0; ``W`` goes only to the
``min(Py, K)`` grid columns that still own trailing columns.  The 1-D triangular
solves of A10 / A01 (lines 4, 6, 7, 9) are done where the reduced panel already lies, so their
scatter of ``2(N-tv)v/p`` words (a lower-order term of Lemma 4.10) is not needed.

COnfCHOX (section 4.7.5, Table 4.1): no pivoting, ``reduce_column`` as above but without the strict
upper triangle of the diagonal block (``(Pz-1)·(M·v_t - v_t(v_t-1)/2)``), ``diagonal``
``min(Px-1, K)·v_t(v_t+1)/2`` (the triangle L00 from its owner to the other holders of the column
that still own trailing rows) and ``panels``: every rank receives each L10 row it needs once, for its rows and
its columns together, and only the rows the lower-half update reads (see :func:`confchox_cost`).

The 2-D LU with partial pivoting (Table 4.2, ScaLAPACK/MKL/SLATE): per column a pivot search
(``2·Px(Px-1)`` words), the pivot row to the panel's ranks (``(Px-1)·v_t``), the ``v_t`` pivot
indices to the ranks outside the panel (``(p-Px)·v_t``), a row swap when the
pivot lies on another grid row (``v_t + 2(N - v_t)`` words; expected fraction ``(Px-1)/Px``), then
the panel along grid rows (``(Py-1)·M·v_t``) and U12 along grid columns (``(Px-1)·v_t·R``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from meshplan.models.factorization.problem import FactorGrid, FactorModelError, FactorProblem

__all__ = ["Cost", "cyclic_count", "tournament_messages", "conflux_cost", "confchox_cost", "lu2d_cost",
           "factor_cost", "table41_cost", "swap_words", "lower_bound", "memory_words", "thesis_leading", "twod_leading"]


@dataclass(frozen=True, slots=True)
class Cost:
    """Words received, summed over ranks, per phase; ``per_rank`` is the mean over the ``p`` ranks."""

    algorithm: str
    p: int
    phases: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return float(sum(self.phases.values()))

    @property
    def per_rank(self) -> float:
        return self.total / self.p

    def to_json(self) -> dict:
        return {"algorithm": self.algorithm, "total_words": self.total, "words_per_rank": self.per_rank,
                "phases": {k: float(v) for k, v in self.phases.items()}}


def cyclic_count(lo, hi, v: int, P: int, c):
    """How many indices in ``[lo, hi)`` coordinate ``c`` owns in a block-cyclic layout (block ``v``);
    works element-wise on numpy arrays."""
    def upto(n):
        q, r = np.divmod(np.maximum(n, 0), v * P)
        return q * v + np.minimum(np.maximum(r - c * v, 0), v)
    out = np.maximum(upto(np.asarray(hi)) - upto(np.asarray(lo)), 0)
    return int(out) if np.ndim(out) == 0 else out


def tournament_messages(P: int) -> int:
    """Messages of a butterfly tournament among ``P`` ranks (non-powers of two fold in and out)."""
    if P <= 1:
        return 0
    q = 1 << (P.bit_length() - 1)
    return 2 * (P - q) + q * (q.bit_length() - 1)


def _steps(N: int, v: int):
    """Per-step arrays ``t, c0, v_t, M, R`` (exact integers, vectorized over the ``ceil(N/v)`` steps)."""
    t = np.arange(-(-N // v), dtype=np.int64)
    c0 = t * v
    vt = np.minimum(v, N - c0)
    M = N - c0
    return t, c0, vt, M, M - vt


def _first_slice(vt, t, Pz: int):
    """``|s_z0|`` per step: the width of the part of layer ``z0 = t mod Pz`` (``layer_slices``)."""
    z0 = t % Pz
    return vt // Pz + (z0 < vt % Pz)


def _sum(x) -> float:
    return float(np.sum(np.asarray(x, dtype=np.float64)))


def _panel_trim(t, Py: int, n: int):
    """``(min(Py, K), [K ≥ Py])`` per step, ``K = n - 1 - t`` the trailing blocks: how many grid
    columns still own trailing columns, and whether column ``py_t = t mod Py`` is one of them."""
    K = n - 1 - t
    return np.minimum(Py, K), (K >= Py).astype(np.int64)


def conflux_cost(problem: FactorProblem, grid: FactorGrid) -> Cost:
    """COnfLUX's words, exactly as :mod:`meshplan.exec.factorization.conflux` sends them."""
    grid.check(problem)
    Px, Py, Pz, v = grid.Px, grid.Py, grid.Pz, grid.v
    t, _c0, vt, M, R = _steps(problem.N, v)
    w0 = _first_slice(vt, t, Pz)
    later = t > 0  # at step 0 the layers z > 0 still hold zeros: nothing to reduce
    ncol, own = _panel_trim(t, Py, len(t))
    ph = {"reduce_column": _sum((Pz - 1) * M * vt * later),
          "tournament": _sum(tournament_messages(Px) * vt * (vt + 1)),
          "pivots": _sum((grid.p - Px) * vt),
          "reduce_rows": _sum(R * np.where(later, (Pz - 1) * vt, vt - w0)),
          "send_rows": _sum((Px - 1) * vt * R),
          "send_panel": _sum(R * (ncol * vt - own * w0))}
    return Cost("conflux", grid.p, ph)


def _min_sum(K, P: int):
    """``Σ_{k=1..K} min(P, k)`` element-wise."""
    K = np.asarray(K, dtype=np.int64)
    return np.where(K <= P, K * (K + 1) // 2, P * (P + 1) // 2 + (K - P) * P)


def confchox_cost(problem: FactorProblem, grid: FactorGrid) -> Cost:
    """COnfCHOX's words, exactly as :mod:`meshplan.exec.factorization.confchox` sends them.

    ``panels``: rank ``(x, y, z)`` receives the columns ``s_z`` of the L10 rows it needs, each once —
    its rows ``i`` with a column ``j ≤ i`` of its own, and its columns ``j`` with a row ``i ≥ j`` of
    its own (the lower half only; a row that is both is sent once) — except the rows it holds
    itself.  Trailing block ``b = t+k`` is needed by ``min(Py, k) + min(Px, n-b) - 1`` of the
    ``Px·Py`` rank columns; the holders ``[:, py_t, z0]`` own the blocks ``b ≥ t + Py`` they need."""
    grid.check(problem)
    Px, Py, Pz, v, N = grid.Px, grid.Py, grid.Pz, grid.v, problem.N
    t, _c0, vt, M, R = _steps(N, v)
    n = len(t)
    w0 = _first_slice(vt, t, Pz)
    K = n - 1 - t
    short = v - (N - (n - 1) * v)  # how much narrower the last block is than v
    need = v * (_min_sum(K, Py) + _min_sum(K, Px) - K) - short * np.minimum(Py, K) * (K >= 1)
    held = v * np.maximum(0, K - Py + 1) - short * (K >= Py)
    ph = {"reduce_column": _sum((Pz - 1) * (M * vt - vt * (vt - 1) // 2) * (t > 0)),
          "diagonal": _sum(np.minimum(Px - 1, K) * vt * (vt + 1) // 2),
          "panels": _sum(vt * need - w0 * held)}
    return Cost("confchox", grid.p, ph)


def lu2d_cost(problem: FactorProblem, grid: FactorGrid, swap_total: float | None = None) -> Cost:
    """The 2-D right-looking LU with partial pivoting on ``[Px, Py, 1]`` (Table 4.2's 2-D model), exact
    for the in-house 2-D baseline given ``swap_total``, the words its row swaps moved (the sum of
    :func:`swap_words` over the swaps that crossed grid rows); ``None`` uses the expected value."""
    if grid.Pz != 1:
        raise FactorModelError(f"the 2-D LU runs on one layer; grid {grid} has Pz = {grid.Pz}")
    grid.check(problem)
    Px, Py, v, N = grid.Px, grid.Py, grid.v, problem.N
    _t, _c0, vt, M, R = _steps(N, v)
    expected = _sum(vt * (Px - 1) / Px * (vt + 2 * (N - vt)))
    ph = {"pivot_search": _sum(vt * Px * (Px - 1) * 2),
          "pivot_row": _sum(vt * (Px - 1) * vt),
          "pivots": _sum((grid.p - Px) * vt),
          "swaps": expected if swap_total is None else float(swap_total),
          "panel": _sum((Py - 1) * M * vt),
          "u_rows": _sum((Px - 1) * vt * R)}
    return Cost("lu2d", grid.p, ph)


def swap_words(N: int, vt: int) -> int:
    """Words one row swap across grid rows moves in the 2-D LU (old row into the panel, both rows
    outside it)."""
    return vt + 2 * (N - vt)


def table41_cost(problem: FactorProblem, grid: FactorGrid) -> Cost:
    """The thesis's own per-processor step costs (Algorithm 2, Table 4.1, proof of Lemma 4.10) summed
    over the steps and evaluated on ``[Px, Py, Pz]`` (the proof's ``[√p1, √p1, c]``), ``M = N - tv``:
    tournament ``v²⌈log2 Px⌉`` (LU), ``A00`` and pivots ``v² + v`` (Cholesky: ``v²``), the 1-D scatter
    of A10 / A01 ``2Mv/p``, the layer reductions ``2Mv·S/N² = 2Mv·Pz/p`` and the panels of lines 8 and
    10, ``Mv/Pz·(1/Px + 1/Py)`` (``2Mv/(c√p1)`` on a square grid).  ``phases`` hold ``p`` times the
    per-processor words, so ``per_rank`` is the thesis's per-processor cost — an upper estimate of the
    exact models above (it counts local data as moved and ``Pz`` where ``Pz - 1`` layers send)."""
    grid.check(problem)
    Px, Py, Pz, v, p = grid.Px, grid.Py, grid.Pz, grid.v, grid.p
    _t, _c0, vt, M, _R = _steps(problem.N, v)
    lu = problem.kind == "lu"
    ph = {"tournament": _sum(vt * vt * math.ceil(math.log2(Px))) * p if lu else 0.0,
          "a00_pivots": _sum(vt * vt + (vt if lu else 0)) * p,
          "scatter": _sum(2 * M * vt),
          "reductions": _sum(2 * M * vt * Pz),
          "panels": _sum(M * vt / Pz * (1 / Px + 1 / Py)) * p}
    return Cost("table41", p, ph)


def factor_cost(problem: FactorProblem, grid: FactorGrid) -> Cost:
    """The 2.5-D algorithm's cost for the problem's kind (COnfLUX or COnfCHOX)."""
    return conflux_cost(problem, grid) if problem.kind == "lu" else confchox_cost(problem, grid)


def lower_bound(problem: FactorProblem, S: float) -> float:
    """Words per rank any parallel schedule with ``S`` words of fast memory moves (section 4.6):
    LU ``(2N³-6N²+4N)/(3p√S) + N(N-1)/(2p)``; Cholesky ``N(N-1)(N-2)/(3p√S) + N(N-1)/(2p) + N/p``."""
    N, p = problem.N, problem.p
    if problem.kind == "lu":
        return (2 * N**3 - 6 * N**2 + 4 * N) / (3 * p * math.sqrt(S)) + N * (N - 1) / (2 * p)
    return N * (N - 1) * (N - 2) / (3 * p * math.sqrt(S)) + N * (N - 1) / (2 * p) + N / p


def memory_words(problem: FactorProblem, grid: FactorGrid) -> int:
    """Words one rank holds at most: its tile of the matrix, the two panels (``v`` columns of its rows,
    ``v`` rows of its columns), the reduced block column and the tournament's ``2v×(v+1)`` candidates."""
    N, v = problem.N, grid.v
    rows = cyclic_count(0, N, v, grid.Px, 0)  # coordinate 0 owns the most (block-cyclic)
    cols = cyclic_count(0, N, v, grid.Py, 0)
    return rows * cols + 2 * v * rows + v * cols + 2 * v * (v + 1)


def thesis_leading(problem: FactorProblem, S: float) -> float:
    """Lemma 4.10's leading term ``N³/(p√S)`` (words per rank)."""
    return problem.N**3 / (problem.p * math.sqrt(S))


def twod_leading(problem: FactorProblem) -> float:
    """Table 4.2's 2-D leading term ``N²/√p`` (words per rank)."""
    return problem.N**2 / math.sqrt(problem.p)
