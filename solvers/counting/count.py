"""``count_problem``: per-statement iteration counts, W, D, E_p and available parallelism of a Python
loop program (thesis chapter 2), evaluated and verified by execution on request.

    >>> from meshplan.models.counting.problem import CountProblem
    >>> (r,) = count_problem(CountProblem.of("def f(n):\\n    for i in range(n):\\n        for j in range(i):\\n            A[i] += 1\\n"))
    >>> str(r.total.value)
    'n*(n - 1)/2'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction

import sympy as sp
from meshplan.models.core.errors import ModelError
from meshplan.models.core.limits import limit
from meshplan.models.counting.execute import execute_ranks
from meshplan.models.loops.control import Flow, lazy_fields, raw_field
from meshplan.solvers.counting.affine import LazyBnd, count_affine
from meshplan.solvers.counting.analyze import count_flow, param_symbol, unknown_symbol
from meshplan.solvers.counting.barvinok import SharedPrinter
from meshplan.solvers.counting.blocks import count_blocks
from meshplan.solvers.counting.evaluate import as_number, compiled, numeric, symbol_names, within
from meshplan.solvers.counting.metrics import (
    available_parallelism,
    depth,
    efficiency,
    fold_pieces,
    grid_metrics,
    rank_max,
    tidy,
    work,
)
from meshplan.solvers.counting.sums import Bnd
from meshplan.solvers.counting.unknown_bounds import parse_bounds

__all__ = ["count_problem", "CountResult", "StatementCount", "parse_bounds"]


@dataclass(frozen=True, slots=True)
class StatementCount:
    name: str
    line: int
    text: str  # the statement's source, printed on first access (the frontend's Deferred text)
    count: Bnd


lazy_fields(StatementCount, "text")


@dataclass(frozen=True, slots=True)
class CountResult:
    """Counts of the most loaded process; ``exact`` when every count is a closed form."""

    flow: Flow
    statements: tuple[StatementCount, ...]
    total: Bnd
    exact: bool
    p: sp.Symbol
    notes: tuple[str, ...] = ()
    unknown_bounds: dict = field(default_factory=dict)
    cases: dict | None = None
    methods: dict | None = None
    unknowns: tuple[str, ...] | None = None
    texts: dict | None = None  # Barvinok's counts as isl printed them, per statement and "total"

    # -- W, D, E_p (section 2.1.1) ----------------------------------------------------------
    @property
    def procs(self) -> tuple[sp.Symbol, ...]:
        """The process counts: one per dimension of a process grid, else ``(p,)``."""
        return tuple(param_symbol(q) for _, q in self.flow.grid) or (self.p,)

    def _metrics(self, N: sp.Expr) -> dict:
        if len(self.procs) > 1:
            return grid_metrics(N, self.procs)
        if self.p.name not in symbol_names(N):  # no process count: sequential code
            return {"work": N, "depth": N, "efficiency": 1 / self.p, "available_parallelism": sp.Integer(1)}
        W = work(N, self.p)
        D = depth(N, self.p)
        return {"work": W, "depth": D, "efficiency": efficiency(W, N, self.p),
                "available_parallelism": available_parallelism(W, D, N, self.p)}

    @property
    def metrics(self) -> dict:
        """Exact W, D, E_p, parallelism; for approximated counts, those of the lower and upper bound
        (``E_p`` bounded by ``W_lo / (p N_hi)`` and ``W_hi / (p N_lo)``)."""
        if self.total.value is not None:
            return self._metrics(self.total.value)
        lo, hi = self._metrics(self.total.lo), self._metrics(self.total.hi)
        P = sp.Mul(*self.procs)
        return {"work": None, "depth": None, "efficiency": None, "available_parallelism": None,
                "bounds": {"work": (lo["work"], hi["work"]), "depth": (lo["depth"], hi["depth"]),
                           "efficiency": (lo["work"] / (P * self.total.hi), hi["work"] / (P * self.total.lo))}}

    def with_unknowns(self, e: sp.Expr, end: int) -> sp.Expr:
        rep = {unknown_symbol(u): b[end] for u, b in self.unknown_bounds.items()}
        return e.xreplace(rep) if rep else e

    def evaluate(self, e, values: dict):
        if e is None:
            return None
        e = sp.sympify(e)
        names, fast = compiled(e)
        if fast is not None and names <= set(values):
            try:  # exact rational arithmetic, no sympy evaluation (fast on Barvinok's piecewise counts)
                v = fast({k: Fraction(v) for k, v in values.items()})
                return int(v) if v.denominator == 1 else float(v)
            except (ModelError, ZeroDivisionError, TypeError):
                pass
        rep = {s: sp.sympify(values[s.name]) for s in e.free_symbols if s.name in values}
        with sp.evaluate(False):
            v = e.xreplace(rep)
        v = numeric(v)
        if v.free_symbols:
            return v
        if v.is_infinite:
            return "oo"
        v = sp.nsimplify(v) if v.has(sp.Float) else v
        try:
            return int(v) if v.is_integer else float(v)
        except TypeError:
            return v

    def verify(self, values: dict) -> dict:
        """Execute the program with ``values`` and compare per statement and in total; at most
        ``limit("iterations")`` loop iterations per rank are executed (``MESHPLAN_MAX_ITERATIONS``)."""
        most = limit("iterations")
        hi = self.evaluate(self.total.hi, values)
        if isinstance(hi, (int, float)) and hi > most:
            raise ModelError(f"verify would execute {hi:,} statement instances, more than the limit of {most:,}; "
                             f"use smaller params or set MESHPLAN_MAX_ITERATIONS={int(hi)}", param=("verify", "params"))
        counts, total = execute_ranks(self.flow, values, procs=self.p.name, max_steps=most)
        rows, ok = [], True
        for st in self.statements:
            got = counts.get(st.name, 0)
            lo, hi = self.evaluate(st.count.lo, values), self.evaluate(st.count.hi, values)
            good = within(lo, got, hi)
            ok = ok and good
            rows.append({"statement": st.name, "executed": got, "lower": as_number(lo), "upper": as_number(hi),
                         "ok": good})
        lo, hi = self.evaluate(self.total.lo, values), self.evaluate(self.total.hi, values)
        tok = within(lo, total, hi)
        rows.append({"statement": "total", "executed": total, "lower": as_number(lo), "upper": as_number(hi),
                     "ok": tok})
        return {"ok": ok and tok, "values": dict(values), "rows": rows}

    def _text_metrics(self) -> dict | None:
        """W, D, E_p and the parallelism as text, from the texts of the counts, for sequential code (no process
        count in them): then no sympy expression of a count is built."""
        if self.texts is None or self.p.name in self.texts["names"] or len(self.procs) > 1:
            return None
        N = self.texts["total"]
        return {"work": N, "depth": N, "efficiency": f"1/{self.p.name}", "available_parallelism": "1"}

    def to_json(self, values: dict | None = None) -> dict:
        fast = self._text_metrics()
        if fast is not None:
            out = self._text_json(fast)
            if values:
                out["values"] = self._evaluated(values, self.metrics, {})
            return out
        m = self.metrics
        shared = SharedPrinter()  # the pieces of the cases, the statements' counts and the total print once

        def s(e):
            return shared(e) if e is not None and e != sp.oo and e.has(sp.Piecewise, sp.floor) else _s(e)
        out = {
            "function": self.flow.name,
            "parameters": list(self.flow.params),
            "rank": self.flow.rank,
            "iterations": {st.name: self.texts[st.name] if self.texts else s(st.count.value)
                           for st in self.statements},
            "lines": {st.name: st.line for st in self.statements},
            "work": s(m["work"]), "depth": s(m["depth"]), "efficiency": s(m["efficiency"]),
            "available_parallelism": s(m["available_parallelism"]),
            "exact": self.exact,
            "bounds": {},
            "unknowns": list(self.flow.unknowns if self.unknowns is None else self.unknowns)
            + [u for u in _unknowns(self) if u not in self.flow.unknowns],
            "notes": list(self.notes),
            "methods": dict(self.methods or {st.name: "closed form" for st in self.statements}),
            "cases": {k: [{"count": e, "when": c} for e, c in v.rows(shared)] for k, v in (self.cases or {}).items()},
        }
        if self.flow.grid:
            out["grid"] = dict(self.flow.grid)
        out["iterations"]["total"] = self.texts["total"] if self.texts else s(self.total.value)
        if m.get("depth") == sp.oo:
            out["notes"].append("D = oo: the parallelization is not work-conserving (more work per process as p grows)")
        exprs = {}  # the bounds as expressions: re-parsing their text would re-evaluate the clamps Max(0, …)
        for st in (*self.statements, None):
            b = self.total if st is None else st.count
            name = "total" if st is None else st.name
            lo, hi = self.with_unknowns(b.lo, 0), self.with_unknowns(b.hi, 1)
            if b.value is None or self.unknown_bounds:
                out["bounds"][name] = {"lower": s(lo), "upper": s(hi)}
                exprs[name] = (lo, hi)
        if "bounds" in m:
            for k, (lo, hi) in m["bounds"].items():
                out["bounds"][k] = {"lower": s(lo), "upper": s(hi)}
                exprs[k] = (lo, hi)
        if values:
            out["values"] = self._evaluated(values, m, exprs)
        return out

    def _evaluated(self, values: dict, m: dict, exprs: dict) -> dict:
        """Every count and metric at ``values`` (``NAME_bounds`` pairs for the bounds ``exprs``)."""
        val = {st.name: as_number(self.evaluate(st.count.value, values)) for st in self.statements}
        val["total"] = as_number(self.evaluate(self.total.value, values))
        for k in ("work", "depth", "efficiency", "available_parallelism"):
            val[k] = as_number(self.evaluate(m[k], values))
        for k, e in exprs.items():
            val[f"{k}_bounds"] = [as_number(self.evaluate(x, values)) for x in e]
        return val

    def _text_json(self, m: dict) -> dict:
        """:meth:`to_json` of a sequential count that Barvinok's algorithm made exact, from the texts."""
        t = self.texts
        cases = {k: [{"count": e, "when": c} for e, c in v.rows()] for k, v in (self.cases or {}).items()}
        return {"function": self.flow.name, "parameters": list(self.flow.params), "rank": self.flow.rank,
                "iterations": {**{st.name: t[st.name] for st in self.statements}, "total": t["total"]},
                "lines": {st.name: st.line for st in self.statements}, **m, "exact": self.exact,
                "bounds": {}, "unknowns": list(self.unknowns or ()), "notes": list(self.notes),
                "methods": dict(self.methods), "cases": cases}


