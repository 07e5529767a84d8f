"""The certified relaxation of problem (5.8) and its closed form (sections 4.3.2, 5.4.5).

Each access term is bounded below by a posynomial (Lemma 5.3 by ∏|D|;
Corollary 5.1 by the mean of its leading monomials ``t_i ∏_{k≠i} |D_k|``).
With the dual ``w`` of the exponent LP, weighted AM–GM gives
``χ(X) ≤ X^W ∏_j (w_j/(W c_j))^{w_j}`` — exact when every term is a monomial
(:func:`closed_form`), an upper bound on χ (so a valid I/O bound) otherwise.
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp

from meshplan.models.soap.sdg import SubProblem, Term
from meshplan.solvers.soap.lp import max_le_one
from meshplan.solvers.soap.symbols import X

__all__ = ["relaxation", "linear_domination", "equality_tiles", "closed_form"]


def _sides(vs: tuple[str, ...]) -> list[tuple[Fraction, dict[str, Fraction]]]:
    """A box side as monomials: one variable, or the mean of several (section 5.5.3)."""
    if not vs:
        return [(Fraction(1), {})]
    return [(Fraction(1, len(vs)), {v: Fraction(1)}) for v in vs]


def _mul(a, b):
    return [(ca * cb, _add(ea, eb)) for ca, ea in a for cb, eb in b]


def _add(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _posynomial(term: Term) -> list[tuple[Fraction, dict[str, Fraction]]]:
    """Monomials ``c·∏ D^e`` whose sum is ≤ the term's size for all |D| ≥ t̂."""
    def box(dims):
        out = [(Fraction(1), {})]
        for d in dims:
            out = _mul(out, _sides(d))
        return out

    if term.kind == "union":
        return [(c / len(term.parts), e) for part in term.parts for c, e in box(part)]
    sides = [_sides(d) for d in term.dims]
    t = list(term.t)
    if term.kind == "inout":
        sides.append([(Fraction(1), {v: Fraction(1) for v in term.version})])
        t.append(term.t_version)
        act = [i for i, ti in enumerate(t) if ti > 0]
        out = []
        for i in act:   # ∏s - ∏(s-t) ≥ t_i ∏_{k≠i} s_k for every i, so ≥ their mean
            mon = [(Fraction(t[i], len(act)), {})]
            for k, sd in enumerate(sides):
                if k != i:
                    mon = _mul(mon, sd)
            out += mon
        return out
    out = [(Fraction(1), {})]
    for sd in sides:
        out = _mul(out, sd)
    return out   # Lemma 5.3: ≥ ∏ s


def relaxation(problem: SubProblem):
    """Per work monomial ``(C, W, x)`` with ``χ_s(X) ≤ C·X^W``; ``None`` if χ is unbounded."""
    monos: dict[tuple, Fraction] = {}
    for term in problem.terms:
        for c, e in _posynomial(term):
            key = tuple(sorted((k, v) for k, v in e.items() if v != 0))
            monos[key] = monos.get(key, Fraction(0)) + c
    keys = [k for k in monos if k]
    classes = list(problem.classes)
    A = [[dict(k).get(v, Fraction(0)) for v in classes] for k in keys]
    out = []
    for _, cls in problem.work:
        a = [Fraction(cls.count(v)) for v in classes]
        if not A:
            return None
        res = max_le_one(a, A)
        if res is None:
            return None
        W, x, w = res
        C = sp.Integer(1)
        for wj, k in zip(w, keys):
            if wj > 0:
                C *= (sp.Rational(wj.numerator, wj.denominator)
                      / (sp.Rational(W.numerator, W.denominator) * sp.Rational(monos[k].numerator,
                                                                                monos[k].denominator))) \
                    ** sp.Rational(wj.numerator, wj.denominator)
        out.append((sp.nsimplify(C), W, dict(zip(classes, x))))
    return out


