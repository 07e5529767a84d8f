"""The exhaustive red–blue pebbling check (solvers/soap/pebbling.py): the SOAP bound is at most the optimal
I/O of every example kernel whose CDAG is small enough to search, and the optimum is at most the I/O of the
program's own loop order replayed through an LRU memory of one word less (an independent upper bound: the
replay updates an element in place, where the pebble game holds the old and the new value at once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.models.core.errors import ModelError
from meshplan.models.soap import parse_file, parse_source
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.pebbling import cdag, optimal_io

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
#: the largest CDAG searched here (a few seconds at most)
MAX_VERTICES = 13


def _need(g) -> int:
    return max([bin(p).count("1") + 1 for p in g.preds] or [1])


def test_hand_counted_plays():
    (p,) = parse_source("def f(N):\n    for i in range(N):\n        y[i] = a[i] * b[i]\n")
    assert optimal_io(cdag(p, {"N": 1}), 3) == 3            # load a, b; store y
    assert optimal_io(cdag(p, {"N": 2}), 3) == 6
    (p,) = parse_source("def f(N):\n    for i in range(N):\n        s[0] += a[i]\n")
    assert optimal_io(cdag(p, {"N": 3}), 3) == 5            # load s, a0, a1, a2; store s
    with pytest.raises(ModelError, match="cannot hold"):      # s, a[i] and the new s
        optimal_io(cdag(p, {"N": 3}), 2)


def _cases():
    out = []
    for f in sorted(EX.glob("*.py")):
        (p,) = parse_file(str(f))
        for size in (1, 2):
            g = cdag(p, {k: size for k in p.params})
            if 0 < g.n <= MAX_VERTICES:
                out.append(pytest.param(f.stem, size, id=f"{f.stem}-{size}"))
    return out


@pytest.mark.parametrize("name, size", _cases())
def test_the_bound_is_at_most_the_optimal_io(name, size):
    (p,) = parse_file(str(EX / f"{name}.py"))
    values = {k: size for k in p.params}
    g = cdag(p, values)
    S = _need(g)
    best = optimal_io(g, S)
    trace = build_trace(p, values)
    width = int((trace.elems >= 0).sum(axis=1).max())
    if S - 1 >= width:  # the replay updates in place: with S − 1 words it is a play with S red pebbles
        assert best <= replay_order(trace, loop_order(trace), S - 1).total
    assert analyze(p).evaluate({**values, "S": S}) <= best + 1e-9, (name, size, best)


def test_enough_kernels_are_checked():
    assert len(_cases()) >= 25


@pytest.mark.parametrize("name", ["jacobi_2d", "seidel_2d"])
def test_an_empty_iteration_domain_has_a_zero_bound(name):
    """|V| is the closed-form sum of the loop nest, (N - 2)^2 per step, which is 1 at N = 1 where
    range(1, N - 1) is reversed: at such sizes the statements are counted one by one (none run)."""
    (p,) = parse_file(str(EX / f"{name}.py"))
    values = {k: 1 for k in p.params}
    assert cdag(p, values).n == 0
    res = analyze(p)
    assert res.evaluate({**values, "S": 1}) <= 0
    assert res.evaluate_numeric({**values, "S": 1}) <= 0


#: drawn by the random-program strategy (tests/solvers/conftest.py): nothing runs at N = 1 (or M = 1), but
#: the trivial floor counted the writes of C (the loop over i, unused by the subscript, was taken as
#: running) and the closed-form counts of range(j + 1, N) with j up to M - 1 went negative
_EMPTY_AT_ONE = [
    """def gen(N, M):
    for i in range(1, N):
        for j in range(0, N):
            C[j] = B[j + 1] * A[i, i + 1]
    for i in range(1, N):
        for j in range(i + 1, i + 1):
            for k in range(0, j + 1):
                C[k] += 1.0
""",
    """def gen(N, M):
    for i in range(1, M):
        for j in range(0, M):
            for k in range(j + 1, N):
                A[i] = B[j + 1] * Y[k + -1] * X[j + 1, k + 1]
""",
    """def gen(N, M):
    for i in range(1, N):
        C[i] = A[i + 1, i] * Y[i, i + 1] * B[i + 1]
    for i in range(1, N):
        for j in range(0, M):
            for k in range(0, M):
                C[i] += X[k + 1] * Y[i + 1, k + 1] * X[i + 1]
