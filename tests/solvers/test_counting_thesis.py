"""Every example of thesis sections 2.1-2.5 (iteration counting), re-derived and checked by execution."""

from __future__ import annotations

import math

import pytest
import sympy as sp

from meshplan.solvers.counting.closed import closed_form, counting_function
from meshplan.models.counting.problem import CountProblem
from meshplan.solvers.counting.count import count_problem


def count_iterations(program, **kw):
    """The solver's counts of a program's function (or functions): ``count_problem`` of its problem."""
    res = count_problem(CountProblem.of(program, **{k: v for k, v in kw.items() if k != "bounds"},
                                        bounds=kw.get("bounds")))
    return res[0] if len(res) == 1 else res
from meshplan.solvers.counting.sums import Bnd, sum_bnd

n, p, m, s = (sp.Symbol(x, integer=True, positive=True) for x in ("n", "p", "m", "s"))


def agree(res, grid):
    """Symbolic counts == executed counts (exact) or bracket them (bounds) on every point of ``grid``."""
    for values in grid:
        rep = res.verify(values)
        assert rep["ok"], rep


SORT = """
def sorting_skeleton(n, p):
    x = 0
    while x < n / p:
        y = 1
        while y < n:
            S1()
            y *= 2
        x += 1
"""


def test_example_I_sorting_skeleton():
    r = count_iterations(SORT)
    N = r.total.value
    assert r.exact
    assert sp.simplify(N - sp.ceiling(n / p) * sp.ceiling(sp.log(n, 2))) == 0
    for nn, pp in [(1024, 16), (2 ** 12, 64), (256, 1)]:  # p | n, n a power of 2: N = n/p log2 n
        assert N.subs({n: nn, p: pp}) == nn // pp * int(math.log2(nn))
    mt = r.metrics
    assert sp.simplify(mt["work"] - n * sp.ceiling(sp.log(n, 2))) == 0
    assert sp.simplify(mt["depth"] - sp.ceiling(sp.log(n, 2))) == 0
    assert mt["efficiency"].subs({n: 4096, p: 32}) == 1  # work-conserving: E_p = 1
    assert mt["available_parallelism"] == n
    agree(r, [{"n": 64, "p": 4}, {"n": 100, "p": 7}, {"n": 1, "p": 3}])


FLAT = """
def flat_reduction(n, p, id):
    for i in range(id * n // p, min((id + 1) * n // p, n)):
        s[id] += a[i]
    for i in range(p):
        sum = sum + s[i]
"""

TREE = """
def tree_reduction(n, p, id):
    for i in range(id * n // p, min((id + 1) * n // p, n)):
        s[id] += a[i]
    i = 1
    while i < p:
        combine_partial_sums(s)
        i *= 2
"""


def test_example_II_flat_reduction():
    r = count_iterations(FLAT)
    assert r.exact and r.flow.rank == "id"
    assert sp.simplify(r.total.value - (sp.ceiling(n / p) + p)) == 0
    mt = r.metrics
    assert mt["work"] == n + 1
    assert mt["depth"] == sp.oo
    assert sp.simplify(mt["efficiency"] - (n + 1) / (p * sp.ceiling(n / p) + p ** 2)) == 0
    agree(r, [{"n": 100, "p": 7}, {"n": 64, "p": 8}, {"n": 5, "p": 9}])


def test_example_II_tree_reduction():
    r = count_iterations(TREE)
    assert r.exact
    assert sp.simplify(r.total.value - (sp.ceiling(n / p) + sp.ceiling(sp.log(p, 2)))) == 0
    mt = r.metrics
    assert mt["work"] == n
    assert mt["depth"] == sp.oo  # not work-conserving
    assert sp.simplify(mt["efficiency"] - n / (p * sp.ceiling(n / p) + p * sp.ceiling(sp.log(p, 2)))) == 0
    assert mt["available_parallelism"] == n
    agree(r, [{"n": 100, "p": 7}, {"n": 1000, "p": 16}, {"n": 3, "p": 5}])


