"""Vertices that no red–blue pebbling needs to pay for: on no path to an output, or from an input.

A pebbling need not compute a vertex that lies on no path to an output of the CDAG (an element's
last value): ``B[i] += A[i, i]`` followed by ``B[i] = 1.0`` over the same elements moves only the
stores of ``B`` (:func:`dead_statements`).  A vertex on no path from an input (``B[i] = 1.0``, then
``B[i] += 1.0``) is computed from nothing and belongs to no minimum dominator set (Kwasniewski's
thesis, section 4.2.3.2; :func:`input_free_writers`).  Counting either kind in |V| makes the SOAP
bound exceed the optimal I/O.  The instances on no path to an output are also found statement by statement
on the program's trace at sample sizes (:func:`last_iterations`): a statement none of whose instances is live
is left out, and one whose values are used only inside one iteration of an enclosing loop and rewritten,
element for element, by its next iteration (``for i: for j: y[j] = …``) keeps the loop's last iteration only.
"""

from __future__ import annotations

from dataclasses import replace

import sympy as sp

from meshplan.models.loops.program import Program, Statement
from meshplan.models.soap.live import at_instances, live_instances, margin, partial_reads
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
    bound where some survive) — unless a statement that is not left out reads the array after it: a
    survivor it reads would become an initial value, an input to load.  Anything not recognized stays."""
    params = set(program.params)
    dead: list[str] = []
    for arr in dict.fromkeys(st.output.array for st in program.statements):
        touching = [st for st in program.statements
                    if st.output.array == arr or any(a.array == arr for a in st.inputs)]
        if any(st.output.array != arr or any(a.array == arr and a.index != st.output.index for a in st.inputs)
               for st in touching):
            continue
        elems = [_elements(st, params) for st in touching]
        over: dict[int, list[int]] = {}      # writer -> the later writers that overwrite it
        for j, st in enumerate(touching):
            if elems[j] is None:
                continue
            over[j] = [k for k, later in enumerate(touching[j + 1:], start=j + 1)
                       if elems[k] is not None and _may_overlap(elems[j], elems[k]) and _runs(later, params)
                       and not any(a.array == arr for a in later.inputs)]
        covered = {j: any(elems[k] == elems[j] for k in ks) for j, ks in over.items() if ks}
        # a value of a writer that a kept statement reads (a survivor of a partial overwrite, or any value
        # before the overwrite) would become an initial value, an input: the writer stays unless every later
        # reader goes too or reads only elements that an overwrite after the writer, before it, rewrote
        changed = True
        while changed:
            changed = False
            for j in list(covered):
                if any(r not in covered and any(a.array == arr for a in touching[r].inputs)
                       and not any(j < k < r and (elems[k] == elems[j] or _covers(elems[k], elems[r]))
                                   for k in over[j])
                       for r in range(j + 1, len(touching))):
                    del covered[j]
                    changed = True
        dead.extend(touching[j].name for j in sorted(covered))
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
        if w not in free and reads and all(id(c) in older and (constant_in_tile(c, group, order, free)
                                                               or _past_an_overwrite(w, writers, free, sdg.program))
                                           for c in reads):
            free.add(w)
    return free


def _past_an_overwrite(w: str, writers: list, free: set, program: Program) -> bool:
    """Whether some elements of in-place update ``w`` may read the older version of an input-free writer
    past the writers between them: no writer between an input-free one that may share an element with
    ``w`` and ``w`` writes, whatever the sizes, every element of ``w`` (``C[i] = 1.0`` over ``range(0, N)``,
    ``C[i] = A[i]·B[i, i]`` over ``range(1, N)``, ``C[i] += 1.0`` over ``range(0, N)``: the update of
    ``C[0]`` reads the constant).  Those vertices lie on no path from an input; which ones they are is a
    difference of ranges, so all of ``w`` is then taken as input-free — leaving its vertices out only
    lowers the bound."""
    params = set(program.params)
    mine = _elements(program.statement(w), params)
    if mine is None:
        return False
    before = writers[:writers.index(w)]
    for n, f in enumerate(before):
        theirs = _elements(program.statement(f), params)
        if f not in free or theirs is None or not _may_overlap(mine, theirs):
            continue
        if not any(_covers(_elements(program.statement(b), params), mine) for b in before[n + 1:]):
            return True
    return False


def _covers(a: tuple | None, b: tuple | None) -> bool:
    """Whether element ranges ``a`` contain ``b`` whatever the sizes (unit steps, constant gaps)."""
    if a is None or b is None:
        return False
    for (la, ua, sa), (lb, ub, sb) in zip(a, b):
        lo, hi = sp.expand(lb - la), sp.expand(ua - ub)
        if sa != 1 or sb != 1 or not (lo.is_number and lo >= 0 and hi.is_number and hi >= 0):
            return False
    return True


def last_iterations(program: Program) -> tuple[Program, tuple[str, ...], tuple]:
    """``(program without the statement instances on no path to an output, notes, guards)``, as far as a
    statement's loop ranges can say which; the rule is per statement, whatever the statements beside it.

    An optimal pebbling never computes a vertex on no path to an output (an element's last value): the
    game ends when the outputs are blue (Kwasniewski's thesis, sections 3.2 and 5.2).  Leaving such
    vertices out keeps every live vertex, its predecessors and the outputs (a live read's producer is
    live, and an element's last writer is an output), so the optimal I/O is the same, while counting them
    in |V|, or in the trivial floor the inputs they read, exceeds it (``for i in range(M): for j in
    range(N): w = Σ_k X[k]; y[j] = w / B[i]`` needs only the last iteration's loads and stores, ``X``,
    ``B[M − 1]``, ``y`` and ``w``, however large ``M`` is).  A statement with a loop that runs no iteration
    at any size (``range(i + 1, i + 1)``) has no vertices and is left out first (as a writer it would still
    shape its array's chain of versions).  Then for each statement, from a backward pass from the outputs
    over the program's trace at sample sizes (:func:`live_instances`):

    * a statement with instances but none of them live is left out (it has another writer of its array:
      the last values of a sole writer are outputs);
    * a loop of the statement whose variable its output subscripts do not use (every iteration writes the
      same elements) and that runs wherever its enclosing loops do (:func:`_always_runs`), or whose length
      depends on the sizes alone, is cut to its last iteration, ``range(U − 1, U)`` (``range(L, L + 1)``
      when it runs downwards), when no instance in an iteration before the last is live; the third value
      lists ``(statement, length)`` for a cut loop that can be empty (``range(1, N)``): the statement has
      no vertices where the length is ≤ 0 (a length that grows with the sizes and is ≥ 1 once every size
      is ≥ 2).  A cut loop nothing of the statement names is dropped;
    * a loop whose variable the output subscripts use loses its first or last iterations when they hold
      no live instance, by the same constant at every sample (:func:`margin`).

    The fourth value lists the ``(statement, input array)`` reads that the trivial floor does not count
    (:func:`partial_reads`).

    A statement that updates its element in place (``y[j] += …``) in a loop where no other statement
    rewrites the array carries its value to the next iteration, so none of its loops is cut there, and a
    program without any candidate is not traced.  Where the sample sizes say dead but other sizes would
    not (sizes that differ from each other), only live vertices are left out: a lower, still valid bound."""
    from meshplan.models.loops.program import sym

    params = {sym(p) for p in program.params}
    empty = [st.name for st in program.statements if any(_never_runs(lp) for lp in st.loops)]
    if empty and len(empty) < len(program.statements):
        program = replace(program, statements=tuple(st for st in program.statements if st.name not in empty))
        notes = [f"statement {name}: a loop of it runs no iteration whatever the sizes; it has no vertices and "
                 "is left out" for name in empty]
    else:
        notes = []
    sts = program.statements
    cuts = [[d for d in range(len(st.loops)) if _cut_candidate(sts, k, d, params)] for k, st in enumerate(sts)]
    drops = [any(j != k and o.output.array == st.output.array for j, o in enumerate(sts))
             for k, st in enumerate(sts)]
    if not any(drops) and not any(cuts):
        return program, tuple(notes), (), ()
    lives = live_instances(program)
    if lives is None:
        return program, tuple(notes), (), ()
    kept: list[Statement] = []
    guards: list[tuple[str, sp.Expr]] = []
    partial: list[tuple[str, str]] = []
    for k, st in enumerate(sts):
        mine = [(values, tr, live, tr.stmt == k) for values, tr, live in lives]
        if drops[k] and all(at.any() and not (live & at).any() for _, _, live, at in mine):
            notes.append(f"statement {st.name}: none of its values lies on a path to an output (each is "
                         "overwritten before a live statement reads it); its vertices are left out")
            continue
        loops = list(st.loops)
        for d in cuts[k]:
            lp = st.loops[d]     # its last iteration is upper − 1, or lower when it runs downwards
            last = lp.lower if lp.descending else lp.upper - 1
            if any(at.any() for _, _, _, at in mine) and all(
                    not (live & at & (tr.vars[lp.var] != at_instances(last, tr, values))).any()
                    for values, tr, live, at in mine):
                # the one iteration of a loop that nothing of the statement names is the statement itself
                # (as a loop of length one it would still make a chain of versions)
                alone = sum(x is not None for x in loops) == 1
                loops[d] = None if _unnamed(st, d) and not alone else replace(lp, lower=last, upper=last + 1)
                if not _always_runs(st, d, params):      # range(1, N): empty at N = 1, where range(N − 1, N) is not
                    guards.append((st.name, _length(lp, params)))
                notes.append(f"statement {st.name}: every value computed in an iteration of loop {lp.var} but "
                             f"the last lies on no path to an output: only the last iteration, {lp.var} = {last}, "
                             "is counted")
        for d, lp in enumerate(loops):
            if lp is None or not drops[k] or loops[d] is not st.loops[d] \
                    or not any(lp.symbol in e.free_symbols for e in st.output.index):
                continue
            first = margin(lp, lp.lower, mine, 1)          # iterations dead at the start, then at the end
            end = margin(lp, lp.upper - 1, mine, -1)
            if first or end:
                loops[d] = replace(lp, lower=lp.lower + first, upper=lp.upper - end)
                notes.append(f"statement {st.name}: the first {first} and the last {end} iteration(s) of loop "
                             f"{lp.var} lie on no path to an output: they are not counted")
        kept.append(replace(st, loops=tuple(lp for lp in loops if lp is not None)))
        partial += partial_reads(kept[-1], mine, {o.output.array for o in sts})
    if not kept:
        return program, tuple(notes), (), ()
    return replace(program, statements=tuple(kept)), tuple(notes), tuple(guards), tuple(partial)


def _length(lp, params: set) -> sp.Expr | None:
    """The number of iterations of loop ``lp`` when it depends on the sizes alone, grows with them and is
    at least 1 once every size is at least 2 (``N − 1`` for ``range(1, N)``; not ``M − N``), else None."""
    length = sp.expand(lp.upper - lp.lower)
    if not (length.free_symbols and length.free_symbols <= params and lp.step == 1):
        return None
    grows = all(length.coeff(p).is_number and length.coeff(p) > 0 for p in length.free_symbols)
    return length if grows and length.subs({p: 2 for p in length.free_symbols}) >= 1 else None


def _unnamed(st: Statement, d: int) -> bool:
    """Whether no access of ``st`` and no bound of its loops inside loop ``d`` uses that loop's variable."""
    v = st.loops[d].symbol
    return not any(v in e.free_symbols for a in (st.output, *st.inputs) for e in a.index) and \
        not any(v in (m.lower.free_symbols | m.upper.free_symbols) for m in st.loops[d + 1:])


def _never_runs(lp) -> bool:
    """Whether loop ``lp`` runs no iteration whatever the sizes and the enclosing loops: its length is a
    constant ≤ 0 (``range(i + 1, i + 1)``)."""
    length = sp.expand(lp.upper - lp.lower)
    return bool(length.is_number and (length <= 0 if lp.step > 0 else length >= 0))


def _cut_candidate(sts, k: int, d: int, params: set) -> bool:
    """Whether loop ``d`` of statement ``k`` may be cut to its last iteration (:func:`last_iterations`): it
    runs (or its length depends on the sizes alone), every iteration writes the same elements, and the
    statement is no in-place update
    that no other statement inside the loop rewrites (its value is carried to the next iteration)."""
    st = sts[k]
    lp = st.loops[d]
    v = lp.symbol
    if lp.step != 1 or not (_always_runs(st, d, params) or _length(lp, params) is not None):
        return False
    if any(v in e.free_symbols for e in st.output.index):
        return False
    head = st.loops[:d + 1]
    return not (any(a == st.output for a in st.inputs)
                and all(j == k or o.output.array != st.output.array or o.loops[:d + 1] != head
                        for j, o in enumerate(sts)))


def _always_runs(st: Statement, d: int, params: set) -> bool:
    """Whether loop ``d`` of ``st`` runs at least once wherever the loops around it do, whatever the
    (positive) sizes: its length ``upper − lower`` is at least 1 with each size at 1 and each enclosing
    variable at its least value (``range(0, P)``, ``range(0, i + 1)`` inside ``range(0, N)``; not
    ``range(1, N)``, empty at N = 1: cutting it to ``range(N − 1, N)`` would add a vertex there)."""
    expr = sp.expand(st.loops[d].upper - st.loops[d].lower)
    outer = {lp.symbol: lp for lp in st.loops[:d]}
    for _ in range(d + 1):
        for s in expr.free_symbols:
            c = expr.coeff(s)
            if not (c.is_number and c > 0 and (s in params or s in outer)):
                return False
        expr = sp.expand(expr.subs({s: 1 if s in params else outer[s].lower for s in expr.free_symbols}))
    return bool(expr.is_number and expr >= 1)
