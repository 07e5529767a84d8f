"""Copies forwarded to their sources (models/soap/copies.py): a contraction of the CDAG.

Checked: deriche's filter-state copies all forward (the reads become ``imgIn[i, j - 1]``, ``y1[i, j - 1]``,
``y1[i, j - 2]`` and the backward and column twins), the result is the original CDAG with each copy vertex
merged into its source at sizes off the samples, a self-copy chain or a read of a scalar's initial value is
not forwarded, and the bound of a forwarded two-sweep program stays below the exhaustive optimum of the
original (contracting a one-predecessor vertex cannot raise the optimal I/O)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.models.soap import parse_file, parse_source
from meshplan.models.soap.copies import contracts, forward_copies, is_copy
from meshplan.models.soap.scalars import split_scalars
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.pebbling import cdag, optimal_io

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"

#: a forward and a backward first-order filter over one line, carried in copied scalars
TWO_SWEEPS = """
def f(M, N):
    for i in range(M):
        xm = 0.0
        for j in range(N):
            y[i, j] = x[i, j] + xm
            xm = y[i, j]
    for i in range(M):
        xp = 0.0
        for j in range(N - 1, -1, -1):
            z[i, j] = x[i, j] + xp
            xp = z[i, j]
    for i in range(M):
        for j in range(N):
            o[i, j] = y[i, j] + z[i, j]
"""

#: ``c`` reads its initial value at the first step: not a copy chain that can be forwarded
CARRIED_IN = """
def f(N):
    for j in range(N):
        y[j] = x[j] + c
        c = x[j]
"""


def test_deriche_filter_states_forward_to_their_sources():
    (p,) = parse_file(str(EX / "deriche.py"))
    q, _ = split_scalars(p)
    r, notes = forward_copies(q)
    assert notes and not any(is_copy(st) for st in r.statements)
    assert not any(not st.output.index for st in r.statements)          # no scalar is left
    (s4,) = [st for st in r.statements if st.name == "S4"]
    assert {str(a) for a in s4.inputs} == {"imgIn[i, j]", "imgIn[i, j - 1]", "y1[i, j - 1]", "y1[i, j - 2]"}
    for values in ({"W": 3, "H": 7}, {"W": 6, "H": 2}):
        assert contracts(q, r, values)
    read = [st for st in r.statements if st.name != "S4"]       # y1 of the row pass is read: not a contraction
    assert not contracts(q, r.__class__(r.name, tuple(read), r.params), {"W": 3, "H": 3})


def test_a_read_of_the_initial_value_is_not_forwarded():
    (p,) = parse_source(CARRIED_IN)
    assert forward_copies(p) == (p, ())


@pytest.mark.parametrize("n", [1, 2])
def test_the_forwarded_bound_is_below_the_exhaustive_optimum_of_the_original(n):
    (p,) = parse_source(TWO_SWEEPS)
    q, notes = forward_copies(p)
    assert notes and len(q.statements) < len(p.statements)
    g = cdag(p, {"M": 1, "N": n})
    assert contracts(p, q, {"M": 1, "N": n})
    memory = max(bin(x).count("1") + 1 for x in g.preds)
    opt = optimal_io(g, memory)
    assert analyze(q).evaluate({"M": 1, "N": n, "S": memory}) <= opt + 1e-9
    h = cdag(q, {"M": 1, "N": n})
    assert h.n < g.n and optimal_io(h, memory) <= opt        # the contraction cannot raise the optimum
