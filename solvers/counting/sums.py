"""Nested sums of counting functions (thesis equation 2.2 and the Bounded Sum Approximation, §2.4.3).

A count is a :class:`Bnd`: an exact sympy value (or ``None`` when only bounds are known) and a lower and
an upper bound.  :func:`sum_bnd` forms ``sum_{d=0}^{n-1} f(d)``:

1. exactly when it can: sympy's closed forms (Faulhaber, geometric) after removing ``Max(0, g)`` — proved
   non-negative on the range, or split at the sign change of a linear ``g`` (exact, with Min/Max limits);
2. otherwise by the BSA algorithm: ceilings relaxed (``f <= ceil f <= f + 1``, type 1), sums without a
   closed form bounded by integrals of the monotone summand (type 2), bounds carried outwards.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy as sp

from meshplan.solvers.counting.logsums import linear as _linear
from meshplan.solvers.counting.logsums import log_sum as _log_sum

__all__ = ["Bnd", "sum_bnd", "closed_sum", "is_nonneg", "clamp0", "smin"]


def clamp0(e: sp.Expr) -> sp.Expr:
    """``Max(0, e)`` without sympy's costly pairwise comparisons (decided at once when the sign is known)."""
    e = sp.sympify(e)
    if e.is_nonnegative or is_nonneg(e):
        return e
    if e.is_nonpositive:
        return sp.Integer(0)
    return sp.Max(0, e, evaluate=False)


def smin(*args) -> sp.Expr:
    """``Min(*args)`` without sympy's pairwise comparisons (numbers are still folded)."""
    uniq = list(dict.fromkeys(sp.sympify(a) for a in args))
    if len(uniq) == 1:
        return uniq[0]
    if all(a.is_number for a in uniq):
        return sp.Min(*uniq)
    return sp.Min(*uniq, evaluate=False)


@dataclass(frozen=True, slots=True)
class Bnd:
    """``lo <= value <= hi``; ``value`` is None when only bounds are known."""

    value: sp.Expr | None
    lo: sp.Expr
    hi: sp.Expr

    @staticmethod
    def exact(e) -> "Bnd":
        e = sp.sympify(e)
        return Bnd(e, e, e)

    def __add__(self, other: "Bnd") -> "Bnd":
        v = None if self.value is None or other.value is None else self.value + other.value
        return Bnd(v, self.lo + other.lo, self.hi + other.hi)

    def map(self, f) -> "Bnd":
        return Bnd(None if self.value is None else f(self.value), f(self.lo), f(self.hi))


@functools.lru_cache(maxsize=4096)
def is_nonneg(e: sp.Expr, facts: tuple = ()) -> bool:
    """True only when ``e >= 0`` is proved (positive integer symbols are at least 1, ceilings of positive
    numbers at least 1), using ``facts``: slacks ``s > 0`` of the guards that hold where ``e`` is used."""
    if _refuted(e, facts):
        return False
    if _nonneg(e):
        return True
    for s in facts:
        slack = s - 1 if s.is_integer else s
        if _nonneg(sp.expand(e - slack)):
            return True
    if len(facts) > 1:
        for a in facts:
            for b in facts:
                if a is not b and a.is_integer and b.is_integer and _nonneg(sp.expand(e - a - b + 2)):
                    return True
    return False


def _refuted(e: sp.Expr, facts: tuple) -> bool:
    """A cheap counterexample: ``e < 0`` at sample points where all facts hold (exact arithmetic on
    compiled expressions; expressions with logs or roots are not sampled)."""
    from meshplan.models.counting.execute import compile_expr  # same layer-independent evaluator

    syms = sorted(e.free_symbols | set().union(*(f.free_symbols for f in facts)), key=lambda x: x.name)
    if not syms or len(syms) > 8:
        return False
    try:
        fe = compile_expr(e)
        ff = [compile_expr(f) for f in facts]
    except Exception:  # log, sqrt, Piecewise…: no sampling
        return False
    for k, base in enumerate((1, 2, 3, 7, 20)):
        env = {x.name: base + (j * (k + 3)) % 11 for j, x in enumerate(syms)}
        try:
            if all(f(env) > 0 for f in ff) and fe(env) < 0:
                return True
        except Exception:  # division by zero at a sample
            continue
    return False


