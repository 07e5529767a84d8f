"""Two opposite sweeps over one line: a floor beside the trivial and window bounds (the red–blue game).

A *line* ``l`` of an input array ``X`` (deriche's row ``imgIn[i, ·]``) is read by two first-order
recurrences running in opposite directions: a forward chain ``F_s`` (each reads ``F_{s−1}`` and the site
``x_{s+a}``) and a backward chain ``B_s`` (each reads ``B_{s+1}`` and ``x_{s+b}``), every vertex of both on
a path to an output.  Copies are contracted first (:func:`meshplan.models.soap.copies.forward_copies`;
a contraction cannot raise the optimal I/O, so a bound of the contracted CDAG bounds the program), which
makes deriche's ``xm1 = imgIn[i, j]`` a direct read ``imgIn[i, j − 1]`` of ``y1[i, j]``.

The argument (valid with recomputation; the game of Kwasniewski, "Performance Modeling and Optimal
Schedules for Data Oblivious Programs", section 5.2, outputs stored): let ``φ(k)`` be the moment of the
first computation of ``F_{k−a}`` and ``ψ(k)`` that of ``B_{k−b}``, for the sites ``k`` both chains read.
The chains make ``φ`` increasing and ``ψ`` decreasing in ``k`` (a chain vertex needs its predecessor red).
Site ``x_k`` is an input, red at both moments.  Let ``c`` be the last site with ``φ(c) < ψ(c)``; for
``k ≤ c``, ``φ(k) ≤ φ(c) < ψ(c) ≤ ψ(k)``, and for ``k > c``, ``ψ(k) ≤ ψ(c + 1) < φ(c + 1) ≤ φ(k)``.  So
every site ``k ≤ c`` not red just after ``φ(c)`` is loaded again after it (its first load came before
``φ(k)``), and likewise every site ``k > c`` around ``ψ(c + 1)``; at most ``S`` values are red at each of
the two moments.  A line thus loads at least ``(sites read) + (sites read by both chains) − 2S`` words.
Lines have disjoint sites, and stores are not loads:

    Q ≥ T + L·max(0, K − 2S),

with ``T`` the trivial bound (every input element loaded once, every output element stored once), ``L``
the number of lines and ``K`` the sites per line that both chains read.  deriche's row pass: ``K = H − 1``,
``L = W`` and ``T = 2HW`` (``imgIn`` read, the final ``imgOut`` stored), so ``Q ≥ max(2HW, 3HW − (2S + 1)W)``: the
published entry ``3HW`` (Table 5.2) for ``H ≫ S``.

The structure is read off the contracted program and checked on its traces at sample sizes, as the other
transformations are: each chain vertex reads its predecessor (but the first), each counted site is read
as an initial value, and every chain vertex is an ancestor of an output of the program.  The output
stores counted in ``T`` are those of the arrays the trivial bound calls outputs after the webs are split
(:func:`meshplan.models.soap.scalars.split_webs`: deriche's final ``imgOut``), used only when every write
of such an array is a last value of its element in the program as given (at the sample sizes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Program, Statement, sym
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.symbols import leading_in_sizes
from meshplan.solvers.soap.trivial import trivial_bound

__all__ = ["SweepBound", "sweep_bound"]

#: the sizes (every parameter) at which the structure is checked on traces
SAMPLES = (4, 5)


@dataclass(frozen=True)
class SweepBound:
    """The floor ``trivial + lines·max(0, sites − 2S)`` of two opposite chains over the lines of ``source``."""

    forward: str
    backward: str
    source: str
    lines: sp.Expr
    sites: sp.Expr
    trivial: sp.Expr
    bound: sp.Expr
    #: the terms of highest degree in the size parameters (the larger branch where they grow)
    leading: sp.Expr

    @property
    def note(self) -> str:
        return (f"two opposite sweeps ({self.forward}, {self.backward}) read each of the {self.lines} lines of "
                f"{self.source}; {self.sites} sites per line are read by both, so each line loads them twice but "
                f"for 2S (recomputation allowed): Q ≥ {self.bound}")


def _chain(st: Statement):
    """``(line loop, step loop, direction)`` when ``st`` writes ``A[l, s]`` (either order) from its own value
    one step back (``A`` at ``s − 1`` ascending, ``s + 1`` descending), else ``None``."""
    if len(st.loops) != 2 or st.op != "=" or len(st.output.index) != 2:
        return None
    line, step = st.loops
    s, l = step.symbol, line.symbol
    if set(st.output.index) != {s, l}:
        return None
    d = -1 if step.descending else 1
    back = tuple(e.xreplace({s: s - d}) for e in st.output.index)
    if not any(a.array == st.output.array and a.index == back for a in st.inputs):
        return None
    return line, step, d


def _sites(st: Statement, inputs: set[str]):
    """``{(array, position of the line coordinate): [offsets a]}`` of ``st``'s reads ``X[l, s + a]``."""
    line, step = st.loops
    out: dict = {}
    for a in st.inputs:
        if a.array not in inputs or len(a.index) != 2:
            continue
        for p in (0, 1):
            off = sp.expand(a.index[1 - p] - step.symbol)
            if a.index[p] == line.symbol and off.is_Integer:
                out.setdefault((a.array, p), []).append(int(off))
    return out


