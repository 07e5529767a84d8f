"""Speed without a changed answer: the fraction-free simplex and the subgraph memo (solvers/soap)."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from meshplan.models.soap import build_sdg, parse_file, parse_source, subgraph_problem
from meshplan.models.soap.scalars import split_scalars
from meshplan.solvers.soap.chi import intensity
from meshplan.solvers.soap.lp import max_le_one
from meshplan.solvers.soap.memo import IntensityMemo, canonical_key

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"

_ENTRY = st.sampled_from([F(0), F(0), F(1), F(1), F(2), F(1, 2), F(3, 2)])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(_ENTRY, min_size=n, max_size=n),
    st.lists(st.lists(_ENTRY, min_size=n, max_size=n), min_size=1, max_size=6),
    st.lists(st.lists(st.sampled_from([F(-1), F(0), F(1)]), min_size=n, max_size=n), max_size=2))))
def test_simplex_optimum_and_duals_match_an_independent_lp_solver(lp):
    c, A, G = lp
    rows, b = A + G, [F(1)] * len(A) + [F(0)] * len(G)
    res = linprog([-float(x) for x in c], A_ub=[[float(x) for x in r] for r in rows], b_ub=[float(x) for x in b],
                  bounds=[(0, None)] * len(c), method="highs")
    got = max_le_one(c, rows, b)
    if res.status == 3:          # unbounded
        assert got is None
        return
    assert got is not None
    val, x, w = got
    assert abs(float(val) + res.fun) <= 1e-9 * max(1.0, abs(res.fun))
    # exact primal feasibility, dual feasibility and strong duality (b·w = value)
    assert all(xi >= 0 for xi in x) and all(wi >= 0 for wi in w)
    assert all(sum(a * xi for a, xi in zip(r, x)) <= bi for r, bi in zip(rows, b))
    assert sum(c_ * xi for c_, xi in zip(c, x)) == val
    assert all(sum(w[j] * rows[j][v] for j in range(len(rows))) >= c[v] for v in range(len(c)))
    assert sum(wi * bi for wi, bi in zip(w, b)) == val


#: two filter passes that differ only in names (deriche's shape): renamed copies of subgraphs
TWO_PASSES = """
def two_passes(W, H, a, b):
    for i in range(W):
        s = 0.0
        for j in range(H):
            y1[i, j] = a * x[i, j] + b * s
            s = y1[i, j]
    for i in range(W):
        s = 0.0
        for j in range(H):
            y2[i, j] = a * x[i, j] + b * s
            s = y2[i, j]
    for i in range(W):
        for j in range(H):
            out[i, j] = y1[i, j] + y2[i, j]
