"""The exponent LP with order rows and the tightest AM–GM certificate (solvers/soap/dual.py)."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.solvers.soap.dual import best_dual, feasible, log_constant
from meshplan.solvers.soap.lp import max_le_one


def test_zero_rows_keep_the_origin_feasible_and_give_duals():
    # max x+y  s.t. x + y ≤ 1, x − y ≤ 0  ->  1 (x = y = 1/2 or any point with x ≤ y)
    val, x, w = max_le_one([F(1), F(1)], [[F(1), F(1)], [F(1), F(-1)]], [F(1), F(0)])
    assert val == 1 and x[0] + x[1] == 1 and x[0] <= x[1]
    assert w[0] * 1 + w[1] * 0 == 1                        # strong duality: b·w = value
    with pytest.raises(ValueError):
        max_le_one([F(1)], [[F(1)]], [F(-1)])


def _brute_lp(c, A, b):
    """max c·x over the vertices of {A x ≤ b, x ≥ 0} in 2-d (brute force)."""
    rows = [(a, bb) for a, bb in zip(A, b)] + [([F(-1), F(0)], F(0)), ([F(0), F(-1)], F(0))]
    best = None
    for (a1, b1), (a2, b2) in itertools.combinations(rows, 2):
        det = a1[0] * a2[1] - a1[1] * a2[0]
        if det == 0:
            continue
        x = [(b1 * a2[1] - a1[1] * b2) / det, (a1[0] * b2 - b1 * a2[0]) / det]
        if all(sum(ai * xi for ai, xi in zip(a, x)) <= bb for a, bb in rows):
            v = c[0] * x[0] + c[1] * x[1]
            best = v if best is None else max(best, v)
    return best


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=2, max_size=4),
       st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), max_size=2))
def test_simplex_with_zero_rows_matches_vertex_enumeration(acc, orders):
    A = [[F(a), F(b)] for a, b in acc] + [[F(a), F(b)] for a, b in orders]
    b = [F(1)] * len(acc) + [F(0)] * len(orders)
    res = max_le_one([F(1), F(1)], A, b)
    brute = _brute_lp([F(1), F(1)], A, b)
    if res is None:
        return   # unbounded: no vertex bound to compare
    assert res[0] == brute
    assert sum(wi * bi for wi, bi in zip(res[2], b)) == res[0]


def test_best_dual_finds_the_midpoint_of_the_convolution_face():
    # χ of Example 5.6 in the case w ≤ r, h ≤ s: variables b c k w h r s
    cls = "b c k w h r s".split()
    def row(vs):
        return [F(int(v in vs)) for v in cls]
    A = [row("khwb"), row("rscb"), row("krs")]
    G = [[F(0)] * 3 + [F(1), F(0), F(-1), F(0)], [F(0)] * 4 + [F(1), F(0), F(-1)]]
    c = [F(1)] * 7
    val, _, y = max_le_one(c, A + G, [F(1)] * 3 + [F(0)] * 2)
    assert val == 2
    w0, mu0 = y[:3], y[3:]
    w, mu = best_dual(A, G, c, [F(1)] * 3, val, w0, mu0)
    assert feasible(w, mu, A, G, c, val)
    assert w == [F(1, 2), F(1), F(1, 2)]
    assert log_constant(w, [1, 1, 1], 2) < log_constant(w0, [1, 1, 1], 2)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=3, max_size=3), min_size=2, max_size=4),
       st.lists(st.integers(1, 4), min_size=4, max_size=4))
def test_best_dual_is_always_exactly_feasible_and_never_worse(rows, coeffs):
    A = [[F(x) for x in r] for r in rows]
    if any(all(A[j][v] == 0 for j in range(len(A))) for v in range(3)):
        return   # some variable in no access: unbounded
    c = [F(1)] * 3
    val, _, w0 = max_le_one(c, A)
    cj = [F(x) for x in coeffs[:len(A)]]
    w, mu = best_dual(A, [], c, cj, val, w0, [])
    assert feasible(w, mu, A, [], c, val)
    assert log_constant(w, cj, val) <= log_constant(w0, cj, val) + 1e-12
