"""The factorization rank program: ``mpiexec -n p python -m meshplan.exec.factorization.rank_main JOB``.

JOB = ``{"cases": [{"kind": "lu"|"cholesky", "algorithm": "conflux"|"2d", "N", "grid": [Px,Py,Pz],
"v", "matrix": {...}, "repeats"}]}`` (see :func:`meshplan.exec.factorization.matrices.make_matrix`).
COnfLUX / COnfCHOX (and the 2-D Cholesky, COnfCHOX on one layer) run through the library's own
:class:`~meshplan.exec.factorization.executor.FactorExecutor`, exactly as a user's program calls it: per
case every rank builds the matrix, takes its tile ``A[rows, cols]``, factors it once while the executor's
counter (and the PMPI counter, when preloaded) count its bytes, then ``repeats`` timed runs (``0``: none) of
the factorization proper — the check of the input tile and its copy into the executor's work tile are the
untimed setup of each run, as the copy of ScaLAPACK's fresh tile is for pdpotrf / pdgetrf;
the factors are gathered on rank 0 (uncounted) and checked: ``‖PA − LU‖_F / (‖A‖_F·N·ε)`` or
``‖A − LLᵀ‖_F / (‖A‖_F·N·ε)``, and the growth factor ``max|U| / max|A|``.  The 2-D LU baseline (row
swaps, :mod:`~meshplan.exec.factorization.lu2d`) runs on its own layout.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from meshplan.exec.factorization.common import Layout
from meshplan.exec.factorization.executor import FactorExecutor
from meshplan.exec.factorization.lu2d import lu2d
from meshplan.exec.factorization.matrices import make_matrix
from meshplan.exec.runtime import pmpi
from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_repeats
from meshplan.models.factorization.breakdown import FactorizationBreakdown, breakdown
from meshplan.models.factorization.cost import confchox_cost, conflux_cost, lu2d_cost, swap_words
from meshplan.models.factorization.problem import FactorGrid, FactorProblem
from meshplan.solvers.factorization.plan import schedule_factorization

__all__ = ["handle", "run_case"]


def _lu2d(ctx: RankContext, kind: str, grid: FactorGrid, A: np.ndarray, N: int, repeats: int, start, mark):
    """The 2-D LU baseline: ``(F, rows, cols, extra, error, timing)``; ``start()`` and ``mark()`` around the
    counted run."""
    lay = Layout(N, grid, ctx.rank)
    tol = N * np.finfo(np.float64).eps * (float(np.max(np.abs(A))) if N else 0.0)
    tile = A[np.ix_(lay.rows, lay.cols)].copy()
    start()
    ipiv, bad = lu2d(ctx.comm, lay, tile, tol)
    mark()
    broke = ctx.world.allreduce(int(bad is not None), op=MPI.MAX)
    timing = (time_repeats(ctx.world, lambda t: lu2d(ctx.world, lay, t, tol), repeats=repeats, warmup=0,
                           setup=lambda: A[np.ix_(lay.rows, lay.cols)].copy()) if repeats > 0 and not broke else None)
    bads = [b for b in ctx.world.allgather(bad) if b is not None]
    err = None
    if bads:
        t, k = min(bads)
        err = breakdown("lu", N, grid.v, t, k)
    return tile, lay.rows, lay.cols, {"ipiv": ipiv}, err, timing


def _executor(ctx: RankContext, kind: str, grid: FactorGrid, A: np.ndarray, N: int, repeats: int, start, mark):
    """COnfLUX / COnfCHOX through the executor: ``(F, rows, cols, extra, error, timing)``; ``start()`` and
    ``mark()`` around the counted run."""
    problem = FactorProblem(kind, N, grid.p, block=grid.v, grid=(grid.Px, grid.Py, grid.Pz))
    with FactorExecutor(schedule_factorization(problem), ctx.comm) as ex:
        A_loc = A[np.ix_(ex.rows, ex.cols)]
        # ex.factor(A_loc), in its three parts: only the factorization itself is measured (not the two
        # small agreement reductions before and after it)
        tile, tol = ex._prepare(A_loc)
        start()
        raw = ex._run(tile, tol)
        mark()
        try:
            factors, err = ex._finish(raw), None
        except FactorizationBreakdown as e:
            factors, err = None, e
        # timed as ScaLAPACK's baseline is (pdpotrf / pdgetrf on a fresh tile, its copy untimed): the
        # factorization proper, with the check and copy of the input tile (_prepare) as the untimed setup
        timing = (time_repeats(ctx.world, lambda prepared: ex._finish(ex._run(*prepared)), repeats=repeats,
                               warmup=0, setup=lambda: ex._prepare(A_loc))
                  if repeats > 0 and err is None else None)
    if factors is None:
        return np.zeros(ex.local_shape), ex.rows, ex.cols, {}, err, timing
    extra = {} if factors.pivots is None else {"pivots": factors.pivots}
    return factors.local, ex.rows, ex.cols, extra, None, timing


def run_case(ctx: RankContext, case: dict) -> dict | None:
    kind, algorithm, N = case["kind"], case.get("algorithm", "conflux"), int(case["N"])
    grid = FactorGrid(*case["grid"], v=int(case["v"]))
    A = make_matrix(kind, N, case.get("matrix", {}))
    repeats = int(case.get("repeats", 1))
    counted: dict = {}

    def start() -> None:
        ctx.world.Barrier()
        counted["before"], counted["pm0"] = ctx.counter.snapshot(), pmpi.read()

    def mark() -> None:  # the counted run is the first factorization; the timed repetitions follow
        counted["received"] = ctx.counter.snapshot()[1] - counted["before"][1]
        counted["pmpi"] = pmpi.diff(counted["pm0"])

    run = _lu2d if algorithm == "2d" and kind == "lu" else _executor
    F, rows, cols, extra, err, timing = run(ctx, kind, grid, A, N, repeats, start, mark)
    pm = counted["pmpi"]
    counts = ctx.world.gather((counted["received"], None if pm is None else pm[1]), root=0)
    parts = ctx.world.gather((rows, cols, F), root=0)
    if ctx.rank != 0:
        return None
    words = np.array([c[0] for c in counts], dtype=np.float64) / 8
    out = {"kind": kind, "algorithm": algorithm, "N": N, "grid": list(case["grid"]), "block": grid.v,
           "measured_words_per_rank": float(words.mean()), "measured_words_max": float(words.max()),
           "pmpi_words_per_rank": (None if any(c[1] is None for c in counts)
                                   else float(np.mean([c[1] for c in counts]) / 8)),
           "time_s": None if timing is None else timing.min_s,
           "time_median_s": None if timing is None else timing.median_s}
    if err is not None:
        out["breakdown"] = {"step": err.step, "column": err.column, "block": list(err.block),
                            "message": err.detail}
        out["verified"] = False
        return out
    Fg = np.zeros((N, N))
    for rows, cols, Fl in parts:
        Fg[np.ix_(rows, cols)] += Fl
    problem = FactorProblem(kind, N, grid.p)
    out.update(_verify(kind, algorithm, A, Fg, extra, grid))
    if algorithm == "2d" and kind == "lu":
        perm_swaps = _swap_total(extra["ipiv"], grid, N)
        model = lu2d_cost(problem, grid, swap_total=perm_swaps)
    elif kind == "lu":
        model = conflux_cost(problem, grid)
    else:
        model = confchox_cost(problem, grid)
    out["model_words_per_rank"] = model.per_rank
    out["model_phases"] = model.to_json()["phases"]
    return out


def _swap_total(ipiv: np.ndarray, grid: FactorGrid, N: int) -> float:
    total = 0.0
    for k, r in enumerate(ipiv):
        if r != k and (k // grid.v) % grid.Px != (r // grid.v) % grid.Px:
            vt = min(grid.v, N - (k // grid.v) * grid.v)
            total += swap_words(N, vt)
    return total


def _verify(kind: str, algorithm: str, A: np.ndarray, Fg: np.ndarray, extra: dict, grid: FactorGrid) -> dict:
    N = A.shape[0]
    eps = np.finfo(np.float64).eps
    if kind == "cholesky":
        L = np.tril(Fg)
        R = A - L @ L.T
        growth = float(np.max(np.abs(L)) ** 2 / np.max(np.abs(A)))
    else:
        if algorithm == "2d":
            perm = np.arange(N)
            for k, r in enumerate(extra["ipiv"]):
                perm[[k, r]] = perm[[r, k]]
            Fp = Fg
        else:
            perm = np.asarray(extra["pivots"], dtype=np.int64)
            Fp = Fg[perm]
            for t in range(-(-N // grid.v)):  # U01 = L00⁻¹·A01 from the reduced pivot rows
                c0, c1 = t * grid.v, min(t * grid.v + grid.v, N)
                L00 = np.tril(Fp[c0:c1, c0:c1], -1) + np.eye(c1 - c0)
                Fp[c0:c1, c1:] = np.linalg.solve(L00, Fp[c0:c1, c1:])
        if sorted(perm.tolist()) != list(range(N)):
            return {"verified": False, "scaled_residual": None, "growth_factor": None,
                    "reason": "the pivot rows are not a permutation"}
        L = np.tril(Fp, -1) + np.eye(N)
        U = np.triu(Fp)
        R = A[perm] - L @ U
        growth = float(np.max(np.abs(U)) / np.max(np.abs(A)))
    res = float(np.linalg.norm(R) / (np.linalg.norm(A) * N * eps))
    return {"verified": bool(res <= 10.0), "scaled_residual": res, "growth_factor": growth}


def handle(ctx: RankContext, job: dict) -> dict | None:
    results = [run_case(ctx, case) for case in job["cases"]]
    return {"results": results} if ctx.rank == 0 else None


if __name__ == "__main__":
    rank_main(handle)
