"""The triangular pair with coinciding rows (models/soap/coincide.py; thesis section 4.6.2; Beaumont,
Eyraud-Dubois, Langou and Vérité, "I/O-Optimal Algorithms for Symmetric Linear Algebra Kernels", SPAA 2022).

The pair term rests on one counting fact: the ``P`` pairs ``(i, j)``, ``j ≤ i``, of a tile's row sets ``I``
and ``J`` touch at least ``P/|I| + (|I| − 1)/2`` rows of ``U = I ∪ J``.  It is checked here by brute force
on random row sets, then the bounds it gives are checked against counted schedules: the triangle-block
schedules of syrk and covariance (tests/solvers/test_soap_counter_schedules.py) and the program order of
syrk, syr2k, cholesky and covariance, replayed exactly through the LRU memory.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from meshplan.models.soap import parse_file, parse_source
from meshplan.models.soap.coincide import coinciding_pairs
from meshplan.models.soap.schedules import best_schedule
from meshplan.models.soap.sdg import build_sdg, subgraph_problem
from meshplan.solvers.soap.bound import analyze

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


@functools.lru_cache(maxsize=None)
def _program(kernel: str):
    (prog,) = parse_file(str(EX / f"{kernel}.py"))
    return prog


@functools.lru_cache(maxsize=None)
def _bound(kernel: str):
    """The bound of an example (analyzed once per kernel for this module's tests)."""
    return analyze(_program(kernel))


def test_the_pairs_of_two_row_sets_touch_at_least_the_counted_rows():
    rng = np.random.default_rng(29)
    for _ in range(3000):
        n = int(rng.integers(1, 12))
        I = set(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        J = set(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        P = sum(1 for i in I for j in J if j <= i)
        strict = sum(1 for i in I for j in J if j < i)
        U = len(I | J)
        assert U >= P / len(I) + (len(I) - 1) / 2          # j ≤ i (the diagonal: half a row less)
        assert U >= strict / len(I) + (len(I) + 1) / 2     # j < i
        # the model point D^i = |I|, D^j = P/|I| is a box of P pairs inside I × J
        assert P / len(I) <= len(J)


def test_coinciding_rows_reach_the_count_and_disjoint_rows_the_two_arrays():
    for n in range(1, 9):
        P = n * (n - 1) // 2                                  # strict pairs of one set of rows
        assert n == P / n + (n + 1) / 2                     # the triangle block: the count is exact
        low, high = set(range(n)), set(range(n, 2 * n))      # I above J: all n² pairs, 2n rows
        assert len(low | high) == n * n / n + n             # |J| + |I|: the two arrays of section 4.6.2


def _terms(kernel: str, arrays):
    sdg = build_sdg(_program(kernel))
    return subgraph_problem(sdg, tuple(arrays)).terms


def test_the_pair_statements_get_a_pair_term_and_lu_keeps_its_two_arrays():
    syrk = [t for t in _terms("syrk", ["C"]) if t.array == "A"]
    assert [t.kind for t in syrk] == ["pair"]
    assert {d for part in syrk[0].parts for d in part} == {("i",), ("j_2",), ("k",)}
    chol = [t for t in _terms("cholesky", ["L"]) if t.kind == "pair"]
    assert len(chol) == 1 and chol[0].parts[1] == (("i_2",), ("k",))   # the column scaling keeps i_2
    # covariance's pair meets the mean's data[i, j] in one union; the cov group (no tile variable shared with
    # the mean's) reads the pair alone and gets it as a pair term (solvers/soap/groups.py)
    from meshplan.solvers.soap.groups import independent_groups
    problem = subgraph_problem(build_sdg(_program("covariance")), ("mean", "cov"))
    (union,) = [t for t in problem.terms if t.array == "data"]
    assert union.kind == "union" and union.coincide
    assert sorted(t.kind for g in independent_groups(problem) for t in g.terms if t.array == "data") == ["input", "pair"]
    # lu's A[i, j] (the update's output) and column A[i, k] are two versions, not one set of rows read twice
    assert all(t.kind != "pair" for t in _terms("lu", ["A"]))
    assert all(t.kind != "pair" for t in _terms("gemm", ["C"]))


def test_the_pair_is_left_as_two_arrays_when_no_class_can_be_shrunk():
    # C[i, j2] += B[i, j2] over a full row joins j's class (one chain of C) without a triangle: a box of P
    # pairs with |D^j| = P/|I| would under-count its work, so the pair stays two arrays (section 4.6.2)
    (prog,) = parse_source("""
def g(N, M):
    for i in range(N):
        for j in range(i + 1):
            for k in range(M):
                C[i, j] += A[i, k] * A[j, k]
        for j2 in range(N):
            C[i, j2] += B[i, j2]
""")
    problem = subgraph_problem(build_sdg(prog), ("C",))
    assert [t.kind for t in problem.terms if t.array == "A"] == ["input", "input"]
    assert coinciding_pairs(problem, prog) is problem


@pytest.mark.parametrize("kernel, sizes, memory", [
    ("syrk", {"N": 24, "M": 16}, 64), ("syrk", {"N": 32, "M": 8}, 128),
    ("syr2k", {"N": 24, "M": 16}, 64), ("cholesky", {"N": 24}, 32), ("cholesky", {"N": 40}, 128),
    ("covariance", {"M": 16, "N": 16}, 32)])
def test_the_bound_is_at_most_the_counted_io_of_the_loop_order(kernel, sizes, memory):
    prog = _program(kernel)
    res = _bound(kernel)
    order = best_schedule(prog, sizes, memory)          # no tiles given: the program's own loop order
    bound = float(res.evaluate({**sizes, "S": memory}))
    assert 0 < bound <= order.loop_order.total


def test_the_leading_terms_are_beaumont_et_al_s():
    N, M, S = sp.symbols("N M S", positive=True)
    kernels = ("syrk", "syr2k", "cholesky", "covariance", "correlation")
    got = {k: _bound(k).leading for k in kernels}
    want = {"syrk": M * N ** 2 / (sp.sqrt(2) * sp.sqrt(S)), "syr2k": sp.sqrt(2) * M * N ** 2 / sp.sqrt(S),
            "cholesky": N ** 3 / (3 * sp.sqrt(2) * sp.sqrt(S)),
            "covariance": M ** 2 * N / (sp.sqrt(2) * sp.sqrt(S)), "correlation": M ** 2 * N / (sp.sqrt(2) * sp.sqrt(S))}
    for k, e in want.items():
        g = got[k].subs({s: sp.Symbol(s.name, positive=True) for s in got[k].free_symbols})
        assert sp.simplify(g - e) == 0, k


def test_syrks_chi_bounds_the_work_of_real_tiles_with_any_row_sets():
    """χ(X) of syrk's ``{C}`` (the pair term) against real subcomputations: row sets ``I``, ``J`` (any sets,
    coinciding or not) and ``K`` columns do ``P·K`` updates and ``P`` scalings on ``P`` pairs, and touch
    ``|I ∪ J|·K`` elements of ``A`` and the ``P`` elements of ``C`` (one older version each).  The two-array
    χ ``(X/3)^{3/2} + X`` is below the work of coinciding tiles: it is not an upper bound."""
    from meshplan.solvers.soap.chi import X, intensity

    (prog,) = parse_file(str(EX / "syrk.py"))
    chi = sp.lambdify([X], intensity(subgraph_problem(build_sdg(prog), ("C",))).chi)
    rng = np.random.default_rng(7)
    beaten = 0
    for _ in range(2000):
        n = int(rng.integers(1, 40))
        I = set(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        J = I if rng.random() < 0.3 else set(rng.choice(n, int(rng.integers(1, n + 1)), replace=False).tolist())
        K = int(rng.integers(1, 60))
        P = sum(1 for i in I for j in J if j <= i)
        access, work = len(I | J) * K + P, P * K + P
        assert work <= chi(access) * (1 + 1e-12), (sorted(I), sorted(J), K)
        beaten += work > (access / 3) ** 1.5 + access
    assert beaten > 0
