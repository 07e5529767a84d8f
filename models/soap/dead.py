"""Vertices that no red–blue pebbling needs to pay for: on no path to an output, or from an input.

A pebbling need not compute a vertex that lies on no path to an output of the CDAG (an element's
last value): ``B[i] += A[i, i]`` followed by ``B[i] = 1.0`` over the same elements moves only the
stores of ``B`` (:func:`dead_statements`).  A vertex on no path from an input (``B[i] = 1.0``, then
``B[i] += 1.0``) is computed from nothing and belongs to no minimum dominator set (Kwasniewski's
thesis, section 4.2.3.2; :func:`input_free_writers`).  Counting either kind in |V| makes the SOAP
bound exceed the optimal I/O.
"""

from __future__ import annotations

import sympy as sp

from meshplan.models.loops.program import Program, Statement
from meshplan.models.soap.symbolic import simplified


def dead_statements(program: Program) -> tuple[str, ...]:
    """The statements whose values are overwritten before any other statement reads them — all of them,
    or (for some sizes) only some: these are left out, which only lowers the bound.

    Only arrays that no statement but their own writers reads, each writer reading only the very
    element it writes (an in-place update), qualify.  A writer is dead when a later writer reads
    nothing of the array and writes its elements once each (its loops are its output subscripts,
    free of other loop variables) over ranges that can share an element with the earlier writer's
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
                   and len(later.loops) == len(later.output.index)
                   and not any(a.array == arr for a in later.inputs)
                   for k, later in enumerate(touching[j + 1:], start=j + 1)):
                dead.append(st.name)
    return tuple(dead)


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
