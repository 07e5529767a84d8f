"""Vertices that no red–blue pebbling needs to pay for: on no path to an output, or from an input.

A pebbling need not compute a vertex that lies on no path to an output of the CDAG (an element's
last value): ``B[i] += A[i, i]`` followed by ``B[i] = 1.0`` over the same elements moves only the
stores of ``B`` (:func:`dead_statements`).  A vertex on no path from an input (``B[i] = 1.0``, then
``B[i] += 1.0``) is computed from nothing and belongs to no minimum dominator set (Kwasniewski's
thesis, section 4.2.3.2; :func:`input_free_writers`).  Counting either kind in |V| makes the SOAP
bound exceed the optimal I/O.  A group of statements whose values are used only inside one iteration of an
enclosing loop and rewritten, element for element, by its next iteration (``for i: for j: y[j] = …``) has
its vertices on a path to an output in the loop's last iteration only (:func:`last_iterations`).
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from meshplan.models.loops.program import Program, Statement
from meshplan.models.soap.symbolic import simplified


def dead_statements(program: Program) -> tuple[str, ...]:
    """The statements whose values are overwritten before any other statement reads them — all of them,
    or (for some sizes) only some: these are left out, which only lowers the bound.

    Only arrays that no statement but their own writers reads, each writer reading only the very
    element it writes (an in-place update), qualify.  A writer is dead when a later writer reads
    nothing of the array and writes each of its elements at least once (its other loops run at least
    once, :func:`_runs`) over ranges that can share an element with the earlier writer's
    (:func:`_may_overlap`): every value of the earlier one reaches only in-place updates of that
    element, which the overwrite discards.  When the ranges are equal every value is discarded; when
    they differ (``C[i] += …`` over ``range(1, N)``, then ``C[i] = …`` over ``range(0, M)``) the overwrite
    covers all of them for some sizes (M ≥ N) and only some for others — a count of the survivors would
    be a piecewise expression, so the writer's vertices are left out for all sizes (a valid, weaker
    bound where some survive).  Anything not recognized stays."""
    params = set(program.params)
    dead: list[str] = []
    for arr in dict.fromkeys(st.output.array for st in program.statements):
        touching = [st for st in program.statements
                    if st.output.array == arr or any(a.array == arr for a in st.inputs)]
        if any(st.output.array != arr or any(a.array == arr and a.index != st.output.index for a in st.inputs)
               for st in touching):
            continue
        elems = [_elements(st, params) for st in touching]
        for j, st in enumerate(touching):
            if elems[j] is None:
                continue
            if any(elems[k] is not None and _may_overlap(elems[j], elems[k])
                   and _runs(later, params)
                   and not any(a.array == arr for a in later.inputs)
                   for k, later in enumerate(touching[j + 1:], start=j + 1)):
                dead.append(st.name)
    return tuple(dead)


def _runs(st: Statement, params: set[str]) -> bool:
    """Whether every loop of ``st`` that its output subscripts do not name runs at least once, whatever
    the (positive) sizes and the other loops: ``range(0, P)`` with ``P`` a size, or a constant length ≥ 1
    (``range(P − 1, P)``, a loop cut to its last iteration by :func:`last_iterations`)."""
    named = {str(x) for x in st.output.index}
    for lp in st.loops:
        if lp.var in named:
            continue
        if lp.step != 1 or not {str(v) for v in lp.lower.free_symbols | lp.upper.free_symbols} <= params:
            return False
        length = sp.expand(lp.upper - lp.lower)
        if not (length.is_number and length >= 1 or lp.lower == 0 and lp.upper.is_Symbol):
            return False
    return True


def _elements(st: Statement, params: set[str]) -> tuple | None:
    """The written elements as ``(lower, upper, step)`` per subscript, or None when a subscript is not
    a loop variable whose range depends on the parameters alone (or a variable repeats)."""
    loops = {lp.var: lp for lp in st.loops}
    out = []
    for x in st.output.index:
        lp = loops.get(str(x)) if isinstance(x, sp.Symbol) else None
        bounds = sp.sympify(lp.lower).free_symbols | sp.sympify(lp.upper).free_symbols if lp else set()
        if lp is None or not {str(v) for v in bounds} <= params:
            return None
        out.append((sp.sympify(lp.lower), sp.sympify(lp.upper), lp.step))
    if len({str(x) for x in st.output.index}) != len(st.output.index):
        return None
    return tuple(out)


def _may_overlap(a: tuple, b: tuple) -> bool:
    """Whether two writers' element ranges (:func:`_elements`, subscript by subscript) can share an element
    at some sizes: no subscript's range ends before the other's starts whatever the sizes (only a constant
    gap decides it; steps are ignored, which can only answer yes more often)."""
    for (la, ua, _), (lb, ub, _) in zip(a, b):
        for gap in (sp.expand(ua - lb), sp.expand(ub - la)):    # a ends before b starts, or b before a
            if gap.is_number and gap <= 0:
                return False
    return True


def constant_in_tile(c, group, order: dict, constant: set) -> bool:
    """Whether the older version that the in-place read ``c`` needs is produced in the tile by a statement
    of ``constant``: one without inputs (``C[i] = 1.0``) or input-free (:func:`input_free_writers`).

    Without a version loop the group's writers share the tile's spatial classes, so the last writer
    before ``c``'s statement computes the older version of every element the tile updates, inside the
    tile.  A vertex whose ancestors (if any) have no predecessors lies on no path from an input, so
    no minimum dominator set holds it (section 4.2.3.2 of the thesis): the Corollary 5.1 term counts
    no older version for it.  The read's own element may lie outside that writer's range (then its older
    version is an initial value); leaving it out only lowers the bound."""
    before = [g for g in group if g.role == "out" and order[g.stmt] < order[c.stmt]]
    return bool(before) and max(before, key=lambda g: order[g.stmt]).stmt in constant


def input_free_writers(group, vers, outs_off, order: dict, constant: set, sdg) -> set:
    """The writers of a Corollary 5.1 group (:func:`meshplan.models.soap.sdg.subgraph_problem`, no
    version loop) whose vertices lie on no path from an input of the CDAG (thesis section 4.2.3.2):
    a statement without inputs (``B[i] = 1.0``), and, in program order, a writer whose every read is
    an in-place read of the very element (an older version) that the last writer before it, itself
    input-free, computes in the tile (``B[i] += 1.0`` after ``B[i] = 1.0``).

    Where the read element lies outside that writer's range its older version is an initial value;
    treating it as input-free only drops an older-version term, which lowers the bound."""
    older = {id(c) for c, v in zip(group, vers)
             if v == -1 and tuple(simplified(x) for x in c.offsets) in outs_off}
    writers = sorted({g.stmt for g in group if g.role == "out"}, key=order.__getitem__)
    free = set(w for w in writers if w in constant)
    for w in writers:
        reads = [c for c in sdg.comps[w] if c.role != "out"]
        if w not in free and reads and all(id(c) in older and constant_in_tile(c, group, order, free)
                                           for c in reads):
            free.add(w)
    return free


def last_iterations(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with each loop whose earlier iterations are dead cut to its last iteration, notes)``.

    A loop ``L`` (``range(0, P)``, ``P`` a size parameter, so it runs at least once) and the maximal run
    ``T`` of consecutive statements enclosed by it qualify when (a) neither the subscripts of the arrays
    ``T`` writes nor the bounds of ``T``'s loops inside ``L`` use ``L``'s variable, so every iteration
    writes the same elements, and (b) no instance of ``T`` in an iteration before the last lies on a
    path to an output (an element's last value) of the CDAG — found by a backward pass from the
    outputs over the program's trace at the sample sizes of the temporaries' expansion.  No pebbling
    needs those vertices (as for :func:`dead_statements`), so the CDAG that remains, the program with
    ``L`` cut to ``range(P − 1, P)`` for ``T``, has the same optimal I/O.  Counting every iteration in |V|, or in
    the trivial floor the inputs they read and the outputs they overwrite, exceeds the optimal I/O
    (``for i in range(M): for j in range(N): w = Σ_k X[k]; y[j] = w / B[i]`` needs only the last
    iteration's loads and stores, ``X``, ``B[M − 1]``, ``y`` and ``w``, however large ``M`` is)."""
    from meshplan.models.loops.program import sym

    params = {sym(p) for p in program.params}
    notes: list[str] = []
    depth = 0
    while True:
        sts = list(program.statements)
        changed = False
        n = 0
        while n < len(sts):
            if len(sts[n].loops) <= depth:
                n += 1
                continue
            head = sts[n].loops[:depth + 1]
            end = n
            while end < len(sts) and sts[end].loops[:depth + 1] == head:
                end += 1
            new = _cut(program, n, end, depth, params)
            if new is not None:
                lp = head[depth]
                names = [st.name for st in sts[n:end]]
                notes.append(f"statement(s) {', '.join(names)}: every value computed in an iteration of loop "
                             f"{lp.var} but the last is used only in that iteration and rewritten by the next "
                             f"one (no path to an output): only the last iteration, {lp.var} = {lp.upper - 1}, "
                             "is counted")
                program, changed = new, True
                break
            n = end
        if not changed:
            depth += 1
            if all(len(st.loops) <= depth for st in program.statements):
                return program, tuple(notes)


