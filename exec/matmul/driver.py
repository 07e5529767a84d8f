"""Run matrix-multiplication schedules on MPI and compare them with their models (thesis ch. 3).

:func:`run_cases` runs many (algorithm, problem, grid) cases in one ``mpiexec`` launch (the shared runtime's
:func:`~meshplan.exec.runtime.launch.run_job`, rank program :mod:`meshplan.exec.matmul.rank`, whose COSMA
cases run through :class:`~meshplan.exec.matmul.executor.MatmulExecutor`), verifies C against numpy and
reports words received per rank by both counters next to the exact model.  :func:`run_scalapack` runs
ScaLAPACK's pdgemm through :mod:`meshplan.exec.runtime.scalapack` in its own launch (its ranks load another
library).  ``meshplan.run_matmul`` (:mod:`meshplan.api.matmul`) builds its cases from a plan.
"""

from __future__ import annotations

from typing import Sequence

from meshplan.exec.runtime import pmpi
from meshplan.exec.runtime.launch import run_job
from meshplan.models.matmul.costs import cosma_rank_words, summa_rank_words
from meshplan.models.matmul.layouts import scalapack_block
from meshplan.models.matmul.problem import Grid, MatmulProblem

__all__ = ["run_cases", "run_scalapack", "scalapack_block", "RTOL", "BASELINES"]

#: verification tolerance (max-norm relative error) per dtype
RTOL = {"f64": 1e-12, "f32": 1e-5}
#: the baselines a run can have next to meshplan's schedule
BASELINES = ("summa", "scalapack")


def _model(case: dict, p: int) -> list[int]:
    prob = MatmulProblem(case["m"], case["n"], case["k"], p)
    if case["algo"] == "cosma":
        g = Grid(*case["grid"])
        words = [cosma_rank_words(prob, g, r).total for r in range(p)]
        if case.get("layout") == "scalapack":
            from meshplan.models.matmul.layouts import conversion_words

            conv = conversion_words(prob, g, int(case["nb"]), *case["bc_grid"])
            words = [w + sum(c.values()) for w, c in zip(words, conv)]
        return words
    pr, pc = case["grid"]
    return [summa_rank_words(prob, pr, pc, r).total for r in range(p)]


def run_cases(np_: int, cases: Sequence[dict], *, repeats: int = 1, seed: int = 0, use_pmpi: bool = True,
              timeout_s: float = 600.0) -> list[dict]:
    """Run ``cases`` (dicts: name, algo cosma|summa, m, n, k, dtype, grid, rounds) on ``np_`` ranks in one
    launch; each result gains ``model_words_per_rank`` and ``verified``."""
    env = pmpi.preload_env() if use_pmpi else None
    job = {"seed": seed, "repeats": repeats, "cases": [dict(c) for c in cases]}
    out = run_job(np_, "meshplan.exec.matmul.rank", job, timeout_s=timeout_s, env=env)
    res = []
    for case, got in zip(cases, out["cases"]):
        got = dict(got)
        got["model_words_per_rank"] = _model(case, np_)
        got["verified"] = got["max_rel_error"] <= RTOL.get(case.get("dtype", "f64"), 1e-12)
        res.append(got)
    return res


def run_scalapack(np_: int, cases: Sequence[dict], *, repeats: int = 1, use_pmpi: bool = True,
                  timeout_s: float = 600.0) -> list[dict]:
    """Run ScaLAPACK pdgemm ``cases`` (dicts: name, m, n, k, grid [pr, pc], nb) in one launch through the
    bridge of :mod:`meshplan.exec.runtime.scalapack` (raises ``ScalapackUnavailable`` when it is absent)."""
    from meshplan.exec.runtime import scalapack

    env = dict(scalapack.rank_env())
    if use_pmpi:
        env.update(pmpi.preload_env())
    out = run_job(np_, "meshplan.exec.matmul.scalapack_rank", {"repeats": repeats, "cases": [dict(c) for c in cases]},
                  timeout_s=timeout_s, env=env)
    res = []
    for got in out["cases"]:
        got = dict(got)
        got["verified"] = got["max_rel_error"] <= RTOL["f64"]
        got["words_per_rank"] = None
        got["model_words_per_rank"] = None
        res.append(got)
    return res
