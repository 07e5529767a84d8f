"""The iterated stencils of Table 5.2 (jacobi-1d, jacobi-2d, heat-3d, seidel-2d): where the published
entries come from, and which subcomputations the bound's χ must cover.

The entries are the rectangle model of Lemma 5.4 with Corollary 5.1 (thesis chapter 5, sections 5.4.2
to 5.4.5): a box of side ``a`` per spatial dimension and ``t`` time steps, dominator
``a^d + 2·d·a^{d−1}·t`` (two offsets per dimension and step), ``k`` vertices per point and step.  Its
χ is ``k·X^{(d+1)/d}/(2(d+1)^{(d+1)/d})`` and the bound ``|V|·2d/(k·S^{1/d})``.  On the programs'
own CDAGs (:func:`meshplan.solvers.soap.pebbling.cdag`) a minimum dominator, found by a maximum flow
with unit vertex capacities, shows subcomputations that are larger than that χ allows: a diamond
pyramid in jacobi-2d, a box that moves one row back per sweep in seidel-2d.  So the rectangle is not
the largest subcomputation and the entries do not follow from the method; the tool's pyramid
(jacobi, heat) and sweep (seidel) χ cover those subcomputations (solvers/soap/pyramid.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from meshplan.models.soap import parse_file, parse_source, sym
from meshplan.models.soap.replay import build_trace, legal, loop_order, replay_order, tiled_order
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import S, X
from meshplan.solvers.soap.pebbling import cdag, optimal_io
from meshplan.solvers.soap.pyramid import sweep_chi, sweep_stencil

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
N, T = sym("N"), sym("TSTEPS")


def _program(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return p


def _dominator(g, H) -> tuple[int, int]:
    """``(|D|, |C|)``: the size of a minimum dominator ``D`` of the vertices ``H`` (every path from an
    input to ``H`` meets it; it may hold vertices of ``H``) and of everything ``D`` dominates."""
    n, big = g.n, 1 << 20
    rows, cols, caps = [], [], []
    for v in range(n):                       # v_in = 2v -> v_out = 2v + 1, capacity 1
        rows.append(2 * v), cols.append(2 * v + 1), caps.append(1)
        m = g.preds[v]
        while m:
            low = m & -m
            m ^= low
            rows.append(2 * (low.bit_length() - 1) + 1), cols.append(2 * v), caps.append(big)
        if g.inputs >> v & 1:
            rows.append(2 * n), cols.append(2 * v), caps.append(big)
    for h in H:
        rows.append(2 * h + 1), cols.append(2 * n + 1), caps.append(big)
    M = csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(2 * n + 2, 2 * n + 2))
    M.sum_duplicates()
    res = maximum_flow(M, 2 * n, 2 * n + 1)
    # the source side of the minimum cut: reachable in the residual graph
    resid = (M - res.flow).tocsr()
    seen, stack = {2 * n}, [2 * n]
    while stack:
        u = stack.pop()
        for k in range(resid.indptr[u], resid.indptr[u + 1]):
            w = int(resid.indices[k])
            if resid.data[k] > 0 and w not in seen:
                seen.add(w)
                stack.append(w)
    D = {v for v in range(n) if 2 * v in seen and 2 * v + 1 not in seen}
    assert len(D) == res.flow_value
    inside = [False] * n
    for v in sorted(range(n), key=lambda v: not g.inputs >> v & 1):   # inputs first, then program order
        if v in D:
            inside[v] = True
        elif not g.inputs >> v & 1:
            m, ok = g.preds[v], True
            while m and ok:
                low = m & -m
                m ^= low
                ok = inside[low.bit_length() - 1]
            inside[v] = ok
    assert all(inside[h] for h in H)
    return res.flow_value, sum(inside)


def _cells(tr):
    """``(i, j, layer)`` of every vertex of a two-statement 2-D stencil's trace (jacobi's shape: the
    second statement's loops are ``i_2, j_2``; two layers per time step)."""
    i = np.where(tr.stmt == 0, tr.vars["i"], tr.vars["i_2"])
    j = np.where(tr.stmt == 0, tr.vars["j"], tr.vars["j_2"])
    return i, j, 2 * tr.vars["t"] + tr.stmt


def _rectangle_chi(x: float, per_point: int) -> float:
    """max ``per_point·i·j·t`` subject to Corollary 5.1's ``i·j·t − (i − 2)(j − 2)(t − 1) ≤ x`` (the
    thesis's two-dimensional stencil box, lower-order terms included), over real ``i, j ≥ 2``."""
    best = 0.0
    for i in np.linspace(2, x, 800):
        j = np.linspace(2, x, 800)
        lin = 2 * i + 2 * j - 4                     # the coefficient of t
        t = np.maximum((x - i * j + 2 * i + 2 * j - 4) / lin, 0)
        best = max(best, float((i * j * t).max()))
    return per_point * best * 1.01                  # the grid's error, generously


