"""Modelled time of COnfLUX / COnfCHOX on a grid and block (thesis sections 4.7–4.8), for ``objective="time"``.

Per step (``⌈N/v⌉`` of them) the busiest rank's messages on the critical path.  LU: the tournament
(``⌈log₂ Px⌉`` butterfly rounds), the pivot indices, the two reductions over the layers (``Pz > 1``), the
pivot rows to the other ranks of the grid column (``Px > 1``) and the panel to the ranks of the grid row
(``Py·Pz > 1``).  Cholesky (no pivots): the diagonal block down the grid column (``Px > 1``), the one
reduction of the block column (``Pz > 1``) and the panel, one message from each holder whose rows a rank
reads (its row panel from the holder of its own ``px``, its column panel from all ``Px``; a holder has its own
rows), which arrive at different times: ``[1, p, 1]`` — the panel factored where it lies, as pdpotrf on a
``1 × p`` grid — waits once per step, ``[Px, 1, 1]`` ``Px`` times.  This is section 4.8's latency of the third dimension and of small
blocks.  The words are the exact model (:func:`~meshplan.models.factorization.cost.factor_cost`,
mean per rank).  The flops are the trailing updates, ``2N³/3p`` (LU) or ``N³/3p`` (Cholesky), plus the
panel factorization, ``N²·v/(2·Px·Py)``: the holders of a block column share its panel, and with ``Py > 1``
look-ahead overlaps it with the other grid columns' updates (each rank factors the panels of its own block
columns), while on ``Py = 1`` every rank waits for every panel — what larger blocks cost.  Seconds from the
machine's :class:`~meshplan.models.matmul.time.Rates`.  Both run at the rate of a multiply of inner dimension
``v`` (:meth:`~meshplan.models.matmul.time.Rates.rate`: the trailing update is a rank-``v`` gemm, the panel's
trsm and its blocked factorization work on ``v`` columns) — what smaller blocks cost, the "smaller local BLAS
calls" of section 4.8.

Every message on a step's critical path is a wait of one busy rank for another.  Where calibrate measured
what such a synchronisation costs at the run's rank count (``System.sync_latency``: on a host with more ranks
than cores, about a scheduler timeslice, far above the idle ping-pong latency), :func:`step_rates` makes that
the latency per message, so that the time objective weighs the number of steps as the machine does.
"""

from __future__ import annotations

import math
from dataclasses import replace

from meshplan.models.factorization.cost import Cost
from meshplan.models.factorization.problem import FactorGrid, FactorProblem
from meshplan.models.matmul.time import Rates, TimeModel

__all__ = ["factor_time", "step_messages", "step_rates"]


def step_messages(kind: str, grid: FactorGrid) -> int:
    """Messages on the critical path of one step (module docstring)."""
    Px, Py, Pz = grid.Px, grid.Py, grid.Pz
    if kind == "cholesky":  # the diagonal block down the grid column, one reduction, the panel from each source
        sources = Px if Py * Pz > 1 else Px - 1  # a holder has its own rows of the panel
        return (Px > 1) + (Pz > 1) + (sources if grid.p > 1 else 0)
    tournament = math.ceil(math.log2(Px)) if Px > 1 else 0
    return tournament + 1 + 2 * (Pz > 1) + (Px > 1) + (Py * Pz > 1)


def factor_time(problem: FactorProblem, grid: FactorGrid, cost: Cost, rates: Rates) -> TimeModel:
    """The modelled seconds of the factorization of ``problem`` on ``grid`` whose exact words are ``cost``."""
    N, v, p = problem.N, grid.v, problem.p
    steps = -(-N // v)
    update = (2.0 if problem.kind == "lu" else 1.0) * N ** 3 / (3 * p)
    # the panel: with Py > 1 look-ahead spreads it (each rank factors the panels of its own block columns while
    # the others update); with Py = 1 every rank of the layer waits for every panel
    panel = N * N * v / (2.0 * grid.Px * grid.Py)
    return TimeModel.of(rates, steps * step_messages(problem.kind, grid), cost.per_rank, update + panel,
                        problem.dtype.itemsize, inner=v)


def step_rates(rates: Rates, system, p: int) -> Rates:
    """``rates`` with the latency per message raised to the synchronisation latency ``system`` measured at
    ``p`` ranks (:meth:`~meshplan.models.core.system.System.sync_latency_at`), when it measured one and it is
    larger (module docstring)."""
    sync = system.sync_latency_at(p) if getattr(system, "sync_latency", None) else None
    return rates if sync is None or sync <= rates.latency else replace(rates, latency=sync)
