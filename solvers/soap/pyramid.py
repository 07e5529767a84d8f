"""Pyramid subcomputations of iterated stencils (thesis chapter 5; the stencil entries of Table 5.2).

A fused stencil subgraph — statements that each sweep the same ``d`` spatial loops inside one
time loop ``t`` and read only the previous sweep's array at constant offsets — has a CDAG of
layers (one layer per statement per time step) in which a vertex depends on the layer below
within a halo of ``τ`` extra cells per dimension (``τ = 2`` for a 3-point stencil).  Its largest
subcomputation with a dominator of ``X`` vertices is a pyramid, not a rectangle: a base of
``w^d = X`` loaded vertices carries layers of width ``w − τh`` for ``h = 1, 2, …``, so

    Σ_{h ≥ 1} (w − τh)^d ≤ ∫_0^{w/τ} (w − τh)^d dh = X^{(d+1)/d} / (τ(d+1))

for a cube, and ``(d!)^{1/d}`` times that for the cross-polytope or simplex a stencil along the
axes allows (see :func:`pyramid_chi`; plus a linear term for flat tiles).
(1-D, 3-point: χ = X²/4, X0 = 2S, ρ = S and jacobi-1d's ``2NT/S``; the rectangle model solved
exactly would give X²/8 and twice that bound, which the method does not support.)  This module
recognizes such subgraphs structurally and returns that χ; everything else is left to
:mod:`meshplan.solvers.soap.chi`.

An in-place Gauss–Seidel sweep (seidel-2d) is one statement whose reads behind the write in the
sweep order see the current sweep and the others the previous one; :func:`sweep_stencil` and
:func:`sweep_chi` bound it by a layer argument over every dominator, not a chosen shape (see
:func:`sweep_chi`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import sympy as sp

from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.symbols import S, X

__all__ = ["pyramid_shape", "pyramid_chi", "sweep_stencil", "sweep_chi", "stencils_refined"]


def pyramid_shape(problem: SubProblem) -> tuple[int, int] | None:
    """``(d, τ)`` when ``problem`` is a fused iterated stencil (see the module doc), else ``None``.

    Every access term is the input-output set of an array of H (no input from outside), with
    one common version (time) class; every statement's work is that class times the same
    ``d ≥ 1`` spatial classes, which are the spatial dimensions of every term; at least two
    statements (layers alternate between arrays) and every spatial dimension has a halo.
    ``τ`` is the smallest positive halo (the slowest shrinking pyramid: the largest χ)."""
    if len(problem.work) < 2 or not problem.terms or problem.constraints:
        return None
    versions = {t.version for t in problem.terms}
    if len(versions) != 1 or any(t.kind != "inout" for t in problem.terms):
        return None
    (version,) = versions
    if len(version) != 1:
        return None
    (time,) = version
    spatial = None
    for t in problem.terms:
        if any(len(d) != 1 for d in t.dims):
            return None
        dims = tuple(d[0] for d in t.dims)
        if spatial is None:
            spatial = dims
        if set(dims) != set(spatial) or len(dims) != len(set(dims)):
            return None
    if not spatial or time in spatial:
        return None
    for _, cls in problem.work:
        if sorted(cls) != sorted((time,) + spatial):
            return None
    halos = [t.t[t.dims.index((v,))] for t in problem.terms for v in spatial]
    per_dim = {v: max(t.t[t.dims.index((v,))] for t in problem.terms) for v in spatial}
    if any(h == 0 for h in per_dim.values()):
        return None
    return len(spatial), min(h for h in halos if h > 0)


def pyramid_chi(d: int, tau: int, layers: int):
    """``(χ(X), X0, ρ(S), W)``: χ = (d!)^{1/d}·X^{(d+1)/d}/(τ(d+1)) + k·X, X0 = (d+1)S.

    The base need not be a cube: a stencil that reads its neighbours along the axes only (the
    5-point jacobi-2d, the 7-point heat-3d) lets a layer shrink by a cross-polytope, and a
    one-sided one by a simplex corner.  Both hold ``(2r)^d/d!`` (resp. ``L^d/d!``) cells for
    the same shrink per layer as a cube of width ``2r`` (``L``), so with ``X`` loaded base cells
    they carry ``(d!)^{1/d}`` times the cube's volume: a 5-point diamond of radius 3 computes
    19 vertices from 25 loaded ones, a 5×5 square 10.  The cube alone (the earlier
    ``X^{(d+1)/d}/(τ(d+1))``) is therefore no upper bound on χ for d ≥ 2, and the bound it gave
    for jacobi-2d and heat-3d (1.15× and 1.26× the published entries) was not supported.  The
    factor is 1 for d = 1 (jacobi-1d keeps ``2NT/S``).

    No other dominator does better (at interior points): let ``C`` hold every vertex all of whose
    paths from the inputs meet a dominator ``D`` of ``X`` vertices, and ``C_t``, ``D_t``,
    ``F_t = C_t ∖ D_t`` (``f_t = |F_t|``) its parts in layer ``t``.  The parents of ``F_t`` lie in
    ``C_{t−1}``: ``F_t + K ⊆ C_{t−1}`` for the stencil's offsets ``K``, and by the Brunn–Minkowski
    inequality ``|D_{t−1}| ≥ f_t − f_{t−1} + dκ f_t^{(d−1)/d}`` with ``κ^d = |conv K|``.  Summed up to
    ``t``, ``X ≥ f_t + dκP_t`` for ``P_t = Σ_{s ≤ t} f_s^{(d−1)/d}``, so
    ``Σ_t f_t ≤ Σ_t (X − dκP_t)^{1/d}(P_t − P_{t−1}) ≤ ∫_0^{X/(dκ)} (X − dκu)^{1/d} du = X^{(d+1)/d}/((d+1)κ)``,
    the pyramid's volume, and ``|H| ≤ |C| ≤ X + Σ_t f_t``.  The cross-polytope of halo ``τ`` has
    ``κ = τ/(d!)^{1/d}``, which gives the constant above (the 5-point cross: ``|conv K| = 2``).  A
    rectangle of the same ``X`` is smaller (tests/solvers/test_soap_stencil_entries.py: a diamond of
    radius 12 in jacobi-2d's CDAG, base 313, holds 1469 vertices; Corollary 5.1's rectangle allows
    1404).  The argument needs ``conv K`` of full dimension: offsets along one diagonal only
    (``τ`` = 2 in each dimension, ``|conv K| = 0``) bound nothing, and are not told apart here.

    The linear term covers flat subcomputations too small to be pyramids (one time step of
    the ``k = layers`` statements over a tile whose halo is cheap in the access model); it
    changes only lower-order terms."""
    W = sp.Rational(d + 1, d)
    chi = sp.factorial(d) ** sp.Rational(1, d) * X ** W / (tau * (d + 1)) + layers * X
    X0 = (d + 1) * S
    rho = simplified(chi.subs(X, X0) / (X0 - S))
    return chi, X0, rho, Fraction(d + 1, d)


Offsets = tuple[tuple[int, ...], ...]


def sweep_stencil(st) -> tuple[int, Offsets, Offsets] | None:
    """``(d, current, previous)`` when statement ``st`` is an in-place sweep, else ``None``.

    The outermost loop (the sweep ``t``) is in no subscript; the ``d ≥ 1`` inner loops (step 1) index
    the output ``A`` once each, and every read is of ``A`` at a constant offset from the write.  A read
    whose offset comes before the write in the inner loops' order (lexicographic, a descending loop
    reversed) sees the current sweep's value, every other read (the element itself and the ones ahead)
    the previous sweep's — at interior points; the reads that reach the domain's edge read inputs.
    Offsets are in the inner loops' order."""
    loops, out = st.loops, st.output
    if len(loops) < 2 or not st.inputs or any(lp.step != 1 for lp in loops):
        return None
    t, inner = loops[0].var, [lp.var for lp in loops[1:]]
    syms = {v: sp.Symbol(v) for v in inner}
    where = {}
    for k, e in enumerate(out.index):
        if not isinstance(e, sp.Symbol) or e.name not in syms or e.name in where:
            return None
        where[e.name] = k
    if sorted(where) != sorted(inner):
        return None
    current, previous = [], []
    for a in st.inputs:
        if a.array != out.array or len(a.index) != len(out.index):
            return None
        off = []
        for v in inner:
            k = where[v]
            o = sp.expand(a.index[k] - out.index[k])
            if not o.is_Integer:
                return None
            off.append(int(o))
        if any(sp.Symbol(t) in e.free_symbols for e in a.index):
            return None
        signed = tuple(-o if lp.descending else o for o, lp in zip(off, loops[1:]))
        (current if signed < (0,) * len(signed) else previous).append(tuple(off))
    return len(inner), tuple(current), tuple(previous)


