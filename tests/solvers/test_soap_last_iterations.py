"""Dead iterations (models/soap/dead.py ``last_iterations``): a statement whose values are used only inside
one iteration of an enclosing loop, and rewritten element for element by the next one, has only its last
iteration on a path to an output, whatever the statements beside it; a statement none of whose instances is
live is left out, and a writer rewritten by a later one that runs at least once is dead.  Counting such vertices made the bound exceed the exhaustive red–blue optimum and the I/O of the
program's own loop order; and a ``min``/``max`` loop bound is refused
with the statement's line (it ended in an internal error)."""

from __future__ import annotations

import pytest

from meshplan.models.core.errors import ModelError
from meshplan.models.soap import parse_source
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.pebbling import cdag, optimal_io

#: y[j] is rewritten in every iteration of i, which its subscript does not use; nothing reads it
OVERWRITTEN = """def f(N, M):
    for i in range(M):
        for j in range(N):
            w = 0.0
            for k in range(N):
                w += X[k]
            y[j] = w / B[i]
"""

#: two arrays rewritten in every iteration of i, the second reading the first
TWO_ARRAYS = """def f(N, M):
    for i in range(M):
        for j in range(N):
            y[j] = X[j] * B[i]
            z[j] = y[j] + B[i]
"""

#: a value carried from one iteration of i to the next: every iteration is live, nothing is cut
CARRIED = """def f(N, M):
    for i in range(M):
        for j in range(N):
            y[j] += X[j] * B[i]
"""

CUT = "only the last iteration"

#: drawn by a random sweep of such nests (all over the exhaustive optimum before): a scalar rewritten by a
#: later statement inside a loop its subscript does not use (was 6 against 1 at N = 2, M = 1) ...
REWRITTEN_BY_A_LOOP = """def f(N, M):
    for i in range(M):
        for j in range(N):
            w = A[i, j] * y[j]
        for j in range(N):
            w = 1.0
"""

#: ... an update whose every iteration is rewritten, whose overwrite the next iteration's update reads
#: (dead through a dead reader: 4 against 2 at N = 1, M = 3) ...
DEAD_THROUGH_A_DEAD_READER = """def f(N, M):
    for i in range(M):
        for j in range(N):
            for k in range(N):
                y[j] += A[i, j]
        for j in range(N):
            for k in range(N):
                y[j] = w * A[i, j]
"""

#: ... and a chain read by earlier in-place updates, which read only its last iteration (5 against 3)
READ_BEFORE_REWRITTEN = """def f(N, M):
    for i in range(M):
        for j in range(N):
            w += 1.0
        for j in range(N):
            w += z[j]
        for j in range(N):
            w = X[j] * z[j]
"""


@pytest.mark.parametrize("src, n, m, optimum", [
    (OVERWRITTEN, 1, 3, 4),      # load X[0], B[2]; store w, y[0] (the bound was 5)
    (OVERWRITTEN, 1, 2, 4),
    (TWO_ARRAYS, 1, 3, 4),       # load X[0], B[2]; store y[0], z[0] (the bound was 5)
    (TWO_ARRAYS, 2, 2, 7),
    (CARRIED, 1, 3, None),
    (REWRITTEN_BY_A_LOOP, 2, 1, 1),              # store w = 1.0
    (REWRITTEN_BY_A_LOOP, 1, 3, 1),
    (DEAD_THROUGH_A_DEAD_READER, 1, 3, 2),       # load A[2, 0]; store y[0]
    (READ_BEFORE_REWRITTEN, 2, 1, 3),            # load X[1], z[1]; store w
], ids=["overwritten-1x3", "overwritten-1x2", "two-arrays-1x3", "two-arrays-2x2", "carried-1x3",
        "rewritten-by-a-loop-2x1", "rewritten-by-a-loop-1x3", "dead-through-a-dead-reader-1x3",
        "read-before-rewritten-2x1"])
