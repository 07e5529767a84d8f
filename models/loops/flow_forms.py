"""The counting frontend's fast reading of affine expressions (thesis section 2.2): loop bounds, steps, guards,
updates and ``if`` conditions as quasi-affine forms (:mod:`meshplan.models.loops.forms`), their sympy
expressions deferred to first use (:class:`~meshplan.models.loops.control.Deferred`).

Each reader below returns the forms of exactly the sympy expression that the frontend's sympy reader
(:meth:`meshplan.models.loops.flow_frontend._FlowReader.expr`, ``condition``, ``guard``) builds for the same
syntax tree, as :func:`~meshplan.models.loops.forms.convert` would read it, or None where it would not be
sure of that; the frontend then builds the sympy expression at once, as before.  Sums, differences, products
and quotients by constants are dict arithmetic; ``//`` by a constant takes the integer terms out of the
``floor`` as sympy's ``floor`` does; ``min`` and ``max`` of linear forms that sympy keeps unevaluated take
its order of the arguments; ``%`` by a constant drops the terms it divides; ``**`` and the other ``min``,
``max`` and ``%`` are read by the sympy reader and converted (sympy simplifies them); comparisons whose two
sides differ by a constant are decided, as sympy decides them, and equalities are kept only where sympy
cannot decide them either.  Anything the sympy reader refuses is left to it, so that it raises its own
error at the same place.
"""

from __future__ import annotations

import ast
import math
from fractions import Fraction

from meshplan.models.loops import forms as f

__all__ = ["cond_form", "expr_forms", "guard_forms"]

_REL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=", ast.NotEq: "!="}
_CMP = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_1 = Fraction(1)


class _Fallback(Exception):
    """The sympy reader must read the whole expression (it is not affine, or its form is not certain)."""


def expr_forms(r, nodes) -> tuple | None:
    """The forms of the expressions ``nodes`` read by the reader ``r``, None when one is not affine."""
    try:
        return tuple(_expr(r, n) for n in nodes)
    except _Fallback:
        return None


def guard_forms(r, test) -> tuple | None:
    """The slacks of a ``while`` guard as forms (``a < b``: ``b - a``; ``a <= b``: ``b - a + 1``), as
    ``_FlowReader.guard`` builds them; None when it must read them."""
    try:
        return tuple(_guard(r, test))
    except _Fallback:
        return None


def cond_form(r, test):
    """The condition of an ``if`` as a form condition, as ``_FlowReader.condition`` builds it with sympy; None
    when it must read it."""
    try:
        return _cond(r, test)
    except _Fallback:
        return None


def _via_sympy(r, node) -> dict:
    """The form of the sympy reader's expression for ``node`` (its errors propagate, as from the whole)."""
    try:
        return f.convert(r.expr(node, {}), {})
    except f.NotAffine:
        raise _Fallback from None


def _plain(form: dict) -> bool:
    return all(isinstance(a, str) for a in form)


def _floor(x: dict) -> dict:
    """sympy's ``floor`` of the linear form ``x``: its integer terms (integer coefficients, an integer constant)
    come out, a non-integer constant stays inside with the other terms."""
    if not _plain(x):
        raise _Fallback
    inside, out = {}, {}
    for a, c in x.items():
        (out if c.denominator == 1 else inside)[a] = c
    if not inside:
        return x
    if len(inside) == 1 and f.ONE in inside:
        return f.add(out, f.const(inside[f.ONE].__floor__()))
    return f.add(out, f.floor_of(inside))


