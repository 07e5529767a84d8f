"""Scalar accumulators split per reset (0-dimensional arrays, thesis section 5.5.2).

A scalar that a loop body resets (``w = A[i, j]``, ``nrm = 0.0``: written without reading
itself) and then updates (``w -= …``) holds a new value chain from every reset: the value
before the reset is never read after it.  Treated as one array, every such chain would be
one version chain of a single vertex set, fusing unrelated loop nests (ludcmp's four uses
of ``w``) into one subgraph whose χ is unbounded or ρ ∝ S.  :func:`split_scalars` renames
the scalar from each reset to the next (in program order) to its own array ``w__1``,
``w__2``, …; a read before the first reset (a value carried around the enclosing loop, e.g.
durbin's ``alpha``) belongs to the last chain.  A scalar whose reads are reached by values of
different chains (deriche's ``xm1``: reset to 0 before the row loop and to ``imgIn[i, j]`` at the end
of its body, so a read sees the first chain at ``j = 0`` and the second one after) cannot be renamed
per chain; every renaming is checked to keep each read's writing instance at sample sizes
(:func:`meshplan.models.soap.expand.same_dataflow`) and a scalar that fails keeps its one name.

:func:`split_webs` (run last by :func:`split_scalars`) renames, for any array whose writers all reset
it, each *web* of its values — writers joined by the reads that see them — to its own array: deriche's
row and column passes write the same ``y1``, ``y2``, ``imgOut`` and filter states, but no read sees
values of both passes.
"""

from __future__ import annotations

from dataclasses import replace

from meshplan.models.loops.program import Access, Program
from meshplan.models.soap.terms import UnionFind

__all__ = ["split_scalars", "split_webs", "forward_scalars"]


def _namer(program: Program, split: dict[str, list[int]]):
    """The name of scalar ``a``'s chain at statement ``n``: ``a__k`` for its k-th reset."""
    arrays = set(program.arrays)

    def name(a: str, n: int) -> str:
        k = sum(1 for r in split[a] if r <= n) or len(split[a])   # before the first reset: the last chain
        new = f"{a}__{k}"
        while new in arrays:
            new += "_"
        return new
    return name


def _renamed(program: Program, split: dict[str, list[int]]) -> Program:
    name = _namer(program, split)

    def ren(acc: Access, n: int) -> Access:
        return replace(acc, array=name(acc.array, n)) if acc.array in split and not acc.index else acc

    return replace(program, statements=tuple(
        replace(st, output=ren(st.output, n), inputs=tuple(ren(a, n) for a in st.inputs))
        for n, st in enumerate(program.statements)))


def _exact(program: Program, split: dict[str, list[int]]) -> dict[str, list[int]]:
    """The scalars of ``split`` whose renaming per chain keeps every read's writing instance."""
    from meshplan.models.soap.expand import same_dataflow

    return {a: r for a, r in split.items() if same_dataflow(program, _renamed(program, {a: r}), None)}


