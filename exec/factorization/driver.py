"""Launch LU / Cholesky runs on MPI ranks and collect their verdicts (thesis 4.7–4.8): the launcher side of
``meshplan factor --run`` and :func:`meshplan.api.factorization.run_factorization`.

* :func:`run_cases` — many cases in one ``mpiexec`` launch of the rank program
  (:mod:`~meshplan.exec.factorization.rank_main`, which runs COnfLUX / COnfCHOX through the library's
  :class:`~meshplan.exec.factorization.executor.FactorExecutor`); what the tests and the benchmark batch.
  The PMPI counter is preloaded when it can be built.
* :func:`execute` — one schedule and its baselines (``"2d"``: the in-house 2-D block-cyclic factorization on
  the best one-layer grid; ``"scalapack"``: pdgetrf / pdpotrf through :mod:`meshplan.exec.runtime.scalapack`
  when that bridge is installed): rank 0's result of the schedule and the baselines' results.  A breakdown
  (singular LU, non-SPD Cholesky) raises
  :class:`~meshplan.models.factorization.breakdown.FactorizationBreakdown` naming the step and block.
* :func:`matrix_spec` — the input matrix of a run: seeded random (LU), SPD (Cholesky) or a ``.npy`` file.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.factorization.breakdown import FactorizationBreakdown
from meshplan.models.factorization.cost import confchox_cost, lu2d_cost
from meshplan.models.factorization.problem import FactorProblem
from meshplan.solvers.factorization.plan import FactorSchedule, plan_2d

__all__ = ["run_cases", "execute", "matrix_spec", "run_scalapack_cases", "model_2d", "FactorizationBreakdown",
           "BASELINES", "RANK_MODULE"]

RANK_MODULE = "meshplan.exec.factorization.rank_main"
SCALAPACK_MODULE = "meshplan.exec.factorization.scalapack_rank"
#: the baselines a run can add
BASELINES = ("2d", "scalapack")
#: the keys of a run's result that the ``run`` object and a ``2d`` baseline report
RUN_KEYS = ("verified", "scaled_residual", "growth_factor", "measured_words_per_rank", "measured_words_max",
            "pmpi_words_per_rank", "time_s", "model_words_per_rank")
BASELINE_KEYS = ("verified", "scaled_residual", "growth_factor", "measured_words_per_rank", "pmpi_words_per_rank",
                 "model_words_per_rank", "time_s")


def _pmpi_env(use: bool) -> dict | None:
    if not use:
        return None
    try:
        from meshplan.exec.runtime import pmpi

        return pmpi.preload_env()
    except Exception:  # noqa: BLE001 - no compiler / header: the Python counter still counts
        return None


def run_cases(np_: int, cases: list[dict], *, pmpi: bool = True, timeout_s: float = 600.0) -> list[dict]:
    """Run every case on ``np_`` ranks in one launch; returns rank 0's result per case."""
    from meshplan.exec.runtime.launch import run_job

    out = run_job(np_, RANK_MODULE, {"cases": cases}, timeout_s=timeout_s, env=_pmpi_env(pmpi))
    return out["results"]


def matrix_spec(kind: str, N: int, seed: int, input: str | None, matrix: dict | None) -> dict:
    """The matrix spec of a run (:func:`~meshplan.exec.factorization.matrices.make_matrix`): ``matrix`` as
    given, the ``.npy`` file ``input`` (checked: a readable regular file holding an ``N × N`` array), or the
    seeded default of ``kind``."""
    if matrix is not None:
        return dict(matrix)
    if input is not None:
        import numpy as np

        try:
            if not stat.S_ISREG(os.stat(input).st_mode):  # a pipe or device would block or never end
                raise ValueError("not a regular file")
            arr = np.load(input, mmap_mode="r")
        except (OSError, ValueError, EOFError) as err:
            raise ModelError(f"input {input}: cannot read a .npy array ({err})", param="input") from err
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ModelError(f"input {input} holds a {arr.shape} array; a square matrix is needed", param="input")
        if arr.shape[0] != N:
            raise ModelError(f"input holds a {arr.shape[0]}×{arr.shape[0]} matrix but N = {N}", param=("input", "N"))
        if arr.dtype.kind not in "biuf" or not np.isfinite(arr).all():  # before mpiexec, not on the ranks
            bad = "is not a real matrix" if arr.dtype.kind not in "biuf" else "holds NaN or infinity"
            raise ModelError(f"input {input} {bad} ({arr.dtype}); factor a finite real matrix", param="input")
        return {"type": "file", "path": str(input)}
    return {"type": "random" if kind == "lu" else "spd", "seed": int(seed)}


