"""Temporaries expanded by the loops that reset them (array expansion; thesis sections 5.3, 5.5.2).

A temporary that a loop body resets and then reads back — doitgen's ``sum[p]`` (``acc``), gramschmidt's
``nrm``, symm's ``temp2``, ludcmp's ``w`` — holds a new value in every iteration of the loops around
it that its subscript does not name.  Stored in one location, every iteration's values look like one
version chain of the same elements, so a tile spanning several iterations seems to need one older
version per element where it really holds one partial result per iteration: the temporary hides the
data flow (the SOAP model of doitgen got ρ ∝ S instead of its batched matrix product's √S).  The CDAG
is a graph of values, not of memory cells, so renaming a location per iteration changes no vertex and
no edge: :func:`expand_temporaries` appends those loop variables to every subscript of the array
(``acc[pp]`` → ``acc[pp, r, q]``) when that is exactly a renaming.

Exactness is checked, not assumed: both programs are enumerated at two small sizes
(:func:`meshplan.models.soap.replay.build_trace`) and every read must see the same writing instance in
both, and none may read the array's initial value (a value carried in from outside the loops — durbin's
``alpha`` — is not expanded).  The sizes are samples, as for the disjointness test of section 5.5.1.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Access, Loop, Program, sym

__all__ = ["expand_temporaries", "same_dataflow", "split_triangles"]

#: the sample sizes of the exactness check (every size parameter takes each in turn)
SAMPLE_SIZES = (4, 5)


def _candidates(program: Program, array: str) -> tuple[Loop, ...]:
    """The loops enclosing every access of ``array`` whose variable none of its subscripts uses."""
    users = [st for st in program.statements
             if st.output.array == array or any(a.array == array for a in st.inputs)]
    common = list(users[0].loops)
    for st in users[1:]:
        n = 0
        while n < min(len(common), len(st.loops)) and common[n] == st.loops[n]:
            n += 1
        common = common[:n]
    named = {str(s) for st in users for a in (st.output, *st.inputs) if a.array == array
             for e in a.index for s in e.free_symbols}
    return tuple(lp for lp in common if lp.var not in named)


def _expanded(program: Program, array: str, loops: tuple[Loop, ...]) -> Program:
    extra = tuple(sym(lp.var) for lp in loops)

    def ren(a: Access) -> Access:
        return replace(a, index=a.index + extra) if a.array == array else a

    return replace(program, statements=tuple(
        replace(st, output=ren(st.output), inputs=tuple(ren(a) for a in st.inputs)) for st in program.statements))


@functools.lru_cache(maxsize=64)
def _producers(program: Program, values: tuple[tuple[str, int], ...]):
    """The program-order access stream at ``values`` and each access's writing instance (cached: every
    candidate renaming of one program is compared with the same original)."""
    from meshplan.models.soap.replay import build_trace, loop_order, producers, stream

    tr = build_trace(program, dict(values), limit=200_000)
    el, wr, inst = stream(tr, loop_order(tr))
    prod = producers(el, wr, inst)[0] if el.size else np.zeros(0, dtype=np.int64)
    return tr, el, wr, inst, prod


def same_dataflow(program: Program, new: Program, array: str) -> bool:
    """Every read of ``new`` sees the writing instance it sees in ``program``, and (unless ``array`` is
    None) no read of ``array`` sees its initial value, at each sample size."""
    for n in SAMPLE_SIZES:
        values = tuple((p, n) for p in program.params)
        try:
            tr0, el0, wr0, _, p0 = _producers(program, values)
            _, el1, wr1, _, p1 = _producers(new, values)
        except ModelError:
            return False
        if el0.shape != el1.shape or not np.array_equal(wr0, wr1) or not np.array_equal(p0[~wr0], p1[~wr1]):
            return False
        if array is not None:
            ids = _element_ids(tr0, program, array)
            reads = ~wr0 & np.isin(el0, ids)
            if np.any(p0[reads] < 0):
                return False
    return True


def _element_ids(trace, program: Program, array: str) -> np.ndarray:
    """The element ids of ``array`` in ``trace`` (the write and read columns of its accesses)."""
    out = []
    for si, st in enumerate(program.statements):
        rows = trace.stmt == si
        for col, a in enumerate([*st.reads, st.output]):
            if a.array == array:
                out.append(trace.elems[rows, col])
    return np.unique(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


def expand_temporaries(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with every reset temporary expanded by its reset loops, notes)``; first the copied scalars
    are forwarded to their sources (:func:`meshplan.models.soap.copies.forward_copies`), the scalar chains
    held in the elements they are stored into and the triangles split.

    An array qualifies when some statement writes it without reading it (a reset) and the loops
    enclosing all its accesses, unnamed by its subscripts, carry no value of it from one iteration
    to the next: then appending their variables to its subscripts is a renaming of the CDAG's
    vertices (checked at sample sizes).  The outermost of those loops is dropped in turn until the
    renaming is exact; an array for which none is exact is left as it is.
    """
    from meshplan.models.soap.copies import forward_copies
    from meshplan.models.soap.scalars import forward_scalars

    program, copied = forward_copies(program)      # copies contracted into their sources (copies.py)
    program, forwarded = forward_scalars(program)
    program, halves = split_triangles(program)
    notes: list[str] = [*copied, *forwarded, *halves]
    resets = [st.output.array for st in program.statements
              if all(a.array != st.output.array for a in st.inputs)]
    for array in dict.fromkeys(resets):
        loops = _candidates(program, array)
        while loops:
            new = _expanded(program, array, loops)
            if same_dataflow(program, new, array):
                notes.append(f"temporary {array} is reset in every iteration of "
                             f"{', '.join(lp.var for lp in loops)}: one element per iteration "
                             f"({array}[…, {', '.join(lp.var for lp in loops)}]), the same CDAG")
                program = new
                break
            loops = loops[1:]
    return program, tuple(notes)


