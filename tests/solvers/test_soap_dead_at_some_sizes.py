"""Vertices on no path to an output, or from an input, that only some sizes or some ranges decide
(models/soap/dead.py; Kwasniewski's thesis, sections 3.2, 4.2.3.2 and 5.2): the survivors of a partial
overwrite that a later update reads, an update that reads a constant past a partial overwrite, iterations
dead at a loop's start, a scalar rewritten in an offset or triangular nest, and a statement that only an
empty loop reads.  Every program here was drawn by a random sweep (bench/pebbling_sweep.py, shape
``affine``, or a fuzzer of such nests) and had a bound above the exhaustive red–blue optimum or above the
I/O of the program's own loop order."""

from __future__ import annotations

import pytest

from meshplan.models.soap import parse_source
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.pebbling import cdag, optimal_io

#: C[0] keeps the constant (the overwrite starts at 1) and C[0] += 1.0 reads it: leaving the constant out
#: made C[0] an initial value to load, and counting the update of C[0] counted a vertex on no path from an
#: input (4.5 against an optimum of 4 at N = M = 2, 16.5 against the loop order's 16 at N = 6, M = 5)
CONSTANT_PAST_AN_OVERWRITE = """def f(N, M):
    for i in range(0, N):
        for j in range(0, M):
            C[i] = 1.0
    for i in range(1, N):
        C[i] = A[i] * B[i, i]
    for i in range(0, N):
        C[i] += 1.0
"""

#: the first iteration of the two updates is overwritten by A[1] = A[2] and read by nothing
#: (2.5 against an optimum of 2 at N = 2)
DEAD_FIRST_ITERATION = """def f(N, M):
    for i in range(1, N):
        A[i] = A[i] * X[i, i] * A[i]
    for i in range(1, N):
        A[i] = A[i] * B[i]
    for i in range(1, N):
        A[i] = A[i + 1]
"""

#: a scalar rewritten over range(1, N) × range(0, i + 1): only the last instance is live, and range(1, N)
#: is empty at N = 1 (3 against 2 at N = 2; 3 against 2 at N = 3 once the inner loop was cut)
SCALAR_IN_AN_OFFSET_NEST = """def f(N, M):
    for i in range(1, M):
        for j in range(i + 1, M):
            B[j] = Y[i, i - 1] * B[i]
    for i in range(1, N):
        for j in range(0, i + 1):
            C = A[i, j]
    for i in range(1, N):
        C += 1.0
"""

#: the same over range(0, M) × range(0, i + 1), whose last iteration is (M − 1, M − 1) at every size
#: (6 against 2 at N = 1, M = 3)
SCALAR_IN_A_TRIANGLE = """def f(N, M):
    for i in range(0, M):
        for j in range(0, i + 1):
            A = B[i + 1, j]
    for i in range(1, N):
        for j in range(0, i + 1):
            for k in range(0, M):
                A += 1.0
"""

#: ... and rewritten by a statement over range(1, M) (4 against 3 at N = 1, M = 3)
SCALAR_REWRITTEN_OVER_AN_OFFSET = """def f(N, M):
    for i in range(0, M):
        for j in range(i + 1, M):
            A += C[j]
    for i in range(1, M):
        A = X[i, i] * C[i - 1]
"""

#: B += … is read only by C[j] += B, whose loop range(i + 1, M) is empty at M = 1, and B = 1.0 overwrites
#: it (2 against 1 at N = 2, M = 1)
READ_ONLY_BY_AN_EMPTY_LOOP = """def f(N, M):
    for i in range(0, N):
        B += C[i] * A[i + 1]
    for i in range(0, N):
        for j in range(i + 1, M):
            for k in range(i + 1, j + 1):
                C[j] += B
    for i in range(0, N):
        B = 1.0
"""

#: C[j] = B[i − 1, j] is overwritten by C[i] = … when M ≥ N (5 against 4 at N = M = 2)
DEAD_AT_SOME_SIZES = """def f(N, M):
    for i in range(1, N):
        for j in range(0, N):
            C[j] = A[i, i + 1]
    for i in range(0, M):
        for j in range(i + 1, N):
            C[j] = B[i - 1, j]
    for i in range(0, M):
        C[i] = X[i - 1] * Y
    for i in range(1, N):
        C[i] += C[i - 1]
"""

SIZES = [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2)]


def _bound(res, values) -> float:
    return max(res.evaluate(values), res.evaluate_numeric(values))


@pytest.mark.parametrize("src", [CONSTANT_PAST_AN_OVERWRITE, DEAD_FIRST_ITERATION, SCALAR_IN_AN_OFFSET_NEST,
                                 SCALAR_IN_A_TRIANGLE, SCALAR_REWRITTEN_OVER_AN_OFFSET, READ_ONLY_BY_AN_EMPTY_LOOP,
                                 DEAD_AT_SOME_SIZES],
                         ids=["constant-past-an-overwrite", "dead-first-iteration", "scalar-in-an-offset-nest",
                              "scalar-in-a-triangle", "scalar-rewritten-over-an-offset", "read-only-by-an-empty-loop",
                              "dead-at-some-sizes"])