def test_section_2_2_doubling_loop_is_log():
    r = count_iterations("def f(n):\n    x = 1\n    while x < n:\n        S()\n        x = 2 * x\n")
    assert sp.simplify(r.total.value - sp.ceiling(sp.log(n, 2))) == 0
    agree(r, [{"n": k} for k in (1, 2, 3, 8, 9, 1000)])


MULTIPATH = """
def multipath(n, p, m):
    x = 1
    while x < n / p + 1:
        y = x
        while y < m:
            S1()
            y = 2 * y
        z = x
        while z < m:
            S2()
            z = z + x
        x = 2 * x
"""


def test_listing_2_2_multipath_loop():
    r = count_iterations(MULTIPATH)
    s1, s2 = r.statements
    assert s1.count.value is not None  # S1: exact (sum of a split Max)
    assert s2.count.value is None  # S2: ceil(m / 2^i) summed -> BSA bounds
    grid = [{"n": nn, "p": pp, "m": mm} for nn in (7, 64, 100) for pp in (1, 3) for mm in (1, 5, 64, 100)]
    agree(r, grid)
    # the thesis' bounds on S2 (section 2.2): ours are at least as tight where n/p + 1 is a power of two
    lo, hi = s2.count.lo, s2.count.hi
    for nn, mm in [(7, 100), (31, 1000)]:
        k = nn + 1
        assert hi.subs({n: nn, p: 1, m: mm}) <= mm * (2 - sp.Rational(1, k))
        assert lo.subs({n: nn, p: 1, m: mm}) >= 2 * mm * (1 - sp.Rational(1, k)) - math.log2(k) - 1e-9
    # depth of S2: 0 <= D <= m in the thesis; ours m - 1 <= D <= m
    b = r.metrics["bounds"]["depth"]
    assert b[1].subs(m, 50) <= 50 + sp.ceiling(sp.log(50, 2)) and b[0].subs(m, 50) >= 49


def test_section_2_4_1_affine_representation():
    d = sp.Symbol("d", integer=True, nonnegative=True)
    y0, z0 = sp.symbols("y0 z0", integer=True)
    x = closed_form(sp.eye(2), sp.Matrix([2, -1]), sp.Matrix([y0, z0]), d)
    assert x == sp.Matrix([y0 + 2 * d, z0 - d])
    nfun = counting_function(x[1] - x[0], d)  # guard y < z: slack z - y
    assert nfun == sp.Max(0, sp.ceiling((z0 - y0) / 3))
    r = count_iterations("def f(y0, z0):\n    y = y0\n    z = z0\n    while y < z:\n        S()\n"
                         "        y += 2\n        z -= 1\n")
    agree(r, [{"y0": a, "z0": b} for a in (1, 4, 9) for b in (1, 5, 30)])


NESTED = """
def nested(y0, z0, m):
    y = y0
    z = z0
    while y < m:
        z = y
        while z < m:
            S()
            z += 1
        y *= 2
"""


def test_listing_2_3_starting_conditions():
    r = count_iterations(NESTED)
    assert r.exact
    n1 = sp.Max(0, sp.ceiling(sp.log(m, 2) - sp.log(sp.Symbol("y0", integer=True, positive=True), 2)))
    y0 = sp.Symbol("y0", integer=True, positive=True)
    expect = m * n1 - y0 * (2 ** n1 - 1)  # sum_{i < n1} (m - 2^i y0)
    for vals in ({"y0": 1, "m": 8}, {"y0": 3, "m": 100}, {"y0": 5, "m": 4}):
        sub = {sp.Symbol(k, integer=True, positive=True): v for k, v in vals.items()}
        assert r.total.value.subs(sub) == expect.subs(sub)
    agree(r, [{"y0": a, "z0": 0, "m": b} for a in (1, 2, 3, 7) for b in (1, 8, 9, 100)])


BSA = """
def bsa(s):
    k = 1
    l = 2
    while k > 0:
        m = k
        while m < s:
            S()
            m += 1
        k = k + l
        l -= 1
"""