def test_the_published_stencil_entries_are_the_rectangle_model():
    a, t, x = sp.symbols("a t x", positive=True)
    entries = {  # name: (d, vertices per point and step, |V|, published entry)
        "jacobi_1d": (1, 2, 2 * N * T, 2 * N * T / S),
        "jacobi_2d": (2, 2, 2 * N ** 2 * T, 4 * N ** 2 * T / sp.sqrt(S)),
        "heat_3d": (3, 2, 2 * N ** 3 * T, 6 * N ** 3 * T / S ** sp.Rational(1, 3)),
        "seidel_2d": (2, 1, N ** 2 * T, 4 * N ** 2 * T / sp.sqrt(S)),
    }
    for name, (d, k, V, entry) in entries.items():
        tt = sp.solve(sp.Eq(a ** d + 2 * d * a ** (d - 1) * t, x), t)[0]
        work = sp.expand(k * a ** d * tt)
        (a0,) = [r for r in sp.solve(sp.diff(work, a), a) if r.is_positive]
        chi = sp.simplify(work.subs(a, a0))
        x0 = (d + 1) * S                         # where χ(X)/(X − S) is least (χ ∝ X^{(d+1)/d})
        assert sp.simplify(sp.diff(chi / (x - S), x).subs(x, x0)) == 0
        rho = sp.simplify(chi.subs(x, x0) / (x0 - S))
        assert sp.simplify(V / rho - entry) == 0, name


def test_a_diamond_beats_the_rectangle_of_jacobi_2d_and_stays_within_the_pyramid():
    p = _program("jacobi_2d")
    size, steps, r = 30, 8, 12
    g, tr = cdag(p, {"N": size, "TSTEPS": steps}), build_trace(p, {"N": size, "TSTEPS": steps})
    i, j, layer = _cells(tr)
    c = size // 2
    H = np.flatnonzero(np.abs(i - c) + np.abs(j - c) <= r - layer).tolist()
    assert len(H) == sum(2 * m * m + 2 * m + 1 for m in range(r + 1))   # layers of radius 12, 11, … 0
    x, closure = _dominator(g, H)
    assert x == 2 * r * r + 2 * r + 1 and closure == len(H)             # its base, which dominates only H
    assert len(H) > _rectangle_chi(x, per_point=2)                      # 1469 > 1404 (the leading term: 1065)
    fused = next(it for it in analyze(p).subgraphs if it.method == "pyramid")
    assert len(H) <= float(fused.chi.subs(X, x))
    lead = fused.chi.subs(X, x) - 2 * x                                 # without its linear term
    assert closure - x <= float(lead) and closure - x > x ** 1.5 / 6    # (the cube's lead: 923 < 1156)


def test_a_box_moving_back_a_row_per_sweep_beats_the_rectangle_of_seidel_2d():
    p = _program("seidel_2d")
    size, steps, (a, b, h) = 24, 8, (8, 16, 8)
    g, tr = cdag(p, {"N": size, "TSTEPS": steps}), build_trace(p, {"N": size, "TSTEPS": steps})
    t, i, j = tr.vars["t"], tr.vars["i"], tr.vars["j"]
    i0, j0 = size - 4 - a, 3                    # interior: the halo rows and columns are computed values
    fixed = (i >= i0 - 4) & (i < i0 - 4 + a) & (j >= j0) & (j < j0 + b) & (t < h)
    moving = (i + t >= i0) & (i + t < i0 + a) & (j >= j0) & (j < j0 + b) & (t < h)
    x_box, _ = _dominator(g, np.flatnonzero(fixed).tolist())
    x, closure = _dominator(g, np.flatnonzero(moving).tolist())
    assert x_box == a * b * h - (a - 2) * (b - 2) * (h - 1)              # Corollary 5.1 counts a box exactly
    assert x < x_box                                                     # the moving box reads less
    assert a * b * h > _rectangle_chi(x, per_point=1)                   # 1024 > the rectangle's ~800 at X = 338
    it = analyze(p).subgraphs[0]
    assert it.method == "sweep" and a * b * h <= float(it.chi.subs(X, x))
    assert closure - x <= float((it.chi - X).subs(X, x))                # the leading part alone covers it


def test_seidel_2d_is_bounded_as_a_sweep():
    r = analyze(_program("seidel_2d"))
    assert sp.simplify(r.leading - sp.sqrt(6) * N ** 2 * T / sp.sqrt(S)) == 0
    (it,) = r.subgraphs
    assert sp.simplify(it.chi - (sp.sqrt(2) * X ** sp.Rational(3, 2) / 9 + X)) == 0


GS1 = """
def gs1(T, N):
    for t in range(T):
        for i in range(1, N - 1):
            A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
"""