def test_the_bound_is_at_most_the_optimal_pebbling(src):
    (p,) = parse_source(src)
    res = analyze(p)
    for n, m in SIZES:
        g = cdag(p, {"N": n, "M": m})
        if not 0 < g.n <= 13:
            continue
        memory = max(bin(q).count("1") + 1 for q in g.preds)
        assert _bound(res, {"N": n, "M": m, "S": memory}) <= optimal_io(g, memory) + 1e-9, (n, m)


@pytest.mark.parametrize("src, n, m, s", [
    (CONSTANT_PAST_AN_OVERWRITE, 6, 5, 8), (SCALAR_IN_AN_OFFSET_NEST, 8, 3, 8), (SCALAR_IN_A_TRIANGLE, 3, 9, 8),
    (DEAD_FIRST_ITERATION, 12, 2, 8)], ids=["constant-past-an-overwrite", "scalar-in-an-offset-nest",
                                             "scalar-in-a-triangle", "dead-first-iteration"])
def test_the_bound_is_at_most_the_programs_own_loop_order(src, n, m, s):
    (p,) = parse_source(src)
    trace = build_trace(p, {"N": n, "M": m})
    attained = replay_order(trace, loop_order(trace), s).total
    assert 0 < _bound(analyze(p), {"N": n, "M": m, "S": s}) <= attained


def test_the_cuts_are_named():
    """Which rule left the vertices out: the first iteration of a loop, a cut of an offset loop (whose
    statement counts nothing where the loop is empty), and the constant kept past the overwrite."""
    notes = analyze(parse_source(DEAD_FIRST_ITERATION)[0]).notes
    assert any("S1: the first 1 and the last 0 iteration(s) of loop i" in n for n in notes), notes
    res = analyze(parse_source(SCALAR_IN_AN_OFFSET_NEST)[0])
    assert [name for name, _ in res.guards] == ["S2"]
    assert _bound(res, {"N": 1, "M": 1, "S": 2}) == 0
    res = analyze(parse_source(CONSTANT_PAST_AN_OVERWRITE)[0])
    assert not any("overwritten before any other statement reads it" in n for n in res.notes), res.notes


#: B[j] += C is partly overwritten by B[i] = … over range(1, M) (not B[0]); B[k] += 1.0 reads B over a
#: range that depends on j (no plain element range): the overwrite's rule must keep B[j] += C
#: (its B[0] survives, and the last update may read any element)
READER_WITHOUT_A_RANGE = """def f(N, M):
    for i in range(0, N):
        C = Y[i + 1]
    for i in range(0, M):
        for j in range(0, M):
            B[j] += C
    for i in range(1, M):
        B[i] = X * A[i + 1, i + 1]
    for i in range(1, M):
        for j in range(i + 1, N):
            for k in range(j + 1, N):
                B[k] += 1.0
"""

#: C[1] += A[1] is overwritten by C[1] = C[2] and read by nothing, so A[1] need not be loaded: the trivial
#: floor counted it (6 against 5 at N = 2, M = 3) ...
READ_ONLY_BY_A_DEAD_INSTANCE = """def f(N, M):
    for i in range(0, M):
        C[i] = 1.0
    for i in range(0, M):
        C[i] += A[i]
    for i in range(1, N):
        C[i] = C[i + 1]
"""

#: ... and a partial overwrite whose survivors only updates inside the overwrite's range read
#: (C[1] = C[1]·X[1, 1]·C[1] reads the constant 1.0): the writers before it are dead (6.67 against 5 at
#: N = M = 2 when the survivors' rule kept them)
READ_INSIDE_THE_OVERWRITE = """def f(N, M):
    for i in range(0, N):
        C[i] = A[i] * B[i, i]
    for i in range(0, M):
        C[i] += A[i]
    for i in range(1, N):
        C[i] = 1.0
    for i in range(1, N):
        C[i] = C[i] * X[i, i] * C[i]
"""


@pytest.mark.parametrize("src", [READER_WITHOUT_A_RANGE, READ_ONLY_BY_A_DEAD_INSTANCE, READ_INSIDE_THE_OVERWRITE],
                         ids=["reader-without-a-range", "read-only-by-a-dead-instance", "read-inside-the-overwrite"])
def test_overwrites_and_dead_reads(src):
    test_the_bound_is_at_most_the_optimal_pebbling(src)
    (p,) = parse_source(src)
    trace = build_trace(p, {"N": 6, "M": 5})
    assert _bound(analyze(p), {"N": 6, "M": 5, "S": 8}) <= replay_order(trace, loop_order(trace), 8).total