def split_scalars(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with each reset scalar chain renamed, then each web of values (:func:`split_webs`)
    renamed, notes)``; the program itself when neither applies."""
    scalars = {st.output.array for st in program.statements if not st.output.index}
    resets: dict[str, list[int]] = {}
    for n, st in enumerate(program.statements):
        a = st.output.array
        if a in scalars and st.op == "=" and all(r.array != a for r in st.inputs):
            resets.setdefault(a, []).append(n)
    split = {a: r for a, r in resets.items() if len(r) > 1}
    split = _exact(program, split) if split else {}
    notes: tuple[str, ...] = ()
    if split:
        name = _namer(program, split)
        notes = tuple(f"scalar {a} is reset {len(r)} times: one array per reset chain "
                      f"({', '.join(name(a, n) for n in r)})" for a, r in split.items())
        program = replace(program, statements=_renamed(program, split).statements)
    program, web_notes = split_webs(program)
    return program, notes + web_notes


def _webs(program: Program):
    """``(union of writer statements per array, {read column: a node it sees}, the writers of final values)``
    from the traces at the sample sizes, or ``None`` when a trace is refused.  A node is ``(array, statement
    index)`` for a writer and ``(array, -1)`` for the array's initial values; a read column ``(statement
    index, slot)`` joins every node whose values it sees."""
    import numpy as np

    from meshplan.models.core.errors import ModelError
    from meshplan.models.soap.expand import SAMPLE_SIZES, _producers
    from meshplan.models.soap.replay import producers

    stmts = program.statements
    cols = [[*st.reads, st.output] for st in stmts]
    uf, seen_by, final = UnionFind(), {}, set()
    for n in SAMPLE_SIZES:
        try:
            tr, el, wr, inst, prod = _producers(program, tuple((p, n) for p in program.params))
        except ModelError:
            return None
        if not el.size:
            continue
        width = tr.elems.shape[1]
        slot = np.tile(np.arange(width), tr.stmt.shape[0])[tr.elems.ravel() >= 0]
        reader = tr.stmt[inst] * width + slot     # (statement, access column) of every access
        src = np.where(prod >= 0, tr.stmt[np.clip(prod, 0, None)], -1)
        pairs = np.unique(np.stack([reader[~wr], src[~wr]], axis=1), axis=0)
        last = producers(el, wr, inst)[1]
        final |= {(stmts[w].output.array, stmts[w].name) for w in np.unique(tr.stmt[last[last >= 0]]).tolist()}
        for col, w in pairs.tolist():
            si, k = divmod(col, width)
            node = (cols[si][k].array, stmts[w].name if w >= 0 else -1)
            uf.union(seen_by.setdefault((si, k), node), node)
    return uf, seen_by, final


def split_webs(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with every array whose values form several webs renamed per web, notes)`` (the CDAG's
    vertices renamed; thesis section 5.5.2: a version is a vertex, not a memory cell).

    A *web* of an array is a class of its writer statements (and of its initial values) that some read
    joins: a read sees values of every member of its web (at the sample sizes) and of no other.  Two
    webs share a location but no value flows from one to a read of the other: deriche's ``y1`` of the
    row pass (``S4``, read by the row pass) and of the column pass (``S21``, read by the column pass),
    or its filter state ``ym1`` of either pass.  Held under one name, the column pass's reads of
    ``y1[i, j]`` and the row pass's look like reads of one array, whose union a tile pays once
    (section 5.5.3): the two passes' reads of ``y1`` in ``{ym1}`` counted ``max(D_i·D_j, D_i4·D_j4)``
    for work on both.  Renamed (the web of the initial values keeps the name, the others get
    ``y1__2``, …), each read names the web it sees; the renaming is kept only where every read sees
    the same writing instance (:func:`meshplan.models.soap.expand.same_dataflow`) and every web is read
    or holds final values (a web that is neither is an overwritten, dead writer; renamed, its values
    would look like outputs)."""
    from meshplan.models.soap.expand import same_dataflow

    stmts = program.statements
    if not any(len(ws) > 1 and not any(a.array == arr for w in ws for a in w.inputs)
               for arr in dict.fromkeys(st.output.array for st in stmts) for ws in [program.writers(arr)]):
        return program, ()                    # no array with several writers that all reset it
    found = _webs(program)
    if found is None:
        return program, ()
    uf, seen_by, final = found
    names = set(program.arrays)
    rename: dict[tuple[str, int], str] = {}      # (array, writer statement index) -> new name
    web_of: dict = {}
    notes = []
    for array in dict.fromkeys(st.output.array for st in stmts):
        writers = [n for n, st in enumerate(stmts) if st.output.array == array]
        if any(a.array == array for n in writers for a in stmts[n].inputs):
            continue                          # an update in place: its version chain stays in one array
        roots = [uf.find((array, stmts[n].name)) for n in writers]
        if len(set(roots)) < 2:
            continue
        readers = [(si, k) for si, st in enumerate(stmts) for k, a in enumerate(st.reads) if a.array == array]
        if any(c not in seen_by for c in readers):
            continue                          # a read with no instance at the samples: its web is unknown
        read_roots = {uf.find(seen_by[c]) for c in readers}
        live = read_roots | {uf.find(node) for node in final if node[0] == array}
        if not set(roots) <= live:
            continue                          # a web neither read nor final: a dead writer, not a web
        order = list(dict.fromkeys(roots))
        init = uf.find((array, -1))
        if init in read_roots:                # the web of the initial values keeps the array's name
            order = [init, *(r for r in order if r != init)]
        new = {}
        for k, r in enumerate(order):
            nm = array if k == 0 else f"{array}__{k + 1}"
            while k and nm in names:
                nm += "_"
            names.add(nm)
            new[r] = nm
        for n, r in zip(writers, roots):
            rename[(array, n)] = new[r]
        for c in readers:
            web_of[c] = new[uf.find(seen_by[c])]
        groups = {new[r]: [stmts[n].name for n, rr in zip(writers, roots) if rr == r] for r in order}
        notes.append(f"array {array} holds {len(order)} webs of values that no read mixes: "
                     + "; ".join(f"{nm} ({'written by ' + ', '.join(ws) if ws else 'initial values'})"
                                 for nm, ws in groups.items())
                     + " (the same CDAG, its vertices renamed)")
    if not rename:
        return program, ()

    def renamed(si: int, st):
        reads = {a: web_of.get((si, k), a.array) for k, a in enumerate(st.reads)}
        out = replace(st.output, array=rename.get((st.output.array, si), st.output.array))
        return replace(st, output=out, inputs=tuple(replace(a, array=reads[a]) for a in st.inputs))

    new = replace(program, statements=tuple(renamed(si, st) for si, st in enumerate(stmts)))
    if not same_dataflow(program, new, None):
        return program, ()
    return new, tuple(notes)


