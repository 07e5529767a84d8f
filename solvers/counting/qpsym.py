"""Barvinok's counts (isl piecewise quasi-polynomials) as sympy expressions, built on demand.

The pieces and conditions are built from isl's term and coefficient API, unevaluated: sympy's automatic
evaluation costs more than isl's count (Verdoolaege et al., "Counting integer points in parametric polytopes
using Barvinok's rational functions", Algorithmica 48(1), 2007).  :func:`vanishes` proves with sympy that a
quasi-polynomial is 0 on a set of parameter values where isl alone cannot.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import sympy as sp

__all__ = ["qp_sym", "condition", "readable", "vanishes"]


@lru_cache(maxsize=None)
def _param(name: str) -> sp.Symbol:
    return sp.Symbol(name, integer=True, nonnegative=True)


def _val(v) -> sp.Rational:
    if v.is_int():
        return sp.Integer(v.to_python())
    return sp.Rational(v.to_str())


@lru_cache(maxsize=None)
def _power(name: str, k: int) -> sp.Expr:
    return _param(name) ** k


def _aff_sym(aff, names: list) -> sp.Expr:
    import islpy as isl

    out = [_val(aff.get_constant_val())]
    for i, name in enumerate(names):
        c = aff.get_coefficient_val(isl.dim_type.param, i)
        if not c.is_zero():
            out.append(sp.Mul(_val(c), _param(name), evaluate=False) if c.is_one() is False else _param(name))
    for i in range(aff.dim(isl.dim_type.div)):
        c = aff.get_coefficient_val(isl.dim_type.div, i)
        if not c.is_zero():
            out.append(sp.Mul(_val(c), _floor(_aff_sym(aff.get_div(i), names)), evaluate=False))
    out = [a for a in out if a is not sp.S.Zero] or [sp.S.Zero]  # only the constant can be 0
    return out[0] if len(out) == 1 else sp.Add(*out, evaluate=False)


def _floor(e: sp.Expr) -> sp.Expr:
    return sp.floor(e, evaluate=False)


def qp_sym(qp, names: list) -> sp.Expr:
    import islpy as isl

    terms = []
    floors: dict[int, sp.Expr] = {}  # the terms of a quasi-polynomial share its divs
    param, div = isl.dim_type.param, isl.dim_type.div
    for t in qp.get_terms():
        f = [_val(t.get_coefficient_val())]
        for i, name in enumerate(names):
            k = t.get_exp(param, i)
            if k:
                f.append(_power(name, k))
        for i in range(t.dim(div)):
            k = t.get_exp(div, i)
            if k:
                fl = floors.get(i)
                if fl is None:
                    fl = floors[i] = _floor(_aff_sym(t.get_div(i), names))
                f.append(fl if k == 1 else sp.Pow(fl, k, evaluate=False))
        f = [x for x in f if x is not sp.S.One] or [sp.S.One]  # only the coefficient can be 1
        terms.append(f[0] if len(f) == 1 else sp.Mul(*f, evaluate=False))
    terms = terms or [sp.Integer(0)]
    return terms[0] if len(terms) == 1 else sp.Add(*terms, evaluate=False)


_CONDITIONS: dict = {}


def condition(text: str, s, names: tuple) -> sp.Basic:
    """:func:`_set_sym` of the parameter set ``s`` (isl's text ``text``), built once per process: the same
    conditions (``n >= 1``, ``m >= n + 1``) recur across statements and programs, and sympy's ``And`` sorts
    its arguments on construction."""
    key = (text, names)
    out = _CONDITIONS.get(key)
    if out is None:
        if len(_CONDITIONS) > 4096:
            _CONDITIONS.clear()
        out = _CONDITIONS[key] = _set_sym(s, list(names))
    return out


def _set_sym(s, names: list) -> sp.Basic:
    ors = []
    for bs in s.get_basic_sets():
        ands = []
        for con in bs.get_constraints():
            a = _aff_sym(con.get_aff(), names)
            ands.append(_relation(a, con.is_equality()))
        ors.append(ands[0] if len(ands) == 1 else sp.And(*ands, evaluate=False))
    return ors[0] if len(ors) == 1 else sp.Or(*ors, evaluate=False)


def _relation(a: sp.Expr, equality: bool) -> sp.Basic:
    """``a >= 0`` (or ``a = 0``) written with positive terms on each side: ``m - n - 1 >= 0`` -> ``m >= n + 1``."""
    lhs, rhs = [], []
    for t in sp.Add.make_args(a):
        c, rest = t.as_coeff_Mul()
        if c < 0:
            rhs.append(rest if c == -1 else -c if rest == 1 else sp.Mul(-c, rest, evaluate=False))
        else:
            lhs.append(t)

    def side(xs):
        return sp.Integer(0) if not xs else xs[0] if len(xs) == 1 else sp.Add(*xs, evaluate=False)
    return (sp.Eq if equality else sp.Ge)(side(lhs), side(rhs), evaluate=False)


@lru_cache(maxsize=4096)
def readable(e: sp.Expr) -> sp.Expr:
    """A polynomial factored (``n*(n - 1)/2``); a quasi-polynomial (with floors) as Barvinok gives it."""
    if e.has(sp.floor) or not e.free_symbols:
        return e
    syms = sorted(e.free_symbols, key=lambda x: x.name)
    den, poly = sp.Poly(sp.expand(e), *syms).clear_denoms(convert=True)
    c, factors = poly.factor_list()
    return sp.Mul(sp.Rational(c) / den, *[f.as_expr() ** k for f, k in factors])


def vanishes(e: sp.Expr, region, names: list, most: int = 64) -> bool:
    """True when ``e`` is 0 at every point of ``region`` (a set of parameter values), proved by evaluating it
    at each value of the parameters that are bounded in a basic set and expanding it in the others."""
    import itertools

    import islpy as isl

    from meshplan.models.counting.execute import compile_expr

    n = len(names)
    syms = [_param(x) for x in names]
    for bs in region.get_basic_sets():
        flat = bs.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
        ranges = {}
        for i in range(n):
            one = flat.project_out(isl.dim_type.set, i + 1, n - i - 1).project_out(isl.dim_type.set, 0, i)
            if one.is_bounded():
                lo, hi = one.lexmin().sample_point(), one.lexmax().sample_point()
                a, b = (pt.get_coordinate_val(isl.dim_type.set, 0).to_python() for pt in (lo, hi))
                ranges[i] = range(a, b + 1)
        if not ranges or any(len(r) > most for r in ranges.values()):
            return False
        keys = sorted(ranges)
        f = compile_expr(e) if len(keys) == n else None
        for combo in itertools.product(*[ranges[i] for i in keys]):
            if f is not None:
                if f({names[i]: Fraction(v) for i, v in zip(keys, combo)}) != 0:
                    return False
                continue
            rest = e.xreplace({syms[i]: sp.Integer(v) for i, v in zip(keys, combo)})
            if sp.expand(sp.sympify(str(rest), locals={x: _param(x) for x in names})) != 0:
                return False
    return True
