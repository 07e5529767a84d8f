"""Which statements Barvinok's algorithm counts, and what is left for the closed-form engine.

:func:`count_affine` takes every statement whose iteration domain is a quasi-affine set
(:func:`~meshplan.models.counting.domains.statement_domains`) to Barvinok's algorithm
(:mod:`meshplan.solvers.counting.barvinok`); the rest (geometric and multiplicative updates, polynomial
guards, loops outside the class) is counted by the closed forms of thesis sections 2.3–2.5
(:mod:`meshplan.solvers.counting.analyze`).  An ``if`` on iteration variables whose condition is quasi-affine
is a constraint of the domain, so its unknown ``u_k`` disappears when every statement under it is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from meshplan.models.counting.domains import Domain, statement_domains
from meshplan.models.loops.control import Flow, Opaque, Work, walk_nodes
from meshplan.solvers.counting.barvinok import Cases, count_domains, is_available

__all__ = ["AffineCounts", "count_affine"]


@dataclass(frozen=True, slots=True)
class AffineCounts:
    """Barvinok's counts of the affine statements (``cases``), the reasons the others are not affine, and the
    unknown loop counts ``u_k`` of ``if`` blocks whose statements all were counted (``resolved``)."""

    cases: dict
    total: sp.Expr
    reasons: dict
    resolved: frozenset
    params: tuple[str, ...]


def _params(flow: Flow, domains: dict[str, Domain], procs: str) -> tuple[str, ...]:
    names = list(flow.params)
    if flow.rank:
        names.append(flow.rank)
    counters = {c.name for d in domains.values() for c in d.counters}
    extra = set()
    for d in domains.values():
        for c in d.constraints:
            extra |= {s.name for s in c.free_symbols} - counters
    names += sorted(extra - set(names))
    return tuple(names)


def count_affine(flow: Flow, procs: str = "p") -> AffineCounts | None:
    """Barvinok's count of every statement of ``flow`` with a quasi-affine domain; None when Barvinok is
    not installed or no statement qualifies."""
    if not is_available():
        return None
    doms = statement_domains(flow)
    affine = {k: v for k, v in doms.items() if isinstance(v, Domain)}
    reasons = {k: v for k, v in doms.items() if not isinstance(v, Domain)}
    if not affine:
        return None
    params = _params(flow, affine, procs)
    got = count_domains(affine, params, procs)
    if got is None:  # an unbounded domain: a loop that never stops for some parameters
        return None
    cases = got
    total = sp.Add(*[c.expr for c in cases.values()])
    resolved = set()
    for nd in walk_nodes(flow.body):
        if isinstance(nd, Opaque) and nd.cond is not None:
            works = [w.name for w in walk_nodes(nd.body) if isinstance(w, Work)]
            if all(w in cases for w in works):
                resolved.add(nd.symbol)
    return AffineCounts(cases, total, reasons, frozenset(resolved), params)