def _candidates(fwd: Program, inputs: set[str]):
    chains = [(st, c) for st in fwd.statements if (c := _chain(st)) is not None]
    for f, (fl, fs, fd) in chains:
        for b, (bl, bs, bd) in chains:
            if fd != 1 or bd != -1 or (fl.lower, fl.upper) != (bl.lower, bl.upper):
                continue
            if fl.step != 1 or fs.step != 1 or bs.step != 1:
                continue
            if {e for lp in (fl, fs, bs) for x in (lp.lower, lp.upper) for e in x.free_symbols} & {
                    fl.symbol, bl.symbol, fs.symbol, bs.symbol}:
                continue                      # a step range that depends on the line: no count per line
            fsites, bsites = _sites(f, inputs), _sites(b, inputs)
            for key in set(fsites) & set(bsites):
                best = None
                for a in fsites[key]:
                    for c in bsites[key]:
                        lo = sp.Max(fs.lower + a, bs.lower + c)
                        hi = sp.Min(fs.upper + a, bs.upper + c)
                        k = sp.simplify(hi - lo)
                        if k.has(sp.Min, sp.Max):
                            continue
                        if best is None or sp.simplify(k - best[0]).is_positive:
                            best = (k, a, c, lo, hi)
                if best is not None:
                    yield f, b, key, best


def _checked(program: Program, fwd: Program, f: Statement, b: Statement, key, best) -> bool:
    """The chains, sites and ancestry hold on the traces of ``fwd`` at the sample sizes."""
    from meshplan.models.soap.copies import read_producers
    from meshplan.models.soap.replay import at_points

    _, a, c, lo, hi = best
    names = [st.name for st in fwd.statements]
    fi, bi = names.index(f.name), names.index(b.name)
    for n in SAMPLES:
        values = {p: n for p in fwd.params}
        try:
            tr, prod = read_producers(fwd, values)
        except ModelError:
            return False
        k0, k1 = int(lo.subs({sym(p): n for p in fwd.params})), int(hi.subs({sym(p): n for p in fwd.params}))
        for si, st, off, d in ((fi, f, a, 1), (bi, b, c, -1)):
            rows = np.flatnonzero(tr.stmt == si)
            step = tr.vars[st.loops[1].var][rows]
            reads = list(st.reads)
            back = tuple(e.xreplace({st.loops[1].symbol: st.loops[1].symbol - d}) for e in st.output.index)
            col = next(i for i, r in enumerate(reads) if r.array == st.output.array and r.index == back)
            first = st.loops[1].lower if d == 1 else st.loops[1].upper - 1
            first = int(at_points(first, values, 1)[0])
            inner = step != first
            p = prod[rows[inner], col]
            if np.any(p < 0) or np.any(tr.stmt[p] != si):
                return False                  # a chain vertex not reading its predecessor
            site = [i for i, r in enumerate(reads) if r.array == key[0] and len(r.index) == 2
                    and r.index[key[1]] == st.loops[0].symbol
                    and sp.expand(r.index[1 - key[1]] - st.loops[1].symbol) == off]
            if not site:
                return False
            counted = (step + off >= k0) & (step + off < k1)
            if np.any(prod[rows[counted], site[0]] != -1):
                return False                  # a counted site that is not an input
        if not _ancestors_of_outputs(program, fwd, tr, prod, {fi, bi}):
            return False
    return True


