"""Iteration domains of the statements of a loop program, as quasi-affine sets (thesis section 2.2).

A statement's iteration domain is the set of integer tuples ``(d_0, …, d_{k-1})`` — the iteration counters
of its enclosing loops, outermost first — for which it runs.  When every loop around it steps its variables
by constants (``x <- x + c``; ``for v in range(lo, hi, step)`` is ``v = lo + step·d``), and every guard,
bound and condition is quasi-affine (affine in the counters and parameters with rational coefficients,
``min``/``max``, ``//`` and ``%`` by constants), the domain is a parametric Presburger set whose number of
points is what Barvinok's algorithm counts (Verdoolaege et al., "Counting integer points in parametric
polytopes using Barvinok's rational functions", Algorithmica 48(1), 2007).

:func:`statement_domains` walks a :class:`~meshplan.models.loops.control.Flow` once, keeping every iteration
variable as a quasi-affine expression of the parameters and the counters (or *unknown* once it is not); it
returns, per statement, a :class:`Domain` or the reason why the statement's domain is not such a set.  A
guard ``g > 0`` of a loop holds for every earlier iteration when it holds at the first and at the current one,
because ``g`` is affine in the loop's own counter.  This module builds the sets only; counting them is the
solver's job (:mod:`meshplan.solvers.counting.barvinok`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from meshplan.models.loops.control import Assign, Branch, Flow, Loop, Opaque, Work, assigned_vars, walk_nodes
from meshplan.models.loops.program import sym

__all__ = ["Domain", "statement_domains", "is_quasi_affine", "counter", "linear_form"]

_REL = (sp.Lt, sp.Le, sp.Gt, sp.Ge, sp.Eq, sp.Ne)


def counter(k: int) -> sp.Symbol:
    """The iteration counter of the ``k``-th loop around a statement (outermost: 0); an integer symbol without
    sign assumptions, so that ``d >= 0`` stays a constraint."""
    return sp.Symbol(f"d_{k}", integer=True)


@dataclass(frozen=True, slots=True)
class Domain:
    """``{(d_0, …, d_{k-1}) : all constraints hold}``: the iteration domain of ``statement``.  ``constraints``
    are sympy relations (or ``And``/``Or``/``Not`` of relations), quasi-affine in the counters and the
    parameters (every other free symbol is a parameter)."""

    statement: str
    counters: tuple[sp.Symbol, ...]
    constraints: tuple[sp.Basic, ...]


class _Unknown(Exception):
    """A value is not a quasi-affine expression of the parameters and counters (the message says why)."""


def is_quasi_affine(e: sp.Basic) -> bool:
    """True when ``e`` is built from numbers and symbols by ``+``, multiplication by numbers, ``floor``,
    ``ceiling``, ``Min``, ``Max`` and ``Mod`` by a positive integer (a quasi-affine expression)."""
    if e.is_Number:
        return e.is_Rational is True
    if e.is_Symbol:
        return True
    if isinstance(e, sp.Add):
        return all(is_quasi_affine(a) for a in e.args)
    if isinstance(e, sp.Mul):
        rest = [a for a in e.args if not a.is_Number]
        return len(rest) <= 1 and all(a.is_Rational for a in e.args if a.is_Number) and all(map(is_quasi_affine, rest))
    if isinstance(e, (sp.floor, sp.ceiling, sp.Min, sp.Max)):
        return all(is_quasi_affine(a) for a in e.args)
    if isinstance(e, sp.Mod):
        return is_quasi_affine(e.args[0]) and e.args[1].is_Integer and e.args[1] > 0
    return False


def _is_affine_cond(c: sp.Basic) -> bool:
    if c in (sp.true, sp.false):
        return True
    if isinstance(c, (sp.And, sp.Or, sp.Not)):
        return all(_is_affine_cond(a) for a in c.args)
    if isinstance(c, _REL):
        return is_quasi_affine(c.lhs) and is_quasi_affine(c.rhs)
    return False


class _Walker:
    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.out: dict[str, Domain | str] = {}

    # -- values ------------------------------------------------------------------------------
    @staticmethod
    def ev(e: sp.Basic, state: dict) -> sp.Basic:
        """``e`` with every iteration variable replaced by its value; raises :class:`_Unknown`."""
        rep = {}
        for s in e.free_symbols:
            if s.name in state:
                v = state[s.name]
                if v is None:
                    raise _Unknown(f"it reads {s.name}, whose value is not an affine function of the loop counters "
                                   "here")
                rep[s] = v
        return e.xreplace(rep) if rep else e

    def value(self, e, state):
        try:
            v = self.ev(e, state)
        except _Unknown:
            return None
        return v if is_quasi_affine(v) else None

    # -- the one pass ----------------------------------------------------------------------------
    def block(self, nodes, state: dict, counters: tuple, cons: tuple) -> dict:
        state = dict(state)
        for nd in nodes:
            if isinstance(nd, Work):
                self.out[nd.name] = Domain(nd.name, counters, cons)
            elif isinstance(nd, Assign):
                vals = [self.value(v, state) for v in nd.values]
                state.update(zip(nd.targets, vals))
            elif isinstance(nd, Branch):
                state = self.branch(nd.cond, nd.then, nd.orelse, state, counters, cons)
            elif isinstance(nd, Opaque):
                if nd.cond is None:
                    self.give_up(nd.body, f"it is inside a loop outside the affine class at line {nd.line} "
                                          f"({nd.symbol})")
                    state.update({v: None for v in nd.assigned})
                else:
                    state = self.branch(nd.cond, nd.body, (), state, counters, cons)
            elif isinstance(nd, Loop):
                self.loop(nd, state, counters, cons)
        return state

    def give_up(self, nodes, why: str) -> None:
        for w in walk_nodes(nodes):
            if isinstance(w, Work):
                self.out[w.name] = why

    def branch(self, cond, then, orelse, state, counters, cons) -> dict:
        try:
            c = self.ev(cond, state)
        except _Unknown as why:
            self.give_up(then + orelse, f"a condition at line {getattr(then[0], 'line', 0) if then else 0} {why}")
            return {**state, **{v: None for v in assigned_vars(then + orelse)}}
        if not _is_affine_cond(c):
            self.give_up(then + orelse, f"the condition {cond} is not quasi-affine")
            return {**state, **{v: None for v in assigned_vars(then + orelse)}}
        s1 = self.block(then, state, counters, cons + (c,))
        s2 = self.block(orelse, state, counters, cons + (sp.Not(c),))
        out = dict(state)
        for v in set(s1) | set(s2):
            a, b = s1.get(v, state.get(v)), s2.get(v, state.get(v))
            out[v] = a if (a is not None and b is not None and (a == b)) else None
        return out

    def loop(self, nd: Loop, state: dict, counters: tuple, cons: tuple) -> None:
        """One loop: its variables stepped by constants are ``x0 + c·d`` after ``d`` iterations.  The set
        dimension is the value of one such variable (the *primary*, ``d = (x - x0)/c``), as a user writes the
        set (``max(0, m - n) <= i < n``): Barvinok's algorithm is much faster on that form than on counters
        substituted into nested ``floor``/``max`` terms."""
        V = assigned_vars(nd.body)
        start = {v: sp.Dummy(f"{v}0", integer=True) for v in V}
        after = _effect(nd.body, {**state, **start})
        d = sp.Dummy("d", integer=True)
        by_d = dict(state)
        steps: dict[str, sp.Rational] = {}
        for v in V:
            a = after.get(v)
            lf = None if a is None else linear_form(a)
            c = lf[1] if lf is not None and lf[0] == {start[v]: 1} else None
            v0 = state[v] if v in state else sym(v)  # never assigned before: a parameter
            if c is not None and v0 is not None:
                steps[v] = c
                by_d[v] = _add(v0, _scale(d, _frac(c)))
            else:
                by_d[v] = None  # reset or not stepped by a constant: unknown at the start of an iteration
        try:
            guard = [self.ev(g, by_d) for g in nd.guard]
        except _Unknown as why:
            return self.skip(nd, state, f"the guard of the loop at line {nd.line} {why}")
        if not all(is_quasi_affine(g) for g in guard):
            return self.skip(nd, state, f"the guard of the loop at line {nd.line} is not quasi-affine")
        slopes = []
        for g in guard:
            lin = _linear_in(g, d)
            if lin is None:
                return self.skip(nd, state, f"the guard of the loop at line {nd.line} is not affine in its counter")
            slopes.append(lin)
        moving = [v for v in V if steps.get(v, 0) != 0]
        if all(b == 0 for _, b in slopes) or not moving:
            return self.skip(nd, state, f"the guard of the loop at line {nd.line} does not change in the loop")
        # the set dimension: the primary variable's value x; d = (x - x0)/c
        prim = moving[0]
        names = {str(s) for s in counters}
        x = sp.Symbol(next(f"{prim}__d{k}" for k in range(len(names) + 1) if f"{prim}__d{k}" not in names),
                      integer=True)
        c, x0 = steps[prim], state[prim] if prim in state else sym(prim)
        dx = _add(x, _scale(x0, Fraction(-1)))  # c·d
        by_x = dict(by_d)
        for v in V:
            if by_d[v] is not None:
                v0 = state[v] if v in state else sym(v)
                by_x[v] = x if v == prim else _add(v0, _scale(dx, _frac(steps[v]) / _frac(c)))
        here = tuple(sp.Gt(self.ev(g, by_x), 0) for g in nd.guard)
        first = tuple(sp.Gt(a, 0) for a, b in slopes if b > 0)  # a falling guard holds at d = 0 if it holds later
        own = (sp.Ge(x, x0) if c > 0 else sp.Le(x, x0),)
        if abs(c) != 1:
            own += (sp.Eq(sp.Mod(dx, abs(c)), 0),)
        self.block(nd.body, by_x, counters + (x,), cons + own + first + here)
        # values after the loop: x0 + c*T with the trip count T when every guard falls by a constant
        trips = None
        if all(b.is_negative for _, b in slopes):
            trips = sp.Max(0, sp.Min(*[sp.ceiling(_scale(a, -1 / _frac(b))) for a, b in slopes]))
        for v in V:
            if v in steps and trips is not None:
                state[v] = _add(state[v] if v in state else sym(v), sp.Mul(steps[v], trips))
            else:
                state[v] = None
        return None

    def skip(self, nd: Loop, state: dict, why: str) -> None:
        self.give_up(nd.body, why)
        for v in assigned_vars(nd.body):
            state[v] = None


def _frac(x: sp.Number) -> Fraction:
    return Fraction(int(x.p), int(x.q))


def linear_form(e: sp.Expr) -> tuple[dict, sp.Rational] | None:
    """``e`` as ``Σ c_a·a + c_0`` over its atoms (symbols and floor/ceiling/min/max/mod terms) with rational
    ``c``, for evaluated and unevaluated sums and products alike; None when ``e`` is not of that form.
    (Coefficients are added as fractions: the walker runs with sympy's evaluation off.)"""
    terms: dict = {}
    const = [Fraction(0)]

    def walk(x, c: Fraction):
        if x.is_Number:
            if not x.is_Rational:
                raise ValueError
            const[0] += c * _frac(x)
        elif isinstance(x, sp.Add):
            for a in x.args:
                walk(a, c)
        elif isinstance(x, sp.Mul):
            k, rest = Fraction(1), []
            for a in x.args:
                if a.is_Number:
                    if not a.is_Rational:
                        raise ValueError
                    k *= _frac(a)
                else:
                    rest.append(a)
            if len(rest) > 1:
                raise ValueError
            if rest and k != 0:
                walk(rest[0], c * k)
        else:
            terms[x] = terms.get(x, Fraction(0)) + c
    try:
        walk(e, Fraction(1))
    except ValueError:
        return None
    return ({a: sp.Rational(c.numerator, c.denominator) for a, c in terms.items() if c != 0},
            sp.Rational(const[0].numerator, const[0].denominator))


def _linear_in(g: sp.Expr, d: sp.Symbol):
    """``g = a + b·d`` with ``d`` outside every floor/min/max/mod -> ``(a, b)`` (``b`` a number), else None."""
    if d not in g.free_symbols:
        return g, sp.Integer(0)
    lf = linear_form(g)
    if lf is None:
        return None
    terms, const = lf
    b = terms.pop(d, sp.Integer(0))
    if any(d in a.free_symbols for a in terms):
        return None
    return _combine(terms, const), b


def _scale(e: sp.Expr, k: Fraction) -> sp.Expr:
    """``k·e`` as a linear form (sympy's evaluation is off in the walker)."""
    terms, const = linear_form(e)

    def times(c: sp.Rational) -> sp.Rational:
        f = _frac(c) * k
        return sp.Rational(f.numerator, f.denominator)
    return _combine({a: times(c) for a, c in terms.items()}, times(const))


def _add(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    return sp.Add(a, b)


def _combine(terms: dict, const: sp.Rational) -> sp.Expr:
    parts = [a if c == 1 else sp.Mul(c, a, evaluate=False) for a, c in terms.items()]
    if const != 0 or not parts:
        parts.append(const)
    return parts[0] if len(parts) == 1 else sp.Add(*parts, evaluate=False)


def _effect(nodes, state: dict) -> dict:
    """The values of the iteration variables after one pass of ``nodes`` (None where not affine); nested
    loops leave the variables they assign unknown."""
    state = dict(state)
    for nd in nodes:  # (called inside the walker's sympy.evaluate(False))
        if isinstance(nd, Assign):
            vals = []
            for v in nd.values:
                try:
                    x = _Walker.ev(v, state)
                    vals.append(x if is_quasi_affine(x) else None)
                except _Unknown:
                    vals.append(None)
            state.update(zip(nd.targets, vals))
        elif isinstance(nd, (Loop, Opaque)):
            state.update({v: None for v in assigned_vars(nd.body)})
            if isinstance(nd, Opaque):
                state.update({v: None for v in nd.assigned})
        elif isinstance(nd, Branch):
            s1, s2 = _effect(nd.then, state), _effect(nd.orelse, state)
            for v in set(s1) | set(s2):
                a, b = s1.get(v, state.get(v)), s2.get(v, state.get(v))
                state[v] = a if (a is not None and b is not None and a == b) else None
    return state


def statement_domains(flow: Flow) -> dict[str, Domain | str]:
    """Per statement of ``flow`` its :class:`Domain`, or the reason (text) why it is not a quasi-affine set."""
    w = _Walker(flow)
    with sp.evaluate(False):  # isl simplifies; sympy's automatic evaluation of min/max/floor is slow
        w.block(flow.body, {}, (), ())
    return {st.name: w.out.get(st.name, "it is never reached") for st in flow.statements}