def _expr(r, node) -> dict:
    t = type(node)
    if t is ast.Name:
        name = node.id
        if name in r.itvars:
            return f.atom(name)
        if name in r.data or name in ("True", "False", "None"):
            raise _Fallback
        r.size_names.add(name)
        return f.atom(name)
    if t is ast.Constant:
        if type(node.value) is not int:
            raise _Fallback
        return f.const(node.value)
    if t is ast.UnaryOp:
        if isinstance(node.op, ast.USub):
            return f.scale(_expr(r, node.operand), Fraction(-1))
        if isinstance(node.op, ast.UAdd):
            return _expr(r, node.operand)
        raise _Fallback
    if t is ast.BinOp:
        op = type(node.op)
        if op not in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod):
            return _via_sympy(r, node)  # `**`: sympy simplifies it
        a, b = _expr(r, node.left), _expr(r, node.right)
        if op is ast.Mod:
            return _mod(a, b)
        if op is ast.Add:
            return f.add(a, b)
        if op is ast.Sub:
            return f.sub(a, b)
        cb = f.constant(b)
        if op is ast.Mult:
            if cb is not None:
                return f.scale(a, cb)
            ca = f.constant(a)
            if ca is not None:
                return f.scale(b, ca)
            raise _Fallback
        if cb is None or cb == 0:
            raise _Fallback
        q = f.scale(a, _1 / cb)
        return q if op is ast.Div else _floor(q)
    if t is ast.Call and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        if len(node.args) < 2 or node.keywords:
            raise _Fallback
        return _min_max(node.func.id, [_expr(r, a) for a in node.args])
    raise _Fallback


def _mod(a: dict, b: dict) -> dict:
    """``a % b`` as sympy's ``Mod`` keeps it, for ``a`` with integer coefficients and a constant ``b >= 2``: when
    the coefficients are all positive and one of them 1 (sympy cannot decide its parity or divisibility), the
    terms whose coefficient ``b`` divides drop out and the constant is taken modulo ``b``; when they all lie
    between 1 and ``b - 1`` (the constant too, if any) and have no common factor with ``b`` (``(i + i) % 3``),
    ``a`` stays as it is (sympy's ``Mod`` on every such case with ``b <= 9`` and up to three names, checked when
    this rule was written); otherwise sympy reads it."""
    k = f.constant(b)
    if k is None or k.denominator != 1 or k < 2 or not _plain(a) or any(c.denominator != 1 for c in a.values()):
        raise _Fallback
    k = int(k)
    if all(c > 0 for x, c in a.items() if x != f.ONE) and _1 in a.values():
        out = {x: c for x, c in a.items() if x != f.ONE and c % k}
        if a.get(f.ONE, 0) % k:
            out[f.ONE] = a[f.ONE] % k
        return f.mod_of(out, k)
    if any(x != f.ONE for x in a) and all(0 < c < k for c in a.values()) and \
            math.gcd(k, *(int(c) for c in a.values())) == 1:
        return f.mod_of(dict(a), k)
    raise _Fallback


def _nodes(form: dict) -> int:
    """The number of nodes of the sympy expression of the linear form (sympy's ``_node_count``): a number or a
    symbol 1, ``c*x`` 3, a sum 1 more than its terms."""
    n = sum(1 if (a == f.ONE or c == 1) else 3 for a, c in form.items())
    return n + 1 if len(form) > 1 else max(n, 1)


def _min_max(kind: str, args: list) -> dict:
    """``min``/``max`` of linear forms as ``_min_max`` of :mod:`~meshplan.models.loops.flow_parts` builds it
    (unevaluated when no two arguments are equal or differ by a constant), with the arguments in sympy's
    order (``ordered``: by node count, then by sort key; the sort key is taken here only between plain
    symbols, by name); otherwise sympy reads it."""
    if not all(_plain(a) for a in args):
        raise _Fallback
    rests = [frozenset((x, c) for x, c in a.items() if x != f.ONE) for a in args]
    if len(set(rests)) != len(rests):
        raise _Fallback  # sympy drops arguments that are implied
    keys = []
    for a in args:
        n = _nodes(a)
        if n == 1 and len(a) == 1 and f.ONE not in a:
            keys.append((1, next(iter(a))))  # a plain symbol: by name
        else:
            keys.append((n, ""))
    for i, k in enumerate(keys):
        if any(k[0] == j[0] and not (k[1] and j[1]) for j in keys[:i]):
            raise _Fallback  # tied node counts other than between symbols: sympy's sort key decides
    order = sorted(range(len(args)), key=lambda i: keys[i])
    return f.min_max(kind, [args[i] for i in order])