def _unknowns(res) -> list[str]:
    out = []
    for e in (res.total.lo, res.total.hi):
        out += sorted(s for s in symbol_names(e) if s.startswith("u") and s[1:].split("_")[0].isdigit())
    return sorted(set(out))


@functools.lru_cache(maxsize=1024)
def _s(e) -> str | None:
    """The text of a count: piecewise quasi-polynomials in their terms' own order (sympy's sorting of the
    terms costs more than counting them), everything else as sympy prints it."""
    if e is None:
        return None
    if e == sp.oo:
        return "oo"
    return sp.sstr(e, order="none") if e.has(sp.Piecewise, sp.floor) else str(e)


def _unclamp(e: sp.Expr, p: sp.Symbol) -> sp.Expr:
    """``Max(0, g)`` -> ``g`` where ``g`` depends on the process count only (``g >= 0`` for ``p >= 1``)."""
    return e.replace(lambda x: isinstance(x, sp.Max) and len(x.args) == 2 and sp.S.Zero in x.args
                     and x.args[1 - x.args.index(sp.S.Zero)].free_symbols == {p},
                     lambda x: x.args[1 - x.args.index(sp.S.Zero)])


def _analyze(flow: Flow, procs: str, bounds: dict) -> CountResult:
    aff = count_affine(flow, procs) if flow.rank is None else None
    if aff is not None and not aff.reasons:
        return _affine_result(flow, procs, bounds, aff)
    raw = count_flow(flow)
    p = param_symbol(procs)
    for name, b in raw.counts.items():  # the process count is at least 1: its loops need no clamp at 0
        raw.counts[name] = b.map(lambda e: _unclamp(e, p))
    exact = True
    notes = list(flow.notes) + raw.notes
    methods = {w.name: "closed form" for w in flow.statements}
    if aff is not None:  # Barvinok's exact counts where it applies, the closed forms elsewhere
        rep = {param_symbol(x): _param(x, procs) for x in aff.params}
        for name, c in aff.cases.items():
            raw.counts[name] = Bnd.exact(c.expr)
            methods[name] = "barvinok"
        for name in raw.counts:
            if methods[name] != "barvinok":
                b = raw.counts[name]
                raw.counts[name] = Bnd(None if b.value is None else b.value.xreplace(rep), b.lo.xreplace(rep),
                                       b.hi.xreplace(rep))
        left = {x.name for b in raw.counts.values() for e in (b.value, b.lo, b.hi) if e is not None
                for x in e.free_symbols}
        gone = set(aff.resolved) | {u for u in raw.opaque if u not in left}
        notes = [n for n in notes if not any(f"counted as {u} " in n for u in gone)]
        raw.opaque[:] = [u for u in raw.opaque if u not in gone]
    stmts = []
    grid = flow.ranks(procs)

    def mx(b: Bnd) -> Bnd:
        nonlocal exact
        parts = []
        for e in (b.value, b.lo, b.hi):
            if e is None:
                parts.append(None)
                continue
            for r, q in grid:  # the block of every grid dimension at its most loaded rank
                try:
                    e, ok = rank_max(e, unknown_symbol(r), param_symbol(q))
                except ValueError as err:
                    raise ModelError(f"function {flow.name}: {err}; write the parallel loop as "
                                     f"`range({r}*n//{q}, min(({r}+1)*n//{q}, n))`") from None
                exact = exact and ok
            parts.append(e)
        return Bnd(parts[0], parts[1], parts[2])

    total = Bnd.exact(0)
    for w in flow.statements:
        b = raw.counts[w.name]
        total = total + b
        b = mx(b)
        b = Bnd(tidy(b.value), tidy(b.lo), tidy(b.hi)) if b.value is not None else Bnd(None, tidy(b.lo), tidy(b.hi))
        exact = exact and b.value is not None
        stmts.append(StatementCount(w.name, w.line, raw_field(w, "text"), b))
    total = mx(total)
    total = Bnd(tidy(total.value) if total.value is not None else None, tidy(total.lo), tidy(total.hi))
    exact = exact and total.value is not None
    left = {x.name for e in (total.value, total.lo, total.hi) if e is not None for x in e.free_symbols}
    exact = exact and not any(u in left for u in (*flow.unknowns, *raw.opaque))  # an unknown u_k: not exact
    unknown = {u for u in bounds if u not in raw.opaque and u not in flow.unknowns}
    if unknown:
        raise ModelError(f"bounds names {sorted(unknown)[0]}, which is not an unknown loop count of "
                         f"{flow.name} (unknowns: {', '.join(raw.opaque) or 'none'})", param="bounds")
    cases = None if aff is None else {k: c for k, c in aff.cases.items()}
    return CountResult(flow, tuple(stmts), total, exact, p, tuple(notes), dict(bounds), cases=cases,
                       methods=methods, unknowns=None if aff is None else
                       tuple(u for u in flow.unknowns if u not in aff.resolved))


