"""``plan.bind(comm)`` checks that every rank of ``comm`` holds the same plan (one launch of
tests/exec/mpi_scripts/plan_agreement.py on 4 ranks).  Ranks that each call a planner could get different
plans and then exchange messages of matching sizes, computing a wrong answer without an error; every executor
must instead raise the same VerificationError on every rank, naming what differs, and never hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import run_mpi_json

pytestmark = pytest.mark.mpi
SCRIPT = Path(__file__).with_name("mpi_scripts") / "plan_agreement.py"

#: case -> the words every rank's message must contain (the field that differs and both values)
DIFFERENT = {
    "matmul grid": ("MatmulExecutor", "grid is [1, 4, 1] on rank 0 but [4, 1, 1] on ranks 1-3"),
    "matmul layout": ("MatmulExecutor", 'layout is "scalapack" on rank 0 but "blocked" on ranks 1-3'),
    "matmul p": ("MatmulExecutor", "problem.p is 4 on ranks 0, 2-3 but 2 on rank 1"),
    "factorization grid": ("FactorExecutor", 'grid is {"Px": 1, "Py": 4', 'on ranks 1-3'),
    "factorization kind": ("FactorExecutor", 'kind is "lu" on ranks 0-2 but "cholesky" on rank 3'),
    "redistribution program": ("RedistributionExecutor", "program is", "but [] on rank 2"),
    "reduction program": ("ReductionExecutor", "steps[0] is", "on ranks 0-2 but", "on rank 3"),
    "halo window": ("HaloExecutor", "window.kernel is [1, 1, 3] on ranks 0, 2-3 but [1, 1, 5] on rank 1"),
}


@pytest.fixture(scope="module")
def result():
    return run_mpi_json(4, [str(SCRIPT)], timeout_s=300)


@pytest.fixture(scope="module")
def cases(result):
    return {c["name"]: c for c in result["cases"]}


@pytest.mark.parametrize("name", sorted(DIFFERENT))
def test_different_plans_raise_the_same_error_on_every_rank(cases, name):
    case = cases[name]
    assert case["raised"] == [True] * 4, case
    assert len(set(case["messages"])) == 1, case["messages"]
    message = case["messages"][0]
    assert "hold different plans" in message
    for words in DIFFERENT[name]:
        assert words in message, message


@pytest.mark.parametrize("name", ["matmul same plan", "matmul per half"])
def test_equal_plans_bind(cases, name):
    assert cases[name]["raised"] == [False] * 4, cases[name]


def test_a_good_bind_after_the_refused_ones_computes(result):
    assert result["still_works"] is True
