"""Sequential code whose parameter is named like the process count: W = N(p = 1) puts p = 1 in Barvinok's
count too (its parameters are non-negative integer symbols, the process count a positive one)."""

import sympy as sp

from meshplan import count_iterations

SRC = ("def seq(n, p):\n    for i in range(n):\n        for j in range(p):\n            A[i, j] += 1\n"
       "    for k in range(p, n):\n        B[k] = 0\n")


def test_work_puts_p_one_in_barvinoks_count():
    js = count_iterations(SRC).to_json()
    assert set(js["methods"].values()) == {"barvinok"}
    n, p = sp.symbols("n p")
    N, W = (sp.sympify(t, locals={"n": n, "p": p}) for t in (js["iterations"]["total"], js["work"]))
    assert p not in W.free_symbols
    for nv in range(0, 7):
        assert W.subs(n, nv) == N.subs({n: nv, p: 1}), nv
    E = sp.sympify(js["efficiency"], locals={"n": n, "p": p})
    for nv, pv in ((5, 2), (6, 3), (7, 1)):
        assert E.subs({n: nv, p: pv}) == W.subs(n, nv) / (pv * N.subs({n: nv, p: pv}))
