"""Work, depth, parallel efficiency and available parallelism from an iteration count (thesis §2.1.1, §2.3).

* :func:`rank_max` — the count of the most loaded process of explicitly parallel code: block ranges
  ``floor((r+1)c) - floor(r c)`` become ``ceil(c)`` (Example II's ``ceil(n/p)``);
* :func:`work` ``W = N|_{p=1}``, :func:`depth` ``D = N|_{p -> oo}`` (``oo`` when the code is not
  work-conserving), :func:`efficiency` ``E_p = W / (p N)``;
* :func:`available_parallelism` — ``W / D`` when the depth is finite; otherwise the largest ``p`` at
  which the divided work still shrinks (where ``ceil(n/p)`` reaches 1: ``n`` in Example II).
"""

from __future__ import annotations

import sympy as sp

from meshplan.solvers.counting.pieces import drop_unreachable, prune_pieces

__all__ = ["rank_max", "work", "depth", "efficiency", "available_parallelism", "tidy", "grid_metrics", "fold_pieces",
           "ratio"]


def tidy(e: sp.Expr) -> sp.Expr:
    """A readable equal form: polynomials factored, the rest expanded if that is shorter."""
    if e is None:
        return None
    try:
        if not e.atoms(sp.ceiling, sp.floor, sp.Min, sp.Max, sp.Piecewise, sp.log, sp.Pow) - {
                a for a in e.atoms(sp.Pow) if a.exp.is_Integer}:
            return sp.factor(sp.expand(e))
        x = _expand(e)
        return x if sp.count_ops(x) <= sp.count_ops(e) else e
    except Exception:  # pragma: no cover - sympy corner cases: keep the form we have
        return e


def _expand(e: sp.Expr) -> sp.Expr:
    """``sympy.expand`` that keeps the conditions of piecewise counts as they are: sympy would rebuild them with
    its evaluation, which decides ``2*n >= 1`` as true for parameters >= 1 and drops the piece that makes a
    count 0 where a parameter is 0."""
    pieces = e.atoms(sp.Piecewise)
    if not pieces:
        return sp.expand(e)
    held = {pw: sp.Dummy() for pw in pieces}
    out = sp.expand(e.xreplace(held))
    return out.xreplace({h: sp.Piecewise(*[(_expand(v), c) for v, c in pw.args], evaluate=False)
                         for pw, h in held.items()})


def rank_max(e: sp.Expr, rank: sp.Symbol, p: sp.Symbol) -> tuple[sp.Expr, bool]:
    """``max over rank in [0, p)`` of ``e`` -> (expression, exact?).  Only block distributions
    ``range(r*c, min((r+1)*c, total))`` are resolved; the result is an upper bound when the rewrite
    is not known to be attained."""
    if rank not in e.free_symbols:
        return e, True
    exact = True

    def min_rule(m):
        nonlocal exact
        dep = [a for a in m.args if rank in a.free_symbols]
        if dep and len(dep) < len(m.args):
            return sp.Min(*dep)
        return m
    e = e.replace(lambda x: isinstance(x, sp.Min) and rank in x.free_symbols, min_rule)
    e = e.replace(lambda x: isinstance(x, sp.Max) and 0 in x.args and len(x.args) == 2
                  and rank in x.free_symbols, lambda x: [a for a in x.args if a != 0][0])

    def pair_rule(add):
        nonlocal exact
        args = list(add.args)
        floors = []
        for a in args:
            c, f = a.as_independent(rank, as_Add=False)
            if isinstance(f, sp.floor):
                floors.append((a, c, f))
        for a1, c1, fa in floors:
            for a2, c2, fb in floors:
                if a1 is a2 or c1.is_positive is not True or sp.expand(c1 + c2) != 0:
                    continue
                delta = sp.expand(fa.args[0] - fb.args[0])
                if rank in delta.free_symbols:
                    continue
                attained = sp.expand(fb.args[0] - rank * delta) == 0 and (p * delta).is_integer
                exact = exact and bool(attained)
                args.remove(a1)
                args.remove(a2)
                return sp.Add(*args) + c1 * sp.ceiling(delta)
        return add
    out = e.replace(lambda x: isinstance(x, sp.Add) and rank in x.free_symbols, pair_rule)
    if rank in out.free_symbols:
        raise ValueError("the count depends on the rank in a way not derived here")
    return out, exact


def _as_procs(e: sp.Expr, p: sp.Symbol) -> sp.Expr:
    """``e`` with every other symbol named like the process count ``p`` replaced by ``p``: Barvinok's counts
    hold their parameters as non-negative integers, a different sympy symbol from the positive ``p``."""
    rep = {s: p for s in e.free_symbols if s.is_Symbol and s.name == p.name and s != p}
    return e.xreplace(rep) if rep else e


