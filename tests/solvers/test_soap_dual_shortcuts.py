"""The face search's shortcuts (a point face, ``w0`` already least on the face, the complementary-slackness
floor) return exactly what the full search returns: every optimal-face LP, the descent and the snapping.

The reference below is the full search of :mod:`meshplan.solvers.soap.dual` without any shortcut: it
solves both LPs per access monomial, always descends and snaps."""

from fractions import Fraction as F

from hypothesis import given, settings, strategies as st

from meshplan.solvers.soap import dual
from meshplan.solvers.soap.lp import max_le_one


def _full_vertices(A, G, c, W, w0, mu0):
    m = len(A)
    out = [(list(w0), list(mu0))]
    rows = dual._face_rows(A, G)
    for j in range(m):
        for d in ([F(int(i == j)) for i in range(m)], [F(int(i != j)) for i in range(m)]):
            p = dual._face_min(A, G, c, W, d, rows)
            if p is not None and all(p[0] != q[0] for q in out):
                out.append((list(p[0]), list(p[1])))
    return out


def _full_best_dual(A, G, c, coeffs, W, w0, mu0):
    if len(A) <= 1 or len(A) > dual.MAX_FACE_ROWS:
        return w0, mu0
    verts = _full_vertices(A, G, c, W, w0, mu0)
    if len(verts) == 1:
        return w0, mu0
    lam, cur = dual._descend([[float(v) for v in w] for w, _ in verts], [float(v) for v in coeffs], float(W))
    best = (dual.log_constant(w0, coeffs, W), w0, mu0)
    if not cur < best[0] - 1e-9:
        return w0, mu0
    K = len(verts)
    for den in dual._DENOMINATORS:
        lr = [max(F(0), F(float(x)).limit_denominator(den)) for x in lam]
        total = sum(lr, F(0))
        if total == 0:
            continue
        lr = [x / total for x in lr]
        w = [sum((lr[i] * verts[i][0][j] for i in range(K)), F(0)) for j in range(len(A))]
        mu = [sum((lr[i] * verts[i][1][k] for i in range(K)), F(0)) for k in range(len(G))]
        if not dual.feasible(w, mu, A, G, c, W):
            continue
        val = dual.log_constant(w, coeffs, W)
        if val < best[0] - 1e-12:
            best = (val, w, mu)
            if val <= cur + 1e-9:
                break
    return best[1], best[2]


def _feasible_reference(w, mu, A, G, c, W) -> bool:
    if any(x < 0 for x in w) or any(x < 0 for x in mu) or sum(w, F(0)) != W:
        return False
    return all(sum((x * row[v] for x, row in list(zip(w, A)) + list(zip(mu, G))), F(0)) >= c[v]
               for v in range(len(c)))


_LP = st.integers(2, 4).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n, max_size=n),                                  # work exponents
    st.lists(st.lists(st.integers(0, 2), min_size=n, max_size=n), min_size=2, max_size=6),  # access monomials
    st.lists(st.lists(st.integers(-1, 1), min_size=n, max_size=n), max_size=2),            # order rows
    st.lists(st.sampled_from([F(1), F(2), F(3), F(1, 2), F(5, 4)]), min_size=6, max_size=6)))


@settings(max_examples=300, deadline=None)
@given(_LP)
def test_best_dual_equals_the_full_face_search(lp):
    a, rows, orders, coeffs = lp
    c = [F(v) for v in a]
    A = [[F(v) for v in r] for r in rows]
    G = [[F(v) for v in r] for r in orders]
    res = max_le_one(c, A + G, [F(1)] * len(A) + [F(0)] * len(G))
    if res is None:
        return
    W, x, y = res
    cj = coeffs[:len(A)]
    w0, mu0 = y[:len(A)], y[len(A):]
    ref = _full_best_dual(A, G, c, cj, W, w0, mu0)
    assert dual.best_dual(A, G, c, cj, W, w0, mu0) == ref
    if not dual.nondegenerate(A, G, x):          # with x the floor shortcut applies too
        assert dual.best_dual(A, G, c, cj, W, w0, mu0, x) == ref
    assert dual.face_vertices(A, G, c, W, w0, mu0)[0] == (list(w0), list(mu0))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([F(0), F(1), F(1, 2), F(2, 3), F(3)]), min_size=2, max_size=4),
       st.lists(st.sampled_from([F(0), F(1, 3), F(1, 2), F(2)]), max_size=2),
       st.lists(st.lists(st.sampled_from([F(0), F(1), F(-1), F(1, 2), F(3, 2)]), min_size=3, max_size=3),
                min_size=4, max_size=4),
       st.lists(st.sampled_from([F(0), F(1), F(1, 2), F(2)]), min_size=3, max_size=3))
def test_feasible_agrees_with_the_fraction_check(w, mu, rows, c):
    A, G = rows[:len(w)], rows[len(w):len(w) + len(mu)]
    mu = mu[:len(G)]
    for W in (sum(w, F(0)), sum(w, F(0)) + 1):
        assert dual.feasible(w, mu, A, G, c, W) == _feasible_reference(w, mu, A, G, c, W)


def test_linear_dominations_hall_value_is_the_lps_optimum():
    """Linear domination's z read off the Hall conditions (``max_T |T|/c(N(T))``) equals the exact simplex
    optimum of its LP on random instances (the optimal value is unique, so the bound is unchanged)."""
    import random
    from fractions import Fraction

    from meshplan.solvers.soap.domination import HALL_MAX_STATEMENTS, _hall
    from meshplan.solvers.soap.lp import max_le_one

    rng = random.Random(7)
    for k in range(300):     # up to as many statements as the Hall conditions are read for
        n, m = rng.randint(1, 5 if k % 3 else HALL_MAX_STATEMENTS), rng.randint(1, 6 if k % 3 else 9)
        reach = [frozenset(rng.sample(range(m), rng.randint(1, m))) for _ in range(n)]
        c = [Fraction(rng.randint(1, 6), rng.choice([1, 2, 3])) for _ in range(m)]
        pairs = [(s, j) for s in range(n) for j in sorted(reach[s])]
        rows = [[Fraction(int(pj == j)) for _, pj in pairs] + [Fraction(0)] for j in range(m)]
        rows += [[Fraction(-int(ps == s)) for ps, _ in pairs] + [Fraction(1)] for s in range(n)]
        res = max_le_one([Fraction(0)] * len(pairs) + [Fraction(1)], rows, c + [Fraction(0)] * n)
        assert _hall(reach, c) == 1 / res[0]
