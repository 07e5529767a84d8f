"""The trivial I/O lower bound: every input read once, every final output written once.

Any schedule loads each input element it uses at least once and stores each element of a
program output at least once, so ``Q ≥ Σ_inputs |elements read| + Σ_outputs |elements
written|`` holds beside the SOAP bound of section 5.2 and the reported bound is their
maximum (the SOAP bound alone can fall below it when a row fits in fast memory, e.g.
softmax).  Counts are exact symbolic sums over the loops a subscript uses; an access whose
element count cannot be taken that way (non-injective or strided subscripts, a loop bound
depending on an unused loop) counts nothing — the floor only ever gets smaller.

An array is an *input* when it is read and never written, an *output* when it is written
and read by no statement other than its writers (a temporary such as 2mm's ``tmp`` may
live in fast memory only, so it counts nothing).  Reads of a statement whose values are all
overwritten before any read (``models.soap.dead``) count nothing: no schedule needs them.
"""

from __future__ import annotations

import sympy as sp

from meshplan.models.loops.program import Access, Program, Statement
from meshplan.models.soap.dead import dead_statements
from meshplan.models.soap.symbolic import simplified

__all__ = ["trivial_bound"]


def _count(st: Statement, acc: Access) -> sp.Expr | None:
    """Distinct elements ``acc`` touches over ``st``'s domain, or ``None`` when not a plain count."""
    loopvars = {lp.symbol for lp in st.loops}
    used = []
    for e in acc.index:
        vs = e.free_symbols & loopvars
        if len(vs) > 1:
            return None
        if vs:
            v = next(iter(vs))
            if sp.expand(e - v).free_symbols & loopvars or sp.diff(e, v) not in (1, -1):
                return None
            if v in used:
                return None
            used.append(v)
    expr: sp.Expr = sp.Integer(1)
    for lp in reversed(st.loops):
        if lp.symbol not in used:
            if (lp.lower.free_symbols | lp.upper.free_symbols) & loopvars:
                return None      # a range depending on the subscript's loops may be empty there
            continue
        if (lp.lower.free_symbols | lp.upper.free_symbols) & (loopvars - set(used)):
            return None
        if lp.step != 1 and lp.step != -1:
            return None
        lo, hi = (lp.lower, lp.upper - 1) if lp.step == 1 else (lp.upper + 1, lp.lower)
        expr = sp.summation(expr, (lp.symbol, lo, hi))
    return sp.factor(simplified(expr))


def trivial_bound(program: Program, skip=frozenset(), skip_reads=frozenset()) -> tuple[sp.Expr, tuple[str, ...]]:
    """``(Σ inputs read + Σ outputs written, the arrays counted)``; the accesses of the statements named in
    ``skip`` count nothing (their counts do not hold at some sizes: the floor only gets smaller), nor the
    reads of ``(statement, array)`` in ``skip_reads`` (some elements only dead instances read)."""
    written = {st.output.array for st in program.statements}
    dead = set(dead_statements(program))   # overwritten before any read: no schedule needs their inputs
    readers: dict[str, set[str]] = {}
    for st in program.statements:
        for a in st.inputs:
            readers.setdefault(a.array, set()).add(st.name)
    total, counted = sp.Integer(0), []
    for arr in program.arrays:
        if arr not in written:
            accs = [(st, a) for st in program.statements if st.name not in dead and st.name not in skip
                    and (st.name, arr) not in skip_reads for a in st.inputs if a.array == arr]
        elif readers.get(arr, set()) <= {w.name for w in program.writers(arr)}:
            accs = [(st, st.output) for st in program.writers(arr) if st.name not in skip]
        else:
            continue
        counts = [c for st, a in accs if (c := _count(st, a)) is not None and c != 0]
        if not counts:
            continue
        total += _largest(counts, program.params)
        counted.append(arr)
    return total, tuple(counted)


def _largest(counts: list[sp.Expr], params) -> sp.Expr:
    """The count that is ≥ the others at sampled sizes (all ≥ 2), else their ``Max``."""
    import random

    from meshplan.models.loops.program import sym

    rng = random.Random(3)
    samples = [{sym(p): rng.randint(2, 10 ** 6) for p in params} for _ in range(8)]
    samples.append({sym(p): 2 for p in params})
    vals = [[float(c.subs(s)) for s in samples] for c in counts]
    for i, row in enumerate(vals):
        if all(all(x >= y for x, y in zip(row, other)) for other in vals):
            return counts[i]
    return sp.Max(*dict.fromkeys(counts))