def _nonneg(e: sp.Expr) -> bool:
    if e.is_nonnegative:
        return True
    if e.has(sp.Min, sp.Max):  # rebuilding Min/Max after substitution can take very long in sympy
        return False
    subs = {s: sp.Dummy(integer=True, nonnegative=True) + 1
            for s in e.free_symbols if s.is_integer and s.is_positive}
    e2 = e.xreplace(subs)
    e2 = e2.replace(lambda x: isinstance(x, sp.ceiling) and x.args[0].is_positive,
                    lambda x: sp.Dummy(integer=True, nonnegative=True) + 1)
    e2 = e2.replace(lambda x: isinstance(x, (sp.ceiling, sp.floor)) and x.args[0].is_nonnegative,
                    lambda x: sp.Dummy(integer=True, nonnegative=True))
    return sp.expand(e2).is_nonnegative is True


def _upper_limit(n: sp.Expr) -> sp.Expr:
    """``Max(0, X)`` -> ``X`` (an empty sum needs no check)."""
    if isinstance(n, sp.Max) and 0 in n.args and len(n.args) == 2:
        return [a for a in n.args if a != 0][0]
    return n


def _plain_sum(f: sp.Expr, d: sp.Symbol, t: sp.Expr) -> sp.Expr | None:
    """``sum_{d=0}^{t-1} f`` in closed form, or None.  Terms ``c d^k r^d``: Faulhaber for ``r = 1``,
    geometric sums otherwise (the forms the counting functions of §2.4 produce)."""
    if d not in f.free_symbols:
        return f * t
    m = sp.Dummy("m", integer=True, nonnegative=True)
    groups: dict = {}
    for term in sp.Add.make_args(sp.expand(f)):
        c, rest = term.as_independent(d, as_Add=False)
        k, r = 0, sp.Integer(1)
        for fac in sp.Mul.make_args(rest):
            if fac == 1:
                continue
            if fac == d:
                k += 1
            elif isinstance(fac, sp.Pow) and fac.base == d and fac.exp.is_Integer and fac.exp > 0:
                k += int(fac.exp)
            elif isinstance(fac, sp.Pow) and d not in fac.base.free_symbols:
                e = sp.expand(fac.exp)
                if not (e.is_polynomial(d) and sp.degree(e, d) == 1):
                    return None
                r = r * fac.base ** e.coeff(d, 1)
                c = c * fac.base ** e.coeff(d, 0)
            elif isinstance(fac, sp.exp):
                return None
            else:
                return None
        groups[(k, r)] = groups.get((k, r), 0) + c
    out = sp.Integer(0)
    for (k, r), c in groups.items():
        if k > 12:
            return None
        if r == 1:  # Faulhaber: sum_{d<m} d^k = (B_{k+1}(m) - B_{k+1}(0)) / (k + 1)
            S = sp.expand((sp.bernoulli(k + 1, m) - sp.bernoulli(k + 1, 0)) / (k + 1))
        else:  # (R d/dR)^k of the geometric sum (R^m - 1) / (R - 1), at R = r
            R = sp.Dummy("R")
            G = (R ** m - 1) / (R - 1)
            for _ in range(k):
                G = R * sp.diff(G, R)
            S = G.xreplace({R: r})
        out += c * S
    return out.xreplace({m: t})


def closed_sum(f: sp.Expr, var: sp.Symbol, lo: sp.Expr, hi: sp.Expr) -> sp.Expr | None:
    """``sum_{var=lo}^{hi} f`` in closed form (:func:`_plain_sum` on ``f(lo + d)``, ``d < hi − lo + 1``), or None.
    The closed form is a polynomial identity, so a reversed range gives what ``sympy.summation`` gives
    (a negative count)."""
    d = sp.Dummy("d", integer=True)
    return _plain_sum(sp.sympify(f).xreplace({var: lo + d}), d, hi - lo + 1)


