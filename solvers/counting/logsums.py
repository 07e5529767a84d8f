"""Exact sums of the counts of geometric loops inside affine loops (thesis section 2.4.4).

A loop ``j = j0; while j < x: j *= B`` runs ``Max(0, ⌈log_B(x / j0)⌉)`` times.  Inside ``for i in range(…)``
with ``x`` affine in ``i``, the sum of these counts over ``i`` is a sum of ceilings of logarithms; it has a
closed form because it counts the pairs ``(x, k)`` with ``j0·B^k < x``: for each ``k`` the ``x`` above
``j0·B^k``.  :func:`log_sum` recognises such a term and returns the exact sum (0 where the range is empty).
"""

from __future__ import annotations

from fractions import Fraction

import sympy as sp

__all__ = ["linear", "log_sum"]


def linear(g: sp.Expr, d: sp.Symbol):
    """``g = a·d + c`` -> ``(a, c)``; None when ``g`` is not of degree at most 1 in ``d``."""
    g = sp.expand(g)
    if g.is_polynomial(d) and sp.Poly(g, d).degree() <= 1:
        return g.coeff(d, 1), g.coeff(d, 0)
    return None


def _log_ceiling(e: sp.Expr, d: sp.Symbol):
    """``(B, b, m, s)`` when ``e`` is ``Max(0, ⌈log_B((d + b)/s)⌉ + m)`` or ``⌈log_B((d + b)/s)⌉`` (then
    ``m = 0``, ``s = 1`` and ``b >= 1``) with integers ``B >= 2``, ``b`` (or a parameter), ``m`` and a start
    ``s >= 1`` that is not a power of ``B`` (a power is folded into ``m``): the count of a geometric loop
    ``j = s; while j < d + b: j *= B`` (plus ``m``); else None."""
    bare = isinstance(e, sp.ceiling)
    if isinstance(e, sp.Max) and len(e.args) == 2 and sp.S.Zero in e.args:
        g = e.args[1 - e.args.index(sp.S.Zero)]
    elif bare:
        g = e
    else:
        return None
    m, c = g.as_coeff_Add()
    if not isinstance(c, sp.ceiling) or not m.is_Integer:
        return None
    h = c.args[0]
    logs = [a for a in h.atoms(sp.log) if d in a.free_symbols]
    if len(logs) != 1:
        return None
    lin = linear(logs[0].args[0], d)  # log(a·d + c) = log(d + c/a) + log(a)
    if lin is None or not (lin[0].is_number and lin[0] > 0):
        return None
    a, b = lin[0], sp.expand(lin[1] / lin[0])
    if not (b.is_integer or b.is_Integer) or d in b.free_symbols:
        return None
    q, r = (sp.expand(h).coeff(logs[0]), sp.expand(h).subs(logs[0], 0))  # h = q·log(d + b) + r
    if q.free_symbols or not q.is_positive or r.free_symbols:
        return None
    B = sp.nsimplify(sp.exp(1 / q))
    if not (B.is_Integer and B >= 2) or sp.simplify(q * sp.log(B) - 1) != 0:
        return None
    r = sp.nsimplify(sp.simplify(r + q * sp.log(a)))  # h = log_B(d + b) + r
    s = sp.Integer(1)
    if not r.is_Integer:  # ⌈log_B(x) + r⌉ = ⌈log_B(x / s)⌉ with s = B^(-r): an integer start that no power is
        s = sp.nsimplify(sp.simplify(B ** (-r)))
        if not (s.is_Integer and s >= 2 and sp.simplify(sp.log(s) / sp.log(B) + r) == 0) or m > 0 or bare:
            return None  # (other forms: the bounds answer)
        r = sp.Integer(0)
    m += r
    if bare and b.is_Integer and b < 1:  # ceiling(log(0)) is no count
        return None  # (a parameter offset: the Max(0, …) a trip count always is, dropped for parameters >= 1)
    return int(B), (int(b) if b.is_Integer else b), int(m), int(s)


def log_sum(term: sp.Expr, d: sp.Symbol, top: sp.Expr) -> sp.Expr | None:
    """``sum_{d=0}^{top-1} c·Max(0, ⌈log_B((d + b)/s)⌉ + m)`` exactly, or None for other terms.

    With ``x = d + b``, ``Σ_{x=1}^{X} Max(0, ⌈log_B(x/s)⌉ + m)`` counts the pairs ``(x, k)``, ``k >= -m``,
    with ``x > s·B^k``.  For ``s = 1`` that is ``max(0, m)·X + (K - r0 + 1)·X - (B^K - B^(r0-1))/(B - 1)`` with
    ``K = ⌈log_B X⌉`` and ``r0 = max(1, 1 - m)`` (0 while ``K < r0 - 1``); for an integer ``s >= 2`` (and
    ``m <= 0``, ``k0 = -m``) it is ``(K - k0)·X - s·(B^K - B^k0)/(B - 1)`` with ``K = ⌈log_B(X/s)⌉`` once
    ``X > s·B^k0``, else 0."""
    c, rest = term.as_independent(d, as_Add=False)
    got = _log_ceiling(rest, d)
    if got is None:
        return None
    B, b, m, s = got
    r0 = max(1, 1 - m)

    def F(X):  # the sum over x = 1 … X >= 1 (and 0 at X = 0, where log(0) is taken as -oo)
        if s > 1:
            k0 = -m
            K = sp.ceiling(sp.log(X / s) / sp.log(B))
            tail = (K - k0) * X - s * (sp.Integer(B) ** K - B ** k0) / (B - 1)
            return sp.Piecewise((tail, sp.Ge(X, s * B ** k0 + 1)), (0, True))
        K = sp.ceiling(sp.log(X) / sp.log(B))
        if not isinstance(b, int):  # X may be 0 at a parameter 0: K clamped, so that 0·K is 0 there
            K = sp.Max(0, K, evaluate=False)
        tail = (K - r0 + 1) * X - (sp.Integer(B) ** K - sp.Integer(B) ** (r0 - 1)) / (B - 1)
        if r0 >= 2:
            tail = sp.Piecewise((tail, sp.Ge(X, B ** (r0 - 2) + 1)), (0, True))
        return max(0, m) * X + tail

    def f_int(x: int) -> int:  # one term, in integers: the least K with s·B^K >= x
        K = 0
        while s * Fraction(B) ** K >= x:
            K -= 1
        while s * Fraction(B) ** K < x:
            K += 1
        return max(0, K + m)
    X1 = b + top - 1
    if isinstance(b, int):
        lo = max(b, 1)
        below = sum(f_int(x) for x in range(1, lo))  # the terms x = 1 … lo - 1 that the range leaves out
        # kept unevaluated: parameters >= 1 make X1 >= lo look certain, but at a parameter 0 the loop is empty
        return c * sp.Piecewise((F(X1) - below, sp.Ge(X1, lo, evaluate=False)), (0, True), evaluate=False)
    # an offset b that is a parameter (may be 0 or negative: the terms x <= 0 are 0)
    below = sp.Piecewise((F(b - 1), sp.Ge(b, 2, evaluate=False)), (0, True), evaluate=False)
    nonempty = sp.And(sp.Ge(X1, 1, evaluate=False), sp.Ge(top, 1, evaluate=False), evaluate=False)
    return c * sp.Piecewise((F(X1) - below, nonempty), (0, True), evaluate=False)
