"""Factorization models: validation, the exact step sums of COnfLUX / COnfCHOX / 2-D LU, and the
lower bounds of thesis section 4.6."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from meshplan.models.factorization.cost import (confchox_cost, conflux_cost, cyclic_count, lower_bound,
                                                lu2d_cost, memory_words, thesis_leading, tournament_messages,
                                                twod_leading)
from meshplan.models.core.errors import ModelError
from meshplan.models.factorization.problem import (FactorGrid, FactorModelError, FactorProblem, layer_slices,
                                                   parse_grid)


@pytest.mark.parametrize("args, fragment", [
    (("lu", 0, 4), "positive integer"),
    (("qr", 16, 4), "unknown factorization"),
    (("lu", 16, 0), "p must be a whole number of ranks"),
    (("lu", 64, 4, 100), "memory too small"),
])
def test_problem_rejects_bad_input(args, fragment):
    with pytest.raises(ModelError, match=fragment):
        FactorProblem(*args)


def test_grid_rejects_block_below_layers_and_wrong_rank_count():
    with pytest.raises(FactorModelError, match="v ≥ c"):
        FactorGrid(2, 2, 4, 2)
    with pytest.raises(FactorModelError, match="must equal p"):
        FactorGrid(2, 2, 1, 16).check(FactorProblem("lu", 256, 8))
    with pytest.raises(FactorModelError, match="own no rows"):
        FactorGrid(8, 1, 1, 64).check(FactorProblem("lu", 256, 8))
    with pytest.raises(FactorModelError, match="PX,PY,PZ"):
        parse_grid("2,2")
    assert parse_grid("2, 1,4") == (2, 1, 4) == parse_grid([2, 1, 4])
    assert str(FactorGrid(2, 1, 4, 8)) == "[2,1,4] v=8"


def test_tournament_messages_fold_non_powers_of_two():
    # q·log2(q) butterfly messages plus 2 per extra rank (fold in, result back)
    assert [tournament_messages(P) for P in (1, 2, 3, 4, 5, 6, 8)] == [0, 2, 4, 8, 10, 12, 24]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200), st.integers(0, 200), st.integers(1, 9), st.integers(1, 5), st.data())
def test_cyclic_count_matches_brute_force(lo, hi, v, P, data):
    c = data.draw(st.integers(0, P - 1))
    want = sum(1 for i in range(lo, hi) if (i // v) % P == c)
    assert cyclic_count(lo, hi, v, P, c) == want


def test_layer_slices_cover_the_block():
    assert layer_slices(5, 2) == [(0, 3), (3, 5)]
    assert layer_slices(1, 3) == [(0, 1), (1, 1), (1, 1)]


def test_conflux_phases_match_their_closed_forms():
    # N divisible by v: sum over steps of v_t·R_t = (N² − N v)/2
    N, v = 1024, 16
    g = FactorGrid(4, 2, 2, v)
    c = conflux_cost(FactorProblem("lu", N, g.p), g)
    half = (N * N - N * v) / 2
    assert c.phases["send_rows"] == (g.Px - 1) * half
    # step 0: the layers z > 0 hold zeros — no column reduction, the pivot rows of layer 1 are copied
    assert c.phases["reduce_rows"] == (g.Pz - 1) * half - (v - v // 2) * (N - v)
    assert c.phases["reduce_column"] == (g.Pz - 1) * ((N * N + N * v) / 2 - N * v)
    # W to the grid columns that still own trailing columns (at the step before last: one of two)
    assert c.phases["send_panel"] == (g.Py * v - v // 2) * (N * N - N * v) / (2 * v) - v * v // 2
    assert c.phases["tournament"] == tournament_messages(4) * N * (v + 1)
    assert c.phases["pivots"] == (g.p - g.Px) * N
    assert c.per_rank == pytest.approx(c.total / 16)


def _chox_brute(N: int, g: FactorGrid) -> tuple[int, int]:
    """COnfCHOX's panel and L00 words from sets: every rank (x, y, z) needs the L10 rows i of its rows
    with one of its columns j ≤ i and of its columns j with one of its rows i ≥ j, minus what it holds."""
    panels = diag = 0
    for t in range(-(-N // g.v)):
        c0 = t * g.v
        vt = min(g.v, N - c0)
        idx = list(range(c0 + vt, N))
        sl = layer_slices(vt, g.Pz)
        for x in range(g.Px):
            rows = [i for i in idx if (i // g.v) % g.Px == x]
            if rows and x != t % g.Px:
                diag += vt * (vt + 1) // 2  # the triangle L00
            for y in range(g.Py):
                cols = [j for j in idx if (j // g.v) % g.Py == y]
                need = set()
                if rows and cols:
                    need = {i for i in rows if i >= cols[0]} | {j for j in cols if j <= rows[-1]}
                for z, (lo, hi) in enumerate(sl):
                    held = (y, z) == (t % g.Py, t % g.Pz)
                    panels += (hi - lo) * sum(1 for i in need if not (held and (i // g.v) % g.Px == x))
    return panels, diag


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 90), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(0, 6))
def test_confchox_panels_match_a_set_count(N, Px, Py, Pz, extra):
    g = FactorGrid(Px, Py, Pz, Pz + extra)
    pr = FactorProblem("cholesky", N, g.p)
    try:
        c = confchox_cost(pr, g)
    except FactorModelError:
        return
    assert (c.phases["panels"], c.phases["diagonal"]) == _chox_brute(N, g)


def test_confchox_sends_each_panel_row_once_on_a_square_grid():
    # [2,2,1]: the diagonal ranks' rows are their columns, so per step 2·R·v (ScaLAPACK's pdpotrf), not 2.5·R·v
    N, v = 2048, 32
    g = FactorGrid(2, 2, 1, v)
    c = confchox_cost(FactorProblem("cholesky", N, 4), g)
    assert c.phases["reduce_column"] == 0
    assert c.phases["panels"] < (N * N - N * v)  # Σ 2·R_t·v
    assert c.phases["diagonal"] == (N // v - 1) * v * (v + 1) // 2


def test_cholesky_moves_less_than_lu_by_symmetry_table_4_1():
    # Table 4.1 puts COnfCHOX's volume at COnfLUX's; exploiting symmetry it moves less (docs/factor.md):
    # no pivot rows to reduce (A01 = A10ᵀ), triangles for the diagonal block and L00, and each L10 row
    # sent once for a rank's rows and columns
    g = FactorGrid(4, 4, 4, 16)
    lu = conflux_cost(FactorProblem("lu", 4096, 64), g)
    ch = confchox_cost(FactorProblem("cholesky", 4096, 64), g)
    # the same block column, but only the lower triangle of its diagonal block (steps 1 … n-1)
    assert ch.phases["reduce_column"] == lu.phases["reduce_column"] - (g.Pz - 1) * (4096 // 16 - 1) * 16 * 15 // 2
    assert ch.phases["panels"] < lu.phases["send_rows"] + lu.phases["send_panel"]
    assert 0.7 < ch.per_rank / lu.per_rank < 1


def test_two_d_model_leading_term_table_4_2():
    N, g = 8192, FactorGrid(8, 8, 1, 16)
    pr = FactorProblem("lu", N, 64)
    c = lu2d_cost(pr, g)
    assert c.per_rank / twod_leading(pr) == pytest.approx(1.0, rel=0.15)
    assert lu2d_cost(pr, g, swap_total=0).phases["swaps"] == 0


def test_lower_bounds_section_4_6():
    N, p, S = 4096, 64, 2**20
    lu = lower_bound(FactorProblem("lu", N, p), S)
    ch = lower_bound(FactorProblem("cholesky", N, p), S)
    assert lu == pytest.approx((2 * N**3 - 6 * N**2 + 4 * N) / (3 * p * math.sqrt(S)) + N * (N - 1) / (2 * p))
    assert lu > ch
    big = 2**20  # the leading terms dominate only for large N
    assert lower_bound(FactorProblem("lu", big, p), S) / (2 * big**3 / (3 * p * math.sqrt(S))) == pytest.approx(1, rel=0.01)
    assert lower_bound(FactorProblem("cholesky", big, p), S) / (big**3 / (3 * p * math.sqrt(S))) == pytest.approx(1, rel=0.01)
    # COnfLUX's leading term is 1.5x the LU bound's (section 4.7.4)
    assert thesis_leading(FactorProblem("lu", N, p), S) / (2 * N**3 / (3 * p * math.sqrt(S))) == pytest.approx(1.5)


def test_2_5d_beats_2d_at_scale_but_needs_the_memory():
    N, p = 65536, 4096
    pr = FactorProblem("lu", N, p)
    flat = conflux_cost(pr, FactorGrid(64, 64, 1, 16)).per_rank
    deep = conflux_cost(pr, FactorGrid(16, 16, 16, 16)).per_rank
    assert deep < 0.6 * flat
    assert memory_words(pr, FactorGrid(16, 16, 16, 16)) > 10 * memory_words(pr, FactorGrid(64, 64, 1, 16))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 16), st.integers(0, 64))
def test_grid_prints_and_parses_back(Px, Py, Pz, extra):
    g = FactorGrid(Px, Py, Pz, Pz + extra)
    assert FactorGrid.parse(str(g)) == g
    with pytest.raises(FactorModelError, match="is written"):
        FactorGrid.parse(str(g).replace("v=", "b="))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["lu", "cholesky"]), st.integers(20, 200), st.sampled_from([4, 8, 16]),
       st.sampled_from([(1, 1, 2), (2, 2, 1), (2, 1, 2), (4, 1, 1), (2, 2, 2), (1, 4, 2), (3, 2, 1)]),
       st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_solve_words_stay_below_their_bound(kind, N, v, shape, nrhs, seed):
    import numpy as np

    from meshplan.models.factorization.solve_cost import solve_cost

    g = FactorGrid(*shape, v=max(v, shape[2]))
    pr = FactorProblem(kind, N, g.p)
    try:
        g.check(pr)
    except FactorModelError:
        return
    perm = np.random.default_rng(seed).permutation(N)
    c = solve_cost(pr, g, nrhs, perm if kind == "lu" else None)
    Px, Py, Pz = shape
    assert 0 < c.per_rank <= N * nrhs * (2 * Py * Pz + Px * Pz + Px + Py) / g.p
    assert c.total == sum(c.phases.values()) and set(c.phases) == {"reduce_rhs", "send_y", "reduce_products",
                                                                    "send_x"}


def test_the_lu_solve_model_needs_the_pivots():
    from meshplan.models.factorization.solve_cost import solve_cost

    with pytest.raises(FactorModelError, match="pivots"):
        solve_cost(FactorProblem("lu", 64, 4), FactorGrid(2, 2, 1, 16), 1)