def _cut(program: Program, n: int, end: int, depth: int, params: set) -> Program | None:
    """The program with loop ``depth`` of statements ``n … end − 1`` cut to its last iteration when the
    conditions of :func:`last_iterations` hold, else None."""
    sts = program.statements
    group = sts[n:end]
    lp = group[0].loops[depth]
    v = lp.symbol
    if lp.step != 1 or lp.lower != 0 or not (lp.upper.is_Symbol and lp.upper in params):
        return None
    arrays = {st.output.array for st in group}
    for st in group:
        if any(v in (m.lower.free_symbols | m.upper.free_symbols) for m in st.loops[depth + 1:]):
            return None                                         # (a) the element set depends on L
        if any(a.array in arrays and any(v in e.free_symbols for e in a.index) for a in (st.output, *st.inputs)):
            return None
    for st in group:     # an accumulation that the run's other statements do not rewrite carries its
        if (any(a == st.output for a in st.inputs)       # value to the next iteration: not traced
                and all(o is st or o.output.array != st.output.array for o in group)):
            return None
    if not _earlier_iterations_dead(program, n, end, depth):    # (b)
        return None
    last = replace(lp, lower=lp.upper - 1)
    return replace(program, statements=tuple(
        replace(st, loops=st.loops[:depth] + (last,) + st.loops[depth + 1:]) if n <= k < end else st
        for k, st in enumerate(sts)))


