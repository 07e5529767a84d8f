"""The subgraph statements Theorem 5.1 of Kwasniewski's thesis (section 5.2) iterates over, with the
statements of unbounded work (χ = ∞, per-statement intensity) left out as a fixpoint."""

from __future__ import annotations

from meshplan.models.soap.sdg import SubProblem, subgraph_problem

__all__ = ["ALL_SUBGRAPHS_UP_TO", "CAPPED_SUBGRAPH", "subgraph_statements", "unbounded_in"]

#: Theorem 5.1 takes every subgraph; all are evaluated while at most this many arrays with
#: vertices remain (112 connected subgraphs for ludcmp's 7, 153 for deriche's 8); past it only
#: those of at most :data:`CAPPED_SUBGRAPH` arrays, and the output says the bound is not certified
ALL_SUBGRAPHS_UP_TO = 12
CAPPED_SUBGRAPH = 4


def subgraph_statements(sdg, max_subgraph, dead=()):
    """The subgraph statements to evaluate, with the statements of unbounded work left out:
    ``(problems, excluded statements, free arrays, size cap)``.

    A statement whose own work no access bounds (χ = ∞) in some subgraph is excluded: its
    vertices are left out, and a lower bound on the rest of the CDAG is one on the program
    (per-statement intensity).  An array written only by excluded statements (a *free* array:
    filter states reset to 0.0, copies ``ym2 = ym1``) has no vertices left; in a subgraph it only
    makes the reads of it free (Definition 5.6), which removes access terms and so can only
    raise χ and ρ.  So instead of every subset of free arrays next to the others (deriche:
    1,358 subgraphs of at most 4 arrays), each subgraph of the other arrays (connected through
    free ones) is taken with *all* the free arrays its statements read: its ρ bounds that of
    every such subset, of any size.  The other arrays' subgraphs are all of them (Theorem 5.1)
    up to :data:`ALL_SUBGRAPHS_UP_TO` arrays.

    The excluded set is a fixpoint: every subgraph of the final list has bounded work.  Each
    round goes through the subgraphs by size and starts the next round as soon as some
    statement is newly unbounded (ludcmp's two are found among pairs); a subgraph statement
    already tested is not tested again.  The final round goes through every subgraph, so the
    order of the rounds only decides which of two valid fixpoints is reached (a statement
    unbounded only next to one excluded later is kept, with its ρ over the subgraphs that
    remain)."""
    excluded: list[str] = list(dead)   # dead statements (models/soap/dead.py) are left out from the start
    seen: dict[tuple, list[int]] = {}     # across rounds: most subgraphs recur unchanged
    built: dict[tuple, SubProblem] = {}   # (arrays, their excluded writers) → the subgraph statement
    while True:
        gone = set(excluded)
        free = tuple(a for a in sdg.computed if all(st.name in gone for st in sdg.program.writers(a)))
        live = len(sdg.computed) - len(free)
        cap = max_subgraph if max_subgraph is not None else (
            live if live <= ALL_SUBGRAPHS_UP_TO else CAPPED_SUBGRAPH)
        out: list[SubProblem] = []
        new: list[str] = []
        for size in range(1, cap + 1):
            fresh = []
            for H in sdg.connected_subsets(max_size=size, min_size=size, through=frozenset(free)):
                read = {a.array for st in sdg.program.statements
                        if st.output.array in H and st.name not in gone for a in st.inputs}
                arrays = tuple(H) + tuple(a for a in free if a in read)
                cut = frozenset(st.name for a in arrays for st in sdg.program.writers(a) if st.name in gone)
                if (arrays, cut) not in built:     # only the excluded writers of its arrays matter
                    built[arrays, cut] = subgraph_problem(sdg, arrays, exclude=cut)
                    fresh.append(built[arrays, cut])
                out.append(built[arrays, cut])
            new = [n for n in unbounded_in(fresh, seen) if n not in gone]   # a tested one adds nothing new
            if new:
                break
        if not new:
            return out, tuple(excluded), free, cap
        excluded += new


def unbounded_in(problems: list[SubProblem], seen: dict) -> tuple[str, ...]:
    """Statements whose own work is unbounded (χ = ∞) in some subgraph or one of its max cases
    (per-statement intensity).  Decided from the exponent LPs alone, before any χ is derived: a
    case is unbounded exactly when one of its statements' LPs is (the relaxation's test), and a
    fused iterated stencil (a pyramid) is bounded, so no subgraph is derived twice.  ``seen`` holds
    the answers by :func:`canonical_key` (problems equal up to renaming: their work indices)."""
    from meshplan.models.soap.cases import has_max, split_cases
    from meshplan.solvers.soap.memo import canonical_key
    from meshplan.solvers.soap.pyramid import pyramid_shape
    from meshplan.solvers.soap.rays import unbounded_statements

    out: list[str] = []
    for p in problems:
        key = canonical_key(p)
        if key not in seen:
            names: list[str] = []
            if pyramid_shape(p) is None:
                for c in (split_cases(p) if has_max(p) else (p,)):
                    names += [n for n in unbounded_statements(c) if n not in names]
            index = {name: k for k, (name, _) in enumerate(p.work)}
            seen[key] = [index[n] for n in names]
        out += [n for n in (p.work[k][0] for k in seen[key]) if n not in out]
    return tuple(out)