def _hull_volume(points: Offsets, d: int) -> Fraction:
    """The volume of the convex hull of lattice ``points`` in ``d`` dimensions (exact: a multiple of 1/d!)."""
    pts = sorted(set(points))
    if len(pts) <= d:
        return Fraction(0)
    if d == 1:
        return Fraction(pts[-1][0] - pts[0][0])
    if d == 2:     # Andrew's monotone chain, then the shoelace
        def cross(o, a, b):
            return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
        hull = []
        for chain in (pts, pts[::-1]):
            part = []
            for q in chain:
                while len(part) >= 2 and cross(part[-2], part[-1], q) <= 0:
                    part.pop()
                part.append(q)
            hull += part[:-1]
        twice = sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(hull, hull[1:] + hull[:1]))
        return Fraction(abs(twice), 2)
    from scipy.spatial import ConvexHull, QhullError
    try:
        vol = ConvexHull(pts).volume
    except QhullError:      # flat: no interior
        return Fraction(0)
    return Fraction(round(vol * math.factorial(d)), math.factorial(d))


def _lattice_volumes(sets: list[Offsets]) -> tuple[int, list[Fraction]]:
    """``(r, volumes)``: the rank ``r`` of the lattice ``L`` the differences within each offset set
    generate, and each set's hull volume in ``L``'s coordinates.  Vertices whose positions differ by no
    vector of ``L`` share no path, so a stencil is ``r``-dimensional and its sizes count in ``L``'s cells
    (offsets along one diagonal: ``r = 1``; a checkerboard: cells of area 2)."""
    from sympy.matrices.normalforms import hermite_normal_form

    diffs = [tuple(a - b for a, b in zip(k, ks[0])) for ks in sets for k in ks]
    diffs = [v for v in diffs if any(v)]
    if not diffs:
        return 0, [Fraction(0)] * len(sets)
    H = hermite_normal_form(sp.Matrix(diffs).T)
    B = sp.Matrix.hstack(*[H[:, c] for c in range(H.shape[1]) if any(H[:, c])])
    r = B.shape[1]
    G = (B.T * B).inv() * B.T
    vols = []
    for ks in sets:
        pts = []
        for k in ks:
            c = G * sp.Matrix([a - b for a, b in zip(k, ks[0])])
            pts.append(tuple(int(x) for x in c))      # integers: k − k0 lies in L
        vols.append(_hull_volume(tuple(pts), r))
    return r, vols


