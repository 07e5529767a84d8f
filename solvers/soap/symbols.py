"""The symbols of the SOAP derivation: X (dominator-set size) and S (fast memory), and the leading term of
a bound in the size parameters."""

import sympy as sp

from meshplan.models.loops.program import sym

__all__ = ["X", "S", "leading_in_sizes"]

X = sp.Symbol("X", positive=True)
S = sp.Symbol("S", positive=True)


def leading_in_sizes(expr: sp.Expr, params) -> sp.Expr:
    """The terms of highest total degree in the size parameters ``params`` (names, or the symbols themselves;
    ``Max`` arguments each)."""
    if isinstance(expr, sp.Max):
        return sp.Max(*[leading_in_sizes(a, params) for a in expr.args])
    psyms = [p if isinstance(p, sp.Symbol) else sym(p) for p in params]
    if not psyms:  # constant loop bounds: nothing to lead
        return expr
    try:
        poly = sp.Poly(sp.expand(expr), *psyms)
    except sp.PolynomialError:
        return expr
    if poly.is_zero:
        return expr
    deg = poly.total_degree()
    return sp.Add(*[c * sp.Mul(*[x ** e for x, e in zip(psyms, m)]) for m, c in poly.terms() if sum(m) == deg])
