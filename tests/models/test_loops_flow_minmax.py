"""The counting frontend builds ``min``/``max`` bounds without sympy's search for redundant arguments where
none can be found; the expression must be the one sympy's evaluation builds, argument for argument."""

import random

import sympy as sp

from meshplan.models.loops.flow_frontend import _min_max, parse_flow_source
from meshplan.models.loops.program import sym

n, m, i, k = (sym(s) for s in "nmik")
POOL = [sp.Integer(0), sp.Integer(3), sp.Integer(-2), n, m, i, 2 * m, n - m, m - n, n + 1, i - m, 2 * n + 2 * m,
        n + m, sp.Rational(1, 2) * n, -i, k + 4, n ** 2, sp.floor(n / 2), i * m, sp.Symbol("x", positive=True),
        sp.Min(n, m), sp.Max(i, 0)]


def test_min_max_is_the_expression_sympy_evaluates():
    rnd = random.Random(7)
    fast = 0
    for _ in range(150):
        args = [rnd.choice(POOL) for _ in range(rnd.randint(2, 4))]
        for which, cls in (("min", sp.Min), ("max", sp.Max)):
            got, want = _min_max(which, list(args)), cls(*args)
            assert sp.srepr(got) == sp.srepr(want), (which, args)
            assert got == want and hash(got) == hash(want)
            fast += isinstance(got, cls) and got is not want
    assert fast > 40  # the shortcut is taken, not only sympy's evaluation


def test_min_max_bounds_in_a_parsed_nest():
    src = ("def f(n, m):\n    for i in range(max(0, m - n), min(n, 2 * m, n + 1)):\n"
           "        for j in range(max(i, i + 1), min(n, m)):\n            A[j] += 1\n")
    (flow,) = parse_flow_source(src)
    lo, loop = flow.body[0], flow.body[1]
    assert lo.values == (sp.Max(0, m - n),)
    assert loop.guard == (sp.Min(n, 2 * m, n + 1) - i,) == (sp.Min(n, 2 * m) - i,)
    assert loop.body[0].values == (i + 1,)  # max(i, i + 1) is evaluated by sympy: i + 1