def sweep_chi(d: int, current: Offsets, previous: Offsets):
    """``(χ(X), X0, ρ(S), W)`` of an in-place sweep, or ``None`` when a hull below is flat.

    χ(X) = X^{(d+1)/d} / ((d+1)^{(d+1)/d}·κ) + X, X0 = (d+1)S, ρ = S^{1/d}/(dκ) + (d+1)/d, where
    κ^d = min(|conv(K_c ∪ {0})|, |conv K_p|) for the current-sweep offsets ``K_c`` and the
    previous-sweep ones ``K_p`` (seidel-2d: both 3/2, χ = √2·X^{3/2}/9 + X, ρ = √6·√S/6 + 3/2), measured
    in the cells of the lattice their differences generate, whose rank replaces ``d``
    (:func:`_lattice_volumes`).

    The argument (section 5.2.2's X-partition; any dominator, not a chosen shape): given a dominator
    ``D`` of ``|D| ≤ X`` vertices, let ``C`` hold every vertex all of whose paths from the inputs meet
    ``D``, ``C_t``, ``D_t`` its part in sweep ``t`` and ``F_t = C_t ∖ D_t``, ``f_t = |F_t|``.  A vertex of
    ``F_t`` has all its parents in ``C``: ``F_t + K_c ⊆ C_t`` and ``F_t + K_p ⊆ C_{t−1}``.  By the
    Brunn–Minkowski inequality ``|F + K| ≥ |F| + d·κ·|F|^{(d−1)/d}``, so the current-sweep reads give
    ``|D_t| ≥ dκ f_t^{(d−1)/d}`` and the previous-sweep ones ``|D_{t−1}| ≥ f_t − f_{t−1} + dκ f_t^{(d−1)/d}``.
    Summing the second below a sweep ``m`` of largest ``f_m = M`` and the first above it,
    ``X ≥ M + dκ Σ_t f_t^{(d−1)/d}``, hence ``Σ_t f_t ≤ M^{1/d} Σ_t f_t^{(d−1)/d} ≤ M^{1/d}(X − M)/(dκ)``, at
    most the constant above (at ``M = X/(d+1)``); ``|H| ≤ |C| ≤ X + Σ_t f_t``.  A rectangle (the
    thesis's Lemma 5.4 with Corollary 5.1, which gives the published seidel-2d entry) is not the largest
    subcomputation: a box that moves one row back per sweep needs only the row above and the two columns
    beside it per sweep (the previous sweep's reads fall on the row the sweep before already read),
    ``X^{3/2}/(3√6)`` asymptotically against the rectangle's ``X^{3/2}/(6√3)``.  Like the pyramid, the
    argument is for interior points: a subcomputation against the domain's edge, whose reads there are
    inputs shared by every sweep, can be larger."""
    if not previous:
        return None
    d, vols = _lattice_volumes([((0,) * d,) + tuple(current), tuple(previous)])
    vol = min(vols)
    if d == 0 or vol <= 0:
        return None
    kappa = sp.Rational(vol.numerator, vol.denominator) ** sp.Rational(1, d)
    W = sp.Rational(d + 1, d)
    chi = X ** W / (sp.Integer(d + 1) ** W * kappa) + X
    X0 = (d + 1) * S
    rho = simplified(chi.subs(X, X0) / (X0 - S))
    return chi, X0, rho, Fraction(d + 1, d)


