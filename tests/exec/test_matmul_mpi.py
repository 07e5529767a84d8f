"""The COSMA schedule (through the MatmulExecutor of the rank program) and 2-D SUMMA on 4 and 8 MPI ranks: C
verified against numpy, the words each rank receives equal the model exactly (Python counter) and within 3%
(PMPI counter).  One launch per rank count."""

from __future__ import annotations

import pytest

from meshplan.exec.matmul.driver import run_cases
from meshplan.exec.runtime import pmpi
from meshplan.exec.runtime.launch import MpiRunError, run_job
from meshplan.models.matmul.costs import cosma_rounds
from meshplan.models.matmul.problem import MatmulProblem
from meshplan.solvers.matmul.plan import schedule_matmul


def plan_matmul(m, n, k, p, memory=None):
    """The solver's schedule (grid, rounds, SUMMA grid, words per rank)."""
    return schedule_matmul(MatmulProblem(m, n, k, p, memory))

pytestmark = pytest.mark.mpi

SHAPES = {  # name -> (m, n, k)
    "square": (48, 48, 48),
    "tall-skinny": (24, 20, 400),      # RPA-like: m = n small, k large
    "flat": (96, 80, 6),
    "largeM": (300, 12, 10),
    "odd": (37, 29, 41),               # nothing divides
}


def _cases(p: int) -> list[dict]:
    cases = []
    for name, (m, n, k) in SHAPES.items():
        plan = plan_matmul(m, n, k, p)
        cases.append(dict(name=f"{name}/plan", algo="cosma", m=m, n=n, k=k, dtype="f64",
                          grid=plan.grid.as_list(), rounds=plan.rounds))
        cases.append(dict(name=f"{name}/summa", algo="summa", m=m, n=n, k=k, dtype="f64",
                          grid=list(plan.summa_grid), rounds=1))
    m, n, k = SHAPES["odd"]
    # limited memory: several rounds; idle ranks; a grid cut along every dimension
    tight = plan_matmul(m, n, k, p, memory=2 * (m * n + m * k + n * k) // p)
    cases.append(dict(name="odd/rounds", algo="cosma", m=m, n=n, k=k, dtype="f64",
                      grid=tight.grid.as_list(), rounds=tight.rounds, overlap=tight.double_buffered))
    for grid in ([2, 2, p // 4], [1, p // 2, 2]):  # double-buffered rounds: the same volume
        cases.append(dict(name=f"odd/overlap {grid}", algo="cosma", m=m, n=n, k=k, dtype="f64", grid=grid,
                          rounds=3, overlap=True))
    cases.append(dict(name="odd/idle", algo="cosma", m=m, n=n, k=k, dtype="f64", grid=[1, p // 2 - 1 or 1, 1],
                      rounds=2))
    cases.append(dict(name="odd/3d", algo="cosma", m=m, n=n, k=k, dtype="f64",
                      grid=[2, 2, p // 4], rounds=cosma_rounds(m, n, k, 2, 2, p // 4, None) + 2))
    # from and to ScaLAPACK's block-cyclic layout (all-to-all conversions counted in the model)
    plan = plan_matmul(m, n, k, p)
    for nb, grid in ((4, plan.grid.as_list()), (8, [1, p // 2 - 1 or 1, 2])):
        cases.append(dict(name=f"odd/block-cyclic nb={nb}", algo="cosma", m=m, n=n, k=k, dtype="f64", grid=grid,
                          rounds=2, layout="scalapack", nb=nb, bc_grid=list(plan.summa_grid), overlap=nb == 8))
    return cases


@pytest.mark.parametrize("p", [4, 8])
def test_runs_verify_and_volumes_equal_the_model(p):
    use_pmpi = True
    try:
        pmpi.build()
    except pmpi.PmpiUnavailable as err:  # pragma: no cover - gcc is on the CI machine
        use_pmpi = False
        reason = str(err)
    cases = _cases(p)
    results = run_cases(p, cases, repeats=1, use_pmpi=use_pmpi, timeout_s=400)
    assert len(results) == len(cases)
    assert any(c["rounds"] > 1 for c in cases)
    for case, res in zip(cases, results):
        assert res["verified"] and res["max_rel_error"] <= 1e-12, (case, res["max_rel_error"])
        assert res["words_per_rank"] == res["model_words_per_rank"], case
        if use_pmpi:
            for got, want in zip(res["pmpi_words_per_rank"], res["model_words_per_rank"]):
                assert abs(got - want) <= 0.03 * want, case
    if not use_pmpi:
        pytest.skip(f"PMPI counter not checked: {reason}")


def test_a_failing_rank_aborts_the_job():
    job = {"seed": 0, "repeats": 1, "fault": {"rank": 1, "kind": "raise"},
           "cases": [dict(name="x", algo="cosma", m=8, n=8, k=8, dtype="f64", grid=[2, 1, 1], rounds=1)]}
    with pytest.raises(MpiRunError, match="injected failure"):
        run_job(2, "meshplan.exec.matmul.rank", job, timeout_s=120)


def test_scalapack_pdgemm_baseline_same_instrument():
    from meshplan.exec.matmul.driver import run_scalapack, scalapack_block
    from meshplan.exec.runtime import scalapack

    ok, why = scalapack.available()
    if not ok:
        pytest.skip(f"ScaLAPACK baseline not installed: {why}")
    p = 4
    cases, plans = [], []
    for name, (m, n, k) in SHAPES.items():
        plan = plan_matmul(m, n, k, p)
        plans.append(plan)
        cases.append(dict(name=name, m=m, n=n, k=k, grid=list(plan.summa_grid),
                          nb=scalapack_block(m, n, k, *plan.summa_grid)))
    results = run_scalapack(p, cases, repeats=1)
    for plan, case, res in zip(plans, cases, results):
        assert res["verified"] and res["max_rel_error"] <= 1e-12, case
        # the same PMPI instrument: COSMA's planned volume is never above pdgemm's measured one
        assert max(plan.words_per_rank) <= max(res["pmpi_words_per_rank"]), case
