"""The AM–GM equality point: tiles, and χ in closed form when every access term is a monomial
(sections 4.3.2, 5.4.5).

With the exponent LP's dual ``(w, μ)`` (:mod:`meshplan.solvers.soap.relax`), weighted AM–GM is tight where
every access monomial with ``w_j > 0`` takes its share ``w_j X/W`` of the budget; complementary slackness
fixes the rest.  When every term is a monomial that point is feasible and attains the bound, so it is the
maximum of problem (5.8) — the optimal tiling of section 5.4.5.
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp

from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.monomials import monomials
from meshplan.solvers.soap.relax import exponent_lp
from meshplan.solvers.soap.symbols import X

__all__ = ["equality_tiles", "satisfies", "closed_form"]


def equality_tiles(problem: SubProblem, work_index: int = 0):
    """Tiles |D|(X) where weighted AM-GM is tight for one work monomial (``None`` if undetermined).

    Complementary slackness fixes the rest: an order constraint with ``μ > 0``
    holds with equality, and a tile whose dual row has slack
    (``(Aᵀw + Gᵀμ)_v > c_v``) sits at its lower bound ``|D^v| = 1``.
    """
    monos = monomials(problem)
    classes = list(problem.classes)
    L = {c: sp.Symbol(f"L_{c}") for c in classes}
    cls = problem.work[work_index][1]
    lp = exponent_lp(problem, monos, cls)
    if lp is None:
        return None
    W, _, w, mu, keys, A, G = lp
    Wr = sp.Rational(W)
    eqs = []
    for wj, k in zip(w, keys):
        if wj > 0:
            cj = sp.Rational(monos[k])
            eqs.append(sp.Add(*[sp.Rational(v) * L[n] for n, v in k]) - sp.log(sp.Rational(wj) * X / (Wr * cj)))
    for mk, g in zip(mu, problem.constraints):
        if mk > 0:
            eqs.append(sp.Add(*[sp.Rational(e) * L[n] for n, e in g]))
    for i, v in enumerate(classes):
        lhs = sum((w[j] * A[j][i] for j in range(len(w))), Fraction(0)) + \
            sum((mu[k] * G[k][i] for k in range(len(mu))), Fraction(0))
        if lhs > cls.count(v):
            eqs.append(L[v])
    sol = sp.linsolve(eqs, [L[c] for c in classes])
    if not sol:
        return None
    vals = next(iter(sol))
    free = set().union(*[v.free_symbols for v in vals]) & set(L.values())
    tiles = {c: simplified(sp.exp(v.subs({f: 0 for f in free}))) for c, v in zip(classes, vals)}
    for xv in (1e5, 1e9):
        try:
            num = {c: float(e.subs(X, xv)) for c, e in tiles.items()}
        except (TypeError, ValueError):
            return None
        if any(v < 1 - 1e-9 for v in num.values()) or not satisfies(problem, num):
            return None
    return tiles


def satisfies(problem: SubProblem, D: dict, rel: float = 1e-9) -> bool:
    """The order constraints of a max case hold at tiles ``D`` (floats, up to ``rel``)."""
    for g in problem.constraints:
        val = 1.0
        for v, e in g:
            val *= float(D[v]) ** float(e)
        if val > 1 + rel:
            return False
    return True


def closed_form(problem: SubProblem, relax):
    """χ and tiles when every access term is a monomial: the AM-GM equality point.

    Then the relaxation is exact; its equality conditions give the tiles, and
    a feasible point attaining the bound is the maximum (the KKT point of the
    geometric program).
    """
    if len(problem.work) != 1:
        return None
    P, F = problem.work_expr(), problem.access_expr()
    monos = monomials(problem)
    D = problem.symbols
    lower = sp.Add(*[sp.Rational(c)
                     * sp.Mul(*[D[k] ** sp.Rational(v) for k, v in key])
                     for key, c in monos.items()])
    if sp.expand(F - lower) != 0:
        return None
    C, W, _ = relax[0]
    tiles = equality_tiles(problem, 0)
    if tiles is None:
        return None
    chi = C * X ** sp.Rational(W)
    for xv in (1e5, 1e9):
        num = {D[c]: float(e.subs(X, xv)) for c, e in tiles.items()}
        if not satisfies(problem, {c: num[D[c]] for c in tiles}):
            return None
        if abs(float(F.subs(num)) - xv) > 1e-6 * xv or \
                abs(float(P.subs(num)) - float(chi.subs(X, xv))) > 1e-6 * float(chi.subs(X, xv)):
            return None
    return chi, tiles
