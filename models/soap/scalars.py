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

__all__ = ["split_scalars"]


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