def _sweeps_refined(results: list, program) -> list:
    """``results`` with the intensity of every single-statement subgraph that is an in-place sweep
    (:func:`sweep_stencil`) replaced by :func:`sweep_chi`'s.  The rectangle the other routes bound
    (Lemma 5.4 with Corollary 5.1) is not the largest subcomputation of a sweep, so their value is
    not kept even where it is lower (a one-dimensional sweep: ``(X + 2)²/8`` against the ``X²/4`` of a
    segment moving one cell back per sweep).  Where the sweep's ρ is lower at some memory size and a
    screened subgraph shares an array, the screen compared against the old ρ: that one is kept."""
    from meshplan.solvers.soap.chi import SAMPLE_S, rho_value_at

    screened = {a for r in results if r.method == "screened" for a in r.problem.arrays}
    by_name = {st.name: st for st in program.statements}
    out = []
    for r in results:
        got = None
        if len(r.problem.statements) == 1 and r.method not in ("screened", "unbounded") \
                and r.problem.statements[0] in by_name:
            shape = sweep_stencil(by_name[r.problem.statements[0]])
            got = sweep_chi(*shape) if shape else None
        if got is not None and screened & set(r.problem.arrays):
            lower = any(rho_value_at(got[2], s) < rho_value_at(r.rho, s) for s in SAMPLE_S)
            got = None if lower else got
        if got is None:
            out.append(r)
            continue
        chi, X0, rho, W = got
        d = len(by_name[r.problem.statements[0]].loops) - 1
        out.append(dataclasses.replace(r, method="sweep", chi=chi, X0=X0, rho=rho, exponent=W, notes=tuple(r.notes) + (
            f"in-place sweep ({d}-D; the reads behind the write see the current sweep): a dominator of X "
            f"vertices dominates at most χ(X) = {chi} (a layer argument over every dominator; the tiles "
            "listed are the rectangle's)",)))
    return out


