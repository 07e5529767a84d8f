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
"""

from __future__ import annotations

from dataclasses import replace

from meshplan.models.loops.program import Access, Program

__all__ = ["split_scalars", "forward_scalars"]


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
    """``(program with each reset scalar chain renamed, notes)``; the program itself when no
    scalar is reset more than once."""
    scalars = {st.output.array for st in program.statements if not st.output.index}
    resets: dict[str, list[int]] = {}
    for n, st in enumerate(program.statements):
        a = st.output.array
        if a in scalars and st.op == "=" and all(r.array != a for r in st.inputs):
            resets.setdefault(a, []).append(n)
    split = {a: r for a, r in resets.items() if len(r) > 1}
    if not split:
        return program, ()
    split = _exact(program, split)
    if not split:
        return program, ()
    stmts = _renamed(program, split).statements
    name = _namer(program, split)
    notes = tuple(f"scalar {a} is reset {len(r)} times: one array per reset chain "
                  f"({', '.join(name(a, n) for n in r)})" for a, r in split.items())
    return replace(program, statements=stmts), notes


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
