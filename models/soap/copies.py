"""Copies forwarded to their sources (a contraction of the CDAG; thesis sections 5.2, 5.5.2).

A statement that only copies a value — ``x = y[…]``: one read, no arithmetic — computes a vertex with one
predecessor and the same value.  deriche's filter states are such copies: ``xm1 = imgIn[i, j]``,
``ym2 = ym1``, ``ym1 = y1[i, j]`` and their twins in the backward filter and the column pass.  As vertices
of their own they count as work in a subgraph (sections 5.4, 5.5.4) that a fused tile does from values it
already holds, so larger fusions raise ρ and the derivation capped at a few arrays is not certified.

:func:`forward_copies` contracts every copy vertex into its predecessor: each read of a copied scalar
``x`` becomes a read of the copy's source at the copy's iteration (``y1[i, j] = … a2·xm1 + b1·ym1 +
b2·ym2`` → ``… a2·imgIn[i, j - 1] + b1·y1[i, j - 1] + b2·y1[i, j - 2]``), and the copy statements go.
Where a read sees a reset constant instead (``xm1 = 0.0`` before each row: the read at ``j = 0``), the
reset now writes the element that the forwarded read names there (``imgIn[i, -1] = 0.0``): the same
vertex (no predecessor) under another name.

Sound for the red–blue pebble game with recomputation (section 5.2): contracting a vertex ``c`` with one
predecessor ``u`` into ``u`` cannot raise the optimal I/O.  A play of the original maps to a play of the
contracted CDAG — the merged vertex holds a red (blue) pebble while ``u`` or ``c`` does; computing ``c``
(which needs ``u`` red) is then nothing, computing ``u`` is computing the merged vertex from the same
predecessors, a load or store of either is one of the merged vertex — with no more loads and stores and
no more red pebbles at any moment.  So the optimum of the contracted CDAG is at most the original's, and
a lower bound of the contracted program bounds the original — provided its outputs are the images of the
original's.  The renamed reset constants are last values of their elements, outputs the original does
not have: a bound on the new program must not count their stores (the X-partition of the SOAP bound uses
no outputs; the trivial floor is taken on the program as given).

Called first by :func:`meshplan.models.soap.expand.expand_temporaries`, and by the two-sweep floor
(:mod:`meshplan.solvers.soap.sweeps`), which reads its chains off the contracted program.  Renamed into the
source array (``imgIn[i, -1] = 0.0``), a reset makes that array a written one whose only writers read
nothing, and the derivation then treats its reads as free: sound, but deriche's six filter statements
become unbounded (χ = ∞, left out) and its SOAP part counts only the reset constants.  Even with the
boundary reads as initial values instead, every subgraph evaluated fuses all six on one load of ``imgIn``
(ρ = 6): once the copies are no work, the method proves no more than the trivial floor for deriche.

Exactness is checked, not assumed: at the sample sizes the new program's CDAG must be the original's with
every copy vertex merged into the vertex it copies (the same instances in program order, the same
edges after the merge, inputs matched one to one).  A scalar that fails (a copy of itself, a read of its
initial value, a reset read at two places) keeps its statements.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace

import numpy as np
import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Access, Program, Statement, sym

__all__ = ["forward_copies", "is_copy", "contracts", "read_producers"]


def is_copy(st: Statement) -> bool:
    """``x = y[…]``: one read and nothing else on the right-hand side, of another location."""
    if st.op != "=" or len(st.inputs) != 1 or st.inputs[0] == st.output:
        return False
    return re.fullmatch(r"\s*\w+\s*(\[[^\]]*\])?\s*", st.text) is not None


def read_producers(program: Program, values: dict[str, int]):
    """``(trace of ``program`` at ``values``, the instance whose value each read column of each instance
    sees: -1 an initial value, -2 no such column)`` (cached per program and sizes)."""
    return _reads_cached(program, tuple(sorted(values.items())))


@functools.lru_cache(maxsize=32)
def _reads_cached(program: Program, values: tuple[tuple[str, int], ...]):
    from meshplan.models.soap.replay import build_trace, producers

    tr = build_trace(program, dict(values), limit=200_000)
    order = np.arange(tr.instances)
    width = tr.elems.shape[1]
    el, wr = tr.elems.ravel(), tr.is_write.ravel()
    keep = el >= 0
    inst = np.repeat(order, width)[keep]
    prod = np.full(el.shape[0], -2, dtype=np.int64)
    if keep.any():
        prod[keep] = producers(el[keep], wr[keep], inst)[0]
    return tr, prod.reshape(-1, width)


def _plan(program: Program, x: str, samples: list[dict[str, int]]):
    """``(new reads {(statement, read column): access}, renamed resets {statement: output}, statements
    dropped)`` that forward the reads of scalar ``x`` to its copies' sources, drop its copies and rename
    its resets that a read sees to the forwarded element; ``None`` when that is not a renaming."""
    from meshplan.models.soap.replay import at_points

    stmts = program.statements
    writers = [n for n, st in enumerate(stmts) if st.output.array == x]
    copies = {n for n in writers if is_copy(stmts[n])}
    resets = {n for n in writers if stmts[n].op == "=" and not stmts[n].inputs}
    if not copies or copies | resets != set(writers):
        return None
    if any(stmts[n].inputs[0].array == x for n in copies):
        return None
    sources = {stmts[n].inputs[0].array for n in copies}
    new_reads: dict[tuple[int, int], Access] = {}
    # reset statement -> (sample, instance) -> (loop values + parameter values, element)
    reset_elem: dict[int, dict[tuple[int, int], tuple]] = {}
    for t, values in enumerate(samples):
        tr, prod = read_producers(program, values)
        pvals = [values[p] for p in program.params]
        for si, st in enumerate(stmts):
            for k, acc in enumerate(st.reads):
                if acc.array != x:
                    continue
                rows = np.flatnonzero(tr.stmt == si)
                if not rows.size:
                    continue
                seen = prod[rows, k]
                if np.any(seen < 0):
                    return None               # the scalar's initial value is read
                by = tr.stmt[seen]
                cs = {int(c) for c in np.unique(by) if int(c) in copies}
                if len(cs) != 1:
                    return None
                (c,) = cs
                cst = stmts[c]
                if not set(cst.vars) <= set(st.vars):
                    return None
                shift = {}
                for v in cst.vars:
                    d = np.unique(tr.vars[v][seen[by == c]] - tr.vars[v][rows[by == c]])
                    if d.size != 1:
                        return None
                    shift[sym(v)] = sym(v) + int(d[0])
                src = cst.inputs[0]
                fwd = replace(src, index=tuple(sp.expand(e.xreplace(shift)) for e in src.index))
                if new_reads.setdefault((si, k), fwd) != fwd:
                    return None
                for r in np.unique(by[by != c]).tolist():
                    if r not in resets:
                        return None
                    pick = by == r
                    env = {**values, **{v: tr.vars[v][rows[pick]] for v in st.vars}}
                    idx = [at_points(e, env, int(pick.sum())).tolist() for e in fwd.index]
                    got = reset_elem.setdefault(r, {})
                    for m, inst in enumerate(seen[pick].tolist()):
                        key = (*[int(tr.vars[v][inst]) for v in stmts[r].vars], *pvals)
                        elem = (fwd.array, *[int(i[m]) for i in idx])
                        if got.setdefault((t, inst), (key, elem)) != (key, elem):
                            return None       # one reset value seen as two elements
    if not new_reads:
        return None
    new_out: dict[int, Access] = {}
    for r, got in reset_elem.items():
        arrays = {e[0] for _, e in got.values()}
        if len(arrays) != 1 or (arrays - sources):
            return None
        names = [*stmts[r].vars, *program.params]
        out = _fitted(names, np.array([k for k, _ in got.values()], dtype=np.int64).reshape(len(got), -1),
                      np.array([e[1:] for _, e in got.values()], dtype=np.int64).reshape(len(got), -1))
        if out is None:
            return None
        new_out[r] = Access(arrays.pop(), out)
    return new_reads, new_out, copies | (resets - set(new_out))


def _apply(program: Program, plans: list) -> Program:
    """``program`` with every plan of :func:`_plan` made (they touch disjoint statements and columns)."""
    reads_at = {key: a for plan in plans for key, a in plan[0].items()}
    outs = {r: a for plan in plans for r, a in plan[1].items()}
    drop = set().union(*(plan[2] for plan in plans))
    kept = []
    for si, st in enumerate(program.statements):
        if si in drop:
            continue
        reads = {a: reads_at.get((si, k), a) for k, a in enumerate(st.reads)}
        kept.append(replace(st, output=outs.get(si, st.output),
                            inputs=tuple(reads[a] for a in st.inputs), text=_retext(st, reads)))
    return replace(program, statements=tuple(kept))


def _retext(st: Statement, reads: dict[Access, Access]) -> str:
    text = st.text
    for old, new in reads.items():
        if old != new and not old.index:
            for name in (old.array, old.array.split("__")[0]):     # the text keeps a web's first name
                if re.search(rf"\b{re.escape(name)}\b", text):
                    text = re.sub(rf"\b{re.escape(name)}\b", str(new), text)
                    break
    return text


def _fitted(names: list[str], at: np.ndarray, elems: np.ndarray) -> tuple[sp.Expr, ...] | None:
    """Each element coordinate as an integer affine function of ``names`` (loop variables, then size
    parameters), exact on every sampled point, or ``None``."""
    a = np.column_stack([np.ones(at.shape[0], dtype=np.int64), at])
    out = []
    for d in range(elems.shape[1]):
        coef, *_ = np.linalg.lstsq(a.astype(float), elems[:, d].astype(float), rcond=None)
        c = np.rint(coef).astype(np.int64)
        if not np.array_equal(a @ c, elems[:, d]):
            return None
        out.append(sp.Integer(int(c[0])) + sum(int(ci) * sym(v) for ci, v in zip(c[1:], names)))
    return tuple(out)


def _preds(program: Program, values: dict[str, int]):
    """``(statement name per instance, per instance the producer of each read column: an instance, or
    ``("in", element)`` for an initial value)``."""
    tr, prod = read_producers(program, values)
    names = [program.statements[s].name for s in tr.stmt.tolist()]
    cols = []
    for i, row in enumerate(prod.tolist()):
        w = program.statements[tr.stmt[i]]
        cols.append([p if p >= 0 else ("in", int(tr.elems[i, k]))
                     for k, p in enumerate(row[:len(w.reads)])])
    return names, cols


def contracts(program: Program, new: Program, values: dict[str, int]) -> bool:
    """The CDAG of ``new`` at ``values`` is that of ``program`` with every instance of a statement that
    ``new`` lacks merged into its one predecessor, or left out when nothing reads it (instances matched in
    program order, read columns one to one, inputs one to one)."""
    try:
        n0, c0 = _preds(program, values)
        n1, c1 = _preds(new, values)
    except ModelError:
        return False
    gone = {st.name for st in program.statements} - {st.name for st in new.statements}
    root: dict[int, object] = {}
    rank: dict[int, int] = {}
    read = set()
    for i, cols in enumerate(c0):
        read |= {p for p in cols if not isinstance(p, tuple)}
    for i, (nm, cols) in enumerate(zip(n0, c0)):
        if nm in gone:
            if len(cols) == 1:
                p = cols[0]
                root[i] = root.get(p, p) if not isinstance(p, tuple) else p
            elif i in read:
                return False
            continue
        rank[i] = len(rank)
    kept = [i for i in range(len(n0)) if i in rank]
    if len(kept) != len(n1):
        return False
    fwd: dict = {}
    back: dict = {}
    for i, j in zip(kept, range(len(n1))):
        if n0[i] != n1[j] or len(c0[i]) != len(c1[j]):
            return False
        for p, q in zip(c0[i], c1[j]):
            p = root.get(p, p) if not isinstance(p, tuple) else p
            if isinstance(p, tuple) != isinstance(q, tuple):
                return False
            if isinstance(p, tuple):
                if fwd.setdefault(p, q) != q or back.setdefault(q, p) != p:
                    return False
            elif p not in rank or rank[p] != q:
                return False
    return True


def forward_copies(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with the copied scalars forwarded to their sources, notes)`` (see the module text); a
    scalar is forwarded only when the result is the contraction of the original CDAG at the sample sizes."""
    from meshplan.models.soap.expand import SAMPLE_SIZES

    base = {p: SAMPLE_SIZES[0] for p in program.params}
    samples = [base, *({**base, p: SAMPLE_SIZES[1]} for p in program.params)]   # affinely independent sizes
    scalars = [a for a in dict.fromkeys(st.output.array for st in program.statements if not st.output.index)
               if any(is_copy(st) for st in program.writers(a))]
    done, start = [], program
    while True:      # a round forwards the scalars whose copies read no copied scalar, all from one trace
        copied = {a for a in scalars if a not in done and any(is_copy(st) for st in program.writers(a))}
        ready = [a for a in scalars if a in copied and not any(is_copy(st) and st.inputs[0].array in copied
                                              for st in program.writers(a))]
        plans = []
        for x in ready:
            try:
                plan = _plan(program, x, samples)
            except ModelError:
                plan = None
            if plan is not None:
                plans.append(plan)
                done.append(x)
        if not plans:
            break
        program = _apply(program, plans)
    if done and not all(contracts(start, program, v) for v in samples):
        return start, ()
    if not done:
        return program, ()
    return program, (f"copies of {', '.join(done)} forwarded to their sources (each copy vertex merged into "
                     "the vertex it copies, which cannot raise the optimal I/O; reset constants renamed to "
                     "the elements the forwarded reads name)",)
