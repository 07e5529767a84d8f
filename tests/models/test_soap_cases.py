"""Max cases of the bounded overlap and injectivity by stride (thesis section 5.5.3)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.soap import build_sdg, parse_source, subgraph_problem
from meshplan.models.soap.access import components, stride_injective
from meshplan.models.soap.cases import MAX_CASES, has_max, split_cases


def _problem(src: str, H):
    (p,) = parse_source(src)   # one function per source
    return p, subgraph_problem(build_sdg(p), H)


CONV = (Path(__file__).resolve().parents[2] / "examples" / "loops" / "conv2d_thesis.py").read_text()


def test_convolution_splits_into_four_cases_with_order_constraints():
    _, prob = _problem(CONV, ("Out",))
    assert has_max(prob)
    cases = split_cases(prob)
    assert len(cases) == 4
    labels = {c.case for c in cases}
    assert "|D^w| ≤ |D^r|, |D^h| ≤ |D^s|" in labels and "|D^r| ≤ |D^w|, |D^s| ≤ |D^h|" in labels
    for c in cases:
        assert not has_max(c) and len(c.constraints) == 2
        img = next(t for t in c.terms if t.array == "Image")
        assert all(len(d) == 1 for d in img.dims)


def test_every_tile_is_covered_by_a_case_whose_terms_equal_the_max():
    """For any tile sizes some case's constraints hold, and there its product terms equal the max terms."""
    _, prob = _problem(CONV, ("Out",))
    cases = split_cases(prob)
    full_expr, case_exprs = prob.access_expr(), {id(c): c.access_expr() for c in cases}
    for vals in itertools.product([1, 2, 5], repeat=len(prob.classes)):
        D = {prob.symbols[c]: sp.Integer(v) for c, v in zip(prob.classes, vals)}
        Dn = dict(zip(prob.classes, vals))
        full = full_expr.xreplace(D)  # exact, like subs, and ten times faster on these expressions
        ok = [c for c in cases if all(sp.Mul(*[sp.Integer(Dn[v]) ** e for v, e in g]) <= 1
                                      for g in c.constraints)]
        assert ok
        for c in ok:
            assert case_exprs[id(c)].xreplace(D) == full


def test_union_cases_order_the_parts():
    _, prob = _problem("""
def outer(N, M):
    for i in range(N):
        for j in range(M):
            for k in range(N):
                C[i, j] += x[i, k] * x[j, k]
""", ("C",))
    cases = split_cases(prob)
    assert len(cases) == 2
    assert {c.case for c in cases} == {"|D^j| ≤ |D^i|", "|D^i| ≤ |D^j|"}


def test_past_max_cases_the_remaining_maxima_take_their_first_argument_and_say_so():
    idx = ", ".join(f"i{n} + j{n}" for n in range(7))          # 2^7 = 128 > MAX_CASES
    loops = ""
    depth = 1
    for m in range(7):
        for v in ("i", "j"):
            loops += "    " * depth + f"for {v}{m} in range(N):\n"
            depth += 1
    src = f"def wide(N):\n{loops}{'    ' * depth}y[i0] += x[{idx}]\n"
    _, prob = _problem(src, ("y",))
    cases = split_cases(prob)
    assert len(cases) <= MAX_CASES
    assert all(any("first argument" in n for n in c.notes) for c in cases)


@pytest.mark.parametrize("expr,ranges,expected", [
    ("3 * w + r", {"r": 3}, True),       # σ = |range(r)|: the thesis's σ_w ≥ |D^r|
    ("2 * w + r", {"r": 3}, False),      # overlapping windows
    ("w + r", {"r": 1}, True),           # r takes one value
    ("9 * a + 3 * b + c", {"b": 3, "c": 3}, True),
    ("9 * a + 3 * b + c", {"b": 4, "c": 3}, False),
    ("3 * w + r", {}, False),            # r over a parameter: not provable
])
def test_stride_injectivity_by_mixed_radix(expr, ranges, expected):
    names = sorted({v for v in ("a", "b", "c", "r", "w") if v in expr.replace("* ", "")})
    loops, depth = "", 1
    for v in names:
        bound = str(ranges[v]) if v in ranges else "N"
        loops += "    " * depth + f"for {v} in range({bound}):\n"
        depth += 1
    src = f"def f(N):\n{loops}{'    ' * depth}y[0] += x[{expr}]\n"
    (p,) = parse_source(src)
    st_ = p.statements[0]
    read = next(c for c in components(p, st_, 0) if c.array == "x")
    assert read.single == expected          # split into one dimension per variable iff injective
    from meshplan.models.soap.access import _decompose
    assert stride_injective(_decompose(st_.inputs[-1].index[0], set(st_.vars), st_, st_.inputs[-1])[0],
                            st_) == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 5))
def test_stride_injective_agrees_with_enumeration(sigma, span, nw):
    """The mixed-radix test never claims injectivity that enumeration refutes."""
    src = f"def f(N):\n    for w in range({nw}):\n        for r in range({span}):\n            y[0] += x[{sigma} * w + r]\n"
    (p,) = parse_source(src)
    st_ = p.statements[0]
    from meshplan.models.soap.access import _decompose
    dim = _decompose(st_.inputs[-1].index[0], set(st_.vars), st_, st_.inputs[-1])[0]
    values = [sigma * w + r for w in range(nw) for r in range(span)]
    if stride_injective(dim, st_):
        assert len(set(values)) == len(values)
