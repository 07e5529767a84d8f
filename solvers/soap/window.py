"""Window (streaming) lower bounds: a chain of one value per outer step that every next step waits for.

The S-partition bound of SOAP (Kwasniewski's thesis, section 5.2, eq. 5.9) sees a subgraph's tiles, not
the order a reduction imposes on them.  When an outer loop ``k`` computes one value ``P(k)`` per step
(the *pivot*: durbin's ``alpha``, a statement under ``k`` alone) that depends on ``P(k − 1)``, let
``T_k`` be the first computation of ``P(k)`` and the *window* ``W_k`` the instances of step ``k`` on a
path ``P(k − 1) ⇝ x ⇝ P(k)``.  Every ``x ∈ W_k`` is first computed in ``(T_{k−1}, T_k]`` (after a
predecessor, before a successor), when all its inputs are red; the windows of different ``k`` are
disjoint.  So the ``c(k)`` distinct input elements (initial values: blue at the start) that ``W_k``
reads are all red at some time of the window, at most ``S`` of them were red at ``T_{k−1}``, and

    Q ≥ Σ_k (c(k) − S)⁺                                   (recomputation allowed: the red–blue game).

Without recomputation a second count holds: the ``L(k)`` values computed in ``W_k`` (besides ``P(k)``)
and read by an instance that depends on ``P(k)`` are all computed before ``T_k`` and used after it, so
at ``T_k`` at most ``S − 1`` of them are red beside ``P(k)`` and each other one is stored in the window
and loaded after it: ``2·Σ_k (L(k) + 1 − S)⁺`` more.  With recomputation a value may instead be
recomputed (from the inputs of the window, which dominate it: Hong and Kung's dominator count alone gives no
more than ``c(k)``), so this part is reported separately.

With recomputation a third count holds (the *paths* count ``e(k)``).  Let the window hold a chain
``ρ_0 → ρ_1 → …`` (the instances of one statement, each a predecessor of the next: durbin's ``sum +=``), and
``t_q`` the first computation of ``ρ_q`` (increasing in ``q``, inside the window).  Take vertex-disjoint
paths of computed vertices (no inputs on them), each ending at a predecessor of some ``ρ_q``.  ``D`` = the
vertices red at ``T_{k−1}`` or loaded in the window.  Either a path meets ``D`` (a load of a non-input,
distinct per path, or one of the ``S`` red at ``T_{k−1}``), or — walking back from its end, red at ``t_q`` —
all of it is computed in the window before ``t_q`` (a *failure*), and every input ``A`` its vertices read
is red before ``t_q``.  The inputs ``B_q`` the chain reads from ``ρ_q`` on are red at or after ``t_q``, so
each input of ``A ∩ B_q`` not red at ``t_q`` is loaded twice in the window.  With ``P`` paths, failures
``F`` and ``μ = |A ∩ B_q|`` of the failure with the largest one, the window loads at least
``c + P − |F| + μ − 2S``; the schedule picks ``F``, so ``e(k) = c(k) + min(P, min_m (P − #{μ ≤ m} + m))``
and ``Q ≥ Σ_k (e(k) − 2S)⁺``.  The paths are found greedily, chain position by chain position, walking
back from each predecessor of the chain: at each vertex to the unused predecessor whose path of first
choices reads the most of ``B_q`` (first choices: an instance of the chain's statement, then the producer
of a read with the output's subscripts; from an instance of the chain's statement only its own
statement's); any such choice is sound.  durbin: ``y[q]`` after step ``k − 1`` is ``y[q] + α·y[k − 2 −
q]`` of the step before, so the path of a small ``q`` turns to the mirrored value and runs back to
``alpha`` of step ``k − 2 − q`` and its ``sum`` chain, which read ``r[0..k − 2 − q]``, while the chain reads
``r[0..k − 1 − q]`` from ``ρ_q`` on: ``μ ≈ k − 1 − q``, about one path per value, so recomputing saves the
schedule at most about one load per window, and ``e(k) = 2k − 1`` (``2k`` on the paths built by hand),
leading term ``N²``.

A fourth count holds with recomputation, the *split* count ``e_M(k)`` of
:mod:`meshplan.solvers.soap.window_parts`: the window cut into ``M`` parts at first computations of the
chain, a dominator set per part (Hong and Kung) found as a maximum flow, with weight 2 on the values the
window computes (a load of one in the window follows a store in it); ``Q ≥ Σ_k (e_M(k) − 2MS)⁺``.  durbin,
four parts: ``e_4(k) = 3k + 1`` (or ``3k + 2``), leading term ``3N²/2``, the thesis's Table 5.2 entry.

:func:`window_bound` finds pivots, windows and the counts on exact traces of the program at four sizes
(the one size parameter 8, 12, 16 and 24; :func:`~meshplan.models.soap.replay.build_trace`), fits ``c`` and ``L`` as
affine functions of ``k`` that hold at every step from a fixed one on and at every size (``e`` as an
affine function at most the count there, as a count may alternate, and so ``e_M``), and sums them
symbolically with the integral lower bound ``Σ_{k=k0}^{K} f(k) ≥ ∫_{k0−1}^{K} f`` (``f`` nondecreasing).
The fit is checked at those sizes only: a
count that changes form at a constant step past 24 would be missed.  Programs of more than one size
parameter are not analysed (a count that depends on two sizes, ``min(k, M)``, cannot be fitted on sizes
that are all equal).  Anything not recognized gives ``None`` (no window piece)."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy as sp

from meshplan.models.core.bits import bits
from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Program, sym
from meshplan.models.soap.replay import build_trace, loop_order, producers, stream
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.window_parts import PARTS, Network, split_count

__all__ = ["WindowBound", "window_bound", "SAMPLE_SIZES"]

#: every parameter takes these values in the traces the counts are fitted on
SAMPLE_SIZES = (8, 12, 16, 24)
#: traces of more instances are not built (no window piece)
MAX_INSTANCES = 5_000


@dataclass(frozen=True)
class WindowBound:
    """The window bound of one pivot: ``bound`` (recomputation allowed: the largest of the reads', the
    paths' and the split count's sums), ``no_recomputation`` (at least ``bound``; the reads' sum plus the
    live values' stores and loads) and their leading terms when every size is ≫ S."""

    pivot: str                  # the statement computing P(k)
    loop: str                   # the outer loop variable k
    first: int                  # the first step k0 the counts hold from
    reads: sp.Expr              # c(k): distinct inputs the window reads
    live: sp.Expr               # L(k): window values read after P(k)
    paths: sp.Expr              # e(k) (at most): c(k) plus the disjoint paths' count; 0 when not fitted
    bound: sp.Expr
    no_recomputation: sp.Expr
    leading: sp.Expr
    leading_no_recomputation: sp.Expr
    split: sp.Expr = sp.Integer(0)      # e_M(k) (at most): the split count of window_parts.py; 0 when not fitted
    parts: int = 0                      # M, the number of parts of the split count (memory term 2·M·S)


def window_bound(program: Program) -> WindowBound | None:
    """The largest window bound over the program's pivots (by leading term at size 2^20), or ``None``."""
    cands = _candidates(program)
    if not cands or len(program.params) != 1:
        return None
    found: dict[str, list] = {c: [] for c in cands}
    for n in SAMPLE_SIZES:
        try:
            tr = build_trace(program, {p: n for p in program.params}, limit=MAX_INSTANCES)
        except ModelError:
            return None
        graph = _graph(tr)
        for c in list(found):
            counts = _counts(tr, graph, c)
            if counts is None:
                del found[c]
            else:
                found[c].append(counts)
    best, val = None, 0.0
    for c, per_size in found.items():
        w = _fit(program, c, per_size)
        if w is not None:
            v = float(w.leading.subs({sym(p): 2 ** 20 for p in program.params}))
            if v > val:
                best, val = w, v
    return best


def _candidates(program: Program) -> list[str]:
    """Statements under one loop of step 1 that read an array a deeper statement under that loop writes
    (a reduction's result) and write one such a statement reads (the next step waits for them)."""
    out = []
    for st in program.statements:
        if len(st.loops) != 1 or st.loops[0].step != 1 or st.loops[0].descending:   # the fit runs k upwards
            continue
        deeper = [o for o in program.statements if len(o.loops) > 1 and o.loops[0] == st.loops[0]]
        if any(a.array == o.output.array for a in st.inputs for o in deeper) and any(
                a.array == st.output.array for o in deeper for a in o.inputs):
            out.append(st.name)
    return out


def _graph(tr):
    """The CDAG's computed vertices (one per instance, numbered in program order) as bit sets: per
    instance its descendants, its ancestors, its direct successors and the input elements (initial
    values) it reads, the set of instances on a path to an output, and per instance and read column the
    producing instance (−1: an input, −2: no read).  A producer precedes its readers, so one sweep each
    way closes the relations."""
    el, wr, inst = stream(tr, loop_order(tr))
    prod, final = producers(el, wr, inst)
    n = tr.instances
    keep = ~wr & (prod >= 0)
    edges = sorted(zip(prod[keep].tolist(), inst[keep].tolist()))
    desc, anc, succ, ins = [0] * n, [0] * n, [0] * n, [0] * n
    for p, i in reversed(edges):          # every edge out of i (> p) is done before p's
        desc[p] |= (1 << i) | desc[i]
        succ[p] |= 1 << i
    for p, i in sorted(edges, key=lambda e: e[1]):
        anc[i] |= (1 << p) | anc[p]
    for e, i in zip(el[~wr & (prod < 0)].tolist(), inst[~wr & (prod < 0)].tolist()):
        ins[i] |= 1 << e
    live = 0
    for f in final[final >= 0].tolist():
        live |= (1 << f) | anc[f]
    cols = np.broadcast_to(np.arange(tr.elems.shape[1]), tr.elems.shape)[tr.elems[loop_order(tr)] >= 0]
    pm = np.full(tr.elems.shape, -2, dtype=np.int64)
    pm[inst[~wr], cols[~wr]] = prod[~wr]
    return desc, anc, succ, ins, live, pm.tolist()


def _counts(tr, graph, pivot: str) -> dict[int, tuple[int, ...]] | None:
    """``{k: (c(k), L(k), e(k), e_M(k) for each M of PARTS)}`` for every step but the first, or ``None``
    when the pivots do not chain."""
    desc, anc, succ, ins, live, pm = graph
    prog = tr.program
    si = [st.name for st in prog.statements].index(pivot)
    loop = prog.statements[si].loops[0]
    kv = tr.vars[loop.var]
    piv = {int(kv[i]): int(i) for i in np.flatnonzero(tr.stmt == si)}
    steps = sorted(piv)
    if len(steps) < 4 or any(not live >> piv[k] & 1 for k in steps):
        return None
    out, reaches, net = {}, {}, None
    for a, b in zip(steps, steps[1:]):
        pa, pb = piv[a], piv[b]
        if not desc[pa] >> pb & 1:
            return None
        window = (anc[pb] | 1 << pb) & desc[pa]       # P(a) ⇝ x ⇝ P(b), P(b) included, P(a) not
        reads, held = 0, 0
        for x in bits(window):
            reads |= ins[x]
            held += x != pb and bool(succ[x] & desc[pb])
        c = reads.bit_count()
        chain = _chain(tr, graph, window)
        if chain and net is None:
            net = Network(tr.instances, pm, ins)
        split = tuple(split_count(net, anc, desc[pa], chain, m) if chain else 0 for m in PARTS)
        out[b] = (c, held, c + _paths(tr, graph, chain, reaches)) + split
    return out


def _chain(tr, graph, window: int) -> list[int]:
    """The window's longest chain: the instances of one statement, each a predecessor of the next (at
    least two; ``[]`` when none)."""
    succ, stmt = graph[2], tr.stmt.tolist()
    members = bits(window)
    chain: list[int] = []
    for s in sorted({stmt[x] for x in members}):
        xs = [x for x in members if stmt[x] == s]
        if len(xs) > max(1, len(chain)) and all(succ[u] >> v & 1 for u, v in zip(xs, xs[1:])):
            chain = xs
    return chain


def _paths(tr, graph, chain: list[int], reaches: dict) -> int:
    """``e(k) − c(k)`` of one window: ``min(P, min_m (P − #{μ ≤ m} + m))`` over the disjoint paths into its
    longest chain (module docstring); 0 without a chain of two instances."""
    _, _, succ, ins, _, pm = graph
    stmt = tr.stmt.tolist()
    if not chain:
        return 0
    cs = stmt[chain[0]]
    if cs not in reaches:
        reaches[cs] = _Reach(tr, pm, ins, cs)
    reach = reaches[cs]
    used = set(chain)
    after = [0] * (len(chain) + 1)                    # B_q: the inputs ρ_q, ρ_{q+1}, … read
    for q in range(len(chain) - 1, -1, -1):
        after[q] = after[q + 1] | ins[chain[q]]
    mus = []
    for q, r in enumerate(chain):
        for v in pm[r]:
            if v < 0 or v in used:
                continue
            used.add(v)
            seen, x = ins[v], v
            while True:                               # walk back: ``x`` is a predecessor of the path so far
                cand = [u for u in reach.order[x] if u not in used]
                if not cand:
                    break
                x = max(cand, key=lambda u: (reach.inputs[u] & after[q]).bit_count())   # first of the best
                used.add(x)
                seen |= ins[x]
            mus.append((seen & after[q]).bit_count())
    mus.sort()
    return min([len(mus)] + [len(mus) - bisect_right(mus, m) + m for m in mus])


class _Reach:
    """Per instance: its predecessors in the order a path prefers them (an instance of the chain's
    statement, then the producer of a read with the output's subscripts, then the rest; from an instance of
    the chain's statement only its own statement's), and ``inputs``, what the path of first choices from it
    reads."""

    def __init__(self, tr, pm, ins, cs: int):
        stmts, stmt = tr.program.statements, tr.stmt.tolist()
        same = [{c for c, a in enumerate(st.reads) if tuple(a.index) == tuple(st.output.index)} for st in stmts]
        self.order: list[list[int]] = []
        self.inputs: list[int] = []
        for x, row in enumerate(pm):
            first = [u for u in row if u >= 0 and stmt[u] == cs]
            if stmt[x] == cs:
                pre = first
            else:
                pre = first + [row[c] for c in sorted(same[stmt[x]]) if row[c] >= 0 and stmt[row[c]] != cs]
                pre += [u for u in row if u >= 0 and u not in pre]
            pre = list(dict.fromkeys(pre))
            self.order.append(pre)
            self.inputs.append(ins[x] | (self.inputs[pre[0]] if pre else 0))


def _fit(program: Program, pivot: str, per_size: list[dict]) -> WindowBound | None:
    """Affine ``c(k)``, ``L(k)`` (fitted on the middle two steps) that hold from one step ``k0`` to ``t``
    steps before the last at every size (the same ``k0`` and ``t`` at every size), summed symbolically:
    the steps outside that range are left out, which only lowers the bound.  ``e(k)`` and ``e_M(k)`` are
    fitted from below (:func:`_fit_below`); when that fails the piece is 0."""
    loop = program.statement(pivot).loops[0]
    fits = []
    for part in (0, 1):
        coef = None
        for counts in per_size:
            ks = sorted(counts)
            m = ks[len(ks) // 2]
            a = counts[m + 1][part] - counts[m][part]
            b = counts[m][part] - a * m
            lo, hi = m, m + 1
            while lo - 1 in counts and counts[lo - 1][part] == a * (lo - 1) + b:
                lo -= 1
            while hi + 1 in counts and counts[hi + 1][part] == a * (hi + 1) + b:
                hi += 1
            here = (a, b, lo, ks[-1] - hi)
            if coef is not None and coef != here:
                return None
            coef = here
        if coef[0] < 0:
            return None
        fits.append(coef)
    (a, b, k0r, tr), (al, bl, k0l, tl) = fits
    k = sym(loop.var)
    last = loop.upper - 1
    reads = _sum(a, b, k0r, last - tr)
    held = 2 * _sum(al, bl + 1, k0l, last - tl)
    below = _fit_below([{q: v[2] for q, v in counts.items()} for counts in per_size])
    paths, forced = sp.Integer(0), sp.Integer(0)
    if below is not None:
        ae, be, k0e, te = below
        paths = sp.Rational(ae.numerator, ae.denominator) * k + sp.Rational(be.numerator, be.denominator)
        forced = _sum(ae, be, k0e, last - te, memory=2 * S)
    at = {sym(p): 2 ** 20 for p in program.params}
    split, parts, cut = sp.Integer(0), 0, sp.Integer(0)
    for j, m in enumerate(PARTS):                     # the split count with the largest leading term
        fit = _fit_below([{q: v[3 + j] for q, v in counts.items()} for counts in per_size])
        if fit is not None:
            af, bf, k0f, tf = fit
            piece = _sum(af, bf, k0f, last - tf, memory=2 * m * S)
            if float(_lead(piece, program.params).subs(at)) > float(_lead(cut, program.params).subs(at)):
                split = sp.Rational(af.numerator, af.denominator) * k + sp.Rational(bf.numerator, bf.denominator)
                parts, cut = m, piece
    lead_r = _lead(reads, program.params)
    kept = [reads] + [x for x in (forced, cut)
                      if float(_lead(x, program.params).subs(at)) > float(lead_r.subs(at))]
    bound = sp.Max(*kept, evaluate=False) if len(kept) > 1 else reads
    lead = max((_lead(x, program.params) for x in kept), key=lambda x: float(x.subs(at)))
    lead_n = _lead(reads + held, program.params)
    no_rec = reads + held if bound == reads else sp.Max(*kept, reads + held, evaluate=False)
    if float(lead.subs(at)) > float(lead_n.subs(at)):
        lead_n = lead
    return WindowBound(pivot, loop.var, min(k0r, k0l), a * k + b, al * k + bl, paths, bound, no_rec,
                       lead, lead_n, split, parts)


def _fit_below(per_size: list[dict]) -> tuple[Fraction, Fraction, int, int] | None:
    """``(a, b, k0, t)`` with ``count(k) ≥ a·k + b`` for ``k0 ≤ k ≤ last − t`` at every size (the same four
    numbers at every size), ``a > 0`` the slope over ``d`` steps from the middle one (``d = 2``, else ``4``,
    from ``d`` steps before the last when the middle one is too late) and ``b`` the least offset on the
    ``d`` steps from there — so a count that alternates, ``k + 1 + ⌈k/2⌉``, is fitted by ``3k/2 + 1``, one
    of period 4 by its slope over 4 steps; ``None`` otherwise."""
    for d in (2, 4):
        coef = None
        for counts in per_size:
            ks = sorted(counts)
            m = min(ks[len(ks) // 2], ks[-1] - d)
            if any(q not in counts for q in range(m, m + d + 1)):
                coef = None
                break
            a = Fraction(counts[m + d] - counts[m], d)
            b = min(counts[q] - a * q for q in range(m, m + d))
            lo, hi = m, m + d - 1
            while lo - 1 in counts and counts[lo - 1] >= a * (lo - 1) + b:
                lo -= 1
            while hi + 1 in counts and counts[hi + 1] >= a * (hi + 1) + b:
                hi += 1
            here = (a, b, lo, ks[-1] - hi)
            if coef is not None and coef != here:
                coef = None
                break
            coef = here
        if coef is not None and coef[0] > 0:
            return coef
    return None


def _sum(a, b, k0: int, last: sp.Expr, memory: sp.Expr = S) -> sp.Expr:
    """A lower bound on ``Σ_{k=k0}^{last} (a·k + b − memory)⁺``: the integral from ``k0 − 1`` to ``last``."""
    a, b = sp.sympify(a), sp.sympify(b)
    if a == 0:
        return sp.Max(0, last - k0 + 1) * sp.Max(0, b - memory)
    hi, lo = sp.Max(0, a * last + b - memory), sp.Max(0, a * (k0 - 1) + b - memory)
    return (hi ** 2 - lo ** 2) / (2 * a)


def _lead(expr: sp.Expr, params) -> sp.Expr:
    """The N ≫ S piece: every ``Max(0, x)`` with a size in ``x`` taken as ``x``, then the terms of highest
    total degree in the sizes."""
    psyms = [sym(p) for p in params]
    e = expr.replace(lambda t: isinstance(t, sp.Max) and t.free_symbols & set(psyms),
                     lambda t: next(x for x in t.args if x.free_symbols & set(psyms)))
    e = e.replace(lambda t: isinstance(t, sp.Max), lambda t: sp.Integer(0))   # no size: S ≥ it
    poly = sp.Poly(sp.expand(e), *psyms)
    if poly.is_zero:
        return sp.Integer(0)
    deg = poly.total_degree()
    return sp.Add(*[c * sp.Mul(*[x ** m for x, m in zip(psyms, ms)]) for ms, c in poly.terms() if sum(ms) == deg])
