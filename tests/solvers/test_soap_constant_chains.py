"""Chains of in-place updates that start from a constant (``B[i] = 1.0``, then ``B[i] += 1.0`` …, then
``B[i] += A[i, i]``): the vertices on no path from an input of the CDAG need no I/O, so the SOAP bound
leaves them out (docs/bound.md, decision 7; Kwasniewski's thesis, sections 4.2.3.2 and 5.5.4).

Each program is checked two ways: the bound is at most the exact I/O of the tool's own schedule
(``meshplan bound --schedule``, replayed through an LRU memory of S words) at sizes with N < M and
N > M, and at most the exhaustive red–blue pebbling optimum where the CDAG is small enough to search.
The optimum is first checked against a hand count: every ``A`` element read once, every element of
``B`` that the chain's first statement does not cover loaded once (its initial value), and every
element written stored once.
"""

from __future__ import annotations

import pytest

from meshplan.api.soap import report_json, schedule_json
from meshplan.models.soap import parse_source
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.pebbling import cdag, optimal_io


def chain(constants: int, updates: int, reads_a: bool = True) -> str:
    """``B[i] = 1.0`` over N, ``constants − 1`` times ``B[i] += 1.0`` over N, then ``updates`` times
    ``B[i] += Aj[i, i]`` (or ``+= 1.0``) over M."""
    lines = ["def gen(N, M):", "    for i in range(0, N):", "        B[i] = 1.0"]
    for _ in range(constants - 1):
        lines += ["    for i in range(0, N):", "        B[i] += 1.0"]
    for j in range(updates):
        lines += ["    for i in range(0, M):", f"        B[i] += A{j}[i, i]" if reads_a else "        B[i] += 1.0"]
    return "\n".join(lines) + "\n"


def hand_count(updates: int, reads_a: bool, n: int, m: int) -> int:
    return (updates * m if reads_a else 0) + max(0, m - n) + max(m, n)


#: hypothesis's draw (test_soap_replay_bound.py): the bound was 2M/3 + 4N/3 = 11.33 at N = 6, M = 5,
#: S = 8, above the schedule's 11 words (load A[i, i], store B[i])
DRAWN = chain(2, 1)

CHAINS = [(2, 1, True), (3, 1, True), (2, 1, False), (3, 2, False), (2, 4, True), (3, 4, True), (1, 4, True)]


def test_the_drawn_program_is_bounded_by_the_tools_schedule():
    (p,) = parse_source(DRAWN)
    values = {"N": 6, "M": 5, "S": 8}
    doc = report_json(analyze(p), values, tiles=True, time_limit_s=0.3)
    sc = schedule_json(p, doc, values)
    assert sc["total"] == hand_count(1, True, 6, 5) == 11
    assert doc["values"]["bound"] <= 11 and doc["values"]["bound_numeric"] <= 11


@pytest.mark.parametrize("constants, updates, reads_a", CHAINS)
def test_a_constant_chain_is_bounded_by_the_tools_schedule(constants, updates, reads_a):
    """N > M and N < M; two constants then four updates was above the schedule too (26.7 > 26 words at
    N = 6, M = 5 and 26.7 > 20 at N = 12, M = 2) while the constants' vertices were counted."""
    (p,) = parse_source(chain(constants, updates, reads_a))
    res = analyze(p)
    for n, m in [(6, 5), (5, 6), (12, 2), (2, 12)]:
        values = {"N": n, "M": m, "S": 8}
        doc = report_json(res, values, tiles=True, time_limit_s=0.3)
        sc = schedule_json(p, doc, values)
        assert sc["total"] >= hand_count(updates, reads_a, n, m)
        v = doc["values"]
        assert max(v["bound"], v["bound_numeric"]) <= sc["total"] * (1 + 1e-9), (n, m, v, sc["total"])


def _need(g) -> int:
    return max([bin(p).count("1") + 1 for p in g.preds] or [1])


@pytest.mark.parametrize("constants, updates, reads_a, n, m", [
    (2, 1, True, 2, 1),     # was 2M/3 + 4N/3 = 3.33 > 3
    (2, 1, True, 1, 2),
    (3, 1, True, 2, 1),     # was (3N + M)/2 = 3.5 > 3
    (3, 1, True, 1, 2),
    (2, 1, False, 2, 1),
    (2, 1, False, 1, 2),
    (3, 1, False, 2, 1),
    (2, 2, True, 2, 1),     # was 3(2N + 2M)/4 = 4.5 > 4
    (2, 2, True, 1, 2),
])
def test_a_constant_chain_is_bounded_by_the_optimal_pebbling(constants, updates, reads_a, n, m):
    (p,) = parse_source(chain(constants, updates, reads_a))
    g = cdag(p, {"N": n, "M": m})
    bound = analyze(p)
    for memory in (_need(g), _need(g) + 1):
        best = optimal_io(g, memory)
        assert best == hand_count(updates, reads_a, n, m)
        assert bound.evaluate({"N": n, "M": m, "S": memory}) <= best + 1e-9, (memory, best)


_OVERWRITTEN = """def gen(N, M):
    for i in range(0, N):
        B[i] += A0[i, i]
    for i in range(0, M):
        B[i] += B[i] * A1[i, i]
    for i in range(0, N):
        B[i] = 1.0
"""


@pytest.mark.parametrize("n, m, optimum", [
    (2, 1, 2),    # store B[0], B[1]: the updates of B[0] are overwritten, so no play computes them
    (1, 2, 4),    # B[1] survives: load B[1], A1[1, 1]; store B[0], B[1]
])
def test_values_overwritten_before_any_read_are_not_counted(n, m, optimum):
    """The mirror image of an input-free chain: vertices on no path to an output (the first update is
    overwritten by the constant before anything else reads it; models/soap/dead.py).  Counting them
    gave 3M/2 + 3N/2 = 4.5 against both optima."""
    (p,) = parse_source(_OVERWRITTEN)
    g = cdag(p, {"N": n, "M": m})
    best = optimal_io(g, _need(g))
    assert best == optimum
    res = analyze(p)
    assert res.evaluate({"N": n, "M": m, "S": _need(g)}) <= best + 1e-9
    assert any("overwritten before any other statement reads it" in note for note in res.notes)


def test_the_trivial_floor_reads_nothing_for_an_overwritten_statement():
    """``A[i] = C[i + 1, i]·X[i]`` then ``A[i] = 1.0``: no play reads C or X (drawn by a sweep of the
    random-program strategy against the exhaustive optimum; the floor counted 2N reads)."""
    (p,) = parse_source("def gen(N, M):\n    for i in range(0, N):\n        A[i] = C[i + 1, i] * X[i]\n"
                        "    for i in range(0, N):\n        A[i] = 1.0\n")
    res = analyze(p)
    for n in (1, 2):
        g = cdag(p, {"N": n, "M": 1})
        best = optimal_io(g, _need(g))
        assert best == n                       # store every A[i]
        assert res.evaluate({"N": n, "M": 1, "S": _need(g)}) <= best + 1e-9
