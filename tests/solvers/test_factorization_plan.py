"""The grid / block choice of COnfLUX and COnfCHOX (the solver's :class:`FactorSchedule` of a typed
:class:`FactorProblem`): exhaustive, re-checked, explained, and equal to a brute force over every grid and
every block size on small cases; the problem validates every input once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from meshplan.models.core.errors import MeshplanError, ModelError
from meshplan.models.factorization.cost import factor_cost, memory_words, table41_cost
from meshplan.models.factorization.problem import FactorGrid, FactorModelError, FactorProblem
from meshplan.solvers.factorization.plan import (FactorSchedule, block_candidates, check_schedule, grids, plan_2d,
                                                 schedule_factorization)


def plan_factorization(kind, N, p, *, memory=None, block=None, grid=None) -> FactorSchedule:
    return schedule_factorization(FactorProblem(kind, N, p, memory, block=block, grid=grid))


def test_grids_are_every_ordered_factorization():
    assert sorted(grids(4)) == [(1, 1, 4), (1, 2, 2), (1, 4, 1), (2, 1, 2), (2, 2, 1), (4, 1, 1)]
    assert all(a * b * c == 12 for a, b, c in grids(12)) and len(grids(12)) == 18


@pytest.mark.parametrize("kind, N, p, S", [("lu", 256, 4, None), ("lu", 1000, 8, 400_000),
                                           ("cholesky", 512, 8, 150_000), ("lu", 300, 6, None)])
def test_plan_equals_brute_force(kind, N, p, S):
    plan = plan_factorization(kind, N, p, memory=S)
    pr = plan.problem
    best = None
    for Px, Py, Pz in grids(p):
        for v in block_candidates(N, Pz):
            try:
                g = FactorGrid(Px, Py, Pz, v)
                g.check(pr)
            except FactorModelError:
                continue
            if S is not None and memory_words(pr, g) > S:
                continue
            w = factor_cost(pr, g).per_rank
            best = w if best is None else min(best, w)
    assert plan.model_words_per_rank == pytest.approx(best)
    check_schedule(plan)
    assert plan.explanation[0].startswith("searched")
    assert plan.memory_words <= (S or plan.memory_words)


def test_memory_limit_forces_fewer_layers():
    N, p = 1024, 8
    roomy = plan_factorization("lu", N, p, grid=(2, 2, 2), block=16)
    assert roomy.grid.Pz == 2
    tight = plan_factorization("lu", N, p, memory=roomy.memory_words - 1)
    assert tight.memory_words < roomy.memory_words


def test_pinned_grid_and_block_and_errors():
    plan = plan_factorization("cholesky", 512, 8, grid=(2, 2, 2), block=32)
    assert (plan.grid.Px, plan.grid.Py, plan.grid.Pz, plan.grid.v) == (2, 2, 2, 32)
    with pytest.raises(FactorModelError, match="v ≥ c") as err:
        plan_factorization("lu", 512, 8, grid=(1, 2, 4), block=2)
    assert err.value.param == "block"
    with pytest.raises(MeshplanError, match="no grid"):
        plan_factorization("lu", 16, 64, block=16)
    with pytest.raises(FactorModelError, match="memory too small") as err:
        plan_factorization("lu", 1024, 4, memory=1000)
    assert err.value.param == "memory"
    with pytest.raises(FactorModelError, match="must equal p") as err:
        plan_factorization("lu", 256, 4, grid=(2, 2, 2))
    assert err.value.param == ("grid", "p")


def test_two_d_plan_has_one_layer():
    g, c = plan_2d(FactorProblem("lu", 1024, 8))
    assert g.Pz == 1 and c.per_rank > 0


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["lu", "cholesky"]), st.integers(32, 400), st.integers(1, 12), st.data())
def test_plan_is_minimal_and_feasible_property(kind, N, p, data):
    pr_free = FactorProblem(kind, N, p)
    try:
        free = plan_factorization(kind, N, p)
    except MeshplanError:
        assert not any(_fits(pr_free, g) for g in _all(pr_free))
        return
    S = data.draw(st.integers(free.memory_words // 2, free.memory_words * 2))
    try:
        plan = plan_factorization(kind, N, p, memory=S)
    except MeshplanError:
        if N * N > p * S:  # rejected by the problem itself: the matrix does not fit
            return
        assert not any(_fits(FactorProblem(kind, N, p, S), g) for g in _all(pr_free))
        return
    pr = plan.problem
    best = min(factor_cost(pr, g).per_rank for g in _all(pr) if _fits(pr, g))
    assert plan.model_words_per_rank == pytest.approx(best)
    assert plan.memory_words <= S


def _all(pr):
    for Px, Py, Pz in grids(pr.p):
        for v in block_candidates(pr.N, Pz):
            yield FactorGrid(Px, Py, Pz, v)


def _fits(pr, g) -> bool:
    try:
        g.check(pr)
    except FactorModelError:
        return False
    return pr.S is None or memory_words(pr, g) <= pr.S


def test_blocks_stay_a_small_multiple_of_the_layers_section_4_7_2():
    for N, Pz in [(4096, 1), (4096, 2), (4096, 32), (100, 2)]:
        vs = block_candidates(N, Pz)
        assert vs and min(vs) >= max(Pz, 16) and max(vs) <= min(N, 8 * max(Pz, 16))
    with pytest.raises(FactorModelError, match="single block"):
        FactorGrid(1, 1, 4, 64).check(FactorProblem("lu", 64, 4))


@pytest.mark.parametrize("kind", ["lu", "cholesky"])
@pytest.mark.parametrize("N, v", [(512, 16), (1024, 16), (2048, 32)])
def test_a_second_layer_does_not_pay_on_four_ranks(kind, N, v):
    # the exact model and the thesis's own step costs (Table 4.1, Lemma 4.10) agree: on p = 4 every grid
    # with Pz > 1 moves more than [2,2,1] at the same block, so the plan keeps one layer
    pr = FactorProblem(kind, N, 4)
    flat = FactorGrid(2, 2, 1, v)
    for Px, Py, Pz in grids(4):
        if Pz > 1:
            g = FactorGrid(Px, Py, Pz, v)
            assert factor_cost(pr, g).per_rank > factor_cost(pr, flat).per_rank
            assert table41_cost(pr, g).per_rank > table41_cost(pr, flat).per_rank
    assert plan_factorization(kind, N, 4).grid.Pz == 1
    assert plan_factorization(kind, N, 4, block=v).grid.Pz == 1


def test_table_4_1_layers_pay_only_beyond_the_threshold():
    # Table 4.1 on a square [q, q, c] grid: panels N²/√(pc) against reductions N²c/p, so c layers beat one
    # iff √p > c + √c — for c = 2, p > 11.7: a tie at p = 8 ([2,4,1] vs [2,2,2]), a gain at p = 32
    N, v = 4096, 32
    def t41(p, grid):
        return table41_cost(FactorProblem("lu", N, p), FactorGrid(*grid, v)).per_rank
    assert t41(8, (2, 2, 2)) == pytest.approx(t41(8, (2, 4, 1)))
    assert t41(32, (4, 4, 2)) < t41(32, (4, 8, 1))
    assert t41(4, (2, 1, 2)) > t41(4, (2, 2, 1))


@pytest.mark.parametrize("kwargs, param, fragment", [
    (dict(kind="qr", N=64, p=4), "kind", "unknown factorization"),
    (dict(kind="lu", N=0, p=4), "N", "N must be"),
    (dict(kind="lu", N=2**21, p=4), "N", "2**62"),
    (dict(kind="lu", N=True, p=4), "N", "N must be"),
    (dict(kind="lu", N=64, p=0), "p", "p must be"),
    (dict(kind="lu", N=64, p=2.0), "p", "p must be"),
    (dict(kind="lu", N=64, p=4, memory=0), "memory", "memory must be"),
    (dict(kind="lu", N=64, p=4, memory=2**63), "memory", "2**62"),
    (dict(kind="lu", N=64, p=4, dtype="i32"), None, "dtype"),
    (dict(kind="lu", N=64, p=4, dtype="f128"), None, "dtype"),
    (dict(kind="lu", N=64, p=4, block=0), "block", "block must be"),
    (dict(kind="lu", N=64, p=4, grid="2,2"), "grid", "PX,PY,PZ"),
    (dict(kind="lu", N=64, p=4, grid="a,b,c"), "grid", "PX,PY,PZ"),
    (dict(kind="lu", N=64, p=4, grid=(0, 4, 1)), "grid", "PX,PY,PZ"),
    (dict(kind="lu", N=64, p=4, grid=(1, 1, 4), block=2), "block", "v ≥ c"),
])
def test_the_problem_is_the_one_validation_site(kwargs, param, fragment):
    with pytest.raises(ModelError, match=fragment.replace("*", r"\*")) as err:
        FactorProblem(**kwargs)
    if param is not None:
        assert err.value.param == param or param in err.value.param
    assert "--" not in str(err.value)  # names API parameters, never CLI flags


def test_the_problem_normalizes_its_pins_and_dtype():
    pr = FactorProblem("lu", 64, 4, dtype="float32", grid="2, 2,1", block=16)
    assert pr.grid == (2, 2, 1) and pr.dtype.short == "f32" and pr.S is None
    assert FactorProblem("lu", 64, 4, grid=[2, 2, 1]) == FactorProblem("lu", 64, 4, grid=(2, 2, 1))
    s = schedule_factorization(pr)
    assert s.block == 16 and (s.grid.Px, s.grid.Py, s.grid.Pz) == (2, 2, 1)
    assert schedule_factorization(pr) is s  # pure and cached
    assert all("--" not in line for line in s.explanation)


def test_objective_time_minimizes_the_modelled_time():
    """With objective time the chosen grid and block have the least modelled time of every feasible candidate
    (brute force over the search's candidates); on a latency-bound machine the fewest messages."""
    from meshplan.models.factorization.cost import factor_cost
    from meshplan.models.factorization.time import factor_time
    from meshplan.models.matmul.time import Rates
    from meshplan.solvers.factorization.plan import search

    for kind in ("lu", "cholesky"):
        prob = FactorProblem(kind, 512, 8)
        for rates in (Rates(5e-6, 1e10, 1e10), Rates(1e-2, 1e10, 1e12)):
            s = schedule_factorization(prob, "time", rates)
            found, _ = search(prob)
            best = min(factor_time(prob, g, factor_cost(prob, g), rates).total_s for _k, g, _c, _m in found)
            assert s.model_time.total_s <= best * (1 + 1e-9) and s.objective == "time"
            assert s.explanation[1].startswith(f"chosen {s.grid}")
        slow = schedule_factorization(prob, "time", Rates(1.0, 1e10, 1e12))  # latency dominates: fewest messages
        assert slow.model_time.messages == min(factor_time(prob, g, c, Rates(1.0, 1e10, 1e12)).messages
                                               for _k, g, c, _m in search(prob)[0])
