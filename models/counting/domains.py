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

from fractions import Fraction

import sympy as sp

from meshplan.models.counting import quasi as q
from meshplan.models.counting.quasi import cond_to_sympy, names_in
from meshplan.models.loops.control import (
    Assign,
    Branch,
    Flow,
    Loop,
    Opaque,
    Work,
    assigned_vars,
    forms_of,
    walk_nodes,
)
from meshplan.models.loops.forms import subst, subst_cond
from meshplan.models.loops.program import sym

__all__ = ["Domain", "statement_domains", "is_quasi_affine", "counter", "linear_form"]

def counter(k: int) -> sp.Symbol:
    """The iteration counter of the ``k``-th loop around a statement (outermost: 0); an integer symbol without
    sign assumptions, so that ``d >= 0`` stays a constraint."""
    return sp.Symbol(f"d_{k}", integer=True)


class Domain:
    """``{(d_0, …, d_{k-1}) : all constraints hold}``: the iteration domain of ``statement``.  ``constraints``
    are sympy relations (or ``And``/``Or``/``Not`` of relations), quasi-affine in the counters and the
    parameters (every other free symbol is a parameter).  A domain built by :func:`statement_domains` holds
    them as :mod:`~meshplan.models.counting.quasi` conditions (``quasi``: the counters' names and the
    conditions) and builds the sympy ones on first use."""

    __slots__ = ("statement", "_counters", "_constraints", "quasi")

    def __init__(self, statement: str, counters: tuple = None, constraints: tuple = None, quasi=None) -> None:
        self.statement = statement
        self._counters, self._constraints, self.quasi = counters, constraints, quasi

    @property
    def counters(self) -> tuple[sp.Symbol, ...]:
        if self._counters is None:
            self._counters = tuple(sym(x) for x in self.quasi[0])
        return self._counters

    @property
    def constraints(self) -> tuple[sp.Basic, ...]:
        if self._constraints is None:
            self._constraints = tuple(cond_to_sympy(c) for c in self.quasi[1])
        return self._constraints

    def parameter_names(self) -> set[str]:
        """The names of the parameters the constraints read (every free name but the counters')."""
        if self.quasi is not None:
            out: set = set()
            for c in self.quasi[1]:
                names_in(c, out)
            return out - set(self.quasi[0])
        return {s.name for c in self.constraints for s in c.free_symbols} - {c.name for c in self.counters}

    def __repr__(self) -> str:
        return f"Domain({self.statement!r}, {self.counters}, {self.constraints})"


def is_quasi_affine(e: sp.Basic) -> bool:
    """True when ``e`` is built from numbers and symbols by ``+``, multiplication by numbers, ``floor``,
    ``ceiling``, ``Min``, ``Max`` and ``Mod`` by a positive integer (a quasi-affine expression)."""
    try:
        q.convert(e, {})
    except q.NotAffine:
        return False
    return True


def _value(e: sp.Basic, state: dict):
    """The form of ``e`` in ``state``, None when it is not quasi-affine there."""
    try:
        return q.convert(e, state)
    except (q.Unknown, q.NotAffine):
        return None


def _values(nd: Assign, state: dict) -> list:
    """The forms of an assignment's values in ``state`` (None where not quasi-affine): substituted into the
    frontend's forms when it read them, else read from sympy."""
    fs = forms_of(nd, "values")
    if fs is None:
        return [_value(v, state) for v in nd.values]
    out = []
    for f in fs:
        try:
            out.append(subst(f, state))
        except q.Unknown:
            out.append(None)
    return out


def _exprs(nd: Loop, state: dict) -> list:
    """The forms of a loop's guard in ``state`` (raises :class:`~meshplan.models.counting.quasi.Unknown` with
    sympy's first unknown name, or ``NotAffine``)."""
    fs = forms_of(nd, "guard")
    if fs is not None:
        try:
            return [subst(f, state) for f in fs]
        except q.Unknown:
            pass  # the message names the variable sympy's walk meets first
    return [q.convert(g, state) for g in nd.guard]


def _cond(nd, state: dict):
    """:func:`_exprs` of a branch's or an ``if`` block's condition."""
    c = forms_of(nd, "cond")
    if c is not None:
        try:
            return subst_cond(c, state)
        except q.Unknown:
            pass
    return q.convert_cond(nd.cond, state)


