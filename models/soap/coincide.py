"""A triangular pair whose rows may coincide (thesis sections 4.6.2, 5.4.4, 5.5.1).

A statement that reads ``A[i, k]`` and ``A[j, k]`` with ``j ≤ i`` (syrk's update, Cholesky's
``L[i, k]·L[j, k]``, covariance's ``data[k, i]·data[k, j]``) was counted as two arrays, the thesis's
Cholesky treatment (section 4.6.2): ``|A| ≥ |D^i|·|D^k| + |D^j|·|D^k|``.  That holds when a tile's
``i`` rows and ``j`` rows are disjoint, but they may coincide: the triangle-block schedule of
Beaumont, Eyraud-Dubois, Langou and Vérité ("I/O-Optimal Algorithms for Symmetric Linear Algebra
Kernels", SPAA 2022) keeps the pairs of one set of ``R`` rows together, ``R(R+1)/2``
pairs on ``R·K`` elements of ``A``, and moves a factor √2 less than that count allows.

The sound count.  On a box tile ``I × J × K`` the statement computes the ``P`` pairs ``(i, j)`` of
``I × J`` in its triangle for every ``k``; they are pairs of rows of ``U = I ∪ J``.  Going through
``I`` in order, its ``t``-th largest row ``i`` pairs with at most the rows of ``U`` at or below it, of
which there are at most ``|U| − t + 1`` (the ``t − 1`` larger rows of ``I`` are above it), so
``P ≤ |I|·|U| − |I|(|I| − 1)/2`` and the pair touches

    ``|U|·K ≥ (P/|I| + (|I| − 1)/2)·K``

elements (the same count holds from ``J``'s side).  At the model point ``D^i = |I|``,
``D^j = P/|I|`` (``≤ |J|``), whose box holds exactly ``P`` pairs, this is
``(|D^j| + |D^i|/2)·|D^k|`` up to ``K/2`` (half a column, for the diagonal ``j = i``; a strict
triangle gives ``(|I| + 1)/2``: none; when ``P < |I|`` the point takes ``D^j = 1``, over-counting the work,
with the same half column), the pair term ``|part 1| + |part 2|/2`` of kind ``pair`` of
:class:`~meshplan.models.soap.terms.Term` (``parts``: the shrunk class's box, then the kept one's).
There the pair statement's work ``D^i·D^j·D^k`` is its real work, every other term (non-decreasing in
each ``D``) is at most its value on the real box, and the work of every statement that does not use
the shrunk class is unchanged.  So problem (5.8) with the pair term has a feasible point doing at
least the real tile's work, and its χ bounds every such tile — provided every statement whose work
uses the shrunk class also uses the kept one and runs over the same triangle in them (its work at
the model point is then its real ``P·…``).  That is checked here, for either side; where it fails
the pair stays two arrays.  Two disjoint row sets (``I`` above ``J``) give ``|I| + |J|``, the two
arrays of section 4.6.2; coinciding ones (``I = J``, ``D^j = |I|/2``) give ``|I|``, the
triangle-block tile.  The term is a posynomial with rational coefficients, so the relaxation and
the closed form of problem (5.8) treat it as any other (no max cases).

Effect: by AM–GM ``|D^j| + |D^i|/2 ≥ √2·√(|D^i||D^j|)``, and for syrk's update
``χ(X) = √2·X^{3/2}/(3√3)`` (``(X/3)^{3/2}`` before), ρ ≈ √(S/2), and the bound ``M·N²/(√2·√S)`` —
Beaumont et al.'s lower bound, attained by their schedule.  Cholesky's scaling of the column
``L[i, k]`` (work ``|D^i|·|D^k|``, not a triangle) keeps ``i`` as the kept class and stays bounded by
the term's ``|D^i|·|D^k|/2``.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from meshplan.models.loops.program import Program, Statement, sym

__all__ = ["coinciding_pairs"]


def coinciding_pairs(problem, prog: Program):
    """``problem`` with each triangular pair of two access terms of one array, read by one statement
    whose rows may coincide, as one ``pair`` term (where the model point of the module docstring is
    valid); the other terms unchanged."""
    from meshplan.models.soap.terms import Term

    terms = list(problem.terms)
    gone: set[int] = set()
    chosen: dict[frozenset, str] = {}     # a pair's two classes → the one shrunk
    changed = False
    notes = list(problem.notes)
    for a, b in itertools.combinations(range(len(terms)), 2):
        if a in gone or b in gone:
            continue
        ta, tb = terms[a], terms[b]
        if ta.array != tb.array or not (_plain(ta) and _plain(tb)) or len(ta.dims) != len(tb.dims):
            continue
        diff = [n for n, (x, y) in enumerate(zip(ta.dims, tb.dims)) if x != y]
        if len(diff) != 1:
            continue
        u, v = ta.dims[diff[0]][0], tb.dims[diff[0]][0]
        key = frozenset((u, v))
        if key not in chosen:        # one model point: every pair on these classes shrinks the same one
            if any(key & k for k in chosen):
                continue
            side = _reads_pair(problem, prog, ta.array, ta.dims, tb.dims, u, v)
            shrunk = _shrunk(problem, prog, u, v, side) if side else None
            if shrunk is None:
                continue
            chosen[key] = shrunk
        shrunk = chosen[key]
        if shrunk == u:
            ta, tb = tb, ta
        sides = tuple(dict.fromkeys(ta.dims + tb.dims))
        terms[a] = Term(ta.array, "pair", sides, (0,) * len(sides), parts=(tb.dims, ta.dims),
                        label=f"{tb.label} ∪ {ta.label}")
        gone.add(b)
        notes.append(f"{ta.array}: {ta.label} and {tb.label} form a triangular pair whose rows may coincide: "
                     "|∪| ≥ |pairs|/|kept rows| + |kept rows|/2 rows per column (section 4.6.2 with coinciding rows)")
    for n, t in enumerate(terms):     # a pair inside a union (covariance's with the mean's data[i, j])
        if n in gone or t.kind != "union" or not t.tri:
            continue
        for a, b in t.tri:
            pa, pb = t.parts[a], t.parts[b]
            diff = [m for m, (x, y) in enumerate(zip(pa, pb)) if x != y]
            if len(pa) != len(pb) or len(diff) != 1 or any(len(d) != 1 for d in pa + pb):
                continue
            u, v = pa[diff[0]][0], pb[diff[0]][0]
            key = frozenset((u, v))
            if key not in chosen:
                if any(key & k for k in chosen):
                    continue
                side = _reads_pair(problem, prog, t.array, pa, pb, u, v)
                shrunk = _shrunk(problem, prog, u, v, side) if side else None
                if shrunk is None:
                    continue
                chosen[key] = shrunk
            terms[n] = replace(t, coincide=(a, b) if chosen[key] == u else (b, a))
            notes.append(f"{t.array}: {t.label}: its triangular pair may coincide, counted as such where its "
                         "statements form their own group (section 4.6.2 with coinciding rows)")
            changed = True
            break
    if not gone and not changed:
        return problem
    return replace(problem, terms=tuple(t for n, t in enumerate(terms) if n not in gone),
                   notes=tuple(dict.fromkeys(notes)))


def _plain(t) -> bool:
    """A term whose size is its box: an input without offsets, or one older version per element."""
    if any(t.t) or any(len(d) != 1 for d in t.dims):
        return False
    return t.kind == "input" or (t.kind == "inout" and t.t_version == 1)


def _class_of(problem, var: str):
    for c, vs in problem.members.items():
        if var in vs:
            return c
    return None


def _orientation(st: Statement, problem, u: str, v: str) -> int:
    """``+1`` when ``st`` runs over ``y ≤ x`` (or ``<``) for its loop ``x`` of class ``u`` and ``y`` of class
    ``v`` (one bound naming the other), ``−1`` for ``y ≥ x``, ``0`` when it is no such triangle."""
    xs = [lp for lp in st.loops if _class_of(problem, lp.var) == u]
    ys = [lp for lp in st.loops if _class_of(problem, lp.var) == v]
    if len(xs) != 1 or len(ys) != 1:
        return 0
    x, y = xs[0], ys[0]
    below = sym(x.var) in y.upper.free_symbols or sym(y.var) in x.lower.free_symbols
    above = sym(x.var) in y.lower.free_symbols or sym(y.var) in x.upper.free_symbols
    return 0 if below == above else (1 if below else -1)


def _sides(problem, acc) -> tuple | None:
    out = []
    for e in acc.index:
        if not e.is_Symbol:
            return None
        out.append((_class_of(problem, str(e)),))
    return tuple(out)


def _reads_pair(problem, prog: Program, array: str, da: tuple, db: tuple, u: str, v: str) -> int:
    """The orientation of a statement of ``problem`` that runs over a triangle in ``u, v`` and reads the
    array as both boxes, neither of them its output (``0``: none).  Its output's older version and an
    operand are different versions (LU's ``A[i, j]`` and column ``A[i, k]``: the lower-order overlap of
    section 5.5.1, which the thesis's LU bound counts as two arrays), not one set of rows read twice."""
    for name, cls in problem.work:
        st = prog.statement(name)
        side = _orientation(st, problem, u, v) if u in cls and v in cls else 0
        if not side:
            continue
        seen = {_sides(problem, acc) for acc in st.reads if acc.array == array and acc != st.output}
        if da in seen and db in seen:
            return side
    return 0


def _shrunk(problem, prog: Program, u: str, v: str, side: int) -> str | None:
    """The class of the pair to shrink (``v`` first): one used only by statements over the pair
    statement's triangle (orientation ``side`` in ``u, v``), each class once, so that at the model
    point their work is their real one; ``None`` when neither is."""
    def only_triangles(w: str) -> bool:
        for name, cls in problem.work:
            if w in cls and (cls.count(u) != 1 or cls.count(v) != 1 or
                             _orientation(prog.statement(name), problem, u, v) != side):
                return False
        return True

    return v if only_triangles(v) else u if only_triangles(u) else None
