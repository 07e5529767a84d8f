"""A bounded solver for the small polynomial systems of the KKT route (section 4.3.2).

``sympy.solve`` on a polynomial system may run for minutes (a Gröbner basis,
then cubic or quartic roots with a symbolic parameter), so :mod:`chi` never
hands it a KKT system.  :func:`solve_bounded` finds the isolated positive
solutions by steps whose cost is bounded by the size of the system alone:

* an equation of total degree 1 eliminates its first variable (substitution);
* an equation that factors over ℚ splits the system, one branch per factor
  (monomial factors are dropped: every unknown is > 0);
* an equation in one unknown of degree ≤ ``max_degree`` is solved by the
  quadratic formula (``sympy.roots``);
* anything else — an irreducible equation of higher degree, several unknowns
  left without a linear or factorable equation, more than ``max_branches``
  branches, or unknowns left undetermined — is given up.

No clock is involved: the same system always gets the same answer, and giving
up only means the caller falls back to the certified relaxation.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["solve_bounded", "Unsolved"]


class Unsolved(Exception):
    """The system is outside what :func:`solve_bounded` solves (the caller falls back)."""


def _clean(eq: sp.Expr, unknowns: list[sp.Symbol]) -> sp.Expr:
    """``eq`` expanded, without monomial factors of the (positive) unknowns."""
    eq = sp.expand(eq)
    if eq == 0 or not eq.free_symbols & set(unknowns):
        return eq
    poly = sp.Poly(eq, *unknowns)
    gcd = poly.terms_gcd()[0]
    if any(gcd):
        eq = sp.expand(eq / sp.Mul(*[s ** k for s, k in zip(unknowns, gcd)]))
    return eq


def solve_bounded(eqs: list[sp.Expr], unknowns: list[sp.Symbol], *, max_degree: int = 2,
                  max_branches: int = 16) -> list[dict]:
    """Isolated solutions ``{unknown: expr}`` of ``eqs = 0`` (raises :class:`Unsolved` past the caps).

    Solutions are expressions in the remaining parameters (here X); the
    caller checks they are real and feasible.  Solutions on which an unknown
    stays free (a positive-dimensional component) are not returned.
    """
    budget = [max_branches]
    out: list[dict] = []
    _solve(list(eqs), list(unknowns), {}, out, budget, max_degree)
    return out


def _solve(eqs, left, sol, out, budget, max_degree) -> None:
    eqs = [e for e in (_clean(e, left) for e in eqs) if e != 0]
    if any(not e.free_symbols & set(left) for e in eqs):
        return                                        # a nonzero constant: no solution on this branch
    if not eqs:
        if not left:
            out.append(sol)
        return                                        # unknowns left free: not an isolated solution
    polys = [sp.Poly(e, *left) for e in eqs]
    for k, (e, p) in enumerate(zip(eqs, polys)):      # 1. eliminate by a linear equation
        if p.total_degree() == 1:
            v = next(u for u in left if p.degree(u) == 1)
            coef = p.coeff_monomial(v)
            if coef.free_symbols & set(left):
                continue
            val = sp.expand(-(e - coef * v) / coef)
            _substitute(eqs[:k] + eqs[k + 1:], left, sol, v, val, out, budget, max_degree)
            return
    for k, e in enumerate(eqs):                       # 2. split on a factorization
        _, factors = sp.factor_list(e, *left)
        factors = [f for f, _ in factors if not _monomial(f, left)]
        if len(factors) > 1 or (len(factors) == 1 and sp.expand(factors[0] - e) != 0
                                and sp.expand(factors[0] + e) != 0):
            for f in factors:
                _branch(budget)
                _solve([f] + eqs[:k] + eqs[k + 1:], left, dict(sol), out, budget, max_degree)
            return
    for k, (e, p) in enumerate(zip(eqs, polys)):      # 3. one unknown, low degree
        used = [u for u in left if p.degree(u) > 0]
        if len(used) == 1 and p.degree(used[0]) <= max_degree:
            v = used[0]
            roots = sp.roots(sp.Poly(e, v), multiple=True)
            if len(roots) != p.degree(v):
                raise Unsolved(f"roots of {e} not found in radicals")
            for r in dict.fromkeys(roots):
                _branch(budget)
                _substitute(eqs[:k] + eqs[k + 1:], left, dict(sol), v, r, out, budget, max_degree)
            return
    raise Unsolved(f"no linear, factorable or degree ≤ {max_degree} univariate equation in {eqs}")


def _substitute(eqs, left, sol, v, val, out, budget, max_degree) -> None:
    sol = {u: sp.expand(e.subs(v, val)) for u, e in sol.items()}
    sol[v] = val
    rest = [u for u in left if u != v]
    _solve([e.subs(v, val) for e in eqs], rest, sol, out, budget, max_degree)


def _branch(budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise Unsolved("too many branches")


def _monomial(f: sp.Expr, unknowns: list[sp.Symbol]) -> bool:
    """A product of powers of the unknowns (never zero: they are positive)."""
    return sp.Poly(f, *unknowns).is_monomial and not f.is_number