def _side(program: Program, array: str, sizes=SAMPLE_SIZES) -> dict | None:
    """``{(statement, access): True for the strict lower triangle ``A[r, c]``, ``c < r``}`` when every
    access of the 2-D ``array`` stays on one side at each sample size and both sides occur."""
    import sympy as sp

    from meshplan.models.soap.access import sample_iterations

    sides: dict = {}
    for n in sizes:
        params = {p: n for p in program.params}
        for st in program.statements:
            accs = [a for a in (st.output, *st.inputs) if a.array == array]
            if not accs:
                continue
            its = sample_iterations(st, params)
            args = [lp.symbol for lp in st.loops] + [sym(p) for p in params]
            for a in accs:
                if len(a.index) != 2:
                    return None
                f = sp.lambdify(args, [a.index[1] - a.index[0]], "math")
                seen = {f(*it, *params.values())[0] < 0 for it in its}
                if len(seen) > 1:
                    return None
                if seen:
                    (lower,) = seen
                    if sides.setdefault((st.name, a), lower) != lower:
                        return None
    every = {(st.name, a) for st in program.statements for a in (st.output, *st.inputs) if a.array == array}
    if every - set(sides) or len(set(sides.values())) < 2:     # an access never sampled is not placed
        return None
    return sides


def split_triangles(program: Program) -> tuple[Program, tuple[str, ...]]:
    """``(program with each written 2-D array whose accesses each stay in its strict lower triangle or in
    the rest split into two arrays, notes)`` (thesis section 5.5.1: disjoint access sets are separate
    arrays).  ludcmp's L part ``A[i, j]``, ``j < i``, and U part ``A[i, j]``, ``j ≥ i``, are then two
    arrays, so a fused tile no longer identifies the two parts' ``j`` loops through one output and
    counts both triangles' updates on one box.  Renaming the elements of one triangle is a renaming of
    the CDAG's vertices; the sides are sampled and the renaming checked as for the expansion."""
    notes: list[str] = []
    for array in dict.fromkeys(st.output.array for st in program.statements):
        sides = _side(program, array)
        if sides is None:
            continue
        names = set(program.arrays)
        lo, up = f"{array}_lower", f"{array}_upper"
        while lo in names or up in names:
            lo, up = lo + "_", up + "_"

        def ren(st, a: Access) -> Access:
            if a.array != array:
                return a
            return replace(a, array=lo if sides.get((st.name, a), False) else up)

        new = replace(program, statements=tuple(
            replace(st, output=ren(st, st.output), inputs=tuple(ren(st, a) for a in st.inputs))
            for st in program.statements))
        if not same_dataflow(program, new, None):
            continue
        notes.append(f"array {array}: every access stays in its strict lower triangle or in the rest: "
                     f"two arrays {lo}, {up} (disjoint access sets, section 5.5.1)")
        program = new
    return program, tuple(notes)
