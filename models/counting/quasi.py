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
back.  The form arithmetic itself (adding, scaling, ``floor``/``min``/``max``/``mod`` atoms) lives in
:mod:`meshplan.models.loops.forms`, shared with the counting frontend.
"""

from __future__ import annotations

from math import lcm

import sympy as sp
from meshplan.models.loops.forms import (
    ONE,
    NotAffine,
    Unknown,
    add,
    atom,
    const,
    constant,
    convert,
    convert_cond,
    floor_of,
    min_max,
    names,
    scale,
    sub,
)
from meshplan.models.loops.program import sym

__all__ = [
    "ONE",
    "NotAffine",
    "Unknown",
    "add",
    "atom",
    "cond_to_sympy",
    "const",
    "constant",
    "convert",
    "convert_cond",
    "floor_of",
    "isl_cond",
    "mentions",
    "min_max",
    "names_in",
    "scale",
    "sub",
    "to_sympy",
]


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
    return names(c[2] if isinstance(c, tuple) else c, out)


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
    den = 1
    for _, c in items:
        if c.denominator != 1:
            den = lcm(den, c.denominator)
    ks = [c.numerator * (den // c.denominator) for _, c in items]  # integer arithmetic: no Fraction products
    parts = [str(k) if a == ONE else f"{k}*{_atom_isl(a)}" for (a, _), k in zip(items, ks)]
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