class _Walker:
    """One pass over a :class:`Flow`; the state maps each iteration variable to its quasi-affine form
    (:mod:`~meshplan.models.counting.quasi`) or None once it is not one."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.out: dict[str, Domain | str] = {}

    def block(self, nodes, state: dict, counters: tuple, cons: tuple) -> dict:
        state = dict(state)
        for nd in nodes:
            if isinstance(nd, Work):
                self.out[nd.name] = Domain(nd.name, quasi=(counters, cons))
            elif isinstance(nd, Assign):
                state.update(zip(nd.targets, _values(nd, state)))
            elif isinstance(nd, Branch):
                state = self.branch(nd, nd.then, nd.orelse, state, counters, cons)
            elif isinstance(nd, Opaque):
                if forms_of(nd, "cond") is None and nd.cond is None:
                    self.give_up(nd.body, f"it is inside a loop outside the affine class at line {nd.line} "
                                          f"({nd.symbol})")
                    state.update({v: None for v in nd.assigned})
                else:
                    state = self.branch(nd, nd.body, (), state, counters, cons)
            elif isinstance(nd, Loop):
                self.loop(nd, state, counters, cons)
        return state

    def give_up(self, nodes, why: str) -> None:
        for w in walk_nodes(nodes):
            if isinstance(w, Work):
                self.out[w.name] = why

    def branch(self, nd, then, orelse, state, counters, cons) -> dict:
        try:
            c = _cond(nd, state)
        except q.Unknown as why:
            self.give_up(then + orelse, f"a condition at line {getattr(then[0], 'line', 0) if then else 0} {why}")
            return {**state, **{v: None for v in assigned_vars(then + orelse)}}
        except q.NotAffine:
            self.give_up(then + orelse, f"the condition {nd.cond} is not quasi-affine")
            return {**state, **{v: None for v in assigned_vars(then + orelse)}}
        s1 = self.block(then, state, counters, cons + (c,))
        s2 = self.block(orelse, state, counters, cons + (("not", c),))
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
        start = {v: q.atom(("start", v)) for v in V}
        after = _effect(nd.body, {**state, **start})
        d = ("d",)
        by_d = dict(state)
        steps: dict[str, Fraction] = {}
        for v in V:
            a = after.get(v)
            step = None
            if a is not None:
                rest = q.sub(a, start[v])
                step = q.constant(rest)
            v0 = state[v] if v in state else q.atom(v)  # never assigned before: a parameter
            if step is not None and v0 is not None:
                steps[v] = step
                by_d[v] = q.add(v0, q.scale(q.atom(d), step))
            else:
                by_d[v] = None  # reset or not stepped by a constant: unknown at the start of an iteration
        try:
            guard = _exprs(nd, by_d)
        except q.Unknown as why:
            return self.skip(nd, state, f"the guard of the loop at line {nd.line} {why}")
        except q.NotAffine:
            return self.skip(nd, state, f"the guard of the loop at line {nd.line} is not quasi-affine")
        slopes = []
        for g in guard:
            b = g.get(d, Fraction(0))
            a = {k: c for k, c in g.items() if k != d}
            if q.mentions(a, d):
                return self.skip(nd, state, f"the guard of the loop at line {nd.line} is not affine in its counter")
            slopes.append((a, b))
        moving = [v for v in V if steps.get(v, 0) != 0]
        if all(b == 0 for _, b in slopes) or not moving:
            return self.skip(nd, state, f"the guard of the loop at line {nd.line} does not change in the loop")
        # the set dimension: the primary variable's value x; d = (x - x0)/c
        prim = moving[0]
        names = set(counters)
        x = next(f"{prim}__d{k}" for k in range(len(names) + 1) if f"{prim}__d{k}" not in names)
        c, x0 = steps[prim], state[prim] if prim in state else q.atom(prim)
        dx = q.sub(q.atom(x), x0)  # c·d
        by_x = dict(by_d)
        for v in V:
            if by_d[v] is not None:
                v0 = state[v] if v in state else q.atom(v)
                by_x[v] = q.atom(x) if v == prim else q.add(v0, q.scale(dx, steps[v] / c))
        here = tuple(("rel", ">", g) for g in _exprs(nd, by_x))
        first = tuple(("rel", ">", a) for a, b in slopes if b > 0)  # a falling guard holds at d = 0 if it holds later
        own = (("rel", ">=" if c > 0 else "<=", dx),)
        if abs(c) != 1:
            own += (("rel", "=", q.atom(("mod", frozenset(dx.items()), int(abs(c))))),)
        self.block(nd.body, by_x, counters + (x,), cons + own + first + here)
        # values after the loop: x0 + c*T with the trip count T when every guard falls by a constant
        trips = None
        if all(b < 0 for _, b in slopes):
            ceils = [q.scale(q.floor_of(q.scale(a, 1 / b)), Fraction(-1)) for a, b in slopes]  # ceiling(a/-b)
            trips = q.min_max("max", [{}, q.min_max("min", ceils)])
        for v in V:
            if v in steps and trips is not None:
                state[v] = q.add(state[v] if v in state else q.atom(v), q.scale(trips, steps[v]))
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


def _effect(nodes, state: dict) -> dict:
    """The values of the iteration variables after one pass of ``nodes`` (None where not quasi-affine); nested
    loops leave the variables they assign unknown."""
    state = dict(state)
    for nd in nodes:
        if isinstance(nd, Assign):
            state.update(zip(nd.targets, _values(nd, state)))
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
    w.block(flow.body, {}, (), ())
    return {st.name: w.out.get(st.name, "it is never reached") for st in flow.statements}
