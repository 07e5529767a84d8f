"""solvers/matmul: CP-SAT grid choice agrees with exhaustive enumeration; the thesis's grid results
(Figure 3.5's 65 ranks, section 3.8's shapes)."""

import random

import pytest

from meshplan.models.core.errors import Infeasible
from meshplan.models.matmul.costs import cosma_max_words, cosma_memory, thesis_rounds
from meshplan.models.matmul.problem import Grid, MatmulError, MatmulProblem
from meshplan.solvers.matmul.plan import (MatmulSchedule, choose_grid, exhaustive_grid, fixed_schedule,
                                          grid_cost, reduction_vs_all_ranks, schedule_matmul)


def plan_matmul(m, n, k, p, *, memory=None, **kw) -> MatmulSchedule:
    return schedule_matmul(MatmulProblem(m, n, k, p, memory), **kw)


def _case(rnd):
    p = rnd.choice([rnd.randint(1, 16), rnd.randint(1, 64), rnd.randint(1, 512)])
    m, n, k = (rnd.choice([rnd.randint(1, 64), rnd.randint(1, 600)]) for _ in range(3))
    need = -(-(m * n + m * k + n * k) // p)
    memory = rnd.choice([None, need * rnd.choice([1, 2, 3, 8]), None])
    tol = rnd.choice([0.0, 0.03, 0.1, 0.25])
    return MatmulProblem(m, n, k, p, memory), tol


def test_cpsat_agrees_with_exhaustive_on_random_cases():
    rnd = random.Random(20211)
    agreed = infeasible = 0
    for _ in range(220):
        prob, tol = _case(rnd)
        ref = exhaustive_grid(prob, tol)
        if ref is None:
            with pytest.raises(Infeasible):
                choose_grid(prob, tol, time_limit_s=20)
            infeasible += 1
            continue
        grid, words, rounds = choose_grid(prob, tol, time_limit_s=20)  # re-checks internally as well
        assert (words, rounds) == (ref[1], ref[2]), (prob, tol)
        assert grid_cost(prob, grid) == (words, rounds)
        assert prob.p - int(tol * prob.p) <= grid.used <= prob.p
        if prob.memory is not None:
            assert cosma_memory(prob.m, prob.n, prob.k, grid.pm, grid.pn, grid.pk, rounds) <= prob.memory
        agreed += 1
    assert agreed + infeasible == 220 and agreed >= 150


def test_figure_3_5_65_ranks_leave_one_idle():
    plan = plan_matmul(1300, 1300, 1300, 65, idle_tolerance=0.03)
    assert plan.grid == Grid(4, 4, 4) and plan.ranks_used == 64
    # thesis: dropping one rank reduces the communication by 36% (domain I/O, section 3.7.1)
    assert reduction_vs_all_ranks(plan) == pytest.approx(0.36, abs=0.005)
    full = plan_matmul(1300, 1300, 1300, 65, idle_tolerance=0.0)
    assert full.ranks_used == 65 and full.max_words > 1.5 * plan.max_words


def test_shapes_plan_sensibly():
    w = 8
    # RPA (section 3.8): m = n = 136w, k = 228w^2 -- tall and skinny, cut along k
    rpa = plan_matmul(136 * w, 136 * w, 228 * w * w, 64)
    assert rpa.grid.pk >= 16
    # largeK: k >> m, n -> mostly k; largeM: m >> n, k -> mostly m; flat: m, n >> k -> no k cut
    assert plan_matmul(64, 64, 65536, 32).grid.pk == 32
    assert plan_matmul(65536, 64, 64, 32).grid.pm == 32
    assert plan_matmul(4096, 4096, 16, 16).grid.pk == 1
    sq = plan_matmul(512, 512, 512, 8)
    assert sq.grid == Grid(2, 2, 2) and sq.max_words <= sq.summa_words_per_rank[0]


def test_limited_memory_adds_rounds():
    free = plan_matmul(256, 256, 256, 8)
    tight = plan_matmul(256, 256, 256, 8, memory=45000)
    assert free.rounds == 1 and tight.rounds > 1
    assert tight.memory_per_rank <= 45000
    roomy = plan_matmul(256, 256, 256, 8, memory=60000)  # 2 rounds single-buffered, 4 double-buffered
    assert roomy.fewest_rounds == 2 and roomy.rounds == 4 and roomy.double_buffered
    assert roomy.memory_per_rank <= 60000 and roomy.strategy.endswith("sk4")
    assert tight.strategy.endswith(f"sk{tight.rounds}")
    # section 3.6.3's continuous latency keeps only C and the panels in memory: never more rounds
    assert 1 <= thesis_rounds(256, 256, 256, 8, 45000) <= tight.rounds


def test_infeasible_and_bad_input():
    with pytest.raises(Infeasible, match="idle"):
        plan_matmul(1, 1, 1, 8, idle_tolerance=0.0)
    with pytest.raises(MatmulError, match="idle_tolerance must be a fraction") as err:
        plan_matmul(8, 8, 8, 4, idle_tolerance=1.5)
    assert err.value.param == "idle_tolerance"
    with pytest.raises(MatmulError, match="memory too small"):
        plan_matmul(100, 100, 100, 2, memory=10)
    with pytest.raises(MatmulError, match="unknown grid method") as err:
        plan_matmul(8, 8, 8, 4, method="annealing")
    assert err.value.param == "method"
    with pytest.raises(MatmulError, match="time_limit_s"):
        plan_matmul(8, 8, 8, 4, time_limit_s=0)
    with pytest.raises(MatmulError, match="problem must be a MatmulProblem"):
        schedule_matmul((8, 8, 8, 4))
    # messages name API parameters, never CLI flags
    with pytest.raises(Infeasible) as err:
        plan_matmul(1, 1, 1, 8, idle_tolerance=0.0)
    assert "--" not in str(err.value) and "idle_tolerance" in str(err.value)


def test_fixed_schedule_on_a_given_grid():
    prob = MatmulProblem(37, 29, 41, 8)
    s = fixed_schedule(prob, Grid(1, 3, 1), 3, double_buffered=True)
    assert s.ranks_used == 3 and s.words_per_rank[3:] == (0,) * 5 and s.rounds == 3 and s.double_buffered
    assert s.method == "fixed" and fixed_schedule(prob, Grid(2, 2, 2)).rounds == 1
    with pytest.raises(MatmulError, match="only 8"):
        fixed_schedule(prob, Grid(3, 3, 1))
    with pytest.raises(MatmulError, match="rounds must be a positive"):
        fixed_schedule(prob, Grid(2, 2, 2), 0)


def test_closed_form_matches_cpsat_objective_on_thesis_scale():
    plan = plan_matmul(16384, 16384, 16384, 18432, method="exhaustive")
    assert plan.max_words == cosma_max_words(16384, 16384, 16384, *plan.grid.as_list())
    assert plan.ranks_used >= 18432 * 0.97


def test_plans_where_cosma_runs():
    """2048³ on 8 ranks with 2 M words each: no grid fits in one pass; k-rounds (COSMA's sequential steps)
    make [2,4,1] fit, and the rounds add no words.  1024×1024×1048576 on 1024 ranks in 3,147,264 words:
    the grid [1,1,1024], 1,047,552 words per rank."""
    s = schedule_matmul(MatmulProblem(2048, 2048, 2048, 8, 2097152), method="exhaustive")
    assert s.rounds > 1 and s.memory_per_rank <= 2097152
    assert s.max_words == cosma_max_words(2048, 2048, 2048, *s.grid.as_list())
    big = schedule_matmul(MatmulProblem(1024, 1024, 1048576, 1024, 3147264), method="exhaustive")
    assert big.grid.as_list() == [1, 1, 1024] and big.max_words == 1047552 and big.rounds == 1


def test_objective_time_minimizes_the_modelled_time():
    """The time objective: the least modelled time over every grid that fits (checked by brute force), words
    break ties; a machine where latency dominates takes fewer messages, one where bandwidth dominates fewer
    words; the explanation names the winner and what the next candidates cost."""
    from meshplan.models.matmul.costs import cosma_rounds
    from meshplan.models.matmul.time import Rates, cosma_time
    from meshplan.solvers.matmul.plan import enumerate_grids, schedule_matmul

    for m, n, k, p, mem in ((256, 256, 256, 8, None), (64, 64, 65536, 4, None), (300, 200, 500, 6, 60000)):
        prob = MatmulProblem(m, n, k, p, mem)
        for rates in (Rates(5e-6, 1e10, 1e10), Rates(1e-1, 1e12, 1e12), Rates(0.0, 1e6, 1e12)):
            s = schedule_matmul(prob, objective="time", rates=rates)
            best = min(cosma_time(m, n, k, *g.as_list(), cosma_rounds(m, n, k, *g.as_list(), mem), rates).total_s
                       for g in enumerate_grids(prob) if cosma_rounds(m, n, k, *g.as_list(), mem) is not None)
            t = cosma_time(m, n, k, *s.grid.as_list(), s.fewest_rounds, rates).total_s
            assert t <= best * (1 + 1e-9) and s.objective == "time" and s.model_time is not None
            assert s.explanation[1].startswith(f"chosen {s.grid}")
    prob = MatmulProblem(64, 64, 65536, 4)
    few_words = schedule_matmul(prob, objective="time", rates=Rates(0.0, 1e6, 1e12))
    assert few_words.max_words == schedule_matmul(prob).max_words  # bandwidth-bound: the words optimum
    with pytest.raises(MatmulError, match="rates") as err:
        schedule_matmul(prob, objective="time")
    assert err.value.param == "system"


def test_cpsat_grid_is_the_enumerations_tie_break():
    """Square problems tie between grids ([1,2,1] and [2,1,1] move the same words): every rank of an MPI
    program plans for itself, so CP-SAT's answer must be one fixed grid, the enumeration's, in every call."""
    from meshplan.models.matmul.problem import MatmulProblem
    from meshplan.solvers.matmul.plan import choose_grid, exhaustive_grid

    for m, n, k, p in ((192, 192, 192, 2), (64, 64, 64, 4), (96, 96, 48, 8), (1536, 1536, 1536, 4)):
        prob = MatmulProblem(m, n, k, p)
        want = exhaustive_grid(prob)
        got = {choose_grid(prob, method="cpsat") for _ in range(5)}
        assert got == {want}, (prob, got, want)
