"""Plan, run and verify LU / Cholesky on MPI ranks (thesis 4.7–4.8): the Python API behind
``meshplan factor``.

* :func:`run_cases` — many cases in one ``mpiexec`` launch (what the tests and the benchmark batch);
  the PMPI counter is preloaded when it can be built.
* :func:`run_factorization` — plan (:func:`meshplan.solvers.factorization.plan.plan_factorization`),
  run COnfLUX / COnfCHOX and the requested baselines (``"2d"``: the in-house 2-D block-cyclic
  factorization on the best one-layer grid; ``"scalapack"``: pdgetrf / pdpotrf through
  :mod:`meshplan.exec.runtime.scalapack` when that bridge is installed), and return one document
  with the fields of ``meshplan factor --json``.  A breakdown (singular LU, non-SPD Cholesky)
  raises :class:`FactorizationBreakdown` naming the step and block.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.factorization.cost import lu2d_cost, confchox_cost
from meshplan.solvers.factorization.plan import FactorPlan, plan_2d, plan_factorization

__all__ = ["FactorRun", "run_cases", "run_factorization", "plan_report", "run_scalapack_cases",
           "FactorizationBreakdown", "BASELINES", "RANK_MODULE"]

RANK_MODULE = "meshplan.exec.factorization.rank_main"
SCALAPACK_MODULE = "meshplan.exec.factorization.scalapack_rank"
BASELINES = ("2d", "scalapack")


class FactorizationBreakdown(VerificationError):
    """The matrix is singular (LU) or not positive definite (Cholesky); the message names the step."""


@dataclass(frozen=True)
class FactorRun:
    """The result of :func:`run_factorization`: the fields of ``meshplan factor --run --json``."""

    kind: str
    N: int
    p: int
    memory: int | None
    grid: list
    block: int
    model_words_per_rank: float
    model_phases: dict
    memory_words_per_rank: int
    lower_bound_words: float
    candidates: int
    explanation: list
    two_d_model_words_per_rank: float | None
    run: dict
    baselines: dict

    @property
    def verified(self) -> bool:
        return bool(self.run["verified"]) and all(b.get("verified", True) is not False
                                                  for b in self.baselines.values())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


def _matrix_spec(kind: str, seed: int, input_path: str | None, matrix: dict | None) -> dict:
    if matrix is not None:
        return dict(matrix)
    if input_path is not None:
        import numpy as np

        import os
        import stat

        try:
            if not stat.S_ISREG(os.stat(input_path).st_mode):  # a pipe or device would block or never end
                raise ValueError("not a regular file")
            arr = np.load(input_path, mmap_mode="r")
        except (OSError, ValueError, EOFError) as err:
            raise ModelError(f"--input {input_path}: cannot read a .npy array ({err})") from err
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ModelError(f"--input {input_path} holds a {arr.shape} array; a square matrix is needed")
        return {"type": "file", "path": str(input_path)}
    return {"type": "random" if kind == "lu" else "spd", "seed": int(seed)}


def _case(kind: str, algorithm: str, N: int, grid, v: int, spec: dict, repeats: int) -> dict:
    return {"kind": kind, "algorithm": algorithm, "N": N, "grid": list(grid), "v": v, "matrix": spec,
            "repeats": repeats}


def run_factorization(kind: str, N: int, np: int, *, memory: int | None = None, block: int | None = None,
                      grid: tuple[int, int, int] | None = None, baselines: Iterable[str] = (),
                      repeats: int = 1, seed: int = 0, input_path: str | None = None,
                      matrix: dict | None = None, pmpi: bool = True, timeout_s: float = 600.0,
                      plan: FactorPlan | None = None) -> FactorRun:
    """Plan, run, verify; the fields of ``meshplan factor --run --json`` (see docs/factor.md)."""
    baselines = tuple(baselines)
    for b in baselines:
        if b not in BASELINES:
            raise ModelError(f"unknown baseline {b!r}; use {', '.join(BASELINES)}")
    if repeats < 0:
        raise ModelError(f"--repeats must be ≥ 0, got {repeats}")
    plan = plan or plan_factorization(kind, N, np, memory=memory, block=block, grid=grid)
    spec = _matrix_spec(kind, seed, input_path, matrix)
    if spec.get("type") == "file":
        import numpy as np_mod

        n_in = np_mod.load(spec["path"], mmap_mode="r").shape[0]
        if n_in != N:
            raise ModelError(f"--input holds a {n_in}×{n_in} matrix but N = {N}")
    g = plan.grid
    cases = [_case(kind, "conflux", N, (g.Px, g.Py, g.Pz), g.v, spec, repeats)]
    two = None
    if "2d" in baselines:
        two = plan_2d(plan.problem, block=block)
        cases.append(_case(kind, "2d", N, (two[0].Px, two[0].Py, 1), two[0].v, spec, repeats))
    results = run_cases(np, cases, pmpi=pmpi, timeout_s=timeout_s)
    main = results[0]
    if "breakdown" in main:
        raise FactorizationBreakdown(f"{'LU' if kind == 'lu' else 'Cholesky'} of N = {N}: "
                                     f"{main['breakdown']['message']}")
    doc = plan.to_json()
    doc["two_d_model_words_per_rank"] = _two_d_model(plan, block)
    doc["run"] = {k: main.get(k) for k in ("verified", "scaled_residual", "growth_factor",
                                           "measured_words_per_rank", "measured_words_max",
                                           "pmpi_words_per_rank", "time_s", "model_words_per_rank")}
    doc["baselines"] = {}
    if two is not None:
        r = results[1]
        doc["baselines"]["2d"] = {"grid": r["grid"], "block": r["block"]} | {
            k: r.get(k) for k in ("verified", "scaled_residual", "growth_factor", "measured_words_per_rank",
                                  "pmpi_words_per_rank", "model_words_per_rank", "time_s")}
    if "scalapack" in baselines:
        doc["baselines"]["scalapack"] = _scalapack(kind, N, np, two[0] if two else plan_2d(plan.problem)[0],
                                                   spec, repeats, timeout_s)
    return FactorRun(**doc)


def plan_report(plan: FactorPlan, *, block: int | None = None) -> dict[str, Any]:
    """The document of ``meshplan factor --json`` without ``--run``: the plan, the 2-D model, ``run: null``."""
    doc = plan.to_json()
    doc["two_d_model_words_per_rank"] = _two_d_model(plan, block)
    doc["run"] = None
    doc["baselines"] = {}
    return doc


def _two_d_model(plan: FactorPlan, block: int | None) -> float | None:
    try:
        g2, c2 = plan_2d(plan.problem, block=block)
    except Exception:  # noqa: BLE001 - no one-layer grid fits: nothing to compare
        return None
    return c2.per_rank


def run_scalapack_cases(np_: int, cases: list[dict], *, pmpi: bool = True, timeout_s: float = 600.0) -> list[dict]:
    """pdgetrf / pdpotrf cases in one launch (:mod:`meshplan.exec.factorization.scalapack_rank`);
    raises ``ScalapackUnavailable`` (with what to install) when the bridge cannot load ScaLAPACK."""
    from meshplan.exec.runtime import scalapack
    from meshplan.exec.runtime.launch import run_job

    env = dict(scalapack.rank_env())
    env.update(_pmpi_env(pmpi) or {})
    return run_job(np_, SCALAPACK_MODULE, {"cases": cases}, timeout_s=timeout_s, env=env)["results"]


def _scalapack(kind: str, N: int, np: int, grid2, spec: dict, repeats: int, timeout_s: float) -> dict:
    from meshplan.exec.runtime import scalapack
    from meshplan.models.factorization.problem import FactorProblem

    ok, why = scalapack.available()
    if not ok:
        return {"available": False, "reason": why}
    case = {"kind": kind, "N": N, "grid": [grid2.Px, grid2.Py], "nb": grid2.v, "matrix": spec, "repeats": repeats}
    res = run_scalapack_cases(np, [case], timeout_s=timeout_s)[0]
    res["model_words_per_rank"] = model_2d(FactorProblem(kind, N, np), grid2)
    return res


def model_2d(problem, grid) -> float:
    """Modeled words per rank of the 2-D baseline on a one-layer grid."""
    return (lu2d_cost(problem, grid) if problem.kind == "lu" else confchox_cost(problem, grid)).per_rank
