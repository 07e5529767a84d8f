"""Quasi-affine expressions and conditions as plain Python values (thesis section 2.2).

A *form* is a dict ``{atom: Fraction}`` read as ``Σ c·atom``; the constant term has the key ``""``.  An atom is
a variable's name (a parameter or an iteration variable), or a tuple: ``("floor", F)``, ``("min", (F, …))``,
``("max", (F, …))``, ``("mod", F, k)`` (``F`` a frozen form, ``k`` a positive integer) or a marker of a walker
(``("start", v)``, ``("d",)``).  A *condition* is ``True``, ``False``, ``("rel", op, F)`` for ``F op 0``,
``("and", (c, …))``, ``("or", (c, …))`` or ``("not", c)``.

These are the quasi-affine expressions of Presburger arithmetic that Barvinok's algorithm counts
(Verdoolaege et al., "Counting integer points in parametric polytopes using Barvinok's rational functions",
Algorithmica 48(1), 2007).  Adding and scaling forms is plain dict arithmetic, much cheaper than sympy's
expression trees: the counting frontend (:mod:`meshplan.models.loops.flow_forms`) reads affine loop bounds,
steps and guards as forms, and :mod:`meshplan.models.counting.quasi` converts sympy expressions to them and
prints them in isl's syntax.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy as sp

__all__ = [
    "ONE",
    "NotAffine",
    "Unknown",
    "add",
    "atom",
    "const",
    "constant",
    "convert",
    "convert_cond",
    "floor_of",
    "min_max",
    "mod_of",
    "names",
    "negate_cond",
    "scale",
    "sub",
    "subst",
    "subst_cond",
]

ONE = ""
_1 = Fraction(1)


class NotAffine(Exception):
    """The expression is not quasi-affine."""


class Unknown(Exception):
    """The expression reads a variable whose value is not a quasi-affine form here (the message says which)."""


def const(c) -> dict:
    return {ONE: c if isinstance(c, Fraction) else Fraction(c)} if c else {}


def atom(a) -> dict:
    return {a: _1}


def add(a: dict, b: dict) -> dict:
    if not b:
        return a
    out = dict(a)
    for k, v in b.items():
        s = out[k] + v if k in out else v
        if s:
            out[k] = s
        else:
            del out[k]
    return out


def scale(a: dict, k: Fraction) -> dict:
    if k == 1:
        return a
    return {x: v * k for x, v in a.items()} if k else {}


def sub(a: dict, b: dict) -> dict:
    return add(a, scale(b, Fraction(-1)))


def constant(a: dict) -> Fraction | None:
    """The value of a constant form; None when it has a variable term."""
    if len(a) > 1 or (a and ONE not in a):
        return None
    return a.get(ONE, Fraction(0))


def floor_of(f: dict) -> dict:
    c = constant(f)
    if c is not None:
        return const(math.floor(c))
    return atom(("floor", frozenset(f.items())))


def min_max(kind: str, forms: list) -> dict:
    cs = [constant(f) for f in forms]
    if all(c is not None for c in cs):
        return const(min(cs) if kind == "min" else max(cs))
    keys = []
    for f in forms:
        k = frozenset(f.items())
        if k not in keys:
            keys.append(k)
    return dict(keys[0]) if len(keys) == 1 else atom((kind, tuple(keys)))


def mod_of(f: dict, k: int) -> dict:
    c = constant(f)
    if c is not None:
        return const(c % k)
    return atom(("mod", frozenset(f.items()), k))


def convert(e: sp.Basic, state: dict) -> dict:
    """The form of the sympy expression ``e`` with each variable named in ``state`` replaced by its form there
    (None: unknown, raises :class:`Unknown`); other symbols are parameters.  Raises :class:`NotAffine`."""
    if e.is_Symbol:
        name = e.name
        if name in state:
            v = state[name]
            if v is None:
                raise Unknown(f"it reads {name}, whose value is not an affine function of the loop counters here")
            return v
        return atom(name)
    if e.is_Number:
        if e.is_Integer:
            return const(int(e.p))
        if not e.is_Rational:
            raise NotAffine
        return const(Fraction(int(e.p), int(e.q)))
    if isinstance(e, sp.Add):
        out: dict = {}
        for a in e.args:
            out = add(out, convert(a, state))
        return out
    if isinstance(e, sp.Mul):
        k, rest = Fraction(1), None
        for a in e.args:
            f = convert(a, state)
            c = constant(f)
            if c is not None:
                k *= c
            elif rest is None:
                rest = f
            else:
                raise NotAffine
        return const(k) if rest is None else scale(rest, k)
    if isinstance(e, sp.floor):
        return floor_of(convert(e.args[0], state))
    if isinstance(e, sp.ceiling):  # ceiling(x) = -floor(-x)
        return scale(floor_of(scale(convert(e.args[0], state), Fraction(-1))), Fraction(-1))
    if isinstance(e, (sp.Min, sp.Max)):
        return min_max("min" if isinstance(e, sp.Min) else "max", [convert(a, state) for a in e.args])
    if isinstance(e, sp.Mod):
        k = constant(convert(e.args[1], state))
        if k is None or k.denominator != 1 or k <= 0:
            raise NotAffine
        return mod_of(convert(e.args[0], state), int(k))
    raise NotAffine


_OPS = {sp.StrictLessThan: "<", sp.LessThan: "<=", sp.StrictGreaterThan: ">", sp.GreaterThan: ">=",
        sp.Equality: "=", sp.Unequality: "!="}


def convert_cond(c: sp.Basic, state: dict):
    """The condition of the sympy relation (or ``And``/``Or``/``Not`` of relations) ``c``, as :func:`convert`."""
    if c is sp.true or c is True:
        return True
    if c is sp.false or c is False:
        return False
    if isinstance(c, sp.And):
        return ("and", tuple(convert_cond(a, state) for a in c.args))
    if isinstance(c, sp.Or):
        return ("or", tuple(convert_cond(a, state) for a in c.args))
    if isinstance(c, sp.Not):
        return ("not", convert_cond(c.args[0], state))
    op = _OPS.get(type(c))
    if op is None:
        raise NotAffine
    return ("rel", op, sub(convert(c.lhs, state), convert(c.rhs, state)))


def subst(f, state: dict) -> dict:
    """The form ``f`` (a dict or a frozen form) with each variable named in ``state`` replaced by its form there
    (None: unknown, raises :class:`Unknown`); ``floor``/``min``/``max``/``mod`` atoms are rebuilt around their
    substituted arguments, so that constant ones fold."""
    out: dict = {}
    for a, c in (f.items() if isinstance(f, dict) else f):
        if a == ONE:
            g = const(c)
            c = _1
        elif isinstance(a, str):
            if a in state:
                g = state[a]
                if g is None:
                    raise Unknown(f"it reads {a}, whose value is not an affine function of the loop counters here")
            else:
                g = atom(a)
        elif a[0] == "floor":
            g = floor_of(subst(a[1], state))
        elif a[0] in ("min", "max"):
            g = min_max(a[0], [subst(x, state) for x in a[1]])
        elif a[0] == "mod":
            g = mod_of(subst(a[1], state), a[2])
        else:
            g = atom(a)
        out = add(out, scale(g, c))
    return out


def subst_cond(c, state: dict):
    """:func:`subst` in every form of the condition ``c``."""
    if c is True or c is False:
        return c
    if c[0] in ("and", "or"):
        return (c[0], tuple(subst_cond(a, state) for a in c[1]))
    if c[0] == "not":
        return ("not", subst_cond(c[1], state))
    return ("rel", c[1], subst(c[2], state))


def names(f, out: set) -> set:
    """The variable names of the form (or frozen form) ``f``, also inside its atoms (into ``out``)."""
    for a, _ in (f.items() if isinstance(f, dict) else f):
        if isinstance(a, str):
            if a:
                out.add(a)
        elif a[0] in ("floor", "mod"):
            names(a[1], out)
        elif a[0] in ("min", "max"):
            for g in a[1]:
                names(g, out)
    return out


_NEG = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "!=", "!=": "="}


def negate_cond(c):
    """``not c`` as sympy's ``Not`` writes it: a relation negated, ``not not c`` is ``c``, a conjunction or
    disjunction kept under ``not``."""
    if c is True or c is False:
        return not c
    if c[0] == "rel":
        return ("rel", _NEG[c[1]], c[2])
    if c[0] == "not":
        return c[1]
    return ("not", c)
