"""Screening (solvers/soap/screen.py): a cheap upper bound on ρ that skips subgraphs which lead no array.

Two claims are checked against the full derivation (``analyze(..., screen=False)``): the screening
bound, with linear domination's ``z`` (``Screen.refined``) or without, is ≥ the derived ρ of every
subgraph at every sampled S (so a screened subgraph's reported ρ, either of the two, is a valid
intensity bound), and the per-array maxima, the bound and its leading term are the same
with and without screening — on the examples and on random programs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.core.errors import ModelError
from meshplan.models.soap import parse_file, parse_source
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import SAMPLE_S
from meshplan.solvers.soap.screen import screen

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
#: examples with several subgraphs, fast enough to derive in full
MULTI = ["atax", "two_mm", "three_mm", "softmax", "gemver", "mlp", "jacobi_1d", "fdtd_2d", "gramschmidt", "symm"]
#: the ones where screening matters most (every subgraph derived takes seconds)
HEAVY = ["durbin", "correlation", "covariance", "adi", "mlp3", "ludcmp", "deriche"]


def _program(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return p


def _summary(r):
    return (str(r.bound), str(r.leading), [(a.array, str(a.rho), a.best) for a in r.arrays], r.notes)


def _check(p):
    full = analyze(p, screen=False)
    quick = analyze(p)
    assert _summary(quick) == _summary(full)
    by_h = {it.problem.arrays: it for it in full.subgraphs}
    assert [it.problem.arrays for it in quick.subgraphs] == list(by_h)
    for it in quick.subgraphs:
        ref = by_h[it.problem.arrays]
        q = screen(ref.problem)
        bounds = []             # every stage: the cheap bound, with linear domination, the relaxation
        while q is not None:
            bounds.append(q)
            q = q.refined()
        for b in bounds:        # every stage of the screening bound is above the derived ρ
            for s, v in zip(SAMPLE_S, b.values):
                assert v >= ref.rho_at(s) * (1 - 1e-9), (it.problem.arrays, s, v, ref.rho_at(s))
        for coarse, finer in zip(bounds, bounds[1:]):   # and each stage only lowers it
            assert all(f <= c * (1 + 1e-12) for f, c in zip(finer.values, coarse.values))
        if it.method == "screened":     # a screened row shows one of the stages
            shown = [it.rho_at(s) for s in SAMPLE_S]
            assert any(shown == pytest.approx(list(b.values), rel=1e-9) for b in bounds), (it.problem.arrays, shown)
        else:                   # a derived subgraph is exactly the full derivation's
            assert (it.method, it.rho, it.chi) == (ref.method, ref.rho, ref.chi)
    return quick


@pytest.mark.parametrize("name", MULTI)
def test_screening_keeps_the_bound_and_bounds_every_subgraph(name):
    _check(_program(name))


@pytest.mark.slow       # derives every subgraph of the large programs (about 10 s each)
@pytest.mark.parametrize("name", HEAVY)
def test_screening_keeps_the_bound_of_the_large_examples(name):
    r = _check(_program(name))
    assert sum(it.method == "screened" for it in r.subgraphs) >= len(r.subgraphs) // 2


@pytest.mark.parametrize("name, count", [("ludcmp", 7), ("deriche", 38)])
def test_large_examples_derive_only_the_leading_candidates(name, count):
    """ludcmp (its scalar chains held in A, y and x: 7 subgraphs; 112 while they were arrays w__1..w__4)
    and deriche (38 since its filter-state copies are forwarded to their sources; 335 before): at most
    about half may lead an array; the rest are screened."""
    r = analyze(_program(name))
    screened = [it for it in r.subgraphs if it.method == "screened"]
    assert len(r.subgraphs) >= count and len(r.subgraphs) // 2 <= len(screened) < len(r.subgraphs)
    assert all("not derived" in it.notes[-1] for it in screened)
    assert not any(a.best == it.problem.arrays for a in r.arrays for it in screened)


def test_a_screened_subgraph_is_derived_on_request():
    r = analyze(_program("atax"))
    it = next(it for it in r.subgraphs if it.method == "screened")
    derived = r.intensity_of(it.problem.arrays)
    assert derived.method != "screened" and derived.rho_at(2.0 ** 10) <= it.rho_at(2.0 ** 10) * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_programs_screened_and_derived_agree(soap_programs, data):
    src = data.draw(soap_programs)
    (p,) = parse_source(src)
    try:
        _check(p)
    except ModelError:
        pass


def test_statements_of_constant_count_in_a_fused_subgraph():
    """Two statements whose counts are constants (exponent W = 0) in one fused subgraph: their joint bound is the
    sum of their constants (no budget to share); the joint relaxation divided by W and gave NaN (a program
    hypothesis drew)."""
    src = ("def gen(N, M):\n    for i in range(0, N):\n        A[i] = A[i + 1] * Y[i + -1, i] * A[i + -1]\n"
           "    for i in range(0, N):\n        for j in range(0, N):\n            A[i] = X[i + 1]\n"
           "    for i in range(0, N):\n        for j in range(0, N):\n            A[i] = Y[i + 1, j + 1] * X[j + -1]\n")
    (p,) = parse_source(src)
    _check(p)


def test_a_dual_with_huge_denominators_gives_a_rational_just_above_the_am_gm_constant():
    """A degenerate exponent LP can give dual weights like 56321449/102307741: sympy then factored numbers of
    millions of digits for hours (a program hypothesis drew).  Beyond small roots the constant is a rational
    just above the value, so χ ≤ C·X^W stays an upper bound; small ones stay exact."""
    import math
    from fractions import Fraction as F

    from meshplan.solvers.soap.relax import am_gm_constant

    w = ((F(56321449, 102307741), F(1, 2)), (F(45986292, 102307741), F(1, 2)),
         (F(37547339, 204615482), F(1, 2)), (F(45986292, 102307741), F(1, 1)), (F(75095559, 204615482), F(1, 1)))
    exact = math.exp(sum(float(a) * math.log(float(a / (2 * c))) for a, c in w))
    c = am_gm_constant(w, F(2))
    assert exact <= float(c) <= exact * (1 + 1e-9)
    assert str(am_gm_constant(((F(1, 2), F(1)), (F(1, 2), F(1))), F(1))) == "1/2"  # (1/2)^(1/2)·(1/2)^(1/2)
    src = ("def gen(N, M):\n    for i in range(0, N):\n        for j in range(i + 1, M):\n            A[j] = C[i]\n"
           "    for i in range(1, N):\n        for j in range(i + 1, M):\n            for k in range(j + 1, j + 1):\n"
           "                A[i] += A[i + -1] * B[i + 1, j] * A[j]\n    for i in range(0, M):\n"
           "        for j in range(i + 1, N):\n            for k in range(1, i + 1):\n"
           "                B[k, i] = X[j, i + 1] * C[i + -1] * B[k + 1, j]\n")
    (p,) = parse_source(src)
    _check(p)
