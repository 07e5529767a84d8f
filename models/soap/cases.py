"""Max cases of the bounded-overlap projection (thesis section 5.5.3).

A non-injective dimension such as ``r + w`` of ``Image[r + w, …]`` takes at
least ``max(|D^r|, |D^w|)`` distinct values on a tile, and the union of
overlapping access groups of one array has at least as many elements as its
largest group.  A max is no monomial, so problem (5.8) is split: each *case*
picks the argument that attains every max and adds the order constraints that
make it the largest (``|D^w| ≤ |D^r|``, written as the monomial
``D_w·D_r^{-1} ≤ 1``).  Inside a case every access term is a product again,
and χ(X) is the maximum of the cases' χ.

Past :data:`MAX_CASES` cases the remaining maxima are bounded below by their
first argument with no order constraint (``max(a, b) ≥ a``): valid, weaker,
and noted.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import replace
from fractions import Fraction

from meshplan.models.soap.sdg import SubProblem
from meshplan.models.soap.terms import Term

__all__ = ["MAX_CASES", "Constraint", "has_max", "split_cases", "constraint_text"]

#: At most this many cases per (subgraph) statement; further maxima use their first argument.
MAX_CASES = 64

#: ``∏ D_v^{e_v} ≤ 1`` as sorted ``(v, e_v)`` pairs.
Constraint = tuple[tuple[str, Fraction], ...]


def _side_keys(problem: SubProblem) -> list[tuple[str, ...]]:
    keys: list[tuple[str, ...]] = []
    for t in problem.terms:
        boxes = t.parts if t.kind == "union" else (t.dims,)
        for b in boxes:
            for d in b:
                if len(d) > 1 and tuple(sorted(d)) not in keys:
                    keys.append(tuple(sorted(d)))
    return keys


def has_max(problem: SubProblem) -> bool:
    """Some access term has a non-injective side or is a union of overlapping groups."""
    return any(t.kind == "union" for t in problem.terms) or bool(_side_keys(problem))


def _monomial(dims, pick: dict) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for d in dims:
        if not d:
            continue
        v = d[0] if len(d) == 1 else pick[tuple(sorted(d))]
        out[v] = out.get(v, Fraction(0)) + 1
    return out


def _ratio(num: dict, den: dict) -> Constraint:
    g = dict(num)
    for v, e in den.items():
        g[v] = g.get(v, Fraction(0)) - e
    return tuple(sorted((v, e) for v, e in g.items() if e != 0))


def constraint_text(g: Constraint) -> str:
    """``D_w ≤ D_r`` style text of one constraint."""
    def mono(items):
        if not items:
            return "1"
        return "·".join(f"|D^{v}|" + (f"^{e}" if e != 1 else "") for v, e in items)
    num = [(v, e) for v, e in g if e > 0]
    den = [(v, -e) for v, e in g if e < 0]
    return f"{mono(num)} ≤ {mono(den)}"


def split_cases(problem: SubProblem) -> list[SubProblem]:
    """The cases of ``problem``'s maxima: sub-problems with product terms and order constraints.

    A problem without maxima is its own single case.  Every case keeps the
    problem's arrays, statements, classes and work; its ``terms`` have one
    variable per side and no unions, its ``constraints`` the orders that
    make the chosen arguments the maxima, its ``case`` a readable label.
    Computed once per problem (the unboundedness test, screening and the
    derivation all split the same subgraph statements).
    """
    return list(_split_cases(problem))


@functools.lru_cache(maxsize=4096)
def _split_cases(problem: SubProblem) -> tuple[SubProblem, ...]:
    sides = _side_keys(problem)
    unions = [n for n, t in enumerate(problem.terms) if t.kind == "union"]
    choices: list[tuple[str, object, list]] = []   # (kind, key, options)
    total = 1
    dropped = 0
    for key in sides:
        if total * len(key) <= MAX_CASES:
            choices.append(("side", key, list(key)))
            total *= len(key)
        else:
            choices.append(("side", key, [key[0]]))
            dropped += 1
    for n in unions:
        k = len(problem.terms[n].parts)
        if total * k <= MAX_CASES:
            choices.append(("union", n, list(range(k))))
            total *= k
        else:
            choices.append(("union", n, [0]))
            dropped += 1
    if not choices:
        return (problem,)
    free = {(kind, key) for kind, key, opts in choices if len(opts) == 1}   # past MAX_CASES
    out = []
    for combo in itertools.product(*[opts for _, _, opts in choices]):
        pick: dict = {}
        part_of: dict[int, int] = {}
        for (kind, key, _), c in zip(choices, combo):
            if kind == "side":
                pick[key] = c
            else:
                part_of[key] = c
        cons: list[Constraint] = []
        for kind, key, opts in choices:
            if kind == "side" and ("side", key) not in free:
                v = pick[key]
                cons += [_ratio({u: Fraction(1)}, {v: Fraction(1)}) for u in key if u != v]
        terms: list[Term] = []
        for n, t in enumerate(problem.terms):
            if t.kind == "union":
                a = part_of[n]
                chosen = _monomial(t.parts[a], pick)
                if ("union", n) not in free:
                    for b, part in enumerate(t.parts):
                        if b == a:
                            continue
                        # max over part b's own side choices: every combination must stay ≤ part a
                        multi = [tuple(sorted(d)) for d in part if len(d) > 1]
                        for sel in itertools.product(*multi):
                            alt = {**pick, **dict(zip(multi, sel))}
                            g = _ratio(_monomial(part, alt), chosen)
                            if g and g not in cons:
                                cons.append(g)
                dims = tuple((v,) for v, e in chosen.items() for _ in range(int(e)))
                terms.append(Term(t.array, "input", dims, (0,) * len(dims),
                                  label=f"{t.label} (largest: part {a + 1} of {len(t.parts)})"))
            else:
                dims = tuple(d if len(d) <= 1 else (pick[tuple(sorted(d))],) for d in t.dims)
                terms.append(replace(t, dims=dims))
        label = ", ".join(constraint_text(g) for g in cons) or "no order constraint"
        notes = problem.notes
        if dropped:
            notes = notes + (f"{dropped} max(…) bounded by their first argument only "
                             f"(more than {MAX_CASES} cases)",)
        out.append(replace(problem, terms=tuple(terms), constraints=tuple(cons), case=label, notes=notes))
    return tuple(out)
