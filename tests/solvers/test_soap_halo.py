"""Translated reads by a statement outside the version loops of the chain they read (Corollary 5.1).

nussinov's ``table[i, j] = max(table[i, j - 1], table[i + 1, j], …)`` runs before the ``k`` updates of
``table[i, j]``: each such read sees one version of a neighbour, so the halo adds the tile's spatial
surface once, not one face per version (which over-counted the dominator by ``|D_i|·|D_k| + |D_j|·|D_k|``).
The bound must stay at most the optimal I/O (exhaustive pebbling on the smallest CDAGs) and the I/O of the
program's own order replayed through an LRU memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.models.soap import parse_file, parse_source
from meshplan.models.soap.expand import expand_temporaries
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.models.soap.sdg import build_sdg, subgraph_problem
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.pebbling import cdag, optimal_io

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"

ROW = """
def row(N):
    for i in range(N):
        for j in range(1, N):
            C[i, j] = C[i, j - 1] + A[i, j]
            for k in range(N):
                C[i, j] += A[i, k] * B[k, j]
"""


def _nussinov():
    (p,) = parse_file(str(EX / "nussinov.py"))
    return p


def test_the_halo_is_counted_once_not_per_version():
    p, _ = expand_temporaries(_nussinov())
    prob = subgraph_problem(build_sdg(p), ("table",))
    inout = [t for t in prob.terms if t.array == "table" and t.kind == "inout"]
    assert sorted((t.t, t.version, t.t_version) for t in inout) == [((0, 0), ("k",), 1), ((1, 1), (), 0)]
    res = analyze(_nussinov())
    assert any("one version of each neighbour" in n for s in res.subgraphs for n in s.problem.notes)


@pytest.mark.parametrize("prog, values, memory", [("nussinov", {"N": 3}, 7), ("nussinov", {"N": 3}, 9),
                                                  ("row", {"N": 2}, 5)])
def test_bound_at_most_the_optimal_io(prog, values, memory):
    p = _nussinov() if prog == "nussinov" else parse_source(ROW)[0]
    best = optimal_io(cdag(p, values), memory)
    assert analyze(p).evaluate({**values, "S": memory}) <= best + 1e-9


@pytest.mark.parametrize("n, memory", [(6, 8), (10, 12), (16, 20)])
def test_bound_at_most_the_replayed_loop_order(n, memory):
    for p in (_nussinov(), parse_source(ROW)[0]):
        trace = build_trace(p, {"N": n})
        attained = replay_order(trace, loop_order(trace), memory).total
        assert analyze(p).evaluate({"N": n, "S": memory}) <= attained