def test_sweeps_are_recognized_by_their_reads():
    (st,) = _program("seidel_2d").statements
    assert sweep_stencil(st) == (2, ((-1, -1), (-1, 0), (-1, 1), (0, -1)),
                                 ((0, 0), (0, 1), (1, -1), (1, 0), (1, 1)))
    assert all(sweep_stencil(s) is None for s in _program("jacobi_2d").statements)   # reads another array
    (st,) = parse_source(GS1)[0].statements
    assert sweep_stencil(st) == (1, ((-1,),), ((0,), (1,)))
    chi, _, rho, _ = sweep_chi(*sweep_stencil(st))
    assert sp.simplify(chi - (X ** 2 / 4 + X)) == 0 and sp.simplify(rho - (S + 2)) == 0
    (st,) = parse_source(GS1.replace("range(1, N - 1)", "range(N - 2, 0, -1)"))[0].statements
    assert sweep_stencil(st) == (1, ((1,),), ((-1,), (0,)))            # a descending sweep reads ahead
    (st,) = parse_source(GS1.replace("A[i - 1] + A[i] + A[i + 1]", "A[i - 1] + A[i - 2]"))[0].statements
    assert sweep_chi(*sweep_stencil(st)) is None                         # no previous sweep read: no bound


def test_a_segment_moving_back_a_cell_per_sweep_is_the_one_dimensional_sweep_chi():
    """1-D Gauss–Seidel: a segment of w cells moving one cell back per sweep reads one cell per sweep
    (X = w + h − 1 for h sweeps, X²/4 vertices), twice the rectangle's (X + 2)²/8; the sweep χ X²/4 + X
    covers it."""
    (p,) = parse_source(GS1)
    g, tr = cdag(p, {"N": 30, "T": 12}), build_trace(p, {"N": 30, "T": 12})
    t, i = tr.vars["t"], tr.vars["i"]
    w, h = 10, 10
    H = np.flatnonzero((i + t >= 15) & (i + t < 15 + w) & (t < h)).tolist()
    x, _ = _dominator(g, H)
    assert x == w + h - 1 and len(H) == w * h > (x + 2) ** 2 / 8
    (it,) = analyze(p).subgraphs
    assert it.method == "sweep" and len(H) <= float(it.chi.subs(X, x))


@pytest.mark.parametrize("src,values,memories", [
    (GS1, {"N": 6, "T": 2}, (4, 5)),
    (GS1, {"N": 5, "T": 3}, (4, 5)),
    (None, {"N": 3, "TSTEPS": 3}, (10, 11)),
])
def test_the_sweep_bound_is_at_most_the_optimal_pebbling(src, values, memories):
    p = parse_source(src)[0] if src else _program("seidel_2d")
    r, g = analyze(p), cdag(p, values)
    for memory in memories:
        best = optimal_io(g, memory)
        assert r.evaluate({**values, "S": memory}) <= best + 1e-9
        assert r.evaluate_numeric({**values, "S": memory}) <= best + 1e-9