def _chain(program: Program, a: str):
    """``(reset, updates, store)`` statement positions of scalar ``a`` when its accesses are one reset
    (``a = …``, not reading ``a``), then updates reading and writing ``a``, then one statement reading
    ``a`` that stores into an array element; else ``None``."""
    touch = [n for n, st in enumerate(program.statements)
             if st.output.array == a or any(r.array == a for r in st.inputs)]
    if len(touch) < 2:
        return None
    first, last = program.statements[touch[0]], program.statements[touch[-1]]
    if first.output.array != a or first.op != "=" or any(r.array == a for r in first.inputs):
        return None
    if last.output.array == a or not last.output.index:
        return None
    mid = touch[1:-1]
    if any(program.statements[n].output.array != a for n in mid):
        return None
    return touch[0], tuple(mid), touch[-1]


def _renamed_to(program: Program, a: str, target: Access) -> Program:
    """Scalar ``a`` renamed to the array element ``target`` in every statement (its text too)."""
    import re

    word = re.compile(rf"\b{re.escape(a)}\b|\b{re.escape(a.split('__')[0])}\b")

    def ren(acc: Access) -> Access:
        return target if acc.array == a else acc

    return replace(program, statements=tuple(
        st if st.output.array != a and all(r.array != a for r in st.inputs) else
        replace(st, output=ren(st.output), inputs=tuple(ren(r) for r in st.inputs),
                text=word.sub(str(target), st.text))
        for st in program.statements))


def _self_copy(st) -> bool:
    """``A[g] = A[g]``: an instance with one predecessor, the element's previous value."""
    return st.op == "=" and bool(st.inputs) and all(r == st.output for r in st.inputs)


def forward_scalars(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with each scalar chain held in the array element it is stored into, notes)``.

    ludcmp's ``w = A[i, j]; w -= A[i, k]·A[k, j]; A[i, j] = w`` computes, in the CDAG, a chain of
    values whose first link copies ``A[i, j]`` and whose last is copied back: held in ``w``, ``A`` has
    no older version of itself and the update's internal reads of ``A`` look free (section 5.5.2
    versions attach to the array that is rewritten).  Renaming ``w`` to ``A[i, j]`` stores the same
    values in another place (the same CDAG, checked at sample sizes as for :func:`split_scalars`);
    then ``A[i, j] = A[i, j]`` copies are dropped.  Dropping a copy contracts a vertex with one
    predecessor into it, which can only lower the optimal I/O of the red–blue pebble game (a play
    of the original maps to one of the contracted CDAG with no more loads or stores: a pebble on
    either vertex becomes one on the merged vertex), so a lower bound of the result is one of the
    program.  A chain is forwarded only when the renaming keeps every read's writing instance.
    """
    from meshplan.models.soap.expand import same_dataflow

    notes: list[str] = []
    scalars = dict.fromkeys(st.output.array for st in program.statements if not st.output.index)
    for a in scalars:
        chain = _chain(program, a)
        if chain is None:
            continue
        target = program.statements[chain[2]].output
        if target.array == a:
            continue
        chain_vars = set.intersection(*(set(program.statements[n].vars)
                                        for n in (chain[0], *chain[1], chain[2])))
        if {str(s) for e in target.index for s in e.free_symbols} - chain_vars - set(program.params):
            continue
        renamed = _renamed_to(program, a, target)
        if not same_dataflow(program, renamed, None):
            continue
        ours = {program.statements[n].name for n in (chain[0], *chain[1], chain[2])}
        kept = tuple(st for st in renamed.statements if not (st.name in ours and _self_copy(st)))
        dropped = len(renamed.statements) - len(kept)
        renamed = replace(renamed, statements=kept)
        notes.append(f"scalar {a} is stored into {target}: held there (the same values), "
                     f"{dropped} copy statement(s) of {target} into itself dropped (a contraction, which "
                     "cannot raise the optimal I/O)")
        program = renamed
    return program, tuple(notes)
