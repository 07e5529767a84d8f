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
from meshplan.models.loops.control import Flow, Opaque, Work, forms_of, walk_nodes
from meshplan.solvers.counting.barvinok import count_domains, is_available, qp_text
from meshplan.solvers.counting.sums import Bnd

__all__ = ["AffineCounts", "LazyBnd", "count_affine"]


@dataclass(frozen=True, slots=True)
class AffineCounts:
    """Barvinok's counts of the affine statements (``cases``), the reasons the others are not affine, and the
    unknown loop counts ``u_k`` of ``if`` blocks whose statements all were counted (``resolved``)."""

    cases: dict
    reasons: dict
    resolved: frozenset
    params: tuple[str, ...]

    @property
    def total(self) -> sp.Expr:
        """The sum of the counts, as sympy."""
        return sp.Add(*[c.expr for c in self.cases.values()])

    @property
    def total_text(self) -> str:
        """The sum of the counts as text: the counts that hold for every parameter value added in isl (one
        quasi-polynomial), the piecewise ones after it."""
        plain = [c for c in self.cases.values() if c.qp is not None]
        rest = [c.count_text for c in self.cases.values() if c.qp is None and c.rows()]
        out = []
        if len(plain) == 1:  # one count that holds everywhere: its text is printed already
            out.append(plain[0].count_text)
        elif plain:
            q = plain[0].qp
            for x in plain[1:]:
                q = q.add(x.qp)
            out.append(qp_text(q, list(self.params)))
        for t in rest:
            out.append(t)
        if not out:
            return "0"
        text = out[0]
        for t in out[1:]:
            text += f" - {t[1:]}" if t.startswith("-") else f" + {t}"
        return text


class LazyBnd:
    """A :class:`~meshplan.solvers.counting.sums.Bnd` of an exact count whose sympy expression is built on first
    use (``make()``): Barvinok's counts are printed from isl, sympy is needed only to evaluate or to
    transform them."""

    __slots__ = ("_make", "_e")

    def __init__(self, make) -> None:
        self._make, self._e = make, None

    @property
    def value(self) -> sp.Expr:
        if self._e is None:
            self._e = sp.sympify(self._make())
        return self._e

    lo = hi = value

    def __add__(self, other):
        return Bnd.exact(self.value) + other

    def map(self, f) -> Bnd:
        return Bnd.exact(self.value).map(f)


def _params(flow: Flow, domains: dict[str, Domain], procs: str) -> tuple[str, ...]:
    names = list(flow.params)
    if flow.rank:
        names.append(flow.rank)
    extra = set()
    for d in domains.values():
        extra |= d.parameter_names()
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
    resolved = set()
    for nd in walk_nodes(flow.body):
        if isinstance(nd, Opaque) and (forms_of(nd, "cond") is not None or nd.cond is not None):
            works = [w.name for w in walk_nodes(nd.body) if isinstance(w, Work)]
            if all(w in cases for w in works):
                resolved.add(nd.symbol)
    return AffineCounts(cases, reasons, frozenset(resolved), params)
