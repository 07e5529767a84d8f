"""Thesis Table 5.2 leading terms that the SOAP method of chapter 5 proves (joint χ of fused
subgraphs, pyramids for stencils, lower-order overlap as disjoint, the trivial floor)."""

from __future__ import annotations

import functools
from pathlib import Path

import sympy as sp

from meshplan.models.soap import parse_file, parse_source, sym
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import S

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"

MLP3 = """
def mlp3(NB, NI, NH, NO):
    for b in range(NB):
        for h in range(NH):
            Y1[b, h] = bias1[h]
            for i in range(NI):
                Y1[b, h] += X[b, i] * W1[h, i]
            Z1[b, h] = max(Y1[b, h], 0.0)
    for b in range(NB):
        for h in range(NH):
            Y2[b, h] = bias2[h]
            for i in range(NH):
                Y2[b, h] += Z1[b, i] * W2[h, i]
            Z2[b, h] = max(Y2[b, h], 0.0)
    for b in range(NB):
        for o in range(NO):
            Y3[b, o] = bias3[o]
            for i in range(NH):
                Y3[b, o] += Z2[b, i] * W3[o, i]
"""


@functools.lru_cache(maxsize=None)
def example(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return analyze(p)


def same_size(expr, **sizes):
    """The leading term with every size parameter set to the given symbols (N, T)."""
    return sp.simplify(expr.subs({sym(k): v for k, v in sizes.items()}))


N, T = sp.Symbol("N", positive=True), sp.Symbol("T", positive=True)


def test_2mm_joint_chi_gives_4N3_over_sqrtS():
    lead = same_size(example("two_mm").leading, NI=N, NJ=N, NK=N, NL=N)
    assert sp.simplify(lead - 4 * N ** 3 / sp.sqrt(S)) == 0


def test_3mm_joint_chi_gives_6N3_over_sqrtS():
    lead = same_size(example("three_mm").leading, NI=N, NJ=N, NK=N, NL=N, NM=N)
    assert sp.simplify(lead - 6 * N ** 3 / sp.sqrt(S)) == 0


def test_three_layer_mlp_is_the_sum_of_its_three_products():
    (p,) = parse_source(MLP3)
    NB, NI, NH, NO = (sym(v) for v in ("NB", "NI", "NH", "NO"))
    lead = analyze(p).leading
    assert sp.simplify(lead - 2 * NB * NH * (NI + NH + NO) / sp.sqrt(S)) == 0


def test_fused_subgraph_chi_is_joint_not_a_sum_of_separate_maxima():
    r = example("two_mm")
    fused = next(it for it in r.subgraphs if len(it.problem.arrays) == 2)
    X = sp.Symbol("X", positive=True)
    lead = sp.limit(fused.chi / X ** sp.Rational(3, 2), X, sp.oo)
    assert sp.simplify(lead - sp.Rational(1, 3) ** sp.Rational(3, 2)) == 0   # one MMM's (X/3)^(3/2)


FLOYD_WARSHALL = """
def floyd_warshall(N):
    for k in range(N):
        for i in range(N):
            for j in range(N):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])
"""


def test_jacobi_1d_pyramid_gives_2NT_over_S_not_the_rectangle_4NT_over_S():
    r = example("jacobi_1d")
    lead = same_size(r.leading, N=N, TSTEPS=T)
    assert sp.simplify(lead - 2 * N * T / S) == 0
    fused = next(it for it in r.subgraphs if len(it.problem.arrays) == 2)
    assert fused.method == "pyramid"


def test_floyd_warshall_overlap_on_the_k_planes_is_disjoint_as_for_lu():
    (p,) = parse_source(FLOYD_WARSHALL)
    r = analyze(p)
    assert sp.simplify(r.leading - 2 * sym("N") ** 3 / sp.sqrt(S)) == 0
    (it,) = r.subgraphs
    assert any("lower-order set {i = k, k = j}" in n for n in it.problem.notes)


def test_reset_scalars_are_split_per_reset_chain():
    from meshplan.models.soap.scalars import split_scalars
    (p,) = parse_file(str(EX / "ludcmp.py")) if (EX / "ludcmp.py").exists() else parse_source("""
def two(N):
    for i in range(N):
        w = A[i, 0]
        for j in range(N):
            w -= A[i, j]
        x[i] = w
    for i in range(N):
        w = y[i]
        z[i] = w
""")
    q, notes = split_scalars(p)
    ws = {a for a in q.arrays if a.startswith("w__")}
    assert len(ws) >= 2 and "w" not in q.arrays and notes


def test_the_trivial_floor_lifts_softmax_like_programs():
    (p,) = parse_source("""
def rowscale(N, M):
    for i in range(N):
        s[i] = 0.0
        for j in range(M):
            s[i] += X[i, j]
        for j in range(M):
            Y[i, j] = X[i, j] / s[i]
""")
    r = analyze(p)
    Nn, M = sym("N"), sym("M")
    assert sp.simplify(r.trivial - 2 * Nn * M) == 0       # X read once, Y written once
    assert sp.simplify(r.leading - 2 * Nn * M) == 0
