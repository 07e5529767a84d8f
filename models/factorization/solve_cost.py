"""Words of the distributed triangular solves that use COnfLUX / COnfCHOX's factors where they lie
(thesis sections 4.7.2–4.7.5: the factors stay in the 2.5-D block-cyclic layout; nothing is gathered).

The right-hand side ``b`` (``nrhs`` columns) is distributed like the rows of ``A``: rank ``(px, py, pz)``
holds the rows ``(i // v) mod Px = px``, replicated over ``py`` and ``pz``.  Step ``t`` (block ``J = [tv,
tv+v_t)``) has one *solver*, the holder ``(t mod Px, t mod Py, t mod Pz)`` of its diagonal block.  Every
rank keeps, for its rows, the partial sums of the forward updates it applied itself (``acc``); only the
holders ``(py, pz) ∈ H_t = {(s mod Py, s mod Pz) : s < t}`` of earlier steps have any.

Forward sweep (``L y = P b``), per step:

* ``reduce_rhs`` — the current values of step ``t``'s pivot rows reach the solver: for each pivot row, every
  rank of its grid row ``px`` with ``(py, pz) ∈ S_t = H_t ∪ {(py_t, z_t)}`` sends its partial sum (the one at
  ``(py_t, z_t)`` sends ``b − acc``), except the solver itself: ``nrhs·Σ_k (|S_t| − [px(k) = px_t])``.  For
  Cholesky the pivot rows are block ``t``, owned by the solver's grid row: ``nrhs·v_t·|H_t ∖ {(py_t, z_t)}|``;
* ``send_y`` — the solver forms ``y_t = L00⁻¹·c_t`` and sends it to the other holders of block column
  ``t``, who add ``L10·y_t`` to their partial sums: LU ``[R > 0]·(Px−1)·v_t·nrhs``, Cholesky
  ``#{x ≠ px_t owning rows ≥ tv+v_t}·v_t·nrhs``.

Backward sweep (``U x = y``), per step from the last:

* ``reduce_products`` — LU: the ranks that hold the reduced pivot rows ``A01`` of step ``t`` (grid row of the
  row, layer ``z(k)`` of its part ``s_z``, every grid column ``y ∈ Y_t`` that owns columns after ``J``) send
  ``A01·x_{>t}`` for their columns to the solver, which forms ``x_t = lu00⁻¹·(c_t − A01·x_{>t})`` (section
  4.7.2's ``U01 = L00⁻¹·A01``, never formed): ``nrhs·Σ_k (|Y_t| − [px(k) = px_t, z(k) = z_t, py_t ∈ Y_t])``.
  Cholesky: the holders of ``L10`` send ``L10ᵀ·x`` for their rows, the solver forms ``x_t = L00⁻ᵀ(y_t − …)``:
  the same count as ``send_y``;
* ``send_x`` — ``x_t`` to the ranks that own its rows (``Py·Pz − 1``), and, for LU with ``t > 0``, to those
  that own its columns (``(Px−1)·Pz`` more): ``v_t·nrhs`` each.

So the solve moves at most ``N·nrhs·(2·Py·Pz + Px·Pz + Px + Py)/p`` words per rank — the order of one right-hand
side per grid row — against ``Θ(N²/√p)`` for gathering the factors.  The LU terms depend on which grid rows
own the pivots (``pivots``); with them the model is exact, as the tests check against the byte counter.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.factorization.cost import Cost, cyclic_count
from meshplan.models.factorization.problem import FactorGrid, FactorModelError, FactorProblem, layer_slices

__all__ = ["solve_cost"]


def solve_cost(problem: FactorProblem, grid: FactorGrid, nrhs: int, pivots=None) -> Cost:
    """Words (summed over ranks) of one solve with ``nrhs`` right-hand sides on the factors of ``grid``;
    LU needs ``pivots``, the rows in pivot order (``N`` indices: step ``t``'s pivots at ``[tv, tv+v_t)``)."""
    grid.check(problem)
    N, v, Px, Py, Pz = problem.N, grid.v, grid.Px, grid.Py, grid.Pz
    lu = problem.kind == "lu"
    if lu:
        if pivots is None or len(pivots) != N:
            raise FactorModelError("the LU solve's words depend on the pivots: give the N pivot rows",
                                   param="pivots")
        owner = (np.asarray(pivots, dtype=np.int64) // v) % Px
    ph = {"reduce_rhs": 0, "send_y": 0, "reduce_products": 0, "send_x": 0}
    held: set[tuple[int, int]] = set()
    for t in range(-(-N // v)):
        c0 = t * v
        vt = min(v, N - c0)
        c1 = c0 + vt
        px_t, py_t, z0 = t % Px, t % Py, t % Pz
        if lu:
            own = owner[c0:c1]
            at_solver = int(np.count_nonzero(own == px_t))
            ph["reduce_rhs"] += vt * len(held | {(py_t, z0)}) - at_solver
            ph["send_y"] += (Px - 1) * vt if c1 < N else 0
            ys = [y for y in range(Py) if cyclic_count(c1, N, v, Py, y)]
            zk = np.repeat(np.arange(Pz), [hi - lo for lo, hi in layer_slices(vt, Pz)])
            local = int(np.count_nonzero((own == px_t) & (zk == z0))) if py_t in ys else 0
            ph["reduce_products"] += vt * len(ys) - local
            ph["send_x"] += vt * (Py * Pz - 1 + ((Px - 1) * Pz if t > 0 else 0))
        else:
            ph["reduce_rhs"] += vt * len(held - {(py_t, z0)})
            below = sum(1 for x in range(Px) if x != px_t and cyclic_count(c1, N, v, Px, x))
            ph["send_y"] += below * vt
            ph["reduce_products"] += below * vt
            ph["send_x"] += vt * (Py * Pz - 1)
        held.add((py_t, z0))
    return Cost("lu_solve" if lu else "cholesky_solve", grid.p,
                {k: float(w * nrhs) for k, w in ph.items()})
