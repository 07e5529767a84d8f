"""Statement domains as isl sets, the sets Barvinok's algorithm counts (islpy-barvinok).

:func:`isl_text` writes a :class:`~meshplan.models.counting.domains.Domain` in isl's syntax, one set dimension per
loop counter and one constraint per guard, bound and condition (Verdoolaege, Seghir, Beyls, Loechner,
Bruynooghe, "Counting integer points in parametric polytopes using Barvinok's rational functions",
Algorithmica 48(1), 2007, for what is counted); :func:`isl_set` builds the same set, constraint by constraint
through islpy where every condition is an affine relation over names.  Parameters are non-negative integers
(the process count ``p`` at least 1).
"""

from __future__ import annotations

from functools import lru_cache
from math import lcm

import sympy as sp

from meshplan.models.counting.domains import Domain, linear_form
from meshplan.models.counting.quasi import isl_cond

__all__ = ["isl_text", "isl_set"]

try:
    import islpy as _isl

    _PARAM, _SET = _isl.dim_type.param, _isl.dim_type.set
except ImportError:  # barvinok.is_available() says so
    _PARAM = _SET = None


def _aff(e: sp.Expr) -> str:
    """A quasi-affine sympy expression in isl syntax: a linear form over atoms, ``(Σ k_a·a + k_0)/L``
    with integers ``k`` (``L`` the common denominator), atoms printed recursively."""
    lf = linear_form(e)
    if lf is None:
        raise ValueError(f"not quasi-affine: {e}")
    terms, const = lf
    den = sp.ilcm(*[c.q for c in terms.values()], const.q) if terms else const.q
    parts = [f"{int(c * den)}*{_atom(a)}" for a, c in terms.items()]
    if const != 0 or not parts:
        parts.append(str(int(const * den)))
    text = " + ".join(parts)
    return f"({text})" if den == 1 else f"(({text})/{den})"


def _atom(a: sp.Expr) -> str:
    if a.is_Symbol:
        return a.name
    if isinstance(a, (sp.floor, sp.ceiling)):
        return f"{'floor' if isinstance(a, sp.floor) else 'ceil'}({_aff(a.args[0])})"
    if isinstance(a, (sp.Min, sp.Max)):
        return f"{'min' if isinstance(a, sp.Min) else 'max'}({', '.join(_aff(x) for x in a.args)})"
    if isinstance(a, sp.Mod) and a.args[1].is_Integer:
        return f"({_aff(a.args[0])} mod {a.args[1]})"
    raise ValueError(f"not quasi-affine: {a}")


_OPS = {sp.Lt: "<", sp.Le: "<=", sp.Gt: ">", sp.Ge: ">=", sp.Eq: "=", sp.Ne: "!="}


@lru_cache(maxsize=4096)
def _cond(c: sp.Basic) -> str:
    """A constraint in isl syntax; cached, as the statements of a nest share their outer loops' constraints."""
    if c is sp.true:
        return "1 = 1"
    if c is sp.false:
        return "1 = 0"
    if isinstance(c, sp.And):
        return "(" + " and ".join(_cond(a) for a in c.args) + ")"
    if isinstance(c, sp.Or):
        return "(" + " or ".join(_cond(a) for a in c.args) + ")"
    if isinstance(c, sp.Not):
        return f"(not {_cond(c.args[0])})"
    op = _OPS.get(type(c))
    if op is None:
        raise ValueError(f"not an affine condition: {c}")
    return f"{_aff(c.lhs)} {op} {_aff(c.rhs)}"


def isl_text(dom: Domain, params: tuple[str, ...], procs: str | None = None) -> str:
    """The isl set of ``dom`` over ``params`` (all non-negative; ``procs`` at least 1)."""
    conds = [f"{q} >= {1 if q == procs else 0}" for q in params]
    if dom.quasi is not None:  # built by the walker: its conditions print directly
        conds += [isl_cond(c) for c in dom.quasi[1]]
        dims = ", ".join(dom.quasi[0])
    else:
        conds += [_cond(c) for c in dom.constraints]
        dims = ", ".join(s.name for s in dom.counters)
    return f"[{', '.join(params)}] -> {{ [{dims}] : {' and '.join(conds) or '1 = 1'} }}"


_INT_OPS = {">=": (False, 0), ">": (False, 1), "<=": (True, 0), "<": (True, 1)}


def _plain_rows(c, den_rows: list) -> bool:
    """Append ``(is_equality, {name: k}, k_0)`` (integers: ``Σ k·name + k_0 >= 0`` or ``= 0``) for the
    condition ``c`` to ``den_rows``; False when ``c`` is not one affine relation over names (an ``and``
    of them counts too): ``min``/``max``/``floor``/``mod``, ``or``, ``not`` and ``!=`` go through isl's
    parser."""
    if c is True:
        return True
    if not isinstance(c, tuple):
        return False
    if c[0] == "and":
        return all(_plain_rows(a, den_rows) for a in c[1])
    if c[0] != "rel":
        return False
    op, f = c[1], c[2]
    items = f.items() if isinstance(f, dict) else f
    den = 1
    for a, k in items:
        if not isinstance(a, str):
            return False
        if k.denominator != 1:
            den = lcm(den, k.denominator)
    row = {a: k.numerator * (den // k.denominator) for a, k in items}
    k0 = row.pop("", 0)
    if op == "=":
        den_rows.append((True, row, k0))
        return True
    if op not in _INT_OPS:
        return False
    neg, strict = _INT_OPS[op]
    if neg:
        row = {a: -k for a, k in row.items()}
        k0 = -k0
    den_rows.append((False, row, k0 - strict))  # integers: F > 0 is F - 1 >= 0
    return True


def isl_set(dom: Domain, params: tuple[str, ...], procs: str | None = None):
    """The isl set of ``dom`` (the set of :func:`isl_text`): a domain whose conditions are affine relations over
    names is built constraint by constraint, in the order of the text (isl's parser intersects its
    conjuncts in that order: the same set); others are read from their text."""
    import islpy as isl

    rows: list = []
    if dom.quasi is None or not all(_plain_rows(c, rows) for c in dom.quasi[1]):
        return isl.Set(isl_text(dom, params, procs))
    dims = list(dom.quasi[0])
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=dims, params=list(params))
    pos = {q: (_PARAM, i) for i, q in enumerate(params)}
    pos.update((x, (_SET, i)) for i, x in enumerate(dims))
    bs = isl.BasicSet.universe(space)
    ls = bs.get_local_space()
    for q in params:
        c = isl.Constraint.inequality_alloc(ls).set_coefficient_val(_PARAM, pos[q][1], 1)
        bs = bs.add_constraint(c.set_constant_val(-1) if q == procs else c)
    for eq, row, k0 in rows:
        c = (isl.Constraint.equality_alloc if eq else isl.Constraint.inequality_alloc)(ls)
        for a, k in row.items():
            if k:
                t, i = pos[a]
                c = c.set_coefficient_val(t, i, _val(k))
        bs = bs.add_constraint(c.set_constant_val(_val(k0)) if k0 else c)
    return isl.Set.from_basic_set(bs)


def _val(k: int):
    """``k`` as islpy takes it: a Python int within a C long, else an ``isl.Val`` read from its digits
    (``range(10**400)``)."""
    if -2**62 <= k < 2**62:
        return k
    import islpy as isl

    return isl.Val(str(k))