def _exact(f: sp.Expr, d: sp.Symbol, n: sp.Expr, facts: tuple = ()) -> sp.Expr | None:
    if d not in f.free_symbols and f.has(sp.Piecewise):  # as it is: piecewise_fold would rebuild the conditions
        return f * n  # with sympy's evaluation (n >= 1 is true for parameters >= 1, the 0 at n = 0 lost)
    f = sp.piecewise_fold(f)
    if n.is_Integer and 0 <= n <= 256:  # a short loop with a known count: add the terms
        return sp.Add(*[f.xreplace({d: k}) for k in range(int(n))])
    if isinstance(f, sp.Piecewise):
        if any(d in c.free_symbols for _, c in f.args):
            return None
        parts = [(_exact(e, d, n, facts), c) for e, c in f.args]
        return None if any(p is None for p, _ in parts) else sp.Piecewise(*parts, evaluate=False)
    top = _upper_limit(n)
    f = _drop_max(f, d, top, facts)
    if d not in f.free_symbols:
        return f * n
    total = sp.Integer(0)
    plain = sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(f)):
        logsum = _log_sum(term, d, top)
        if logsum is not None:
            total += logsum
            continue
        maxes = [a for a in term.atoms(sp.Max) if d in a.free_symbols]
        if not maxes:
            plain += term
            continue
        if len(maxes) != 1 or 0 not in maxes[0].args or len(maxes[0].args) != 2:
            return None
        mx = maxes[0]
        g = [a for a in mx.args if a != 0][0]
        coeff = sp.cancel(term / mx)
        if d in coeff.free_symbols:
            return None
        lin = _linear(g, d)
        own = tuple(s for s in facts if d in s.free_symbols)
        if is_nonneg(g, own) or (lin is not None and is_nonneg(g.subs(d, 0), facts)
                                  and is_nonneg(g.subs(d, top - 1), facts)):
            plain += coeff * g
            continue
        if lin is None:
            return None
        b, a = lin
        F = _plain_sum(g, d, sp.Symbol("t_"))
        if F is None or not b.is_number:
            return None
        t = sp.Symbol("t_")
        if b < 0:
            cut = smin(n, clamp0(sp.ceiling(a / (-b))))
            total += coeff * F.subs(t, cut)
        elif b > 0:
            cut = smin(n, clamp0(sp.floor(-a / b) + 1))
            total += coeff * (F.subs(t, n) - F.subs(t, cut))
        else:
            total += coeff * clamp0(a) * n
    rest = _plain_sum(plain, d, n)
    if rest is None:
        return None
    return total + rest


def _drop_max(f: sp.Expr, d: sp.Symbol, top: sp.Expr, facts: tuple) -> sp.Expr:
    """``Max(0, g) -> g`` wherever ``g >= 0`` is proved for every summed ``d``."""
    own = tuple(s for s in facts if d in s.free_symbols)
    outer = tuple(s for s in facts if d not in s.free_symbols)
    rep = {}
    for mx in f.atoms(sp.Max):
        if len(mx.args) != 2 or 0 not in mx.args:
            continue
        g = [a for a in mx.args if a != 0][0]
        if d not in g.free_symbols:  # kept unless g >= 0 also at parameters 0 (a log or root count: always kept)
            ok = _nonneg_from_zero(g, outer) and not _edge(g)
        else:
            ok = is_nonneg(g, own) or (_linear(g, d) is not None and is_nonneg(g.subs(d, 0), outer)
                                       and is_nonneg(g.subs(d, top - 1), outer))
        if ok:
            rep[mx] = g
    return f.xreplace(rep) if rep else f


def _nonneg_from_zero(g: sp.Expr, facts: tuple) -> bool:
    """:func:`is_nonneg` with the parameters taken as non-negative (not positive) integers: a clamp of a count
    that an outer loop multiplies must hold where a parameter is 0 and the outer loop still runs."""
    rep = {s: sp.Symbol(s.name, integer=True, nonnegative=True)
           for e in (g, *facts) for s in e.free_symbols if s.is_Symbol and s.is_positive and not s.is_Dummy}
    return is_nonneg(g.xreplace(rep), tuple(f.xreplace(rep) for f in facts)) if rep else is_nonneg(g, facts)


def _edge(g: sp.Expr) -> bool:
    """A count with a log or a root of the parameters: proved ``>= 0`` only for parameters >= 1."""
    return bool(g.free_symbols) and (g.has(sp.log) or any(not a.exp.is_Integer for a in g.atoms(sp.Pow)))


