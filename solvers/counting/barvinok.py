"""Exact counts of quasi-affine iteration domains with Barvinok's algorithm (islpy-barvinok).

Barvinok's algorithm counts the integer points of a parametric polytope as a piecewise quasi-polynomial in
the parameters (Verdoolaege, Seghir, Beyls, Loechner, Bruynooghe, "Counting integer points in parametric
polytopes using Barvinok's rational functions", Algorithmica 48(1), 2007; in isl as ``isl_set_card``).
:func:`count_domains` turns each statement's :class:`~meshplan.models.counting.domains.Domain` into an isl
set, counts it, and reads the answer back as :class:`Cases`: the pieces (a quasi-polynomial and the
parameter domain where it holds) and a sympy ``Piecewise`` that is 0 outside them (empty domains count 0).
Parameters are non-negative integers (the process count ``p`` at least 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy as sp

from meshplan.models.counting.domains import Domain, linear_form

__all__ = ["is_available", "Cases", "count_domains", "isl_text", "SharedPrinter"]


def is_available() -> bool:
    """True when islpy was built with Barvinok (the ``islpy-barvinok`` wheel)."""
    try:
        import islpy as isl
    except ImportError:
        return False
    return hasattr(isl.Set, "card")


@lru_cache(maxsize=None)
def _param(name: str) -> sp.Symbol:
    return sp.Symbol(name, integer=True, nonnegative=True)


class SharedPrinter:
    """sympy's str printer (terms in their own order, ``order="none"``) that prints each sub-expression object
    once: a count's pieces appear in its cases, in its ``Piecewise`` and in the total.  The text of a
    sub-expression does not depend on where it stands (the parent adds the parentheses), so the output is
    that of ``sympy.sstr(e, order="none")``."""

    def __init__(self) -> None:
        from sympy.printing.str import StrPrinter

        memo: dict = {}

        class _Printer(StrPrinter):
            def _print(self, expr, **kwargs):
                if kwargs:
                    return super()._print(expr, **kwargs)
                hit = memo.get(id(expr))
                if hit is not None and hit[0] is expr:
                    return hit[1]
                out = super()._print(expr)
                memo[id(expr)] = (expr, out)  # the reference keeps the id from being reused
                return out
        self._printer = _Printer({"order": "none"})

    def __call__(self, e: sp.Basic) -> str:
        from sympy.printing.precedence import PRECEDENCE_FUNCTIONS

        slow = PRECEDENCE_FUNCTIONS["Mul"]
        PRECEDENCE_FUNCTIONS["Mul"] = _precedence_mul
        try:
            return self._printer.doprint(e)
        finally:
            PRECEDENCE_FUNCTIONS["Mul"] = slow


def _precedence_mul(item) -> int:
    """sympy's ``precedence_Mul`` without building ``-item``: ``Mul.could_extract_minus_sign`` negates the
    product (a new sympy object, its assumptions deduced) only to rule out ``zoo*x == -zoo*x``; a leading
    number that is negative (never ``zoo`` or ``nan``) is the same answer.  Printing Barvinok's counts spent
    most of its time there."""
    from sympy.core.function import Function
    from sympy.printing.precedence import PRECEDENCE

    if any(isinstance(a, Function) and getattr(a, "precedence", PRECEDENCE["Mul"]) < PRECEDENCE["Mul"]
           for a in item.args):
        return PRECEDENCE["Mul"]
    c = item.args[0]
    neg = c.is_Number and (c.p < 0 if c.is_Rational else bool(c.is_extended_negative))
    return PRECEDENCE["Add"] if neg else PRECEDENCE["Mul"]


@dataclass(frozen=True, slots=True)
class Cases:
    """A piecewise quasi-polynomial: ``pieces`` are ``(count, condition)`` pairs of sympy expressions with
    disjoint conditions on the parameters; the count is 0 where none holds.  ``expr`` is the same as one
    sympy expression (a plain quasi-polynomial when one piece holds for every parameter value)."""

    pieces: tuple[tuple[sp.Expr, sp.Basic], ...]
    expr: sp.Expr
    text: str = ""

    def rows(self, printer: SharedPrinter | None = None) -> list[tuple[str, str]]:
        """``(count, condition)`` as text, then ``("0", "otherwise")`` when the pieces do not cover all."""
        pr = printer or SharedPrinter()
        out = [(pr(e), pr(c)) for e, c in self.pieces]
        if not isinstance(self.expr, sp.Piecewise) or self.expr.args[-1][1] is not sp.true:
            return out
        if self.expr.args[-1][0] == 0:
            out.append(("0", "otherwise"))
        return out


# -- sympy -> isl syntax ----------------------------------------------------------------------------
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
    conds += [_cond(c) for c in dom.constraints]
    dims = ", ".join(s.name for s in dom.counters)
    return f"[{', '.join(params)}] -> {{ [{dims}] : {' and '.join(conds) or '1 = 1'} }}"


# -- isl -> sympy -------------------------------------------------------------------------------------
# (built from isl's term and coefficient API, unevaluated: sympy's automatic evaluation costs more than isl)
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


def _qp_sym(qp, names: list) -> sp.Expr:
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


def _condition(text: str, s, names: tuple) -> sp.Basic:
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


def _cases(pw, names: list, context) -> Cases:
    pieces = []
    qps = []
    for dom, qp in pw.get_pieces():
        dom = dom.gist(context).compute_divs()
        pieces.append((_readable(_qp_sym(qp, names)), _condition(dom.to_str(), dom, tuple(names))))
        qps.append(qp)
    qps = [q for q, (e, c) in zip(qps, pieces) if c is not sp.false]
    pieces = [(e, c) for e, c in pieces if c is not sp.false]
    rest = context.subtract(pw.domain()) if pieces else context
    covers = rest.is_empty()
    if not pieces:
        return Cases((), sp.Integer(0), pw.to_str())
    if not covers:  # a piece that is 0 where no piece holds extends there: "n*(n - 1)/2" instead of cases
        k = next((i for i, (e, _) in enumerate(pieces) if not _nonzero_at_small(qps[i], rest)
                  and _vanishes(e, rest, names)), None)
        if k is not None:
            pieces = [p for i, p in enumerate(pieces) if i != k] + [pieces[k]]
            covers = True
    if len(pieces) == 1 and covers:
        return Cases(((pieces[0][0], sp.true),), pieces[0][0], pw.to_str())
    args = list(pieces)
    if covers:
        args[-1] = (args[-1][0], sp.true)
        pieces[-1] = (pieces[-1][0], sp.Not(sp.Or(*[c for _, c in pieces[:-1]], evaluate=False), evaluate=False))
    else:
        args.append((sp.Integer(0), sp.true))
    return Cases(tuple(pieces), sp.Piecewise(*args, evaluate=False), pw.to_str())


@lru_cache(maxsize=4096)
def _readable(e: sp.Expr) -> sp.Expr:
    """A polynomial factored (``n*(n - 1)/2``); a quasi-polynomial (with floors) as Barvinok gives it."""
    if e.has(sp.floor) or not e.free_symbols:
        return e
    syms = sorted(e.free_symbols, key=lambda x: x.name)
    den, poly = sp.Poly(sp.expand(e), *syms).clear_denoms(convert=True)
    c, factors = poly.factor_list()
    return sp.Mul(sp.Rational(c) / den, *[f.as_expr() ** k for f, k in factors])


def _nonzero_at_small(qp, region, top: int = 6) -> bool:
    """True when isl evaluates ``qp`` to a non-zero value at a point of ``region`` (a set of parameter values):
    its sample points, then every point with all parameters at most ``top``.  A cheap disproof before
    :func:`_vanishes` tries to prove that ``qp`` is 0 on the region."""
    import islpy as isl

    for bs in region.get_basic_sets():
        pt = bs.sample_point()
        if not pt.is_void() and not qp.eval(pt).is_zero():
            return True
    n = region.dim(isl.dim_type.param)
    if n == 0:
        return False
    flat = region.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
    xs = [f"x{i}" for i in range(n)]
    box = isl.Set(f"{{ [{', '.join(xs)}] : " + " and ".join(f"{x} <= {top}" for x in xs) + " }")
    points = []
    (flat & box).foreach_point(points.append)
    space = qp.get_domain_space()
    for p in points:
        q = isl.Point.zero(space)
        for i in range(n):
            q = q.set_coordinate_val(isl.dim_type.param, i, p.get_coordinate_val(isl.dim_type.set, i))
        if not qp.eval(q).is_zero():
            return True
    return False


def _vanishes(e: sp.Expr, region, names: list, most: int = 64) -> bool:
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


def count_domains(domains: dict[str, Domain], params: tuple[str, ...], procs: str | None = None
                  ) -> dict[str, Cases] | None:
    """Per statement the :class:`Cases` of its domain's size; None when a domain is unbounded (a loop that
    never stops for some parameter values).  (The total is the sum of these: adding them in isl multiplies
    the pieces.)"""
    import islpy as isl

    names = list(params)
    context = isl.Set(f"[{', '.join(names)}] -> {{ : " +
                      " and ".join(f"{q} >= {1 if q == procs else 0}" for q in names) + " }") if names else \
        isl.Set("{ : }")
    out = {}
    for name, dom in domains.items():
        pw = isl.Set(isl_text(dom, params, procs)).card()
        if "infty" in pw.to_str():
            return None
        out[name] = _cases(pw.coalesce(), names, context)
    return out
