"""Fewer pieces in a piecewise count over non-negative integer parameters, the same value at every point.

The work and depth of a block-distributed program (thesis chapter 2, section 2.1.1) come from Barvinok's
piecewise count of the most loaded rank with the process counts set to 1 or taken to infinity; most of its
pieces are then unreachable (``(n >= 2) & (n <= 0)``) or agree with a neighbour at their few points.
:func:`prune_pieces` compares conditions on one parameter exactly, as sets of integers (affine relations with
rational coefficients, ``And``/``Or``/``Not``/``ITE`` of them), and leaves every other condition as it is.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["prune_pieces"]

# A set of integers is a sorted tuple of disjoint, non-adjacent intervals (a, b), ends possibly -oo / oo.
_ALL = ((-sp.oo, sp.oo),)


def _ints(c: sp.Basic, x: sp.Symbol) -> tuple | None:
    """The integers ``x`` at which ``c`` holds, for ``c`` built by ``And``/``Or``/``Not`` from relations affine in
    ``x`` with rational coefficients; None for any other condition."""
    if c is sp.true or c is sp.false:
        return _ALL if c is sp.true else ()
    if isinstance(c, (sp.And, sp.Or)):
        parts = [_ints(a, x) for a in c.args]
        if any(s is None for s in parts):
            return None
        out = parts[0]
        for s in parts[1:]:
            out = _meet(out, s) if isinstance(c, sp.And) else _norm(out + s)
        return out
    if isinstance(c, sp.Not):
        s = _ints(c.args[0], x)
        return None if s is None else _minus(_ALL, s)
    if isinstance(c, sp.ITE):
        i, th, el = (_ints(a, x) for a in c.args)
        return None if None in (i, th, el) else _norm(_meet(i, th) + _minus(el, i))
    if not isinstance(c, (sp.Ge, sp.Gt, sp.Le, sp.Lt, sp.Eq, sp.Ne)):
        return None
    d = sp.expand(c.lhs - c.rhs)
    a = d.coeff(x)
    b = sp.expand(d - a * x)
    if not (a.is_Rational and b.is_Rational):
        return None
    if isinstance(c, (sp.Le, sp.Lt)):  # d <= 0 is -d >= 0
        a, b = -a, -b
    if isinstance(c, (sp.Eq, sp.Ne)):
        hit = () if a == 0 and b != 0 else _ALL if a == 0 else ((-b / a, -b / a),) if (-b / a).is_integer else ()
        return hit if isinstance(c, sp.Eq) else _minus(_ALL, hit)
    strict = isinstance(c, (sp.Gt, sp.Lt))
    if a == 0:
        return _ALL if (b > 0 or (b == 0 and not strict)) else ()
    t = -b / a  # a*x + b >= 0 (> 0): x >= t (> t) when a > 0, x <= t (< t) when a < 0
    if a > 0:
        return ((sp.floor(t) + 1 if strict else sp.ceiling(t), sp.oo),)
    return ((-sp.oo, sp.ceiling(t) - 1 if strict else sp.floor(t)),)


def _norm(ivs) -> tuple:
    out: list = []
    for a, b in sorted(ivs, key=lambda t: t[0]):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _meet(s: tuple, t: tuple) -> tuple:
    return _norm([(max(a, c), min(b, d)) for a, b in s for c, d in t if max(a, c) <= min(b, d)])


def _minus(s: tuple, t: tuple) -> tuple:
    gaps, lo = [], -sp.oo  # the complement of t
    for a, b in t:
        if lo <= a - 1:
            gaps.append((lo, a - 1))
        lo = b + 1
    if lo != sp.oo:
        gaps.append((lo, sp.oo))
    return _meet(s, _norm(gaps))


def _points(s: tuple, limit: int = 16) -> list | None:
    if sum((b - a + 1) if b != sp.oo else limit + 1 for a, b in s) > limit:
        return None
    return [v for a, b in s for v in range(int(a), int(b) + 1)]


def _domain(x: sp.Symbol) -> tuple | None:
    if x.is_integer and x.is_nonnegative:
        return ((1 if x.is_positive else 0, sp.oo),)
    return None


def _univariate(c: sp.Basic) -> tuple[sp.Symbol, tuple] | None:
    """``(x, integers of x meeting c)`` when ``c`` is a condition on one non-negative integer symbol."""
    syms = c.free_symbols
    if len(syms) != 1:
        return None
    (x,) = syms
    base = _domain(x)
    if base is None:
        return None
    got = _ints(c, x)
    return None if got is None else (x, _meet(got, base))


def _condition(x: sp.Symbol, s: tuple, base: tuple) -> sp.Basic | None:
    """A relation for ``x in s`` given ``x in base`` (``x >= 2``, ``Eq(x, 2)``, True), or None."""
    if not s:
        return sp.false
    if _minus(base, s) == ():
        return sp.true
    if len(s) != 1:
        return None
    (a, b), (lo, hi) = s[0], (base[0][0], base[-1][1])
    if a == b:
        return sp.Eq(x, a)
    return sp.And(*([sp.Ge(x, a)] if a > lo else []), *([sp.Le(x, b)] if b < hi else []))


def _agree(v: sp.Expr, w: sp.Expr, x: sp.Symbol, s: tuple) -> bool:
    """True when ``v`` equals ``w`` at each of the finitely many values ``s`` of ``x`` (for all other symbols)."""
    pts = _points(s)
    return pts is not None and all(sp.expand(v.xreplace({x: k}) - w.xreplace({x: k})) == 0 for k in pts)


def _or_else(c, other):
    return other if c is None else c


def prune_pieces(e: sp.Expr, facts: dict | None = None) -> sp.Expr:
    """An equal count with fewer pieces, for non-negative integer parameters: a piece no parameter value reaches
    is dropped (``(n >= 2) & (n <= 0)``; a point an earlier piece takes), a piecewise count inside a piece whose
    condition decides it becomes the piece it selects, and a piece merges into the one before it when that one's
    expression has its values at its finitely many points (``(n - 1, n >= 3), (1, Eq(n, 2))`` is
    ``(n - 1, n >= 2)``).  Only conditions on one parameter are compared (as sets of integers); others stay."""
    facts = dict(facts or {})
    if not isinstance(e, sp.Piecewise):
        if not e.args or not e.has(sp.Piecewise):
            return e
        return e.func(*[prune_pieces(a, facts) for a in e.args])
    if e.args[-1].cond is not sp.true:  # not defined everywhere: left as it is
        return e
    kept = []  # (value, condition, x, integers of x reaching the piece)
    for v, c in e.args:
        conj = c.args if isinstance(c, sp.And) else (c,)
        local, rest, dead = dict(facts), [], False
        for a in conj:
            u = _univariate(a) if a is not sp.true else None
            if u is None:
                rest.append(a)
                continue
            x, s = u
            local[x] = _meet(local.get(x, _domain(x)), s)
            dead = dead or not local[x]
        if dead:
            continue
        keys = {a.free_symbols.pop() for a in conj if a is not sp.true and _univariate(a)}
        cond = sp.And(*rest, *[_or_else(_condition(x, local[x], facts.get(x, _domain(x))),
                                        sp.And(*[a for a in conj if a.free_symbols == {x}])) for x in keys])
        value = prune_pieces(v, local)
        if len(keys) == 1 and not rest:
            (x,) = keys
            kept.append((value, cond, x, local[x]))
            facts[x] = _minus(facts.get(x, _domain(x)), local[x])  # later pieces: the values this one misses
        else:
            kept.append((value, cond, None, None))
        if cond is sp.true:
            break
    if not kept:
        return e
    merged = [kept[0]]
    for v2, c2, x2, s2 in kept[1:]:
        v1, c1, x1, s1 = merged[-1]
        if c2 is sp.true and x2 is None and x1 is not None:  # the last piece: the values the others miss
            x2, s2 = x1, facts.get(x1)
        if x2 is not None and x2 == x1 and s2 is not None:
            both = _norm(s1 + s2)
            cond = sp.true if c2 is sp.true else _condition(x1, both, _domain(x1))
            keep = v1 if _agree(v1, v2, x1, s2) else v2 if _agree(v2, v1, x1, s1) else None
            if cond is not None and keep is not None:
                merged[-1] = (keep, cond, x1, both)
                continue
        merged.append((v2, c2, x2, s2))
    if merged[0][1] is sp.true:
        return merged[0][0]
    return sp.Piecewise(*[(v, c) for v, c, _, _ in merged])



def drop_unreachable(e: sp.Expr) -> sp.Expr:
    """``e`` without the pieces of its outer ``Piecewise`` whose condition no integer parameter values meet.
    Each ``ceiling(E/q)`` or ``floor(E/q)`` of a process count ``q >= 1`` becomes an integer in the range of its
    values over all ``q >= 1`` (``ceiling``: ``1 … E`` where ``E >= 1``, ``E … 0`` elsewhere; ``floor``: ``0 … E``
    where ``E >= 0``, ``E … -1`` elsewhere), and isl decides whether the condition can hold then.  A
    relaxation: a piece it drops is never taken; one it keeps may still never be."""
    if not isinstance(e, sp.Piecewise):
        return e
    keep = [(v, c) for v, c in e.args if c is sp.true or not _never(c)]
    if len(keep) == len(e.args) or not keep:
        return e
    return keep[0][0] if keep[0][1] is sp.true else sp.Piecewise(*keep)


def _never(c: sp.Basic) -> bool:
    import islpy as isl

    rep, relax = {}, []
    for k, a in enumerate(sorted(c.atoms(sp.ceiling, sp.floor), key=sp.default_sort_key)):
        num, den = sp.fraction(sp.together(a.args[0]))
        E = _affine(num)
        if not (den.is_Symbol and den.is_integer and den.is_positive and E is not None):
            return False
        z = rep[a] = sp.Symbol(f"rlx{k}", integer=True)
        relax.append(f"(({E} >= 1 and 1 <= {z} <= {E}) or ({E} <= 0 and {E} <= {z} <= 0))"
                     if isinstance(a, sp.ceiling) else
                     f"(({E} >= 0 and 0 <= {z} <= {E}) or ({E} <= -1 and {E} <= {z} <= -1))")
    body = _isl(c.xreplace(rep))
    syms = sorted((c.xreplace(rep).free_symbols - set(rep.values())) | {s for a in rep for s in a.free_symbols},
                  key=lambda s: s.name)
    if body is None or not all(s.is_integer for s in syms):
        return False
    doms = [f"{s.name} >= {1 if s.is_positive else 0}" for s in syms if s.is_nonnegative]
    text = (f"[{', '.join(s.name for s in syms)}] -> {{ [{', '.join(z.name for z in rep.values())}] : "
            f"{' and '.join([body, *relax, *doms])} }}")
    try:
        return isl.Set(text).is_empty()
    except isl.Error:  # a name isl does not read: undecided
        return False


def _affine(e: sp.Expr) -> str | None:
    """``e`` as isl text when it is affine with integer coefficients, else None."""
    e = sp.expand(sp.sympify(e))
    syms = sorted(e.free_symbols, key=lambda s: s.name)
    coeffs = [e.coeff(s) for s in syms]
    const = sp.sympify(e.xreplace({s: sp.S.Zero for s in syms}))
    if not all(x.is_Integer for x in (*coeffs, const)) or sp.expand(e - sum(k * s for k, s in zip(coeffs, syms))
                                                                    - const) != 0:
        return None
    return " + ".join([f"{k}*{s.name}" for k, s in zip(coeffs, syms) if k != 0] + [str(const)])


_OPS = {sp.Ge: ">=", sp.Gt: ">", sp.Le: "<=", sp.Lt: "<", sp.Eq: "="}


def _isl(c: sp.Basic) -> str | None:
    """A condition affine in its symbols (rational coefficients) as isl text, or None."""
    if c is sp.true or c is sp.false:
        return "0 = 0" if c is sp.true else "1 = 0"
    if isinstance(c, (sp.And, sp.Or, sp.Not, sp.Ne)):
        parts = [_isl(a) for a in c.args] if not isinstance(c, sp.Ne) else [_isl(sp.Eq(*c.args, evaluate=False))]
        if None in parts:
            return None
        return f"(not {parts[0]})" if isinstance(c, (sp.Not, sp.Ne)) else \
            "(" + (" and " if isinstance(c, sp.And) else " or ").join(parts) + ")"
    if type(c) not in _OPS:
        return None
    d = sp.expand(c.lhs - c.rhs)
    den = sp.ilcm(1, *[sp.fraction(k)[1] for k in d.as_coefficients_dict().values()])
    lhs = _affine(d * den)
    return None if lhs is None else f"{lhs} {_OPS[type(c)]} 0"