def test_the_sweep_bounds_are_below_replayed_schedules():
    (p,) = parse_source(GS1)
    values, memory = {"N": 130, "T": 64}, 18
    tr = build_trace(p, values)
    t, i = tr.vars["t"], tr.vars["i"]
    skewed = np.lexsort((t, i + t, t // 16))      # bands of 16 sweeps, column by column (c = i + t)
    assert legal(tr, skewed)
    io = replay_order(tr, skewed, memory).total
    assert analyze(p).evaluate({**values, "S": memory}) <= io < replay_order(tr, loop_order(tr), memory).total
    p = _program("seidel_2d")
    values, memory = {"N": 34, "TSTEPS": 8}, 64
    tr = build_trace(p, values)
    bound = analyze(p).evaluate({**values, "S": memory})
    for order in (loop_order(tr), tiled_order(tr, [(("t",), 8), (("i",), 1), (("j",), 18)], {"j": ("t", 1)})):
        if legal(tr, order):
            assert bound <= replay_order(tr, order, memory).total


DIAGONAL = """
def diagonal(T, N):
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = A[i - 1, j - 1] + A[i, j] + A[i + 1, j + 1]
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = B[i - 1, j - 1] + B[i, j] + B[i + 1, j + 1]
"""


def test_a_stencil_along_one_diagonal_is_bounded_per_diagonal():
    """Two reads per dimension (halo 2) but all on one diagonal: every diagonal ``i − j`` is its own
    1-D stencil.  A legal schedule that runs each diagonal in skewed bands of S/4 layers moves fewer
    words than the 2-D pyramid's ρ allows; the bound is the 1-D pyramid's, below it."""
    from meshplan.solvers.soap.pyramid import pyramid_chi

    (p,) = parse_source(DIAGONAL)
    values, memory = {"N": 50, "T": 32}, 256
    tr = build_trace(p, values)
    i, j, layer = _cells(tr)
    order = np.lexsort((layer, i + layer, layer // (memory // 4), i - j))
    assert legal(tr, order)
    io = replay_order(tr, order, memory).total
    _, _, rho_2d, _ = pyramid_chi(2, 2, 2)
    assert io < tr.instances / float(rho_2d.subs(S, memory))      # 7292 < 11 522
    r = analyze(p)
    fused = next(it for it in r.subgraphs if len(it.problem.arrays) == 2)
    assert fused.method == "pyramid" and sp.simplify(fused.chi - (X ** 2 / 4 + 2 * X)) == 0
    assert r.evaluate({**values, "S": memory}) <= io


def _sweep_source(offsets: list[int]) -> str:
    reads = " + ".join(f"A[i + {o}]" if o >= 0 else f"A[i - {-o}]" for o in offsets)
    return f"""
def sweep(T, N):
    for t in range(T):
        for i in range(2, N - 2):
            A[i] = ({reads}) / 3.0
"""


@pytest.mark.parametrize("offsets", [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1, 2], [-2, -1, 0, 1, 2], [-1, 0, 2], [-2, 0, 1]])
def test_one_dimensional_sweeps_stay_below_the_optimal_pebbling_and_a_skewed_schedule(offsets):
    """Sweeps with other reads (one or two cells either side of the element): the bound is at most the
    exhaustive optimum at tiny sizes and at most a legal skewed schedule's I/O."""
    (p,) = parse_source(_sweep_source(offsets))
    (st,) = p.statements
    d, cur, prev = sweep_stencil(st)
    assert d == 1 and cur == tuple((o,) for o in offsets if o < 0) and prev == tuple((o,) for o in offsets if o >= 0)
    r = analyze(p)
    assert r.subgraphs[0].method == "sweep"
    values = {"N": 7, "T": 2}
    g = cdag(p, values)
    memory = max(bin(m).count("1") for m in g.preds) + 1
    assert r.evaluate({**values, "S": memory}) <= optimal_io(g, memory) + 1e-9
    values, memory = {"N": 260, "T": 64}, 24
    tr = build_trace(p, values)
    t, i = tr.vars["t"], tr.vars["i"]
    order = np.lexsort((t, i + 2 * t, t // 8))      # bands of 8 sweeps, columns i + 2t
    assert legal(tr, order)
    assert r.evaluate({**values, "S": memory}) <= replay_order(tr, order, memory).total



def _own(center: bool) -> str:
    def reads(a):
        return " + ".join(f"{a}[{x}]" for x in ["i - 1, j", "i + 1, j"] + (["i, j"] if center else []) + ["i, j - 1", "i, j + 1"])
    return f"""
def own(T, N):
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = {reads("A")} + B[i, j]
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = {reads("B")} + A[i, j]
"""


@pytest.mark.parametrize("center", [True, False])
def test_a_stencil_that_also_reads_its_own_values_is_bounded_by_the_cycle_of_its_other_reads(center):
    """jacobi-2d whose statements also add their own previous value: the reads of the other array still
    close into jacobi's cycle of layers (A → B → A), and a read more only adds parents a subcomputation
    must hold, so the pyramid's layer argument holds — in the lattice those reads generate.  With the
    centre read that is jacobi's χ; without it a vertex reads only the other parity, the CDAG splits into
    two checkerboards and the argument gives ``X^{3/2}/3`` (the pyramid of the stencil's counts alone, which
    the tool took unchecked before, claimed jacobi's).  A diamond pyramid (on one checkerboard without the
    centre) stays within χ, and the bound below the program order's I/O."""
    (p,) = parse_source(_own(center))
    r = analyze(p)
    fused = next(it for it in r.subgraphs if len(it.problem.arrays) == 2)
    jacobi = sp.sqrt(2) * X ** sp.Rational(3, 2) / 6 + 2 * X
    assert fused.method == "pyramid"
    assert sp.simplify(fused.chi - (jacobi if center else X ** sp.Rational(3, 2) / 3 + 2 * X)) == 0
    size, steps, rad = 26, 6, 11
    g, tr = cdag(p, {"N": size, "T": steps}), build_trace(p, {"N": size, "T": steps})
    i, j, layer = _cells(tr)
    c = size // 2
    mine = (np.abs(i - c) + np.abs(j - c) <= rad - layer) & (center | ((i + j + layer) % 2 == 0))
    x, closure = _dominator(g, np.flatnonzero(mine).tolist())
    assert np.count_nonzero(mine) <= closure <= float(fused.chi.subs(X, x))
    values = {"N": 20, "T": 4}
    tr = build_trace(p, values)
    for memory in (16, 64):
        assert r.evaluate({**values, "S": memory}) <= replay_order(tr, loop_order(tr), memory).total
