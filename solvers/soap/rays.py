"""Which statements of a subgraph have unbounded work: the rays of their exponent LPs (section 5.4.5).

A statement whose work monomial no combination of access monomials bounds (some of its loop variables
appear in no access) makes χ unbounded; :func:`meshplan.solvers.soap.bound.analyze` leaves its vertices
out.  The rays are read off the accesses and order rows; the simplex decides the rest.
"""

from __future__ import annotations

from meshplan.models.soap.sdg import SubProblem
from meshplan.solvers.soap.monomials import monomials
from meshplan.solvers.soap.relax import simplex

__all__ = ["unbounded_statements", "bounded"]


def unbounded_statements(problem: SubProblem) -> tuple[str, ...]:
    """The statements of ``problem`` whose work monomial no combination of access monomials bounds
    (the exponent LP is unbounded: some of its loop variables appear in no access).

    The rays (:func:`_ray_support`) depend on the accesses and order rows only, so they are found
    once for all the statements; the simplex decides the rest."""
    keys = [k for k in monomials(problem) if k]
    if not keys:
        return tuple(name for name, _ in problem.work)
    classes = set(problem.classes)
    support = _ray_support([{v: e for v, e in k if v in classes} for k in keys],
                           [{v: e for v, e in g if v in classes and e != 0} for g in problem.constraints],
                           problem.classes)
    out = []
    for name, cls in problem.work:
        decided = _decide(support, set(cls))
        if decided is None:
            decided = simplex(problem, cls) is not None
        if not decided:
            out.append(name)
    return tuple(out)


def bounded(rows) -> bool | None:
    """Whether ``max a·x, A x ≤ 1, G x ≤ 0, x ≥ 0`` is bounded (the origin is feasible), from dense
    rows ``(keys, A, G, a)`` (``None``: no access — unbounded); ``None`` when only the simplex decides
    (:func:`_ray_support`)."""
    if rows is None:
        return False
    _, A, G, a = rows
    n = range(len(a))
    support = _ray_support([{v: r[v] for v in n if r[v] != 0} for r in A],
                           [{v: g[v] for v in n if g[v] != 0} for g in G], n)
    return _decide(support, {v for v in n if a[v] > 0})


def _ray_support(A: list[dict], G: list[dict], variables) -> tuple[set, bool] | None:
    """Where the rays of an exponent LP ``max a·x, A x ≤ 1, G x ≤ 0, x ≥ 0`` can live, from sparse rows
    (variable → nonzero entry; ``A`` the access exponents, ``G`` the order rows): ``(F, r)`` with ``F``
    the variables a ray may use and ``r`` whether the ray ``1_F`` satisfies every order row
    (``None`` when an access exponent is negative: the simplex decides).

    It is unbounded exactly when a ray ``x ≥ 0`` with ``A x ≤ 0, G x ≤ 0`` has ``a·x > 0``.
    The access exponents ``A`` are ≥ 0, so a ray lives on the variables in no access, minus those
    an order row with no negative entry there forces to 0 (:func:`_decide` reads the answer)."""
    if any(e < 0 for r in A for e in r.values()):
        return None
    F = set(variables) - {v for r in A for v in r}   # a ray lives on these
    changed = True
    while changed:          # x_u = 0 when a row g·x ≤ 0 has g_u > 0 and no negative entry on F
        changed = False
        for g in G:
            if all(g.get(v, 0) >= 0 for v in F):
                hit = {v for v in F if g.get(v, 0) > 0}
                if hit:
                    F -= hit
                    changed = True
    return F, all(sum(g.get(v, 0) for v in F) <= 0 for g in G)


def _decide(support: tuple[set, bool] | None, work: set) -> bool | None:
    """Bounded (``True``), unbounded (``False``) or undecided (``None``: the simplex decides) for the
    work variables ``work`` (positive work exponent), from :func:`_ray_support`: no ray variable in
    the work — bounded; the ray ``1_F`` feasible and in the work — unbounded."""
    if support is None:
        return None
    F, ray = support
    if not F & work:
        return True
    return False if ray else None
