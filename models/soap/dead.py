"""Statements whose values no output needs: overwritten before anything else reads them.

A red–blue pebbling need not compute a vertex that lies on no path to an output of the CDAG (an
element's last value): ``B[i] += A[i, i]`` followed by ``B[i] = 1.0`` over the same elements moves
only the stores of ``B``.  Counting such vertices in |V| makes the SOAP bound of Kwasniewski's thesis
(section 4.2.3.2: the bound counts the vertices every pebbling computes) exceed the optimal I/O.
"""

from __future__ import annotations

import sympy as sp

from meshplan.models.loops.program import Program, Statement


def dead_statements(program: Program) -> tuple[str, ...]:
    """The statements every value of which is overwritten before any other statement reads it.

    Only arrays that no statement but their own writers reads, each writer reading only the very
    element it writes (an in-place update), qualify.  A writer is dead when a later writer reads
    nothing of the array and writes exactly the same elements, once each (its loops are its output
    subscripts, each with the same range as the earlier writer's, free of other loop variables — so it
    runs whenever the earlier one has an element): every value of the earlier one reaches only
    in-place updates of that element, which the overwrite discards.  Anything not recognized stays."""
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
            if any(elems[k] == elems[j] and len(later.loops) == len(later.output.index)
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
        if lp is None or not {str(v) for v in sp.sympify(lp.lower).free_symbols | sp.sympify(lp.upper).free_symbols} <= params:
            return None
        out.append((sp.sympify(lp.lower), sp.sympify(lp.upper), lp.step))
    if len({str(x) for x in st.output.index}) != len(st.output.index):
        return None
    return tuple(out)