"""


def _problems(name):
    (prog,) = parse_source(TWO_PASSES) if name == "two_passes" else parse_file(str(EX / f"{name}.py"))
    prog, _ = split_scalars(prog)
    sdg = build_sdg(prog)
    return [subgraph_problem(sdg, H) for H in sdg.connected_subsets(max_size=3)]


@pytest.mark.parametrize("name", ["two_passes", "durbin", "gramschmidt"])
def test_a_memo_hit_equals_the_direct_derivation(name):
    """Every subgraph through the memo gives what deriving it alone gives (tiles and case labels
    renamed); the two passes are renamed copies, so there the memo is actually hit."""
    probs = _problems(name)
    memo = IntensityMemo(intensity)
    for p in probs:
        got, ref = memo(p), intensity(p)
        assert got.problem is p
        assert (got.method, got.rho, got.chi, got.X0, got.tiles, got.tiles_of_X, got.notes) == \
            (ref.method, ref.rho, ref.chi, ref.X0, ref.tiles, ref.tiles_of_X, ref.notes)
        assert [(c.problem.case, c.rho, c.tiles) for c in got.cases] == \
            [(c.problem.case, c.rho, c.tiles) for c in ref.cases]
    if name == "two_passes":
        assert memo.hits > 0


def test_the_key_ignores_names_but_not_structure():
    probs = _problems("two_passes")
    keys = [canonical_key(p) for p in probs]
    assert len(set(keys)) < len(keys)                     # renamed copies share a key
    sizes = {canonical_key(p): (len(p.classes), len(p.terms), len(p.work)) for p in probs}
    for p in probs:                                       # equal keys: equal shape
        assert sizes[canonical_key(p)] == (len(p.classes), len(p.terms), len(p.work))
    assert np.all([isinstance(k, tuple) for k in keys])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=3, max_size=3), min_size=2, max_size=5),
       st.lists(st.lists(st.integers(-1, 1), min_size=3, max_size=3), max_size=2),
       st.lists(st.integers(1, 4), min_size=5, max_size=5))
def test_skipping_the_face_search_at_a_nondegenerate_vertex_changes_no_certificate(rows, orders, coeffs):
    """best_dual with the primal vertex (which skips the face search when the vertex is
    nondegenerate, the dual then being unique) returns what the full search returns."""
    from meshplan.solvers.soap.dual import best_dual, nondegenerate

    A = [[F(v) for v in r] for r in rows]
    G = [[F(v) for v in r] for r in orders]
    c = [F(1)] * 3
    res = max_le_one(c, A + G, [F(1)] * len(A) + [F(0)] * len(G))
    if res is None:
        return
    val, x, y = res
    cj = [F(v) for v in coeffs[:len(A)]]
    full = best_dual(A, G, c, cj, val, y[:len(A)], y[len(A):])
    assert best_dual(A, G, c, cj, val, y[:len(A)], y[len(A):], x) == full
    if nondegenerate(A, G, x):
        assert full == (y[:len(A)], y[len(A):])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.lists(st.integers(0, 1), min_size=n, max_size=n), min_size=1, max_size=4),
    st.lists(st.lists(st.integers(-1, 1), min_size=n, max_size=n), max_size=3))))
def test_boundedness_shortcuts_agree_with_the_simplex(lp):
    """rays.bounded decides most exponent LPs from their rays (``None``: the simplex decides); where it
    decides it must agree with the simplex."""
    from meshplan.solvers.soap.rays import bounded

    a = [F(v) for v in lp[0]]
    A = [[F(v) for v in r] for r in lp[1]]
    G = [[F(v) for v in r] for r in lp[2]]
    ref = max_le_one(a, A + G, [F(1)] * len(A) + [F(0)] * len(G)) is not None
    assert bounded((None, A, G, a)) in (ref, None)
    if not G:                   # without order rows the rays always decide
        assert bounded((None, A, G, a)) == ref


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_iteration_counts_by_power_sums_equal_sympy_summation(soap_programs, data):
    """|V| of every statement by the power-sum route is sympy's summation of the nest, term for term."""
    import sympy as sp

    from meshplan.solvers.soap.counts import _polynomial_iterations

    (p,) = parse_source(data.draw(soap_programs))
    for stmt in p.statements:
        fast = _polynomial_iterations(stmt)
        expr = sp.Integer(1)
        for lp in reversed(stmt.loops):
            expr = sp.summation(expr, (lp.symbol, lp.lower, lp.upper - 1))
        assert fast is not None and str(fast) == str(sp.factor(sp.simplify(expr)))


@settings(max_examples=300, deadline=None)
@given(st.tuples(
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 2)),
    st.dictionaries(st.sampled_from("abcd"), st.integers(1, 4)),
    st.lists(st.dictionaries(st.sampled_from("abcd"), st.integers(-2, 2).filter(bool), min_size=1), max_size=3)))
def test_domination_certificate_is_sound(case):
    """domination.dominated(work, access, constraints) certifies ∏D^work ≤ ∏D^access for every |D| ≥ 1 with
    ∏D^g ≤ 1 for each order row g: no D of a grid (log |D| in {0, 0.7, 2, 5} per variable) satisfying
    the rows breaks a certified pair, and without rows the certificate is exact (every access exponent
    ≥ the work's)."""
    import itertools

    from meshplan.solvers.soap.domination import dominated

    work, access, rows = case
    access = {v: F(e, 2) for v, e in access.items()}
    rows = [tuple(sorted((v, F(e)) for v, e in g.items())) for g in rows]
    ok = dominated({v: F(e) for v, e in work.items()}, access, tuple(rows))
    if not rows:
        assert ok == all(access.get(v, 0) >= e for v, e in work.items())
    if ok:
        for logs in itertools.product((0.0, 0.7, 2.0, 5.0), repeat=4):
            logd = dict(zip("abcd", logs))
            if any(sum(float(e) * logd[v] for v, e in g) > 1e-12 for g in rows):
                continue
            lw = sum(e * logd[v] for v, e in work.items())
            la = sum(float(e) * logd[v] for v, e in access.items())
            assert lw <= la + 1e-9, (logd, lw, la)