""",
]


@pytest.mark.parametrize("src", _EMPTY_AT_ONE)
def test_sizes_where_a_range_is_empty_or_reversed_are_bounded_by_the_optimal_pebbling(src):
    """A positive bound (2 words) for a program that moves nothing at N = 1 or M = 1 before; and where
    something runs, still at most the optimum."""
    (p,) = parse_source(src)
    res = analyze(p)
    checked = 0
    for n, m in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (1, 3)]:
        g = cdag(p, {"N": n, "M": m})
        if g.n > 11:
            continue
        memory = _need(g)
        best = optimal_io(g, memory) if g.n else 0
        values = {"N": n, "M": m, "S": memory}
        assert max(res.evaluate(values), res.evaluate_numeric(values)) <= best + 1e-9, (n, m, best)
        checked += 1
    assert checked >= 4


#: C[i] += … over range(1, N) overwritten by C[i] = A[i + 1, i] over range(0, M) or range(1, M): the
#: overwrite covers every update when M ≥ N (the update is then dead) and only some when M < N; the update's
#: vertices and reads were counted for all sizes (4.5 and 3 against optima of 4 and 2 at N = M = 2)
_PARTIAL_OVERWRITE = """def gen(N, M):
    for i in range(1, N):
        C[i] += X[i]
    for i in range({lo}, M):
        C[i] = A[i + 1, i]
"""

#: an overwrite that never covers element 0: the updates of the other elements are dead for every size
#: (the trivial floor counted all N reads of X: 8 against an optimum of 7 at N = 3)
_OVERWRITE_BUT_ONE = """def gen(N, M):
    for i in range(0, N):
        C[i] += X[i]
    for i in range(1, N):
        C[i] = Y[i]
"""


@pytest.mark.parametrize("src", [_PARTIAL_OVERWRITE.format(lo=0), _PARTIAL_OVERWRITE.format(lo=1),
                                 _OVERWRITE_BUT_ONE])
def test_a_partial_overwrite_is_bounded_by_the_optimal_pebbling(src):
    (p,) = parse_source(src)
    res = analyze(p)
    assert any("overwritten before any other statement reads it" in n for n in res.notes)
    for n, m in [(2, 2), (3, 2), (2, 3), (3, 3), (2, 1), (1, 2), (3, 1)]:
        g = cdag(p, {"N": n, "M": m})
        if not 0 < g.n <= (MAX_VERTICES if m == 1 else 11):
            continue
        memory = _need(g)
        values = {"N": n, "M": m, "S": memory}
        best = optimal_io(g, memory)
        assert max(res.evaluate(values), res.evaluate_numeric(values)) <= best + 1e-9, (n, m, best)


_CONSTANT_THEN_UPDATE = """def gen(N, M):
    for i in range(0, N):
        C[i] = 1.0
    for i in range(0, M):
        C[i] += A[i, i] * B[i, i]
"""

_CONSTANTS_THEN_UPDATE = """def gen(N, M):
    for i in range(0, N):
        B[i] = 1.0
    for i in range(0, N):
        B[i] = 1.0
    for i in range(0, M):
        B[i] += A[i, i]
"""


@pytest.mark.parametrize("src, sizes, optimum", [
    (_CONSTANT_THEN_UPDATE, (2, 1, 4), 4),     # load A[0, 0], B[0, 0]; store C[0], C[1]
    (_CONSTANT_THEN_UPDATE, (3, 2, 4), 7),
    (_CONSTANTS_THEN_UPDATE, (2, 1, 4), 3),    # load A[0, 0]; store B[0], B[1]
    (_CONSTANTS_THEN_UPDATE, (3, 2, 4), 5),
])
def test_an_update_of_a_constant_is_bounded_by_the_optimal_pebbling(src, sizes, optimum):
    n, m, memory = sizes
    (p,) = parse_source(src)
    assert optimal_io(cdag(p, {"N": n, "M": m}), memory) == optimum
    assert analyze(p).evaluate({"N": n, "M": m, "S": memory}) <= optimum


_ZERO_THEN_PRODUCT = """def f(N, K):
    for i in range(N):
        for j in range(N):
            C[i, j] = 0.0
    for i in range(N):
        for j in range(N):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]
"""


@pytest.mark.parametrize("n, k", [(1, 1), (1, 3), (2, 1)])
def test_a_zero_initialized_partial_sum_is_bounded_by_the_optimal_pebbling(n, k):
    """With a version loop the older version of a tile's first update stays counted (the previous partial
    sum, outside the tile): still at most the optimum where the CDAG is small enough to search."""
    (p,) = parse_source(_ZERO_THEN_PRODUCT)
    g = cdag(p, {"N": n, "K": k})
    bound = analyze(p)
    for memory in range(_need(g), _need(g) + 2):
        assert bound.evaluate({"N": n, "K": k, "S": memory}) <= optimal_io(g, memory)