def _affine_result(flow: Flow, procs: str, bounds: dict, aff) -> CountResult:
    """Every statement counted by Barvinok's algorithm: exact piecewise quasi-polynomials."""
    unknown = {u for u in bounds if u not in flow.unknowns or u in aff.resolved}
    if unknown:
        raise ModelError(f"bounds names {sorted(unknown)[0]}, which is not an unknown loop count of "
                         f"{flow.name} (unknowns: none)", param="bounds")
    notes = tuple(n for n in flow.notes if not any(f"counted as {u} " in n for u in aff.resolved))
    stmts = tuple(StatementCount(w.name, w.line, raw_field(w, "text"), LazyBnd(lambda c=aff.cases[w.name]: c.expr))
                  for w in flow.statements)
    texts = {w.name: aff.cases[w.name].count_text for w in flow.statements}
    texts.update(total=aff.total_text, names=frozenset(aff.params))
    return CountResult(flow, stmts, LazyBnd(lambda: aff.total), True, _param(procs, procs), notes, {},
                       cases=dict(aff.cases),
                       methods={w.name: "barvinok" for w in flow.statements},
                       unknowns=tuple(u for u in flow.unknowns if u not in aff.resolved), texts=texts)


def _param(name: str, procs: str) -> sp.Symbol:
    """Parameters of Barvinok's counts are non-negative integers (the process count positive)."""
    return param_symbol(name) if name == procs else unknown_symbol(name)


