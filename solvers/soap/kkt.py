"""χ(X) by the KKT conditions of problem (5.8) for one statement with few tile variables (section 4.3.2).

Stationarity ``∂P/∂D = λ ∂F/∂D`` with ``F = X`` over active sets of the bounds ``|D| ≥ 1``; the work ``P`` is
a monomial, so ``λ`` is eliminated and the polynomial system is solved by bounded steps
(:func:`meshplan.solvers.soap.polysys.solve_bounded`).  A solution is accepted only if it is real,
``≥ 1``, ``λ > 0``, and no random feasible tile does more work (a numeric check that the stationary
point is the global maximum).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import sympy as sp

from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.polysys import Unsolved, solve_bounded
from meshplan.solvers.soap.symbols import X

__all__ = ["kkt", "kkt_system", "KKT_MAX_DEGREE", "KKT_MAX_BRANCHES"]

#: The KKT systems are solved by :func:`polysys.solve_bounded`: linear
#: elimination, splitting on factors, and univariate equations of degree at most
#: this (roots in radicals); at most this many branches.  Past either cap the
#: relaxation is used — a structural test, so the route never depends on time.
KKT_MAX_DEGREE = 2
KKT_MAX_BRANCHES = 16


def kkt_system(P: sp.Expr, F: sp.Expr, free: list[sp.Symbol]):
    """The KKT system of ``max P s.t. F = X`` with λ eliminated.

    ``P = ∏ D_v^{e_v}`` is a monomial, so stationarity ``∂P/∂D_v = λ ∂F/∂D_v``
    times ``D_v`` reads ``e_v P = λ D_v ∂F/∂D_v``; with ``P, λ > 0`` it is
    equivalent to ``e_u D_v ∂F/∂D_v = e_v D_u ∂F/∂D_u`` (u the first free
    variable) and ``λ = e_u P / (D_u ∂F/∂D_u)``.  Returns ``(equations, λ)``,
    or ``None`` when ``P`` is no monomial.
    """
    if not free:
        return None
    e = {}
    for v in free:
        d = sp.degree(P, v)
        if sp.expand(P - P.subs(v, 1) * v ** d) != 0:
            return None
        e[v] = d
    u = next((v for v in free if e[v] > 0), None)
    if u is None:
        return None
    Fu = sp.diff(F, u)
    eqs = [sp.expand(e[u] * v * sp.diff(F, v) - e[v] * u * Fu) for v in free if v != u]
    return eqs + [sp.expand(F - X)], e[u] * P / (u * Fu)


def kkt(problem: SubProblem, *, guess: set[str] | None = None):
    """``(χ(X), {class: |D|(X)})`` from the KKT conditions, or ``None``.

    Active sets of ``|D| ≥ 1`` are tried in a fixed order (the exponent LP's
    guess, none, then by size); a system outside the caps of
    :func:`polysys.solve_bounded` is skipped, so the answer depends on the
    problem alone.  The first active set with a real feasible solution is
    taken, and it must pass the numeric global-maximum check.
    """
    Dsym = problem.symbols
    P, F = problem.work_expr(), problem.access_expr()
    classes = list(problem.classes)
    tried: list[frozenset] = []
    orders = []
    if guess is not None:
        orders.append(frozenset(guess))
    orders.append(frozenset())
    for r in range(1, len(classes)):
        orders += [frozenset(c) for c in itertools.combinations(classes, r)]
    best = None
    for act in orders:
        if act in tried:
            continue
        tried.append(act)
        sub = {Dsym[c]: 1 for c in act}
        free = [Dsym[c] for c in classes if c not in act]
        Pa, Fa = P.subs(sub), sp.expand(F.subs(sub))
        system = kkt_system(Pa, Fa, free)
        if system is None:
            continue
        eqs, lam = system
        try:
            sols = solve_bounded(eqs, free, max_degree=KKT_MAX_DEGREE, max_branches=KKT_MAX_BRANCHES)
        except Unsolved:
            continue
        for sol in sols:
            if set(sol) != set(free) or any(sol[v].free_symbols - {X} for v in free):
                continue
            tiles = {c: (sp.Integer(1) if c in act else sol[Dsym[c]]) for c in classes}
            if not _feasible(tiles, lam.subs(sol)):
                continue
            chi = simplified(Pa.subs({v: sol[v] for v in free}))
            val = float(chi.subs(X, 1e9))
            if best is None or val > best[0]:
                best = (val, chi, tiles)
        if best is not None:
            break
    if best is None:
        return None
    _, chi, tiles = best
    if not _globally_max(problem, chi):
        return None
    return chi, tiles


def _feasible(tiles: dict, lam) -> bool:
    for xv in (1e5, 1e8):
        for e in tiles.values():
            try:
                v = complex(sp.N(e.subs(X, xv)))
            except (TypeError, ValueError):
                return False
            if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)) or v.real < 1 - 1e-9:
                return False
        if lam is not None:     # λ = e_u P / (D_u ∂F/∂D_u): must be finite and > 0
            try:
                lv = complex(sp.N(lam.subs(X, xv)))
            except (TypeError, ValueError, ZeroDivisionError):
                return False
            if not (math.isfinite(lv.real) and math.isfinite(lv.imag)) or \
                    abs(lv.imag) > 1e-9 * max(1.0, abs(lv.real)) or lv.real <= 0:
                return False
    return True


def _globally_max(problem: SubProblem, chi: sp.Expr, samples: int = 300) -> bool:
    """No random feasible tile (scaled onto Σ|A| = X) does more work than χ(X)."""
    classes = list(problem.classes)
    Dsym = [problem.symbols[c] for c in classes]
    Pf = sp.lambdify([Dsym], problem.work_expr(), np)
    Ff = sp.lambdify([Dsym], problem.access_expr(), np)
    rng = np.random.default_rng(0)
    n = len(classes)
    dirs = rng.random((samples, n)) * rng.integers(0, 2, (samples, n))
    dirs = np.vstack([dirs, np.eye(n), np.ones((1, n))])
    dirs = dirs[dirs.any(axis=1)]

    def ev(f, scale):
        out = f(np.exp(scale[:, None] * dirs).T)
        return np.broadcast_to(np.asarray(out, dtype=float), scale.shape)

    for xv in (1e4, 1e7):
        bound = float(chi.subs(X, xv))
        lo, hi = np.zeros(len(dirs)), np.full(len(dirs), 60.0)
        for _ in range(60):
            mid = (lo + hi) / 2
            ok = ev(Ff, mid) <= xv
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
        if np.any(ev(Pf, lo) > bound * (1 + 1e-6)):
            return False
    return True


# -- intensity ---------------------------------------------------------------------

#: memory sizes at which candidate intensities are compared (a sampled check, not a proof)