def _offsets(st, arrays) -> Offsets | None:
    """The constant offsets (in the output's subscript order) of ``st``'s reads of ``arrays``; ``None``
    when a subscript is not the output's plus a constant."""
    out = st.output
    got = []
    for a in st.inputs:
        if a.array not in arrays:
            continue
        if len(a.index) != len(out.index):
            return None
        off = tuple(sp.expand(x - y) for x, y in zip(a.index, out.index))
        if not all(o.is_Integer for o in off):
            return None
        got.append(tuple(int(o) for o in off))
    return tuple(got)


def _layer_reads(stmts, arrays) -> list | None:
    """Per statement, the offsets of the one read the layer argument follows: a choice of one array of the
    subgraph per statement, written by another statement (its own may be read in place, within the sweep),
    each array chosen once, so that the chosen reads close into cycles of layers (jacobi's ``A → B → A``).
    Other reads only add parents a subcomputation must hold, so any such choice bounds χ; the one whose
    least hull volume (in its lattice's rank) is largest is taken.  ``None`` when the statements do not
    write distinct arrays or no choice closes (fdtd-2d's two spokes both read ``hz``)."""
    if sorted(st.output.array for st in stmts) != sorted(arrays):
        return None
    options = [sorted({a.array for a in st.inputs if a.array in arrays} - {st.output.array}) for st in stmts]
    best = None
    for choice in itertools.product(*options):
        offs = [_offsets(st, {a}) for st, a in zip(stmts, choice)]
        if len(set(choice)) < len(choice) or any(not o or len(o[0]) != len(offs[0][0]) for o in offs):
            continue
        rank, vols = _lattice_volumes(offs)
        if best is None or (rank, min(vols)) > best[0]:
            best = ((rank, min(vols)), offs)
    return None if best is None else best[1]


