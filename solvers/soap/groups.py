"""Statements of a subgraph that share no tile variable: one χ per group, summed.

A fused subgraph statement ``St_H`` (thesis section 5.5.4) may hold statements whose tiles share no
variable and that meet only in a bounded-overlap union of one input array (section 5.5.3):
covariance's ``mean[j] += data[i, j]`` and ``cov[i, j] += data[k, i]·data[k, j]`` both read ``data``,
so ``{mean, cov}`` has the access term ``|data[i, j] ∪ data[k, i'] ∪ data[k, j']|``.  That union holds
at least the sum of the triangular pair ``data[k, i']``, ``data[k, j']`` (two arrays, section 4.6.2),
but a max of a sum and a product is no case of monomial order constraints, and the plain union
(the largest single part) loses the pair.

Split the statements into groups connected by tile variables (a term other than such a union
connects every variable it names).  For a tile ``D`` feasible for ``St_H`` (``Σ_j |A_j|(D) ≤ X``)
the restriction to a group ``g`` is feasible for the group's problem ``St_g``, whose terms are the
group's own terms, the terms with no variable, and each coupling union restricted to the parts in
``g`` — at most the union, since the union holds every part and every sum group: when the parts in
``g`` meet one sum group only, ``St_g`` counts them as separate arrays (their sum), else as their
own bounded-overlap union.  Every other term is ≥ 0.  So ``χ_H(X) ≤ Σ_g χ_g(X)``: each group gets
the whole budget, which loses at most a factor of the group count in lower-order groups and
nothing in the leading one when the others are linear (``mean``).
"""

from __future__ import annotations

from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.terms import Term, UnionFind

__all__ = ["independent_groups"]


def _vars(dims) -> set[str]:
    return {v for d in dims for v in d}


def _term_vars(t: Term) -> set[str]:
    return _vars(t.dims) | set(t.version)


def independent_groups(problem: SubProblem) -> list[SubProblem]:
    """The group problems ``St_g`` of ``problem`` (``[]`` when its statements form one group)."""
    if problem.constraints or len(problem.work) < 2:
        return []
    uf = UnionFind(problem.classes)
    for _, cls in problem.work:
        for c in cls[1:]:
            uf.union(cls[0], c)
    for t in problem.terms:
        if t.kind == "union":
            for part in t.parts:
                vs = sorted(_vars(part))
                for v in vs[1:]:
                    uf.union(vs[0], v)
        else:
            vs = sorted(_term_vars(t))
            for v in vs[1:]:
                uf.union(vs[0], v)
    roots = list(dict.fromkeys(uf.find(cls[0]) for _, cls in problem.work if cls))
    if len(roots) < 2 or any(not cls for _, cls in problem.work):
        return []
    out = []
    for root in roots:
        classes = tuple(c for c in problem.classes if uf.find(c) == root)
        work = tuple(w for w in problem.work if uf.find(w[1][0]) == root)
        terms: list[Term] = []
        for t in problem.terms:
            if t.kind != "union":
                vs = _term_vars(t)
                if not vs or uf.find(next(iter(vs))) == root:
                    terms.append(t)
                continue
            mine = [n for n, part in enumerate(t.parts) if not _vars(part) or uf.find(sorted(_vars(part))[0]) == root]
            terms += _restricted(t, mine)
        out.append(SubProblem(problem.arrays, tuple(s for s, _ in work), classes,
                              {c: problem.members[c] for c in classes if c in problem.members}, work,
                              tuple(terms), problem.notes))
    return out


def _restricted(t: Term, mine: list[int]) -> list[Term]:
    """Union ``t`` restricted to its parts ``mine``: separate arrays when they meet one sum group only
    (the group's sum is at most the union), else their own union (its largest part)."""
    if not mine:
        return []
    if t.coincide and sorted(mine) == sorted(t.coincide):   # the group reads the pair alone (models/soap/coincide.py)
        dims = tuple(dict.fromkeys(t.parts[mine[0]] + t.parts[mine[1]]))
        return [Term(t.array, "pair", dims, (0,) * len(dims), parts=tuple(t.parts[n] for n in t.coincide),
                     label=f"{t.label} (its triangular pair)")]
    groups = [tuple(n for n in g if n in mine) for g in (t.sums or tuple((n,) for n in range(len(t.parts))))]
    groups = [g for g in groups if g]
    if len(groups) == 1:
        return [Term(t.array, "input", t.parts[n], (0,) * len(t.parts[n]), label=f"{t.label} (part {n + 1})")
                for n in groups[0]]
    return [Term(t.array, "union", (), (), parts=tuple(t.parts[n] for n in mine), label=t.label)]
