"""Quasi-affine expressions and conditions as plain Python values, for building iteration domains.

A *form* is a dict ``{atom: Fraction}`` read as ``Σ c·atom``; the constant term has the key ``""``.  An atom is
a variable's name (a parameter or a set dimension), or a tuple: ``("floor", F)``, ``("min", (F, …))``,
``("max", (F, …))``, ``("mod", F, k)`` (``F`` a frozen form, ``k`` a positive integer) or a marker of the
walker (``("start", v)``, ``("d",)``).  A *condition* is ``True``, ``False``, ``("rel", op, F)`` for
``F op 0``, ``("and", (c, …))``, ``("or", (c, …))`` or ``("not", c)``.

These are the quasi-affine expressions of Presburger arithmetic that Barvinok's algorithm counts
(Verdoolaege et al., "Counting integer points in parametric polytopes using Barvinok's rational functions",
Algorithmica 48(1), 2007).  :func:`convert` reads a sympy expression of the loop model into a form;
:func:`isl_cond` prints a condition in isl's syntax; :func:`to_sympy` and :func:`cond_to_sympy` give sympy
back.  Adding and scaling forms is plain dict arithmetic: much cheaper than sympy's expression trees.
"""

from __future__ import annotations

import math
from fractions import Fraction
from math import lcm

import sympy as sp

from meshplan.models.loops.program import sym

__all__ = ["NotAffine", "Unknown", "ONE", "const", "atom", "add", "sub", "scale", "constant", "convert",
           "convert_cond", "floor_of", "min_max", "isl_cond", "to_sympy", "cond_to_sympy", "names_in", "mentions"]

ONE = ""


class NotAffine(Exception):
    """The expression is not quasi-affine."""


class Unknown(Exception):
    """The expression reads a variable whose value is not a quasi-affine form here (the message says which)."""


_1 = Fraction(1)


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


def _mod(f: dict, k: int) -> dict:
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
        return _mod(convert(e.args[0], state), int(k))
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


def mentions(f, a) -> bool:
    """True when the atom ``a`` occurs in the form (or frozen form) ``f``, also inside its atoms."""
    for x, _ in (f.items() if isinstance(f, dict) else f):
        if x == a:
            return True
        if isinstance(x, tuple) and x[0] in ("floor", "mod") and mentions(x[1], a):
            return True
        if isinstance(x, tuple) and x[0] in ("min", "max") and any(mentions(g, a) for g in x[1]):
            return True
    return False


def names_in(c, out: set) -> set:
    """The variable names of a condition or form (into ``out``)."""
    if isinstance(c, bool):
        return out
    if isinstance(c, tuple) and c[0] in ("and", "or"):
        for a in c[1]:
            names_in(a, out)
        return out
    if isinstance(c, tuple) and c[0] == "not":
        return names_in(c[1], out)
    f = c[2] if isinstance(c, tuple) else c
    for x, _ in (f.items() if isinstance(f, dict) else f):
        if isinstance(x, str):
            if x:
                out.add(x)
        elif x[0] in ("floor", "mod"):
            names_in(x[1], out)
        elif x[0] in ("min", "max"):
            for g in x[1]:
                names_in(g, out)
    return out


# -- isl's syntax -------------------------------------------------------------------------------------
def _atom_isl(a) -> str:
    if isinstance(a, str):
        return a
    if a[0] == "floor":
        return f"floor({isl_form(a[1])})"
    if a[0] in ("min", "max"):
        return f"{a[0]}({', '.join(isl_form(g) for g in a[1])})"
    if a[0] == "mod":
        return f"({isl_form(a[1])} mod {a[2]})"
    raise ValueError(f"not an atom of a set: {a}")


def isl_form(f) -> str:
    """``(Σ k·a + k_0)/L`` with integers ``k`` (``L`` the common denominator), in isl's syntax."""
    items = list(f.items() if isinstance(f, dict) else f)
    den = lcm(*[c.denominator for _, c in items]) if items else 1
    parts = [str(int(c * den)) if a == ONE else f"{int(c * den)}*{_atom_isl(a)}" for a, c in items]
    text = " + ".join(parts) or "0"
    return f"({text})" if den == 1 else f"(({text})/{den})"


def isl_cond(c) -> str:
    if c is True:
        return "1 = 1"
    if c is False:
        return "1 = 0"
    if c[0] == "and":
        return "(" + " and ".join(isl_cond(a) for a in c[1]) + ")"
    if c[0] == "or":
        return "(" + " or ".join(isl_cond(a) for a in c[1]) + ")"
    if c[0] == "not":
        return f"(not {isl_cond(c[1])})"
    return f"{isl_form(c[2])} {c[1]} 0"


# -- sympy, for the callers that transform domains as sympy -----------------------------------------
def to_sympy(f) -> sp.Expr:
    terms = []
    for a, c in (f.items() if isinstance(f, dict) else f):
        k = sp.Rational(c.numerator, c.denominator)
        if a == ONE:
            terms.append(k)
            continue
        if isinstance(a, str):
            x = sym(a)
        elif a[0] == "floor":
            x = sp.floor(to_sympy(a[1]))
        elif a[0] in ("min", "max"):
            x = (sp.Min if a[0] == "min" else sp.Max)(*[to_sympy(g) for g in a[1]])
        elif a[0] == "mod":
            x = sp.Mod(to_sympy(a[1]), a[2])
        else:
            raise ValueError(f"not an atom of a set: {a}")
        terms.append(k * x)
    return sp.Add(*terms)


_REL = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "=": sp.Eq, "!=": sp.Ne}


def cond_to_sympy(c) -> sp.Basic:
    if c is True:
        return sp.true
    if c is False:
        return sp.false
    if c[0] == "and":
        return sp.And(*[cond_to_sympy(a) for a in c[1]])
    if c[0] == "or":
        return sp.Or(*[cond_to_sympy(a) for a in c[1]])
    if c[0] == "not":
        return sp.Not(cond_to_sympy(c[1]))
    return _REL[c[1]](to_sympy(c[2]), 0)
