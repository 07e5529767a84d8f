"""Subgraph statements that are the same problem up to renaming share one χ derivation.

Programs with many small arrays (deriche's filter states, ludcmp's accumulators) give
hundreds of subgraphs ``H`` (section 5.5.4) whose statements ``St_H`` differ only in
the names of their arrays, statements and tile variables: deriche's 1,358 connected
subgraphs are 209 distinct problems.  :func:`canonical_key` renames the tile classes
by their sorted rank (so every name-ordered choice of the derivation — the order of
max cases, of sympy's arguments — is the same) and drops the names of arrays and
statements, which the derivation does not read.  :class:`IntensityMemo` derives each
key once and translates the result to every other problem with that key: the class
renaming maps tiles and case labels, the max cases are re-split from the problem
itself (same order) and paired by position.  The bound is the same as without it.
"""

from __future__ import annotations

from dataclasses import replace

from meshplan.models.soap.cases import has_max, split_cases
from meshplan.models.soap.sdg import SubProblem

__all__ = ["canonical_key", "IntensityMemo"]


def _ranks(problem: SubProblem) -> dict[str, int]:
    return {c: n for n, c in enumerate(sorted(problem.classes))}


def canonical_key(problem: SubProblem) -> tuple:
    """Everything the χ derivation reads, with tile classes named by their sorted rank."""
    rk = _ranks(problem)

    def r(vs):
        return tuple(rk[v] for v in vs)

    terms = tuple((t.kind, tuple(r(d) for d in t.dims), t.t, r(t.version), t.t_version,
                   tuple(tuple(r(d) for d in part) for part in t.parts), t.sums, t.coincide) for t in problem.terms)
    return (r(problem.classes), tuple(r(cls) for _, cls in problem.work), terms,
            tuple(tuple((rk[v], e) for v, e in g) for g in problem.constraints))


class IntensityMemo:
    """``memo(problem)``: ``intensity(problem)``, derived once per :func:`canonical_key`."""

    def __init__(self, compute):
        self._compute = compute
        self._seen: dict[tuple, object] = {}
        self.hits = 0

    def __call__(self, problem: SubProblem, key: tuple | None = None):
        """``intensity(problem)``; ``key`` is its :func:`canonical_key` when the caller has it already."""
        key = canonical_key(problem) if key is None else key
        first = self._seen.get(key)
        if first is None:
            first = self._seen[key] = self._compute(problem)
            return first
        self.hits += 1
        return _translate(first, problem)


def _translate(result, problem: SubProblem):
    """``result`` (of a problem with the same key) restated for ``problem``."""
    old = result.problem
    by_rank = sorted(problem.classes)
    cmap = {c: by_rank[n] for c, n in _ranks(old).items()}

    def tiles(d: dict) -> dict:
        return {cmap.get(c, c): e for c, e in d.items()}

    cases = ()
    notes = result.notes
    if result.cases:
        new_cases = split_cases(problem) if has_max(problem) else [problem]
        cases = tuple(replace(c, problem=p, tiles=tiles(c.tiles), tiles_of_X=tiles(c.tiles_of_X))
                      for c, p in zip(result.cases, new_cases))
        relabel = {c.problem.case: p.problem.case for c, p in zip(result.cases, cases)}
        notes = tuple(_relabel(n, relabel) for n in notes)
    return replace(result, problem=problem, tiles=tiles(result.tiles), tiles_of_X=tiles(result.tiles_of_X),
                   notes=notes, cases=cases)


def _relabel(note: str, relabel: dict) -> str:
    head, sep, label = note.rpartition("the leading case: ")
    if sep and label in relabel:
        return head + sep + relabel[label]
    return note