def _guard(r, test) -> list:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [s for v in test.values for s in _guard(r, v)]
    if not isinstance(test, ast.Compare):
        raise _Fallback
    out, left = [], _expr(r, test.left)
    for op, right_node in zip(test.ops, test.comparators):
        right = _expr(r, right_node)
        if not isinstance(op, _CMP):
            raise _Fallback
        if isinstance(op, ast.Lt):
            out.append(f.sub(right, left))
        elif isinstance(op, ast.LtE):
            out.append(f.add(f.sub(right, left), f.const(1)))
        elif isinstance(op, ast.Gt):
            out.append(f.sub(left, right))
        else:
            out.append(f.add(f.sub(left, right), f.const(1)))
        left = right
    return out


def _decide(op: str, c: Fraction) -> bool:
    return {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0, "=": c == 0, "!=": c != 0}[op]


def _cond(r, test):
    if isinstance(test, ast.BoolOp):
        parts = [_cond(r, v) for v in test.values]
        return _lattice("and" if isinstance(test.op, ast.And) else "or", parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return f.negate_cond(_cond(r, test.operand))
    if not isinstance(test, ast.Compare):
        raise _Fallback
    terms = [_expr(r, x) for x in (test.left, *test.comparators)]
    ops = [_REL.get(type(op)) for op in test.ops]
    if None in ops:
        raise _Fallback
    rels = []
    for op, a, b in zip(ops, terms, terms[1:]):
        d = f.sub(a, b)
        c = f.constant(d)
        if c is not None:
            rels.append(_decide(op, c))
        elif not (_plain(d) and (op not in ("=", "!=") or _undecided(d))) and not (op in ("=", "!=") and _residue(d)):
            raise _Fallback  # sympy may decide these (parity, signs of min/max/floor/mod)
        else:
            rels.append(("rel", op, d))
    return _lattice("and", rels)


def _undecided(d: dict) -> bool:
    """``d = 0`` is left open by sympy: integer coefficients, one of them 1 or -1 (no parity argument)."""
    return all(c.denominator == 1 for c in d.values()) and any(abs(c) == 1 for x, c in d.items() if x != f.ONE)


def _residue(d: dict) -> bool:
    """``d`` is ``x mod k - c`` with ``0 <= c < k`` (``x mod k = c`` is left open by sympy)."""
    c = -d.get(f.ONE, 0)
    rest = [(x, v) for x, v in d.items() if x != f.ONE]
    return len(rest) == 1 and rest[0][1] == 1 and isinstance(rest[0][0], tuple) and rest[0][0][0] == "mod" \
        and c.denominator == 1 and 0 <= c < rest[0][0][2]


def _lattice(kind: str, parts: list):
    """sympy's ``And``/``Or`` of conditions: nested ones of the same kind flattened, the identity dropped, the
    absorbing value absorbing; relations only (sympy also merges relations that are the same or opposite up
    to a factor: then the sympy reader decides)."""
    unit = kind == "and"
    flat = []
    for p in parts:
        if p is unit:
            continue
        if p is (not unit):
            return not unit
        if isinstance(p, tuple) and p[0] == kind:
            flat.extend(p[1])
        else:
            flat.append(p)
    if any(not (isinstance(p, tuple) and p[0] == "rel") for p in flat):
        raise _Fallback
    for i, p in enumerate(flat):
        for q in flat[:i]:
            if _proportional(p[2], q[2]):
                raise _Fallback
    if not flat:
        return unit
    return flat[0] if len(flat) == 1 else (kind, tuple(flat))


def _proportional(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    k = None
    for x, c in a.items():
        ratio = c / b[x]
        if k is None:
            k = ratio
        elif ratio != k:
            return False
    return True