def _ancestors_of_outputs(program: Program, fwd: Program, tr, prod, chains: set[int]) -> bool:
    """Every instance of the ``chains`` statements lies on a path to the last value of an element that the
    program as given writes (the renamed reset constants of the contraction are not outputs of it)."""
    from meshplan.models.soap.replay import producers, stream

    el, wr, inst = stream(tr, np.arange(tr.instances))
    final = producers(el, wr, inst)[1]
    resets = {i for i, st in enumerate(fwd.statements) if not st.inputs}
    live = np.zeros(tr.instances, dtype=bool)
    for v in final[final >= 0].tolist():
        if int(tr.stmt[v]) not in resets:
            live[v] = True
    for v in range(tr.instances - 1, -1, -1):       # producers come earlier in program order
        if live[v]:
            for p in prod[v].tolist():
                if p >= 0:
                    live[p] = True
    return bool(all(live[tr.stmt == si].all() for si in chains))


def _trivial(stored: Program, split: Program, skip_reads: frozenset) -> sp.Expr:
    """The trivial bound of the split program when each of its output arrays' writes is a last value in
    ``stored`` at the sample sizes (the same instances: the split renames vertices), else of ``stored``."""
    from meshplan.models.soap.replay import build_trace, producers, stream

    base, _ = trivial_bound(stored, skip_reads=skip_reads)
    better, counted = trivial_bound(split, skip_reads=skip_reads)
    written = {st.output.array for st in split.statements}
    outs = [a for a in counted if a in written]
    idx = [i for i, st in enumerate(split.statements) if st.output.array in outs]
    for n in SAMPLES:
        try:
            tr = build_trace(stored, {p: n for p in stored.params}, limit=200_000)
        except ModelError:
            return base
        el, wr, inst = stream(tr, np.arange(tr.instances))
        final = set(producers(el, wr, inst)[1].tolist())
        if any(v not in final for v in np.flatnonzero(np.isin(tr.stmt, idx)).tolist()):
            return base
    return better


def sweep_bound(stored: Program, skip_reads: frozenset = frozenset()) -> SweepBound | None:
    """The two-sweep floor of ``stored`` (the program as given), or ``None`` when no pair of opposite chains
    over the lines of an input is found and checked; ``skip_reads`` as for
    :func:`~meshplan.solvers.soap.trivial.trivial_bound` (reads only dead instances make)."""
    from meshplan.models.soap.copies import forward_copies
    from meshplan.models.soap.scalars import split_scalars

    if not any(lp.descending for st in stored.statements for lp in st.loops):
        return None
    if not any(_chain(st) for st in stored.statements) and not any(
            not st.output.index for st in stored.statements):
        return None
    inputs = {a.array for st in stored.statements for a in st.inputs} - {st.output.array for st in stored.statements}
    split, _ = split_scalars(stored)
    fwd, _ = forward_copies(split)
    for f, b, key, best in _candidates(fwd, inputs):
        try:
            ok = _checked(stored, fwd, f, b, key, best)
        except (ModelError, TypeError, ValueError):     # a bound or subscript the traces cannot evaluate
            ok = False
        if not ok:
            continue
        lines = sp.expand(f.loops[0].upper - f.loops[0].lower)
        triv = _trivial(stored, split, skip_reads)
        bound = sp.Max(triv, sp.expand(triv + lines * (best[0] - 2 * S)))   # a line loads no fewer than T counts
        return SweepBound(f.name, b.name, key[0], lines, best[0], triv, bound,
                          _leading(sp.Max(triv, sp.expand(triv + lines * best[0])), stored.params))
    return None


def _leading(expr: sp.Expr, params) -> sp.Expr:
    """:func:`~meshplan.solvers.soap.symbols.leading_in_sizes` with the sizes positive, so that the branches
    of a ``Max`` compare (``Max(2HW, 3HW)`` is ``3HW``)."""
    pos = {sym(p): sp.Symbol(f"_{p}", positive=True) for p in params}
    lead = leading_in_sizes(expr.xreplace(pos), list(pos.values()))
    return lead.xreplace({v: k for k, v in pos.items()})
