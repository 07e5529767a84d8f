"""Copies forwarded to their sources (models/soap/copies.py): a contraction of the CDAG; and the two-sweep
floor that reads its chains off the contracted program (solvers/soap/sweeps.py).

Checked: deriche's filter-state copies all forward (the reads become ``imgIn[i, j - 1]``, ``y1[i, j - 1]``,
``y1[i, j - 2]`` and the backward and column twins), the result is the original CDAG with each copy vertex
merged into its source at sizes off the samples, a self-copy chain or a read of a scalar's initial value is
not forwarded, and the bound of a forwarded two-sweep program stays below the exhaustive optimum of the
original (contracting a one-predecessor vertex cannot raise the optimal I/O)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy as sp

from meshplan.models.soap import parse_file, parse_source
from meshplan.models.soap.copies import contracts, forward_copies, is_copy
from meshplan.models.soap.scalars import split_scalars
from meshplan.models.loops.program import sym
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.sweeps import sweep_bound
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


# --- the two-sweep floor (solvers/soap/sweeps.py), which reads its chains off the contracted program ---

#: two opposite first-order chains over each row of ``x``, without copies (``y[i, -1]``, ``z[i, N]`` inputs)
DIRECT = """
def f(M, N):
    for i in range(M):
        for j in range(N):
            y[i, j] = x[i, j] + y[i, j - 1]
    for i in range(M):
        for j in range(N - 1, -1, -1):
            z[i, j] = x[i, j] + z[i, j + 1]
"""

#: both chains run forward: one load of a row serves both, no floor
SAME_WAY = DIRECT.replace("range(N - 1, -1, -1)", "range(N)").replace("z[i, j + 1]", "z[i, j - 1]")

#: the chains read different arrays: no site is read twice
TWO_INPUTS = DIRECT.replace("z[i, j] = x[i, j]", "z[i, j] = u[i, j]")


def test_the_sweep_floor_of_two_copied_filters():
    (p,) = parse_source(TWO_SWEEPS)
    sw = sweep_bound(p)
    assert sw is not None and sw.source == "x" and (sw.forward, sw.backward) == ("S2", "S5")
    M, N = sym("M"), sym("N")
    assert sw.bound == sp.Max(2 * M * N, sp.expand(2 * M * N + M * (N - 2 * S)))  # x loaded, o stored; N sites a row


@pytest.mark.parametrize("src", [SAME_WAY, TWO_INPUTS])
def test_no_floor_without_two_opposite_sweeps_over_one_input(src):
    (p,) = parse_source(src)
    assert sweep_bound(p) is None


@pytest.mark.parametrize("src", [DIRECT, TWO_SWEEPS])
@pytest.mark.parametrize("M, N, memory", [(2, 60, 4), (1, 200, 8)])
def test_the_sweep_floor_is_below_replayed_schedules(src, M, N, memory):
    """The loop order (each chain row by row) and the order fusing each row's two chains, both replayed by
    LRU, against the bound — which the floor leads at these sizes."""
    import numpy as np

    from meshplan.models.soap.replay import build_trace, legal, loop_order, replay_order

    (p,) = parse_source(src)
    res = analyze(p)
    bound = res.evaluate({"M": M, "N": N, "S": memory})
    assert any("two opposite sweeps" in n for n in res.notes)
    tr = build_trace(p, {"M": M, "N": N})
    by_row = np.lexsort((np.arange(tr.instances), tr.vars["i_2"].clip(0) + tr.vars["i"].clip(0)))
    for order in (loop_order(tr), by_row):
        if legal(tr, order):
            assert bound <= replay_order(tr, order, memory).total