def work(N: sp.Expr, p: sp.Symbol) -> sp.Expr:
    N = _as_procs(N, p)
    return tidy(prune_pieces(N.xreplace({p: sp.Integer(1)})))


def _lim(e: sp.Expr, p: sp.Symbol) -> sp.Expr:
    """``lim_{p -> oo} e``: rational functions of ``p`` by degrees, the rest by sympy."""
    if p not in e.free_symbols:
        return e
    num, den = sp.fraction(sp.together(e))
    if num.is_polynomial(p) and den.is_polynomial(p):
        pn, pd = sp.Poly(num, p), sp.Poly(den, p)
        ratio = pn.LC() / pd.LC()
        if pn.degree() < pd.degree():
            return sp.Integer(0)
        if pn.degree() == pd.degree():
            return ratio
        sign = sp.sign(ratio)
        if sign in (1, -1):
            return sign * sp.oo
        if ratio.is_nonnegative:  # e.g. u1 * p: grows without bound unless the factor is 0
            return sp.oo
    out = sp.limit(e, p, sp.oo)
    return out.replace(lambda x: isinstance(x, sp.sign) and x.args[0].is_nonnegative, lambda x: sp.Integer(1))


def _limit_atoms(N: sp.Expr, p: sp.Symbol) -> sp.Expr:
    """Ceilings/floors/Max/Min of ``p`` replaced by their values at ``p -> oo``."""
    def rule(x):
        inner = _limit_atoms(x.args[0], p) if isinstance(x, (sp.ceiling, sp.floor)) else None
        if isinstance(x, (sp.ceiling, sp.floor)):
            L = _lim(inner, p)
            if L.is_infinite:
                return inner
            gap = inner - L
            pos = gap.is_positive if gap.is_positive is not None else sp.simplify(gap).is_positive
            if L.is_integer and pos is None and not gap.is_zero:
                lead = _leading_sign(gap, p)  # the gap's sign for large p, e.g. n - 1 for (n - 1)/p
                if lead is not None:
                    if isinstance(x, sp.ceiling):
                        return sp.Piecewise((L + 1, lead > 0), (L, True))
                    return sp.Piecewise((L, lead >= 0), (L - 1, True))
            if L.is_integer:
                if isinstance(x, sp.ceiling):
                    return L + 1 if pos else L
                return L if (pos or gap.is_zero) else L - 1
            return type(x)(L)
        args = [_limit_atoms(a, p) for a in x.args]
        lims = [_lim(a, p) for a in args]
        return sp.Max(*lims) if isinstance(x, sp.Max) else sp.Min(*lims)
    return N.replace(lambda x: isinstance(x, (sp.ceiling, sp.floor, sp.Max, sp.Min)) and p in x.free_symbols, rule)


def _leading_sign(gap: sp.Expr, p: sp.Symbol) -> sp.Expr | None:
    """An expression with the sign of ``gap`` as ``p -> oo`` (a rational function of ``p``: the ratio of the
    leading coefficients), or None."""
    num, den = sp.fraction(sp.together(gap))
    if not (num.is_polynomial(p) and den.is_polynomial(p)):
        return None
    lead = sp.Poly(num, p).LC() / sp.Poly(den, p).LC()
    return None if p in lead.free_symbols else sp.simplify(lead)


def depth(N: sp.Expr, p: sp.Symbol) -> sp.Expr:
    N = _as_procs(N, p)
    if p not in N.free_symbols:
        return tidy(N)
    try:
        return tidy(prune_pieces(_lim(_limit_atoms(N, p), p)))
    except Exception:  # pragma: no cover - sympy limit failures
        return sp.nan


def efficiency(W: sp.Expr, N: sp.Expr, p: sp.Symbol) -> sp.Expr:
    """``E_p = W / (p N)``: cancelled when both are polynomials, otherwise as it stands (cheap)."""
    N = _as_procs(N, p)
    if sp.expand(W - N) == 0:
        return 1 / p
    E = W / (p * N)
    if not (E.atoms(sp.ceiling, sp.floor, sp.Min, sp.Max, sp.log, sp.Piecewise)):
        return sp.cancel(E)
    return E