def _pyramids_checked(results: list, program) -> list:
    """Every pyramid of :func:`pyramid_chi` checked against its statements' read offsets (the problem
    holds only their counts per dimension).  Where the reads close into cycles of layers
    (:func:`_layer_reads`: jacobi, heat, and stencils that also read older or their own values), the
    layer argument of :func:`pyramid_chi` is taken in the lattice of :func:`_lattice_volumes` (rank ``r``,
    ``κ^r`` the least hull volume over the chosen reads) whenever that gives a larger χ than the
    cross-polytope of halo ``τ``: offsets along one diagonal make ``r = 1`` (χ = X²/(2κ), a far weaker
    bound).  A leapfrog (fdtd-2d) is bounded by :func:`_leapfrog`; any other fused stencil gets no bound
    (ρ = ∞): no layer argument here covers it."""
    by_name = {st.name: st for st in program.statements}
    out = []
    for r in results:
        shape = pyramid_shape(r.problem) if r.method == "pyramid" else None
        stmts = [by_name.get(n) for n in r.problem.statements]
        if shape is None or None in stmts:
            out.append(r)
            continue
        d, tau = shape
        arrays = set(r.problem.arrays)
        offs = [_offsets(st, arrays) for st in stmts]
        if any(o is None or not o or len(o[0]) != d for o in offs):
            out.append(r)
            continue
        if any(len({a.array for a in st.inputs if a.array in arrays}) > 1 or
               any(a.array == st.output.array for a in st.inputs) for st in stmts):   # not jacobi's alternation
            ordered = [st for st in program.statements if st.name in r.problem.statements]   # program order
            leap = _leapfrog(r, ordered, arrays, results)
            if leap is not None:
                out.append(leap)
                continue
        chosen = _layer_reads(stmts, arrays)
        rank, vols = _lattice_volumes(chosen) if chosen else (0, [0])
        vol = min(vols)
        if rank == 0 or vol == 0:   # no cycle of layers with a volume: no bound
            why = ("a statement's stencil is flat (its offsets' hull has no volume): the pyramid does not bound it"
                   if chosen else "the stencil's offsets span fewer dimensions than its loops: the CDAG splits into "
                   "independent lower-dimensional stencils, which the pyramid does not bound"
                   if _lattice_volumes(offs)[0] < d else "a fused stencil whose reads close into no cycle of layers "
                   "and that is no leapfrog: no layer argument covers it, so it gets no bound")
            out.append(dataclasses.replace(r, method="unbounded", chi=None, X0=sp.oo, rho=sp.oo,
                                           notes=tuple(r.notes) + (why,)))
            continue
        if rank == d and vol >= Fraction(tau ** d, math.factorial(d)):
            out.append(r)       # at least the cross-polytope: the χ above holds
            continue
        kappa = sp.Rational(vol.numerator, vol.denominator) ** sp.Rational(1, rank)
        W = sp.Rational(rank + 1, rank)
        chi = X ** W / ((rank + 1) * kappa) + len(r.problem.work) * X
        X0 = (rank + 1) * S
        out.append(dataclasses.replace(r, chi=chi, X0=X0, exponent=Fraction(rank + 1, rank),
                                       rho=simplified(chi.subs(X, X0) / (X0 - S)), notes=tuple(r.notes) + (
            f"the stencil's offsets span {rank} of {d} dimensions with hull {vol} (the cross-polytope's "
            f"{Fraction(tau ** d, math.factorial(d))}): χ(X) = {chi}",)))
    return out


def _leapfrog(r, stmts, arrays, results):
    """``r`` bounded as a leapfrog stencil (:mod:`meshplan.solvers.soap.stencil_leapfrog`: statements that
    read the same step's values of the others, fdtd-2d), or ``None`` when it is none or a screened subgraph
    sharing an array would exceed the new ρ at some sampled memory size (the screen compared against the
    old one)."""
    from meshplan.solvers.soap.chi import SAMPLE_S, rho_value_at
    from meshplan.solvers.soap.stencil_leapfrog import leapfrog_chi, leapfrog_stencil

    shape = leapfrog_stencil(stmts, arrays)
    got = leapfrog_chi(shape) if shape is not None else None
    if got is None:
        return None
    chi, X0, rho, W = got
    if any(rho_value_at(q.rho, s) > rho_value_at(rho, s) for q in results if q.method == "screened"
           and arrays & set(q.problem.arrays) for s in SAMPLE_S):
        return None
    K = ", ".join(str(k) for k in shape.hub_offsets)
    return dataclasses.replace(r, method="leapfrog", chi=chi, X0=X0, rho=rho, exponent=W, notes=tuple(r.notes) + (
        f"leapfrog stencil ({shape.d}-D, {shape.k} statements; {shape.hub} reads the same step's "
        f"{', '.join(n for n, _, _ in shape.spokes)}, hub offsets per step {K}): a dominator of X vertices "
        f"dominates at most χ(X) = {chi} (a layer argument over every dominator)",))


def stencils_refined(results: list, program) -> list:
    """``results`` with the pyramids checked against their statements' offsets (:func:`_pyramids_checked`;
    leapfrogs such as fdtd-2d bounded by :func:`_leapfrog`) and the in-place sweeps bounded by
    :func:`sweep_chi` (:func:`_sweeps_refined`)."""
    return _sweeps_refined(_pyramids_checked(results, program), program)