def test_the_bound_is_at_most_the_optimal_pebbling(src, n, m, optimum):
    (p,) = parse_source(src)
    g = cdag(p, {"N": n, "M": m})
    memory = max(bin(q).count("1") + 1 for q in g.preds)
    best = optimal_io(g, memory)
    if optimum is not None:
        assert best == optimum
    res = analyze(p)
    values = {"N": n, "M": m, "S": memory}
    assert max(res.evaluate(values), res.evaluate_numeric(values)) <= best + 1e-9, (n, m, best)
    if src in (OVERWRITTEN, TWO_ARRAYS, CARRIED):
        assert any(CUT in note for note in res.notes) == (src is not CARRIED)


@pytest.mark.parametrize("src", [OVERWRITTEN, TWO_ARRAYS], ids=["overwritten", "two-arrays"])
def test_the_bound_is_at_most_the_programs_own_loop_order(src):
    """At N = 12, M = 5, S = 16 the bound was 50.4 against the 30 words of the loop order's LRU replay."""
    (p,) = parse_source(src)
    values = {"N": 12, "M": 5}
    trace = build_trace(p, values)
    attained = replay_order(trace, loop_order(trace), 16).total
    res = analyze(p)
    assert 0 < max(res.evaluate({**values, "S": 16}), res.evaluate_numeric({**values, "S": 16})) <= attained


#: drawn by random sweeps of such nests (bench/pebbling_sweep.py; all over the exhaustive optimum when the
#: loop was cut for a whole run of statements or not at all): a statement whose earlier iterations are dead
#: beside one whose every iteration is live, so only the first is cut (8 against 7 at N = 1, M = 3) ...
LIVE_BESIDE_DEAD = """def f(N, M):
    for i in range(M):
        for j in range(N):
            y[j] += A[i, j]
            w = A[i, j] * B[i]
"""

#: ... the same beside a chain carried through every iteration (8 against 5) ...
CARRIED_BESIDE_DEAD = """def f(N, M):
    for i in range(M):
        for j in range(N):
            z[j] = z[j]
        for j in range(N):
            w = A[i, j] * B[i]
"""

#: ... beside a statement whose subscript uses the loop's variable (8 against 6) ...
BESIDE_A_ROW_WRITE = """def f(N, M):
    for i in range(M):
        for j in range(N):
            w = A[i, j] * y[j]
        v[i] = 1.0
"""

#: ... a statement dead in every iteration, its array read by another statement (5 against 4) ...
DEAD_IN_EVERY_ITERATION = """def f(N, M):
    for i in range(M):
        for j in range(N):
            w = y[j] * A[i, j]
            y[j] = B[i] * y[j]
            y[j] = A[i, j] * A[i, j]
"""

#: ... an inner loop whose earlier iterations are dead (5 against 4 at N = 2, M = 1) ...
INNER_LOOP = """def f(N, M):
    for i in range(M):
        for j in range(N):
            y[j] = 1.0
            for k in range(N):
                y[j] = 1.0
            for k in range(N):
                w = X[j]
"""

#: ... and a row written, read and overwritten in each iteration (4 against 3 at N = 2, M = 1)
OVERWRITTEN_ROW = """def f(N, M):
    for i in range(M):
        for j in range(N):
            v[i] = 1.0
        for j in range(N):
            w += v[i]
        w += v[i]
        for j in range(N):
            v[i] += A[i, j] * B[i]
        v[i] = 1.0
"""


#: a loop that runs downwards keeps its last iteration, i = 0, beside a chain live in every iteration
#: (9 against 8 at N = 1, M = 3 before)
DESCENDING = """def f(N, M):
    for i in range(M - 1, -1, -1):
        for j in range(N):
            y[j] = X[j] * B[i]
            w = A[i, j] * w
"""