def _relax(e: sp.Expr, d: sp.Symbol, pol: int, facts: tuple = ()) -> sp.Expr:
    """A bound of ``e`` (upper for ``pol > 0``) without ceilings/floors in ``d`` (type 1 of §2.4.3).
    Factors of products are counts (non-negative), so only numeric coefficients flip the direction."""
    if d not in e.free_symbols:
        return e
    if isinstance(e, sp.Add):
        return sp.Add(*[_relax(a, d, pol, facts) for a in e.args])
    if isinstance(e, sp.Mul):
        c, rest = e.as_coeff_Mul()
        p2 = pol if c >= 0 else -pol
        return c * sp.Mul(*[_relax(a, d, p2, facts) for a in sp.Mul.make_args(rest)])
    if isinstance(e, sp.ceiling):
        a = _relax(e.args[0], d, pol, facts)
        return a + 1 if pol > 0 else a
    if isinstance(e, sp.floor):
        a = _relax(e.args[0], d, pol, facts)
        return a if pol > 0 else a - 1
    if isinstance(e, sp.Max) and 0 in e.args and len(e.args) == 2:
        g = [a for a in e.args if a != 0][0]
        if is_nonneg(g, facts) or pol < 0:
            return _relax(g, d, pol, facts)
        return clamp0(_relax(g, d, pol, facts))
    if isinstance(e, sp.Min):
        return _relax(e.args[0], d, pol, facts) if pol > 0 else sp.Integer(0)
    return e


def _integral(f: sp.Expr, d: sp.Symbol, n: sp.Expr, pol: int) -> sp.Expr | None:
    """Type 2 of §2.4.3: for monotone ``f``, ``int_0^{n-1} f + min/max(f(0), f(n-1))`` bounds the sum."""
    if sp.count_ops(f) > 30 or f.has(sp.Min, sp.Max, sp.Piecewise):  # slow or not monotone-checkable
        return None
    x = sp.Dummy("x", positive=True)
    fp = sp.diff(f, d)
    up = is_nonneg(fp.subs(d, x))
    down = not up and is_nonneg(-fp.subs(d, x))
    if not (up or down):
        return None
    t = sp.Dummy("t", nonnegative=True)
    try:
        I = sp.integrate(f.subs(d, x), (x, 0, t), risch=False)
    except Exception:  # pragma: no cover - sympy failures
        return None
    if I.has(sp.Integral):
        return None
    # the upper end n - 1 clamped at 0, unevaluated: parameters >= 1 make it look non-negative, but at a
    # parameter 0 the loop is empty and a root of n - 1 would be complex
    top = sp.Max(0, n - 1, evaluate=False) if n.free_symbols else n - 1
    I = I.xreplace({t: top})
    first, last = f.subs(d, 0), f.xreplace({d: top})
    if not (first.is_finite is not False and last.is_finite is not False):
        return None
    end = (last if up else first) if pol > 0 else (first if up else last)
    # kept unevaluated: parameters >= 1 make n > 0 look certain, but at a parameter 0 the loop is empty and
    # the integral of a root would be complex there
    return sp.Piecewise((0, sp.Le(n, 0, evaluate=False)), (I + end, True), evaluate=False)


def _bound(f: sp.Expr, d: sp.Symbol, n: sp.Expr, pol: int, facts: tuple) -> sp.Expr | None:
    r = _relax(f, d, pol, facts)
    out = _exact(r, d, n, facts)
    if out is None:
        out = _integral(r, d, n, pol)
    return out


def sum_bnd(f: Bnd, d: sp.Symbol, n: Bnd, facts: tuple = ()) -> Bnd | None:
    """``sum_{d=0}^{n-1} f(d)`` (equation 2.2, one level), exact or bounded; None if no bound is found.
    ``facts`` are guard slacks known positive for every summed ``d`` (this loop's and enclosing ones)."""
    if f.value is not None and n.value is not None:
        v = _exact(f.value, d, n.value, facts)
        if v is not None:
            return Bnd.exact(v)
    lo = _bound(f.lo, d, n.lo, -1, facts)
    hi = _bound(f.hi, d, n.hi, +1, facts)
    if lo is None or hi is None:
        return None
    return Bnd(None, lo, hi)
