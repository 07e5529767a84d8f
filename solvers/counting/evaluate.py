"""Evaluating a count at parameter values: exact rational arithmetic where the count allows it, sympy with
60-digit floors and ceilings elsewhere, and the comparison of an executed count with its bounds (thesis
§2.5: a count is exact when its bounds meet)."""

from __future__ import annotations

import functools

import sympy as sp
from meshplan.models.core.errors import ModelError
from meshplan.models.counting.execute import compile_expr

__all__ = ["compiled", "numeric", "as_number", "within", "symbol_names"]


def symbol_names(e: sp.Basic) -> frozenset[str]:
    """The names of the free symbols of ``e``, as ``e.free_symbols`` has them, visiting each sub-expression
    object once: Barvinok's pieces are shared between a count's ``Piecewise``, its cases and the total, and
    sympy's ``free_symbols`` walks every copy."""
    seen, out, todo = set(), set(), [e]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.is_Symbol:
            out.add(x.name)
        elif getattr(x, "bound_symbols", None):  # Sum, Lambda, ...: sympy knows which symbols are bound
            out.update(s.name for s in x.free_symbols)
        else:
            todo.extend(x.args)
    return frozenset(out)


@functools.lru_cache(maxsize=512)
def compiled(e: sp.Expr):
    """The names ``e`` needs and an exact evaluator of ``e`` (None when it has logs or roots)."""
    names = symbol_names(e)
    if e.has(sp.log, sp.exp) or not all(a.exp.is_Integer for a in e.atoms(sp.Pow)):
        return names, None
    try:
        return names, compile_expr(e)
    except ModelError:
        return names, None


def numeric(e: sp.Expr) -> sp.Expr:
    """Ceilings/floors of numbers evaluated with 60 digits (exact integers such as ``log(64)/log(2)``
    snap to themselves), innermost first; the rest by sympy."""
    if e.is_Atom:
        return e
    if isinstance(e, sp.Piecewise):  # the first piece whose condition holds; the others are not evaluated
        for v, c in e.args:
            c = numeric(c) if not isinstance(c, bool) else sp.sympify(c)
            if c is sp.true or c is True:
                return numeric(v)
            if c is not sp.false and c is not False:
                return e.func(*[(numeric(a), numeric(b)) for a, b in e.args])
        return sp.nan
    args = [numeric(a) for a in e.args]
    if isinstance(e, sp.Mul) and any(a.is_zero for a in args):
        # a count times 0 (an outer loop that does not run) is 0, also where the inner count's closed form is
        # log(0) = -oo: the inner loop never runs either
        return sp.Integer(0)
    if isinstance(e, sp.log) and args[0].is_number and args[0].is_nonpositive:
        # log(r) of a geometric counting function ceiling(log(r)/log(a)) (section 2.4.3) with r <= 0: the guard
        # fails before the first iteration, so the clamped count Max(0, …) is 0; -oo gives exactly that
        return sp.S.NegativeInfinity
    if isinstance(e, (sp.ceiling, sp.floor)) and args[0].is_number and args[0].is_infinite:
        return args[0]
    if isinstance(e, (sp.ceiling, sp.floor)) and args[0].is_number:
        x = sp.N(args[0], 60)
        r = sp.Integer(round(x))
        if abs(x - r) < sp.Float("1e-40", 60):
            return r
        return sp.Integer(int(sp.ceiling(x) if isinstance(e, sp.ceiling) else sp.floor(x)))
    return e.func(*args)


def as_number(v):
    if v is None or isinstance(v, (int, float)):
        return v
    return str(v)


def within(lo, got, hi) -> bool:
    try:
        return bool(lo <= got + 1e-9) and bool(got <= hi + 1e-9)
    except TypeError:
        return False