def available_parallelism(W: sp.Expr, D: sp.Expr, N: sp.Expr, p: sp.Symbol) -> sp.Expr:
    N = _as_procs(N, p)
    if p not in N.free_symbols:
        return sp.Integer(1)
    if D.is_finite and D != 0:
        return tidy(W / D)
    cuts = []
    for c in N.atoms(sp.ceiling):
        arg = c.args[0]
        if p in arg.free_symbols and _lim(arg, p) == 0:
            num, den = sp.fraction(sp.together(arg))
            a, k = den.as_coeff_exponent(p)
            if p not in num.free_symbols and p not in a.free_symbols and k.is_positive:
                cuts.append(sp.powsimp((num / a) ** (1 / k), force=True))  # arg = 1 at this p
    if not cuts:
        return sp.oo
    return cuts[0] if len(cuts) == 1 else sp.Min(*cuts)


def grid_metrics(N: sp.Expr, procs: tuple[sp.Symbol, ...]) -> dict:
    """W, D, E_p and the available parallelism on a process grid: W at every count 1, D as every count grows
    without bound (one after the other: each block count ``ceiling(E/q)`` settles at 1 once ``q >= E``),
    ``E_p = W / (P N)`` with ``P`` the product of the counts."""
    P = sp.Mul(*procs)
    if not N.free_symbols & set(procs):
        return {"work": N, "depth": N, "efficiency": 1 / P, "available_parallelism": sp.Integer(1)}
    W = tidy(prune_pieces(fold_pieces(work(N.xreplace({q: sp.Integer(1) for q in procs[1:]}), procs[0]))))
    D = N
    for q in procs:
        D = depth(D, q)
    D = tidy(prune_pieces(fold_pieces(D)))
    # quotients of piecewise counts are kept as quotients: evaluated, a piece's 0/0 would print as zoo
    E = sp.Integer(1) / P if sp.expand(W - N) == 0 else ratio(W, P * N)
    par = ratio(W, D) if D.is_finite and D != 0 else sp.oo
    return {"work": W, "depth": D, "efficiency": E, "available_parallelism": par}


def ratio(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """``a / b``, simplified unless a piecewise count is involved (then undefined where both are 0)."""
    if a.has(sp.Piecewise) or b.has(sp.Piecewise):
        return sp.Mul(a, sp.Pow(b, -1, evaluate=False), evaluate=False)
    return tidy(a / b)


def fold_pieces(e: sp.Expr) -> sp.Expr:
    """One flat ``Piecewise`` for a sum of few piecewise terms, without the pieces whose conditions no block
    count ``ceiling(E/q)`` can meet (:func:`~meshplan.solvers.counting.pieces.drop_unreachable`), with a piece
    ``(e1, A1 & … & C)`` merged into the next ``(e2, C)`` when every ``Ai`` is ``x >= 1`` of a non-negative
    integer ``x`` (so it fails only at ``x = 0``) and ``e1`` at ``x = 0`` is ``e2``."""
    if not e.has(sp.Piecewise) or len(e.atoms(sp.Piecewise)) > 8:
        return e
    e = e.replace(lambda x: isinstance(x, sp.Gt) and x.lhs.is_integer and x.rhs.is_Integer,
                  lambda x: sp.Ge(x.lhs, x.rhs + 1))  # integers: x > 0 is x >= 1
    f = sp.piecewise_fold(e)
    if not isinstance(f, sp.Piecewise):
        return e
    f = drop_unreachable(f)  # pieces whose block-count conditions cannot hold (ceiling(n/q) <= -1)
    if not isinstance(f, sp.Piecewise):
        return f
    pieces = list(f.args)
    i = 0
    while i + 1 < len(pieces):
        (e1, c1), (e2, c2) = pieces[i], pieces[i + 1]
        a1 = set(c1.args) if isinstance(c1, sp.And) else {c1}
        a2 = set(c2.args) if isinstance(c2, sp.And) else {c2} if c2 is not sp.true else set()
        extra = a1 - a2
        if a2 <= a1 and extra and all(_positive_var(a) is not None for a in extra) and all(
                sp.expand(e1.xreplace({_positive_var(a): sp.Integer(0)}) - e2) == 0 for a in extra):
            pieces[i:i + 2] = [(e1, c2)]
            continue
        i += 1
    return sp.Piecewise(*pieces)


def _positive_var(a) -> sp.Symbol | None:
    """``x`` when ``a`` is ``x >= 1`` or ``x > 0`` of a non-negative integer symbol, else None."""
    x = a.lhs if isinstance(a, (sp.Ge, sp.Gt)) else None
    if isinstance(x, sp.Symbol) and x.is_nonnegative and x.is_integer and (
            (isinstance(a, sp.Ge) and a.rhs == 1) or (isinstance(a, sp.Gt) and a.rhs == 0)):
        return x
    return None