def test_section_2_4_3_bsa_example():
    i = sp.Symbol("i", integer=True, nonnegative=True)
    k0, l0 = sp.Integer(1), sp.Integer(2)
    x = closed_form(sp.Matrix([[1, 1], [0, 1]]), sp.Matrix([0, -1]), sp.Matrix([k0, l0]), i)
    assert sp.expand(x[0] - (-i ** 2 / 2 + sp.Rational(5, 2) * i + 1)) == 0  # k_{0,2}
    assert counting_function(x[0], i) == 6  # n_1 = 6
    r = count_iterations(BSA)
    assert r.exact
    for sv in (4, 5, 10, 100):
        assert r.total.value.subs(s, sv) == 6 * sv - 16  # the exact sum the thesis brackets
    agree(r, [{"s": v} for v in (1, 2, 3, 4, 7, 50)])


def test_section_2_4_3_ceiling_sum_type_1():
    i = sp.Symbol("i", integer=True, nonnegative=True)
    out = sum_bnd(Bnd.exact(sp.ceiling((i + 1) / 2)), i, Bnd.exact(n))
    for nv in range(1, 40):
        truth = sum(math.ceil((k + 1) / 2) for k in range(nv))
        assert out.lo.subs(n, nv) <= truth <= out.hi.subs(n, nv)


def test_section_2_4_3_integral_bounds_type_2():
    i = sp.Symbol("i", integer=True, nonnegative=True)
    f = (i + 1) * sp.log(i + 1) / sp.log(2)  # sum_{i=1}^{n} i log2 i has no closed form
    out = sum_bnd(Bnd.exact(f), i, Bnd.exact(n))
    assert out.value is None
    for nv in (1, 2, 10, 100, 1000):
        truth = sum(k * math.log2(k) for k in range(1, nv + 1))
        lo, hi = float(out.lo.subs(n, nv)), float(out.hi.subs(n, nv))
        assert lo - 1e-9 <= truth <= hi + 1e-9
        assert hi - lo <= float(f.subs(i, nv - 1)) + 1e-9  # tight: within one term


CG = """
def cg_rows(na, nprows):
    j = 0
    while j < na / nprows:
        sum = 0.0
        for k in range(rowstr[j], rowstr[j + 1]):
            sum = sum + a[k] * p[colidx[k]]
        w[j] = sum
        j += 1
"""


def test_section_2_5_1_non_affine_cg_loop():
    r = count_iterations(CG, procs="nprows", bounds="u1=0..na")
    na, npr = sp.Symbol("na", integer=True, positive=True), sp.Symbol("nprows", integer=True, positive=True)
    u1 = sp.Symbol("u1", integer=True, nonnegative=True)
    inner = [st for st in r.statements if "a[k]" in st.text][0]
    assert sp.simplify(inner.count.value - sp.ceiling(na / npr) * u1) == 0
    assert any("line 6" in note and "rowstr" in note and "u1" in note for note in r.notes)
    js = r.to_json({"na": 100, "nprows": 8})
    assert js["bounds"][inner.name] == {"lower": "0", "upper": "na*ceiling(na/nprows)"}
    agree(r, [{"na": 100, "nprows": 8, "u1": 5}])


def test_jordan_and_diagonalizable_updates():
    jordan = count_iterations("def f(n):\n    y = 0\n    z = 0\n    while y < n:\n        S()\n"
                              "        y += z\n        z += 1\n")
    agree(jordan, [{"n": v} for v in (1, 2, 10, 1000)])
    diag = count_iterations("def g(n, x0):\n    x = x0\n    y = 1\n    while y < n:\n"
                            "        for k in range(x):\n            S()\n        x, y = 2 * x + y, 3 * y\n")
    assert diag.exact
    agree(diag, [{"n": v, "x0": a} for v in (1, 5, 100, 3 ** 6) for a in (0, 1, 4)])


@pytest.mark.parametrize("src", [SORT, FLAT, TREE, MULTIPATH, NESTED, BSA])
def test_examples_round_through_json(src):
    js = count_iterations(src).to_json({"n": 64, "p": 4, "m": 16, "s": 9, "y0": 1, "z0": 0})
    assert set(js) >= {"iterations", "work", "depth", "efficiency", "available_parallelism", "exact", "bounds"}
    assert "total" in js["iterations"]