@pytest.mark.parametrize("src, n, m, optimum, left_out", [
    (LIVE_BESIDE_DEAD, 1, 3, 7, "S2: every value computed in an iteration of loop i but the last"),
    (LIVE_BESIDE_DEAD, 2, 2, 10, "S2: every value computed in an iteration of loop i but the last"),
    (CARRIED_BESIDE_DEAD, 1, 3, 5, "S2: every value computed in an iteration of loop i but the last"),
    (BESIDE_A_ROW_WRITE, 1, 3, 6, "S1: every value computed in an iteration of loop i but the last"),
    (DEAD_IN_EVERY_ITERATION, 1, 2, 4, "S2: none of its values lies on a path to an output"),
    (INNER_LOOP, 2, 1, 4, "S3: every value computed in an iteration of loop k_2 but the last"),
    (OVERWRITTEN_ROW, 2, 1, 3, "S4: none of its values lies on a path to an output"),
    (DESCENDING, 1, 3, 8, "S1: every value computed in an iteration of loop i but the last lies on no path "
                          "to an output: only the last iteration, i = 0"),
], ids=["live-beside-dead-1x3", "live-beside-dead-2x2", "carried-beside-dead-1x3", "beside-a-row-write-1x3",
        "dead-in-every-iteration-1x2", "inner-loop-2x1", "overwritten-row-2x1", "descending-1x3"])
def test_dead_instances_are_left_out_statement_by_statement(src, n, m, optimum, left_out):
    """The vertices on no path to an output are left out per statement, whatever the statements beside it
    (thesis sections 3.2 and 5.2: a pebbling ends when the outputs are blue)."""
    (p,) = parse_source(src)
    g = cdag(p, {"N": n, "M": m})
    memory = max(bin(q).count("1") + 1 for q in g.preds)
    assert optimal_io(g, memory) == optimum
    res = analyze(p)
    values = {"N": n, "M": m, "S": memory}
    assert max(res.evaluate(values), res.evaluate_numeric(values)) <= optimum + 1e-9
    assert any(left_out in note for note in res.notes), res.notes


@pytest.mark.parametrize("bound, line", [("min(i, j)", 5), ("max(N, M)", 5), ("min(i + 1, M)", 5)])
def test_a_min_or_max_loop_bound_is_refused_with_its_line(bound, line):
    (p,) = parse_source(f"def f(N, M):\n    for i in range(N):\n        for j in range(M):\n"
                        f"            for k in range({bound}):\n                C[i, j] += A[i, k] * B[k, j]\n")
    with pytest.raises(ModelError, match=f"line {line}\\).*min/max"):
        analyze(p)


def test_a_statement_that_never_runs_is_left_out():
    """Drawn by the random-program strategy: ``range(i + 1, i + 1)`` runs nothing, but its writer of ``B[j]``
    gave ``B``'s chain a version loop, so the input-free ``B[i] = 1.0; B[i] += 1.0`` were counted: 8 words
    against the 6 stores of the program's own order at N = 6, S = 8."""
    (p,) = parse_source("def gen(N, M):\n    for i in range(0, N):\n        for j in range(i + 1, i + 1):\n"
                        "            B[j] = A[i, j]\n    for i in range(0, N):\n        B[i] = 1.0\n"
                        "    for i in range(0, N):\n        B[i] += 1.0\n")
    res = analyze(p)
    assert any("S1: a loop of it runs no iteration" in note for note in res.notes)
    trace = build_trace(p, {"N": 6, "M": 5})
    attained = replay_order(trace, loop_order(trace), 8).total
    assert attained == 6
    assert max(res.evaluate({"N": 6, "M": 5, "S": 8}), res.evaluate_numeric({"N": 6, "M": 5, "S": 8})) <= attained
    g = cdag(p, {"N": 2, "M": 1})
    assert max(res.evaluate({"N": 2, "M": 1, "S": 2}), res.evaluate_numeric({"N": 2, "M": 1, "S": 2})) \
        <= optimal_io(g, 2) == 2