def _earlier_iterations_dead(program: Program, n: int, end: int, depth: int) -> bool:
    """At each sample size: no instance of statements ``n … end − 1`` in an iteration of their loop
    ``depth`` before its last lies on a path to an output (an element's last value) of the CDAG."""
    import numpy as np

    from meshplan.models.core.errors import ModelError
    from meshplan.models.soap.expand import SAMPLE_SIZES
    from meshplan.models.soap.replay import build_trace, loop_order, producers, stream

    var = program.statements[n].loops[depth].var
    for size in SAMPLE_SIZES:
        try:
            tr = build_trace(program, {p: size for p in program.params}, limit=200_000)
        except ModelError:
            return False
        el, wr, inst = stream(tr, loop_order(tr))
        if el.size == 0:
            continue
        prod, final = producers(el, wr, inst)
        live = np.zeros(tr.instances, dtype=bool)
        live[final[final >= 0]] = True
        read = ~wr & (prod >= 0)
        src, dst = prod[read], inst[read]
        for k in np.argsort(-dst, kind="stable").tolist():    # readers before their producers
            if live[dst[k]]:
                live[src[k]] = True
        earlier = (tr.stmt >= n) & (tr.stmt < end) & (tr.vars[var] != size - 1)   # L is range(0, P)
        if (earlier & live).any():
            return False
    return True
