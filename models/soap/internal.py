"""Reads of an array of a subgraph ``H`` that translate none of its outputs (Definition 5.6 and
sections 4.6.2, 5.5.1, 5.5.3 of Kwasniewski's thesis): :func:`internal_reads`, used by
:func:`meshplan.models.soap.sdg.subgraph_problem`."""

from __future__ import annotations

import sympy as sp

from meshplan.models.loops.program import Program, sym
from meshplan.models.soap.access import Component
from meshplan.models.soap.terms import Term, access_text, box, undominated

__all__ = ["internal_reads"]


def internal_reads(arr: str, cs: list[Component], terms: list[Term], comps: list[Component], matched: dict,
                   classes_of, prog: Program, H: tuple[str, ...], notes: list[str], cls=None) -> list[Term]:
    """The access terms of reads of an array of ``H`` that translate none of its outputs.

    Definition 5.6 leaves them out of ``St_H``: every vertex of an array of ``H`` "could be computed"
    inside the subcomputation.  On the rectangular tile of the fused statements (section 5.4.4:
    one domain ``D`` over the identified tile variables) the writers of ``arr`` compute only
    ``arr[f(D)]``; a read ``arr[g(D)]`` of other elements needs them from an earlier
    subcomputation or from slow memory, so they belong to the dominator set like an input's.
    When ``arr`` has one Corollary 5.1 term whose size is its box ``|f(D)|`` (each written
    element needs its one older version from outside, no halo), the elements written or read
    are at least ``max(|f(D)|, |g(D)|)``: the term becomes that bounded-overlap union (section
    5.5.3; :mod:`cases` splits the max).  A read that forms the triangular pair of section
    4.6.2 with a read translating the output (covariance's ``data[k, i]`` and ``data[k, j]``,
    ``j ≥ i``) is counted as a second array, as that pair is among inputs.  Otherwise (no such
    term: the written elements need no older version, so the read may be of values computed
    from few inputs) the read stays free, as Definition 5.6 has it.
    """
    from meshplan.models.soap.terms import _triangular

    where = "{" + ", ".join(H) + "}"
    own = [n for n, t in enumerate(terms) if t.array == arr and t.kind == "inout"]
    if len(own) != 1 or any(terms[own[0]].t) or terms[own[0]].t_version != 1:
        for c in cs:
            notes.append(f"{c.stmt}: read {access_text(c.access)} is computed inside {where}: "
                         "not loaded (Definition 5.6)")
        return terms
    term = terms[own[0]]
    twins = [comps[i] for i in matched if comps[i].array == arr]
    parts, extra = [term.dims], []
    for c in cs:
        dims = box([c], classes_of(c))[0]
        if cls is not None and _apart_per_version(c, [o for o in comps if o.role == "out" and o.array == arr],
                                                  term.version, cls, prog):
            extra.append(Term(arr, "input", dims, (0,) * len(dims), label=access_text(c.access)))
            notes.append(f"{c.stmt}: read {access_text(c.access)} of {arr}, computed inside {where}, touches no "
                         "element its writers write in the same version: a second array (section 5.5.1, as for LU)")
        elif any(_triangular(c, m, prog) for m in twins):
            extra.append(Term(arr, "input", dims, (0,) * len(dims), label=access_text(c.access)))
            notes.append(f"{c.stmt}: read {access_text(c.access)} of {arr}, computed inside {where}, and its "
                         "translated read overlap only on the diagonal of a triangular domain: a second array "
                         "(section 4.6.2)")
        elif dims not in parts:
            parts.append(dims)
            notes.append(f"{c.stmt}: read {access_text(c.access)} touches elements of {arr} the tile's writers "
                         f"need not compute: |{arr} written ∪ read| ≥ its largest part (section 5.5.3)")
    parts = undominated(parts)
    out = list(terms)
    label = f"{term.label} ∪ " + " ∪ ".join(access_text(c.access) for c in cs)
    if len(parts) > 1:
        out[own[0]] = Term(arr, "union", (), (), parts=tuple(parts), label=label)
    elif parts[0] != term.dims:     # a read's box contains the written one: it is the union's size
        out[own[0]] = Term(arr, "input", parts[0], (0,) * len(parts[0]), label=label)
    return out + extra


def _apart_per_version(c: Component, outs: list[Component], version: tuple, cls, prog: Program,
                       n: int = 5, limit: int = 4000) -> bool:
    """Within each value of the writers' version loops (tile classes ``version``), read ``c`` touches no
    element the writers ``outs`` write (sampled at size ``n``): LU's lower-order overlap (section 5.5.1)
    between a read of one statement and the writes of another."""
    from meshplan.models.soap.access import sample_iterations

    if not version or not outs:
        return False
    params = {p: n for p in prog.params}

    def tagged(comp: Component):
        st = prog.statement(comp.stmt)
        pos = {cls(lp.var): k for k, lp in enumerate(st.loops)}
        if any(v not in pos for v in version):
            return None
        iters = sample_iterations(st, params, limit)
        if len(iters) >= limit:
            return None
        f = sp.lambdify([lp.symbol for lp in st.loops] + [sym(p) for p in params],
                        [sp.Integer(0)] + list(comp.access.index), "math")
        pv = list(params.values())
        return {tuple(it[pos[v]] for v in version) + tuple(int(x) for x in f(*it, *pv)[1:]) for it in iters}

    read = tagged(c)
    if not read:
        return False
    written: set = set()
    for o in outs:
        w = tagged(o)
        if w is None:
            return False
        written |= w
    return bool(written) and not (read & written)