def linear_domination(problem: SubProblem):
    """``z`` with χ(X) ≤ z·X, from assigning each work monomial to an access monomial ≥ it.

    If every exponent of an access monomial ``c_j n_j`` is ≥ that of a work
    monomial ``m_s`` then ``m_s ≤ n_j`` for all |D| ≥ 1; assigning each ``m_s``
    to such a ``j`` gives ``Σ m_s ≤ max_j (load_j / c_j) · Σ c_j n_j ≤ z·X``.
    Tighter than the AM-GM sum when several statements share the work
    (``None`` when some work monomial is dominated by no access monomial).
    """
    monos: dict[tuple, Fraction] = {}
    for term in problem.terms:
        for c, e in _posynomial(term):
            key = tuple(sorted((k, v) for k, v in e.items() if v != 0))
            monos[key] = monos.get(key, Fraction(0)) + c
    load: dict[tuple, Fraction] = {k: Fraction(0) for k in monos}
    works = sorted((tuple(sorted((v, Fraction(cls.count(v))) for v in set(cls))) for _, cls in problem.work),
                   key=lambda w: -sum(e for _, e in w))
    for w in works:
        a = dict(w)
        cands = [k for k in monos if all(dict(k).get(v, 0) >= e for v, e in a.items())]
        if not cands:
            return None
        best = min(cands, key=lambda k: (load[k] + 1) / monos[k])
        load[best] += 1
    return max(load[k] / monos[k] for k in monos)


def _monomials(problem: SubProblem) -> dict[tuple, Fraction]:
    monos: dict[tuple, Fraction] = {}
    for term in problem.terms:
        for c, e in _posynomial(term):
            key = tuple(sorted((k, v) for k, v in e.items() if v != 0))
            monos[key] = monos.get(key, Fraction(0)) + c
    return monos


def equality_tiles(problem: SubProblem, work_index: int = 0):
    """Tiles |D|(X) where weighted AM-GM is tight for one work monomial (``None`` if undetermined)."""
    monos = _monomials(problem)
    classes = list(problem.classes)
    L = {c: sp.Symbol(f"L_{c}") for c in classes}
    keys = [k for k in monos if k]
    A = [[dict(k).get(v, Fraction(0)) for v in classes] for k in keys]
    res = max_le_one([Fraction(problem.work[work_index][1].count(v)) for v in classes], A)
    if res is None:
        return None
    W, _, w = res
    Wr = sp.Rational(W.numerator, W.denominator)
    eqs = []
    for wj, k in zip(w, keys):
        if wj > 0:
            cj = sp.Rational(monos[k].numerator, monos[k].denominator)
            eqs.append(sp.Add(*[sp.Rational(v.numerator, v.denominator) * L[n] for n, v in k])
                       - sp.log(sp.Rational(wj.numerator, wj.denominator) * X / (Wr * cj)))
    sol = sp.linsolve(eqs, [L[c] for c in classes])
    if not sol:
        return None
    vals = next(iter(sol))
    free = set().union(*[v.free_symbols for v in vals]) & set(L.values())
    tiles = {c: sp.simplify(sp.exp(v.subs({f: 0 for f in free}))) for c, v in zip(classes, vals)}
    for xv in (1e5, 1e9):
        try:
            if any(float(e.subs(X, xv)) < 1 - 1e-9 for e in tiles.values()):
                return None
        except (TypeError, ValueError):
            return None
    return tiles


def closed_form(problem: SubProblem, relax):
    """χ and tiles when every access term is a monomial: the AM-GM equality point.

    Then the relaxation is exact; its equality conditions give the tiles, and
    a feasible point attaining the bound is the maximum (the KKT point of the
    geometric program).
    """
    if len(problem.work) != 1:
        return None
    P, F = problem.work_expr(), problem.access_expr()
    monos = _monomials(problem)
    D = problem.symbols
    lower = sp.Add(*[sp.Rational(c.numerator, c.denominator)
                     * sp.Mul(*[D[k] ** sp.Rational(v.numerator, v.denominator) for k, v in key])
                     for key, c in monos.items()])
    if sp.expand(F - lower) != 0:
        return None
    C, W, _ = relax[0]
    tiles = equality_tiles(problem, 0)
    if tiles is None:
        return None
    chi = C * X ** sp.Rational(W.numerator, W.denominator)
    for xv in (1e5, 1e9):
        num = {D[c]: float(e.subs(X, xv)) for c, e in tiles.items()}
        if abs(float(F.subs(num)) - xv) > 1e-6 * xv or \
                abs(float(P.subs(num)) - float(chi.subs(X, xv))) > 1e-6 * float(chi.subs(X, xv)):
            return None
    return chi, tiles