def _case(kind: str, algorithm: str, N: int, grid, v: int, spec: dict, repeats: int) -> dict:
    return {"kind": kind, "algorithm": algorithm, "N": N, "grid": list(grid), "v": v, "matrix": spec,
            "repeats": repeats}


def execute(schedule: FactorSchedule, spec: dict, *, baselines: tuple[str, ...] = (), repeats: int = 1,
            pmpi: bool = True, timeout_s: float = 600.0) -> tuple[dict, dict]:
    """Run the schedule (and ``baselines``) on ``p`` ranks in one launch (ScaLAPACK in a second): rank 0's
    result (its :data:`RUN_KEYS`) and ``{name: result}`` of the baselines."""
    pr, g = schedule.problem, schedule.grid
    cases = [_case(pr.kind, "conflux", pr.N, (g.Px, g.Py, g.Pz), g.v, spec, repeats)]
    two = plan_2d(pr)[0] if baselines else None
    if "2d" in baselines:
        cases.append(_case(pr.kind, "2d", pr.N, (two.Px, two.Py, 1), two.v, spec, repeats))
    results = run_cases(pr.p, cases, pmpi=pmpi, timeout_s=timeout_s)
    main = results[0]
    if "breakdown" in main:
        b = main["breakdown"]
        raise FactorizationBreakdown(f"{'LU' if pr.kind == 'lu' else 'Cholesky'} of N = {pr.N}: {b['message']}",
                                     step=b["step"], column=b["column"], block=tuple(b["block"]),
                                     detail=b["message"])
    run = {k: main.get(k) for k in RUN_KEYS}
    done: dict[str, Any] = {}
    if "2d" in baselines:
        r = results[1]
        done["2d"] = {"grid": r["grid"], "block": r["block"]} | {k: r.get(k) for k in BASELINE_KEYS}
    if "scalapack" in baselines:
        done["scalapack"] = _scalapack(pr, two, spec, repeats, timeout_s)
    return run, done


def run_scalapack_cases(np_: int, cases: list[dict], *, pmpi: bool = True, timeout_s: float = 600.0) -> list[dict]:
    """pdgetrf / pdpotrf cases in one launch (:mod:`meshplan.exec.factorization.scalapack_rank`);
    raises ``ScalapackUnavailable`` (with what to install) when the bridge cannot load ScaLAPACK."""
    from meshplan.exec.runtime import scalapack
    from meshplan.exec.runtime.launch import run_job

    env = dict(scalapack.rank_env())
    env.update(_pmpi_env(pmpi) or {})
    return run_job(np_, SCALAPACK_MODULE, {"cases": cases}, timeout_s=timeout_s, env=env)["results"]


def _scalapack(pr: FactorProblem, grid2, spec: dict, repeats: int, timeout_s: float) -> dict:
    from meshplan.exec.runtime import scalapack

    ok, why = scalapack.available()
    if not ok:
        return {"available": False, "reason": why}
    case = {"kind": pr.kind, "N": pr.N, "grid": [grid2.Px, grid2.Py], "nb": grid2.v, "matrix": spec,
            "repeats": repeats}
    res = run_scalapack_cases(pr.p, [case], timeout_s=timeout_s)[0]
    res["model_words_per_rank"] = model_2d(FactorProblem(pr.kind, pr.N, pr.p), grid2)
    return res


def model_2d(problem: FactorProblem, grid) -> float:
    """Modeled words per rank of the 2-D baseline on a one-layer grid."""
    return (lu2d_cost(problem, grid) if problem.kind == "lu" else confchox_cost(problem, grid)).per_rank
