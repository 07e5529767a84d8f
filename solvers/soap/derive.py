"""Which subgraph statements to derive: screening against the derived intensities (Theorem 5.1).

Any upper bound on ρ_H may stand in for ρ_H in Theorem 5.1, so a subgraph needs its full derivation
(:func:`meshplan.solvers.soap.chi.intensity`) only if it could attain ``max_{H∋A} ρ_H`` for one of its
arrays; :mod:`meshplan.solvers.soap.screen` gives the upper bounds, in stages of rising cost.
"""

from __future__ import annotations

from meshplan.models.soap.sdg import SubProblem
from meshplan.solvers.soap.chi import SAMPLE_S, Intensity, intensity
from meshplan.solvers.soap.memo import IntensityMemo, canonical_key
from meshplan.solvers.soap.screen import screen

__all__ = ["derive_screened"]


def derive_screened(problems: list[SubProblem], counted: set[str]) -> list[Intensity]:
    """The intensity of every subgraph in ``problems``: derived (:func:`intensity`, once per problem up
    to renaming) for those that may lead an array of ``counted``, the screening bound for the rest.

    Per array, the undecided subgraph with the largest screening bound (at the middle sampled S) is
    derived next, until every other subgraph holding the array has a screening bound at most the
    elementwise maximum of the derived ρ at every sampled S (:data:`SAMPLE_S`) and cannot win a tie
    for it (strictly below at some sample, or after the first derived subgraph attaining it — the
    per-array maximum takes the first dominating subgraph in order).  A subgraph that cannot be
    screened is always derived; the one about to be derived first gets the screen's relaxation stage
    (:class:`~meshplan.solvers.soap.screen.Relaxed`) and is set aside instead if that settles it.
    The derived ρ are the ones ``screen=False`` gives, and a
    screened subgraph's ρ is bounded by them, so the per-array maxima — and the bound — are the
    same as deriving everything (up to ``Max`` arguments dominated at every sample)."""
    memo = IntensityMemo(intensity)
    keys = [canonical_key(p) for p in problems]
    first: dict[tuple, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    quick = {k: screen(problems[i]) for k, i in first.items()}
    derived: dict[tuple, list[float]] = {}
    holders = {A: [i for i, p in enumerate(problems) if A in p.arrays] for A in counted}
    mid = len(SAMPLE_S) // 2

    def derive(i: int) -> None:
        it = memo(problems[i], keys[i])
        derived[keys[i]] = [it.rho_at(s) for s in SAMPLE_S]

    for k, q in quick.items():
        if q is None:
            derive(first[k])

    def below(q: list[float], i: int, best: list[float], lead: int | None) -> bool:
        if not all(a <= b * (1 + 1e-12) for a, b in zip(q, best)):
            return False
        return any(a < b * (1 - 1e-12) for a, b in zip(q, best)) or (lead is not None and lead < i)

    def refine(i: int, deep: bool = False) -> bool:
        """Lower subgraph ``i``'s bound by one stage (:meth:`Screen.refined`: linear domination, then, with
        ``deep``, the relaxation); whether it changed."""
        finer = quick[keys[i]].refined(deep)
        if finer is not None:
            quick[keys[i]] = finer
        return finer is not None

    def settled(i: int, best: list[float] | None, lead: int | None) -> bool:
        """Whether subgraph ``i`` is derived or below ``best`` (with the finer bounds while the cheaper are not)."""
        if keys[i] in derived:
            return True
        if best is None:
            return False
        while not below(quick[keys[i]].values, i, best, lead):
            if not refine(i):
                return False
        return True

    def deepened(i: int, best: list[float], lead: int | None) -> bool:
        """Whether subgraph ``i`` falls below ``best`` with the dearer stages (the relaxation) too."""
        while refine(i, deep=True):
            if below(quick[keys[i]].values, i, best, lead):
                return True
        return False

    def pick(open_: list[int]) -> int:
        """The open subgraph with the largest finer bound at the middle S (first in order on ties), refining
        in order of the current bounds only until none left can win (refining only lowers a bound)."""
        def key(i):
            return (quick[keys[i]].values[mid], -i)
        top = None
        for i in sorted(open_, key=key, reverse=True):
            if top is not None and key(i) <= key(top):
                break
            refine(i)
            if top is None or key(i) > key(top):
                top = i
        return top

    while True:
        progressed = False
        for A in sorted(counted):
            rows = [(i, derived[keys[i]]) for i in holders[A] if keys[i] in derived]
            best = [max(col) for col in zip(*[r for _, r in rows])] if rows else None
            lead = next((i for i, r in rows if all(a >= b * (1 - 1e-12) for a, b in zip(r, best))), None)
            open_ = [i for i in holders[A] if not settled(i, best, lead)]
            while open_:    # the relaxation stage only for the subgraph about to be derived (it is dearer)
                i = pick(open_)
                if best is not None and deepened(i, best, lead):
                    open_.remove(i)
                    continue
                derive(i)
                progressed = True
                break
        if not progressed:
            break
    return [memo(p, keys[i]) if keys[i] in derived else quick[keys[i]].intensity(p) for i, p in enumerate(problems)]
