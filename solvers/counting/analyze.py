"""Symbolic iteration counts of a loop program (thesis sections 2.3–2.5).

:func:`count_flow` walks a :class:`~meshplan.models.loops.control.Flow` once, keeping the value of every
iteration variable as a sympy expression of the parameters and the counters of the enclosing loops:

* an assignment updates that state (the *initial assignments* and *starting conditions*, §2.4.2);
* a loop: one symbolic pass over its body (with symbols for the loop-carried variables) gives the update
  ``x <- A x + b`` (the composition of equation 2.5 and of multipath bodies, §2.4.5) and the body's
  statement counts as functions of ``x``; the closed form ``x(d)`` (equation 2.3) turns the guard into the
  counting function ``n`` (equation 2.4) and the body counts into sums over ``d < n`` (equation 2.2);
* an Opaque loop multiplies its body's counts by its symbol ``u_k`` (§2.5.1); ``if`` on parameters gives
  Piecewise counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from meshplan.models.loops.control import Assign, Branch, Flow, Loop, Opaque, Work, assigned_vars
from meshplan.solvers.counting.closed import NotAffine, closed_form, counting_bounds, counting_function
from meshplan.solvers.counting.sums import Bnd, smin, sum_bnd

__all__ = ["count_flow", "RawCounts", "param_symbol", "unknown_symbol"]


def param_symbol(name: str) -> sp.Symbol:
    """Parameters (sizes, p) are positive integers."""
    return sp.Symbol(name, integer=True, positive=True)


def unknown_symbol(name: str) -> sp.Symbol:
    """Counts of loops outside the class (u_k) and the rank are non-negative integers."""
    return sp.Symbol(name, integer=True, nonnegative=True)


@dataclass
class RawCounts:
    """Per statement the count of one process (before the maximum over ranks), and solver notes."""

    counts: dict[str, Bnd]
    notes: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)


class _Solver:
    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.notes: list[str] = []
        self.opaque: list[str] = []
        self.n_unknown = len(flow.unknowns)
        self.level = 0
        self.facts: list = []
        self.rational = _rational_vars(flow.body)

    def add(self, acc: dict, name: str, b: Bnd) -> None:
        acc[name] = acc[name] + b if name in acc else b

    def block(self, nodes, state: dict) -> tuple[dict, dict]:
        counts: dict[str, Bnd] = {}
        state = dict(state)
        for nd in nodes:
            if isinstance(nd, Work):
                self.add(counts, nd.name, Bnd.exact(1))
            elif isinstance(nd, Assign):
                vals = [self.ev(v, state) for v in nd.values]
                state.update(zip(nd.targets, vals))
            elif isinstance(nd, Branch):
                cond = self.ev(nd.cond, state)
                s1, c1 = self.block(nd.then, state)
                s2, c2 = self.block(nd.orelse, state)
                for name in set(c1) | set(c2):
                    a, b = c1.get(name, Bnd.exact(0)), c2.get(name, Bnd.exact(0))
                    v = None if a.value is None or b.value is None else sp.Piecewise((a.value, cond), (b.value, True))
                    self.add(counts, name, Bnd(v, sp.Piecewise((a.lo, cond), (b.lo, True)),
                                               sp.Piecewise((a.hi, cond), (b.hi, True))))
                for var in set(s1) | set(s2):
                    a, b = s1.get(var, state.get(var, param_symbol(var))), s2.get(var, state.get(var, param_symbol(var)))
                    state[var] = a if a == b else sp.Piecewise((a, cond), (b, True))
            elif isinstance(nd, Opaque):
                self.opaque_loop(nd, nd.symbol, state, counts)
            elif isinstance(nd, Loop):
                self.loop(nd, state, counts)
        return state, counts

    def ev(self, e, state: dict):
        """An expression of the source in terms of the current state and the parameters."""
        rep = {}
        for s in e.free_symbols:
            if s.name in state:
                rep[s] = state[s.name]
            elif s.name == self.flow.rank or any(s.name == r for r, _ in self.flow.grid):
                rep[s] = unknown_symbol(s.name)
            else:
                rep[s] = param_symbol(s.name)
        return e.xreplace(rep)

    def opaque_loop(self, nd, symbol: str, state: dict, counts: dict, why: str | None = None) -> None:
        u = unknown_symbol(symbol)
        inner = dict(state)
        for v in (nd.assigned if isinstance(nd, Opaque) else assigned_vars(nd.body)):
            inner[v] = unknown_symbol(f"{v}_{symbol}")
        body = nd.body
        s_after, c = self.block(body, inner)
        for name, b in c.items():
            self.add(counts, name, b.map(lambda e: e * u))
        for v in (nd.assigned if isinstance(nd, Opaque) else assigned_vars(nd.body)):
            state[v] = unknown_symbol(f"{v}_{symbol}")
        if why is not None:
            self.notes.append(f"line {nd.line}: {why}; counted as {symbol} iterations (section 2.5.1; give "
                              f"bounds with --bounds {symbol}=LO..HI)")
        self.opaque.append(symbol)

    def loop(self, nd: Loop, state: dict, counts: dict) -> None:
        V = assigned_vars(nd.body)
        cur = {v: sp.Dummy(f"{v}c") if v in self.rational else sp.Dummy(f"{v}c", integer=True) for v in V}
        inner = {**state, **cur}
        guard = [self.ev(g, inner) for g in nd.guard]
        self.facts.extend(guard)
        try:
            after, body_counts = self.block(nd.body, inner)
        finally:
            del self.facts[len(self.facts) - len(guard):]
        try:
            n, xd, need, d = self._solve(nd, V, cur, after, guard, body_counts, state)
        except (ValueError, TypeError) as err:  # sympy could not decide a comparison (complex roots…)
            why = NotAffine(f"no real counting function: {err}")
            self.n_unknown += 1
            self.opaque_loop(nd, f"u{self.n_unknown}", state, counts, f"the loop at line {nd.line} is outside "
                             f"the affine class ({why})")
            return
        except NotAffine as why:
            self.n_unknown += 1
            head = f"`for {nd.var} …`" if nd.kind == "for" else "`while …`"
            self.opaque_loop(nd, f"u{self.n_unknown}", state, counts, f"{head} is outside the affine class ({why})")
            return
        nb = n if isinstance(n, Bnd) else Bnd.exact(n)
        for name, b in body_counts.items():
            f = b.map(lambda e: _logs(e.xreplace(xd)))
            try:
                s = sum_bnd(f, d, nb, tuple(self.facts) + tuple(g.xreplace(xd) for g in guard))
            except (ValueError, TypeError):  # sympy could not decide a comparison
                s = None
            if s is None:
                self.n_unknown += 1
                u = f"u{self.n_unknown}"
                self.notes.append(f"line {nd.line}: no bound for the sum of {name} over this loop; counted as "
                                  f"{u} (section 2.5.1)")
                self.opaque.append(u)
                s = Bnd.exact(unknown_symbol(u))
            self.add(counts, name, s)
        for v in V:
            if isinstance(n, Bnd):  # a bounded count: the variables' values after the loop are not known
                state[v] = unknown_symbol(f"{v}_after_line{nd.line}")
                continue
            try:
                if v in need:
                    state[v] = sp.sympify(xd[cur[v]]).xreplace({d: n})
                else:
                    last = after[v].xreplace(xd).xreplace({d: n - 1})
                    state[v] = sp.Piecewise((state.get(v, param_symbol(v)), sp.Eq(n, 0)), (last, True))
            except (ValueError, TypeError):  # sympy could not form the value: unknown from here on
                state[v] = unknown_symbol(f"{v}_after_line{nd.line}")

    def _solve(self, nd, V, cur, after, guard, body_counts, state):
        cur_syms = set(cur.values())
        needed: set[str] = set()
        frontier = set().union(*(g.free_symbols for g in guard))
        for b in body_counts.values():
            for e in (b.lo, b.hi) + (() if b.value is None else (b.value,)):
                frontier |= e.free_symbols
        inv = {c: v for v, c in cur.items()}
        todo = [inv[s] for s in frontier if s in inv]
        while todo:
            v = todo.pop()
            if v in needed:
                continue
            needed.add(v)
            todo.extend(inv[s] for s in after[v].free_symbols if s in inv and inv[s] not in needed)
        order = [v for v in V if v in needed]
        if not order:
            raise NotAffine("the guard does not depend on any variable the loop changes")
        m = len(order)
        A, b = sp.zeros(m, m), sp.zeros(m, 1)
        zero = {cur[v]: 0 for v in order}
        for i, v in enumerate(order):
            F = sp.expand(after[v])
            if _nonaffine_atom(F, cur_syms):
                raise NotAffine(f"the update of {v} is not affine")
            for j, w in enumerate(order):
                A[i, j] = sp.diff(F, cur[w])
                if A[i, j].free_symbols & cur_syms:
                    raise NotAffine(f"the update of {v} is not affine (it multiplies iteration variables)")
            b[i] = F.xreplace(zero)
            if b[i].free_symbols & cur_syms:
                raise NotAffine(f"the update of {v} depends on a variable the loop changes but does not track")
        x0 = sp.Matrix([state.get(v, param_symbol(v)) for v in order])
        self.level_counter = getattr(self, "level_counter", 0) + 1
        d = sp.Symbol(f"i{self.level_counter}_{nd.line}", integer=True, nonnegative=True)
        xs = closed_form(A, b, x0, d)
        xd = {cur[v]: xs[i] for i, v in enumerate(order)}
        ns, los, his = [], [], []
        for g in guard:
            s = g.xreplace(xd)
            try:
                ns.append(counting_function(s, d))
            except NotAffine:
                got = counting_bounds(s, d)  # a linear recurrence: a lower and an upper count
                if got is None:
                    raise
                los.append(got[0])
                his.append(got[1])
        if los:
            n = Bnd(None, smin(*ns, *los), smin(*ns, *his))
            self.notes.append(f"line {nd.line}: the guard's slack has several geometric terms (a linear "
                              "recurrence); the loop count is bounded by the dominant term's counts with the "
                              "others at their largest size (section 2.4.3)")
        else:
            n = smin(*ns)
        return n, xd, needed, d


def _logs(e: sp.Expr) -> sp.Expr:
    """``log(2**i * y) -> i*log(2) + log(y)`` so that integer counters leave ceilings.  A clamp ``Max(0, …)``
    and the conditions of a ``Piecewise`` are rebuilt unevaluated: sympy would drop them as decided for
    parameters >= 1, but at a parameter 0 a log count is negative or complex and they make it 0."""
    if not e.has(sp.log):
        return e
    if isinstance(e, sp.Max):
        return sp.Max(*[_logs(a) for a in e.args], evaluate=False)
    if isinstance(e, sp.Piecewise):
        return sp.Piecewise(*[(_logs(v), c) for v, c in e.args], evaluate=False)
    if e.has(sp.Max, sp.Piecewise):
        return e.func(*[_logs(a) for a in e.args])
    return sp.expand_log(e, force=True)


def _rational_vars(nodes) -> set[str]:
    """Iteration variables that may take non-integer values (some update divides)."""
    out: set[str] = set()

    def walk(ns):
        for nd in ns:
            if isinstance(nd, Assign):
                out.update(t for t, v in zip(nd.targets, nd.values) if v.is_integer is not True)
            elif isinstance(nd, (Loop, Opaque)):
                walk(nd.body)
            elif isinstance(nd, Branch):
                walk(nd.then)
                walk(nd.orelse)
    walk(nodes)
    return out


def _nonaffine_atom(F: sp.Expr, cur: set) -> bool:
    for a in F.atoms(sp.floor, sp.ceiling, sp.Min, sp.Max, sp.Piecewise, sp.log):
        if a.free_symbols & cur:
            return True
    for a in F.atoms(sp.Pow):
        if a.exp.free_symbols & cur or (a.base.free_symbols & cur and not a.exp.is_Integer):
            return True
    return False


def count_flow(flow: Flow) -> RawCounts:
    """Per statement the symbolic count ``N`` of one process (rank left symbolic)."""
    solver = _Solver(flow)
    _, counts = solver.block(flow.body, {})
    for w in flow.statements:
        counts.setdefault(w.name, Bnd.exact(0))
    return RawCounts({w.name: counts[w.name] for w in flow.statements}, solver.notes, solver.opaque)
