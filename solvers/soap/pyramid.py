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
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp

from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.symbols import S, X

__all__ = ["pyramid_shape", "pyramid_chi"]


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

    The linear term covers flat subcomputations too small to be pyramids (one time step of
    the ``k = layers`` statements over a tile whose halo is cheap in the access model); it
    changes only lower-order terms."""
    W = sp.Rational(d + 1, d)
    chi = sp.factorial(d) ** sp.Rational(1, d) * X ** W / (tau * (d + 1)) + layers * X
    X0 = (d + 1) * S
    rho = simplified(chi.subs(X, X0) / (X0 - S))
    return chi, X0, rho, Fraction(d + 1, d)
