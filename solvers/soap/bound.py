"""I/O lower bounds of SOAP programs (eq. 5.9, Theorem 5.1, Lemma 4.9).

:func:`analyze` builds the SDG, evaluates every connected subgraph statement
``St_H`` (up to ``max_subgraph`` arrays), and combines them by Theorem 5.1:

    Q ≥ Σ_{A computed} |A| / max_{H ∋ A} ρ_H,

where |A| is the number of CDAG vertices of array ``A`` (the iterations of the
statements writing it).  For a single statement this is eq. (5.9),
Q ≥ |V|(X0 − S)/χ(X0).  The parallel bound divides by ``p`` (Lemma 4.9).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.soap.access import Finding, check_conditions
from meshplan.models.soap.dead import dead_statements, last_iterations
from meshplan.models.soap.live import dead_at
from meshplan.models.soap.expand import expand_temporaries
from meshplan.models.soap.scalars import split_scalars
from meshplan.models.loops.program import Program, sym
from meshplan.models.soap.sdg import build_sdg
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.chi import SAMPLE_S, S, Intensity, dominating, intensity
from meshplan.solvers.soap.counts import check_ranges, enumerated, iterations, miscounted
from meshplan.solvers.soap.derive import derive_screened
from meshplan.solvers.soap.memo import IntensityMemo
from meshplan.solvers.soap.pyramid import stencils_refined
from meshplan.solvers.soap.subgraphs import ALL_SUBGRAPHS_UP_TO, CAPPED_SUBGRAPH, subgraph_statements  # noqa: F401
from meshplan.solvers.soap.sweeps import SweepBound, sweep_bound
from meshplan.solvers.soap.symbols import leading_in_sizes
from meshplan.solvers.soap.window import WindowBound, window_bound
from meshplan.solvers.soap.trivial import trivial_bound

__all__ = ["ArrayBound", "ProgramBound", "analyze", "leading_term", "P"]

P = sp.Symbol("p", positive=True)


@dataclass(frozen=True)
class ArrayBound:
    """The bound of one array: its vertex count, the largest intensity of a subgraph holding it, and that subgraph."""

    array: str
    vertices: sp.Expr           # |A|
    rho: sp.Expr                # max_{H ∋ A} ρ_H (a sympy Max when not decided)
    best: tuple[str, ...]       # the subgraph H attaining it (by sampled S)
    statements: tuple[str, ...]


@dataclass(frozen=True)
class ProgramBound:
    """The I/O lower bound of a program (section 5.2): SOAP findings, subgraph intensities, per-array bounds and
    their sum."""

    program: Program
    findings: tuple[Finding, ...]
    subgraphs: tuple[Intensity, ...]
    arrays: tuple[ArrayBound, ...]
    bound: sp.Expr
    leading: sp.Expr
    parallel: sp.Expr
    seconds: float
    notes: tuple[str, ...] = field(default=())
    #: every input read once + every output written once (the floor under the SOAP bound)
    trivial: sp.Expr = sp.Integer(0)
    #: the program the trivial floor counts (before temporaries are expanded; ``None``: ``program``)
    stored: Program | None = None
    #: the window bound of a chain the outer steps wait for (:mod:`meshplan.solvers.soap.window`), if any
    window: WindowBound | None = None
    #: ``(statement, length)``: a statement whose loop was cut to its last iteration has no vertices where
    #: that loop's length (``N − 1`` for ``range(1, N)``) is ≤ 0 (models/soap/dead.py ``last_iterations``)
    guards: tuple = ()
    #: ``(statement, input array)`` whose reads the trivial floor does not count (some only dead instances read)
    partial_reads: tuple = ()
    #: the floor of two opposite chains over the lines of an input (:mod:`meshplan.solvers.soap.sweeps`), if any
    sweep: SweepBound | None = None

    @property
    def dominant(self) -> ArrayBound | None:
        """The array whose term leads the bound (largest |A|/ρ for large sizes)."""
        if not self.arrays:
            return None
        vals = {p: 4096 for p in self.program.params}
        best, arg = -1.0, None
        for a in self.arrays:
            try:
                v = float((a.vertices / a.rho).subs(vals).subs(S, 2.0 ** 16)) if a.rho != sp.oo else 0.0
            except (TypeError, ValueError):
                v = 0.0
            if v > best:
                best, arg = v, a
        return arg

    def intensity_of(self, H: tuple[str, ...]) -> Intensity:
        """The intensity of subgraph ``H`` (derived now if it was screened); raises :class:`ModelError` when it
        was not analysed."""
        for it in self.subgraphs:
            if it.problem.arrays == tuple(H):
                return intensity(it.problem) if it.method == "screened" else it
        raise ModelError(f"no subgraph {H}")

    def evaluate_numeric(self, values: dict[str, float]) -> float:
        """The bound at concrete sizes with each ρ_H minimized over X numerically (still valid)."""
        s = float(values["S"])
        degenerate = self._degenerate(values)
        if degenerate is not None:
            return self._degenerate_value(values, degenerate, lambda a: max(
                it.rho_numeric(s) for it in self.subgraphs if a.array in it.problem.arrays))
        subs = {sym(k): v for k, v in values.items() if k not in ("S", "p")}
        total = 0.0
        for a in self.arrays:
            cands = [it for it in self.subgraphs if a.array in it.problem.arrays]
            rho = max(it.rho_numeric(s) for it in cands)
            if math.isinf(rho):
                continue
            total += float(sp.N(a.vertices.subs(subs))) / rho
        total = max(total, float(sp.N(self.trivial.subs(subs))))
        if self.window is not None:
            total = max(total, float(sp.N(self.window.bound.subs(subs).subs(S, s))))
        if self.sweep is not None:
            total = max(total, float(sp.N(self.sweep.bound.subs(subs).subs(S, s))))
        return total / float(values.get("p", 1))

    def evaluate(self, values: dict[str, float]) -> float:
        """The bound at concrete parameter values and fast memory ``S``; raises :class:`ModelError` naming missing
        values."""
        missing = [p for p in self.program.params if p not in values]
        if missing or "S" not in values:
            raise ModelError(f"to evaluate the bound give {', '.join(missing + ([] if 'S' in values else ['S']))} "
                             "in params (e.g. N=4096,S=65536)", param="params")
        degenerate = self._degenerate(values)
        if degenerate is not None:
            return self._degenerate_value(values, degenerate, lambda a: float(sp.N(a.rho.subs(S, values["S"]))))
        subs = {sym(k): v for k, v in values.items() if k not in ("S", "p")}
        subs[S] = values["S"]
        subs[P] = values.get("p", 1)
        expr = self.bound if "p" not in values else self.parallel
        return float(sp.N(expr.subs(subs)))

    def _degenerate(self, values: dict[str, float]) -> tuple[set, set] | None:
        """The statements (of ``program``, and of the program the trivial floor counts) whose closed-form
        counts may be wrong at these sizes — a loop range reversed where it runs, or no iteration at all
        (:func:`~meshplan.solvers.soap.counts.miscounted`); ``None`` when there are none (or a size is no
        integer), and the symbolic bound holds as it is."""
        sizes = {k: values[k] for k in self.program.params}
        if not all(float(v).is_integer() for v in sizes.values()):
            return None
        sizes = {k: int(v) for k, v in sizes.items()}
        empty = self._empty(sizes)
        bad = {st.name for st in self.program.statements if st.name in empty or miscounted(st, sizes)}
        bad_stored = {st.name for st in (self.stored or self.program).statements
                      if st.name in empty or miscounted(st, sizes)}
        return (bad, bad_stored) if bad or bad_stored else None

    def _empty(self, sizes: dict[str, int]) -> set[str]:
        """The statements with no vertex on a path to an output at these sizes: cut to a last iteration whose
        loop runs no iteration here (:attr:`guards`), or, where some statement runs no iteration, with no
        live instance on the trace at these sizes (``dead_at``; a statement that only an empty loop reads)."""
        subs = {sym(k): v for k, v in sizes.items()}
        empty = {name for name, length in self.guards if length.xreplace(subs) <= 0}
        prog = self.stored or self.program
        if empty or any(miscounted(st, sizes) for st in prog.statements):
            rest = tuple(st for st in prog.statements if st.name not in empty)
            if rest:
                empty |= dead_at(replace(prog, statements=rest), sizes)
        return empty

    def _degenerate_value(self, values: dict[str, float], degenerate: tuple[set, set], rho_of) -> float:
        """The bound at sizes where some closed-form counts do not hold (:meth:`_degenerate`): Theorem 5.1
        with each such statement's vertices counted one by one (none past a limit, which only lowers the
        bound) and the others' closed forms, and the trivial floor without the accesses of such statements
        (a smaller floor).  Empty domains (``range(1, N − 1)`` at
        N = 1) thus give no vertices and no reads, as no schedule moves anything for them."""
        bad, bad_stored = degenerate
        sizes = {k: int(values[k]) for k in self.program.params}
        empty = self._empty(sizes)
        subs = {sym(k): v for k, v in sizes.items()}
        total = 0.0
        for a in self.arrays:
            if a.rho == sp.oo:
                continue
            n = 0.0
            for name in a.statements:
                st = self.program.statement(name)
                if name in empty:
                    continue
                n += (enumerated(st, sizes) or 0) if name in bad else float(sp.N(iterations(st).subs(subs)))
            if n > 0:
                total += n / rho_of(a)
        triv, _ = trivial_bound(self.stored or self.program, skip=bad_stored, skip_reads=frozenset(self.partial_reads))
        total = max(total, float(sp.N(triv.subs(subs))))
        return total / float(values.get("p", 1))


def analyze(program: Program, *, max_subgraph: int | None = None, screen: bool = True) -> ProgramBound:
    """Derive the symbolic I/O lower bound of ``program`` (deterministic: no time limit inside).

    ``max_subgraph`` caps the number of arrays of an evaluated subgraph (default: none while at
    most :data:`ALL_SUBGRAPHS_UP_TO` arrays with vertices remain — every subgraph, as Theorem
    5.1 requires).  With ``screen`` (the default) a subgraph whose cheap upper bound on ρ
    (:mod:`meshplan.solvers.soap.screen`) cannot lead any of its arrays is not derived and
    reports that bound; ``screen=False`` derives every subgraph."""
    t0 = time.perf_counter()
    program, cut_notes, guards, partial = last_iterations(program)    # earlier iterations dead (models/soap/dead.py)
    stored = program   # splitting and expansion rename values, not outputs: the trivial floor counts these
    program, split_notes = split_scalars(program)
    split_notes = cut_notes + split_notes
    program, expand_notes = expand_temporaries(program)
    split_notes += expand_notes
    findings = tuple(check_conditions(program))
    sdg = build_sdg(program)
    notes: list[str] = list(split_notes)
    dead = dead_statements(program)
    if dead:
        notes.append(f"statement(s) {', '.join(dead)}: every value is overwritten before any other statement "
                     "reads it; no pebbling needs them, so their vertices are left out")
    problems, excluded, free, cap = subgraph_statements(sdg, max_subgraph, dead)
    live = len(sdg.computed) - len(free)
    if cap < live:
        notes.append(f"subgraphs of more than {cap} arrays are not evaluated (Theorem 5.1 iterates over "
                     "all subgraphs): a larger fusion with a higher intensity would make this bound too "
                     "high — it is not certified")
    if set(excluded) - set(dead):
        unbounded = ', '.join(s for s in excluded if s not in dead)
        notes.append(f"statement(s) {unbounded}: no access bounds their work (χ = ∞); their "
                     "vertices are left out and the other statements are bounded without them")
        if free:
            notes.append(f"arrays written only by those statements ({', '.join(free)}) are joined to every "
                         "subgraph whose statements read them (their reads are then free, which can only "
                         "raise ρ: this covers every subgraph with any of them, of any size)")
    counted = {A for A in sdg.computed if A not in free}
    results = derive_screened(problems, counted) if screen else [IntensityMemo(intensity)(p) for p in problems]
    results = stencils_refined(results, program)     # stencils checked against their offsets (pyramid.py)
    for st in program.statements:
        notes.extend(check_ranges(st))
    counts = {st.name: iterations(st) for st in program.statements}
    arrays: list[ArrayBound] = []
    # writers in no subgraph statement lie on no path from an input (models/soap/dead.py): left out too
    kept = {name for p in problems for name in p.statements}
    input_free = [st.name for st in program.statements if st.name not in kept and st.name not in excluded]
    if input_free:
        notes.append(f"statement(s) {', '.join(input_free)}: on no path from an input (a constant and the "
                     "in-place updates of it that read nothing else); their vertices need no I/O and are left "
                     "out (section 4.2.3.2)")
    for A in sdg.computed:
        writers = tuple(st.name for st in program.writers(A) if st.name not in excluded and st.name in kept)
        verts = sp.expand(sp.Add(*[counts[w] for w in writers]))
        cands = [r for r in results if A in r.problem.arrays and r.method != "screened"]   # the rest are below
        if not writers or not cands:
            continue
        rho, best = _max_rho(cands)
        arrays.append(ArrayBound(A, verts, rho, best, writers))
    soap = sp.Add(*[a.vertices / a.rho for a in arrays if a.rho != sp.oo])
    lead = leading_term(arrays, program.params)
    triv, counted = trivial_bound(stored, skip_reads=frozenset(partial))
    win = window_bound(stored)
    pieces, leads = [soap], [lead]
    if triv != 0:
        pieces.append(triv)
        leads.append(leading_in_sizes(triv, program.params))
    if win is not None:
        pieces.append(win.bound)
        leads.append(win.leading)
    if (sweep := sweep_bound(stored, frozenset(partial))) is not None:    # two opposite chains over lines (sweeps.py)
        pieces.append(sweep.bound)
        leads.append(sweep.leading)
        notes.append(sweep.note)
    bound, kept = _largest(pieces, program.params)
    lead, _ = _largest(leads, program.params, leading=True)
    if triv != 0 and any(k is triv for k in kept):
        notes.append(f"the bound is the max with the trivial bound {triv} (every element of "
                     f"{', '.join(counted)} read or written once)")
    if win is not None:
        notes.append(f"the window bound of {win.pivot} (one value per step of {win.loop} that the next step "
                     f"waits for; {win.reads} inputs read per step) is {win.bound}")
    return ProgramBound(program, findings, tuple(results), tuple(arrays), bound, lead, bound / P,
                        time.perf_counter() - t0, tuple(notes), triv, stored, win, guards, partial, sweep)


def _largest(exprs: list, params, *, leading: bool = False) -> tuple[sp.Expr, list]:
    """The max of ``exprs`` without those at most another at sampled sizes and memories (the first of
    equals kept): ``(the one left or their Max, those left)``; the Max of all when one does not evaluate.

    For leading terms the sizes grow past the memory (all parameters 2^20 and 2^30, S up to 2^16):
    the regime a leading term describes."""
    if len(exprs) == 1:
        return exprs[0], list(exprs)
    sizes = (2.0 ** 20, 2.0 ** 30) if leading else (2.0 ** 12, 2.0 ** 20)
    mems = (2.0 ** 4, 2.0 ** 10, 2.0 ** 16) if leading else SAMPLE_S
    vals = []
    for e in exprs:
        row = []
        for n in sizes:
            for s in mems:
                subs = {sym(p): n for p in params}
                subs[S] = s
                try:
                    row.append(float(sp.N(e.subs(subs))))
                except (TypeError, ValueError):
                    return sp.Max(*exprs), list(exprs)
        vals.append(row)

    def ge(j: int, k: int) -> bool:
        return all(a >= b * (1 - 1e-12) for a, b in zip(vals[j], vals[k]))

    kept = [e for k, e in enumerate(exprs)
            if not any(j != k and ge(j, k) and (j < k or not ge(k, j)) for j in range(len(exprs)))]
    return (kept[0] if len(kept) == 1 else sp.Max(*kept)), kept


def _max_rho(cands: list[Intensity]):
    finite = [c for c in cands if c.rho != sp.oo]
    if len(finite) < len(cands):
        inf = next(c for c in cands if c.rho == sp.oo)
        return sp.oo, inf.problem.arrays
    vals = [[c.rho_at(s) for s in SAMPLE_S] for c in finite]
    i = dominating(vals)
    if i is not None:
        return finite[i].rho, finite[i].problem.arrays
    top = max(range(len(finite)), key=lambda i: vals[i][-1])
    # a candidate at most another at every sample (the first of equals kept) is left out of the Max, as a
    # dominating one decides it alone: deriving or screening the dominated ones gives the same Max
    kept = [c for k, c in enumerate(finite) if not any(
        j != k and all(a >= b * (1 - 1e-12) for a, b in zip(vals[j], vals[k])) and
        (j < k or any(a > b * (1 + 1e-12) for a, b in zip(vals[j], vals[k]))) for j in range(len(finite)))]
    return sp.Max(*dict.fromkeys(c.rho for c in kept), evaluate=False), finite[top].problem.arrays


def leading_term(arrays: list[ArrayBound], params) -> sp.Expr:
    """Highest total degree in the parameters, then the leading behaviour as S -> ∞."""
    psyms = [sym(p) for p in params]
    terms = []
    for a in arrays:
        if a.rho == sp.oo:
            continue
        poly = sp.Poly(sp.expand(a.vertices), *psyms) if psyms else None
        if poly is None or poly.is_zero:
            deg, lt = 0, a.vertices
        else:
            deg = poly.total_degree()
            lt = sp.Add(*[c * sp.Mul(*[x ** e for x, e in zip(psyms, m)])
                          for m, c in poly.terms() if sum(m) == deg])
        terms.append((deg, lt, _lead_rho(a.rho)))
    if not terms:
        return sp.Integer(0)
    dmax = max(d for d, _, _ in terms)
    top = [(lt, r) for d, lt, r in terms if d == dmax]
    expr = sp.Add(*[lt / r for lt, r in top])
    u = sp.Symbol("u", positive=True)
    try:
        lead_s = simplified(expr.subs(S, 1 / u).as_leading_term(u).subs(u, 1 / S))
    except Exception:  # noqa: BLE001 - sympy may not find a leading term; keep the expression
        lead_s = expr
    return sp.factor(lead_s)


def _lead_rho(rho: sp.Expr) -> sp.Expr:
    rho = rho.replace(sp.Min, lambda *a: min(a, key=lambda r: float(r.subs(S, 2.0 ** 30))))   # chi.intensity's
    if isinstance(rho, sp.Max):
        rho = max(rho.args, key=lambda r: float(r.subs(S, 2.0 ** 30)))
    u = sp.Symbol("u", positive=True)
    try:
        return simplified(rho.subs(S, 1 / u).as_leading_term(u).subs(u, 1 / S))
    except Exception:  # noqa: BLE001
        return rho
