"""The reference executor: run a :class:`~meshplan.models.loops.control.Flow` with concrete parameters
and count how often each statement executes (the test oracle and ``meshplan count --verify``).

Arithmetic is exact (``fractions.Fraction``: ``/`` is rational division, ``//`` floors), so the counts
are those of the loop program of section 2.2, not of floating point.  An Opaque loop ``u_k`` runs its
body ``values["u_k"]`` times.  For explicitly parallel code (a rank variable), :func:`execute_ranks`
runs every rank ``0 … p-1`` (every point of a process grid) and reports the most loaded process (section 2.1, Example II).
"""

from __future__ import annotations

import itertools
import math
import operator
from fractions import Fraction
from typing import Callable

import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.control import Assign, Branch, Flow, Loop, Opaque, Work

__all__ = ["execute", "execute_ranks", "compile_expr"]

Env = dict
_RELATIONS = {sp.Lt: operator.lt, sp.Le: operator.le, sp.Gt: operator.gt, sp.Ge: operator.ge, sp.Eq: operator.eq,
              sp.Ne: operator.ne}


def compile_expr(e: sp.Basic) -> Callable[[Env], Fraction]:
    """A fast exact evaluator of an integer/rational sympy expression (``Fraction`` arithmetic)."""
    if e is sp.true or e is sp.false:
        truth = bool(e)
        return lambda env: truth
    if isinstance(e, sp.Symbol):
        name = e.name
        return lambda env: env[name]
    if e.is_Integer or e.is_Rational:
        v = Fraction(int(e.p), int(e.q))
        return lambda env: v
    if isinstance(e, sp.Piecewise):  # (value, condition) pairs: the first whose condition holds
        pairs = [(compile_expr(v), compile_expr(c)) for v, c in e.args]

        def piece(env):
            for v, c in pairs:
                if c(env):
                    return v(env)
            raise ModelError(f"no piece of {e} holds")
        return piece
    args = [compile_expr(a) for a in e.args]
    if isinstance(e, sp.Add):
        return lambda env: sum((f(env) for f in args), Fraction(0))
    if isinstance(e, sp.Mul):
        def mul(env):
            out = Fraction(1)
            for f in args:
                out *= f(env)
            return out
        return mul
    if isinstance(e, sp.Pow) and e.exp.is_Integer:
        base, k = args[0], int(e.exp)
        return lambda env: Fraction(base(env)) ** k
    if isinstance(e, sp.floor):
        return lambda env: Fraction(math.floor(args[0](env)))
    if isinstance(e, sp.ceiling):
        return lambda env: Fraction(math.ceil(args[0](env)))
    if isinstance(e, sp.Mod):
        return lambda env: Fraction(args[0](env) % args[1](env))
    if isinstance(e, tuple(_RELATIONS)):
        op = _RELATIONS[type(e)]
        return lambda env: op(args[0](env), args[1](env))
    if isinstance(e, sp.And):
        return lambda env: all(f(env) for f in args)
    if isinstance(e, sp.Or):
        return lambda env: any(f(env) for f in args)
    if isinstance(e, sp.Not):
        return lambda env: not args[0](env)
    if isinstance(e, sp.Min):
        return lambda env: min(f(env) for f in args)
    if isinstance(e, sp.Max):
        return lambda env: max(f(env) for f in args)
    raise ModelError(f"cannot execute expression {e} (only + - * / // min max and integer powers)")


class _Run:
    def __init__(self, values: dict, max_steps: int) -> None:
        self.env = {k: Fraction(v) for k, v in values.items()}
        self.counts: dict[str, int] = {}
        self.steps = 0
        self.max_steps = max_steps
        self.cache: dict[int, Callable] = {}

    def ev(self, e):
        f = self.cache.get(id(e))
        if f is None:
            f = self.cache[id(e)] = compile_expr(e)
        try:
            return f(self.env)
        except KeyError as err:
            raise ModelError(f"no value for {err.args[0]}: give it in params "
                             f"(unknown loop counts u_k need a value to execute)", param="params") from None

    def block(self, nodes) -> None:
        for nd in nodes:
            if isinstance(nd, Work):
                self.counts[nd.name] = self.counts.get(nd.name, 0) + 1
            elif isinstance(nd, Assign):
                vals = [self.ev(v) for v in nd.values]
                for t, v in zip(nd.targets, vals):
                    self.env[t] = v
            elif isinstance(nd, Loop):
                while all(self.ev(g) > 0 for g in nd.guard):
                    self.tick(nd.line)
                    self.block(nd.body)
            elif isinstance(nd, Opaque) and nd.cond is not None and nd.symbol not in self.env:
                if self.truth(nd.cond):  # an `if` on iteration variables: its own condition decides
                    self.block(nd.body)
            elif isinstance(nd, Opaque):
                reps = self.ev(sp.Symbol(nd.symbol))
                for _ in range(int(reps)):
                    self.tick(nd.line)
                    self.block(nd.body)
            elif isinstance(nd, Branch):
                self.block(nd.then if self.truth(nd.cond) else nd.orelse)
            else:  # pragma: no cover - the model has no other node
                raise ModelError(f"unknown node {nd!r}")

    def truth(self, cond) -> bool:
        """The value of a condition (relations joined by And/Or/Not) in the current state."""
        if cond in (sp.true, sp.false):
            return bool(cond)
        if isinstance(cond, sp.And):
            return all(self.truth(a) for a in cond.args)
        if isinstance(cond, sp.Or):
            return any(self.truth(a) for a in cond.args)
        if isinstance(cond, sp.Not):
            return not self.truth(cond.args[0])
        op = _RELATIONS.get(type(cond))
        if op is None:
            raise ModelError(f"cannot execute condition {cond}")
        return op(self.ev(cond.lhs), self.ev(cond.rhs))

    def tick(self, line: int) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise ModelError(f"execution stopped after {self.max_steps:,} loop iterations (loop at line {line}); "
                             "use smaller params to verify, or raise MESHPLAN_MAX_ITERATIONS", param="params")


def execute(flow: Flow, values: dict, *, max_steps: int = 5_000_000) -> dict[str, int]:
    """Statement name -> executions for one process (``values`` holds parameters, ``rank``, ``u_k``)."""
    run = _Run(values, max_steps)
    run.block(flow.body)
    return {w.name: run.counts.get(w.name, 0) for w in flow.statements}


def execute_ranks(flow: Flow, values: dict, *, procs: str = "p", max_steps: int = 5_000_000
                  ) -> tuple[dict[str, int], int]:
    """Per statement the maximum over ranks, and the total of the most loaded rank (every rank of the process
    grid: each combination of the grid's rank variables ``0 … count-1``)."""
    grid = flow.ranks(procs)
    if not grid:
        counts = execute(flow, values, max_steps=max_steps)
        return counts, sum(counts.values())
    for r, q in grid:
        if q not in values:
            raise ModelError(f"explicitly parallel code (rank variable {r}) needs {q} in params", param="params")
    best: dict[str, int] = {}
    total = 0
    for coords in itertools.product(*(range(int(values[q])) for _, q in grid)):
        counts = execute(flow, {**values, **{r: c for (r, _), c in zip(grid, coords)}}, max_steps=max_steps)
        for k, v in counts.items():
            best[k] = max(best.get(k, 0), v)
        total = max(total, sum(counts.values()))
    return best, total