def count_problem(problem) -> list[CountResult]:
    """The counts of every function of a :class:`~meshplan.models.counting.problem.CountProblem` (thesis
    chapter 2), one :class:`CountResult` each."""
    bounds = problem.bounds
    if isinstance(bounds, str):
        bounds = parse_bounds(bounds)
    return [_analyze_ranks(f, f.grid[0][1] if f.grid else problem.procs, bounds or {}) for f in problem.flows]


def _analyze_ranks(flow: Flow, procs: str, bounds: dict) -> CountResult:
    """:func:`_analyze`; for explicitly parallel code whose count it leaves inexact (or cannot take the most
    loaded rank of), the block distribution counted by Barvinok's algorithm with the block's ends as
    parameters, when isl proves the last rank's block the heaviest (:mod:`~meshplan.solvers.counting.blocks`)."""
    if flow.rank is None:
        return _analyze(flow, procs, bounds)
    if len(flow.ranks(procs)) > 1:  # a process grid: Barvinok's count first (exact at extents 0 too)
        blk = count_blocks(flow, procs)
        if blk is not None:
            return _block_result(flow, procs, bounds, blk)
    try:
        res, failure = _analyze(flow, procs, bounds), None
    except ModelError as err:
        res, failure = None, err
    if res is None or not res.exact:
        blk = count_blocks(flow, procs)
        if blk is not None:
            return _block_result(flow, procs, bounds, blk)
    if res is None:
        raise failure
    return res


def _block_result(flow: Flow, procs: str, bounds: dict, counts: dict) -> CountResult:
    if bounds:
        raise ModelError(f"bounds names {sorted(bounds)[0]}, which is not an unknown loop count of {flow.name} "
                         "(unknowns: none)", param="bounds")
    if flow.grid:  # per grid dimension a factor `E >= 1` in every piece: one flat piecewise count
        counts = {k: tidy(fold_pieces(c)) for k, c in counts.items()}
    stmts = tuple(StatementCount(w.name, w.line, raw_field(w, "text"), Bnd.exact(tidy(counts[w.name]))) for w in flow.statements)
    total = tidy(sp.Add(*[counts[w.name] for w in flow.statements]))
    if flow.grid:
        total = tidy(fold_pieces(total))
    notes = tuple(n for n in flow.notes if " counted as u" not in n)
    return CountResult(flow, stmts, Bnd.exact(total), True, param_symbol(procs), notes, {},
                       methods={w.name: "barvinok (block ends as parameters)" for w in flow.statements},
                       unknowns=())
