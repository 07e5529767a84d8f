"""Linear domination: χ(X) ≤ z·X when every statement's work is at most one access monomial (section 5.4.5).

For subgraphs whose leading exponent is at most 1 (matrix–vector kernels), spreading each work monomial
fractionally over the access monomials that dominate it bounds χ by an exact LP, tighter than the sum of
the statements' AM–GM constants when several statements share the work.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from meshplan.models.soap.sdg import SubProblem
from meshplan.solvers.soap.lp import solve_rows
from meshplan.solvers.soap.monomials import access_key_ids, cached, monomials, structure

__all__ = ["linear_domination", "dominated"]


def dominated(work: dict, access: dict, constraints) -> bool:
    """``∏D^work ≤ ∏D^access`` for all |D| ≥ 1 satisfying the order constraints.

    With ``e = access − work`` it suffices that ``e + μ·g ≥ 0`` for some
    ``μ ≥ 0`` and one constraint ``∏D^g ≤ 1`` (or none): then
    ``∏D^e ≥ ∏D^{−μg} ≥ 1``.
    """
    e = dict(access)
    for v, x in work.items():
        e[v] = e.get(v, 0) - x
    short = {v: x for v, x in e.items() if x < 0}
    if not short:
        return True
    for g in constraints:          # μ ≥ -e_v/g_v where g_v > 0, μ ≤ e_v/(-g_v) where g_v < 0 (e_v = 0 off e)
        gd = dict(g)
        if any(gd.get(v, 0) <= 0 for v in short):
            continue               # a short variable this row cannot lift
        lo = max(Fraction(-x) / gd[v] for v, x in short.items())
        caps = [Fraction(e.get(v, 0)) / -gv for v, gv in gd.items() if gv < 0]
        if not caps or lo <= min(caps):
            return True
    return False


@functools.lru_cache(maxsize=16384)
def _dominated_key(work: tuple, access: tuple, constraints: tuple) -> bool:
    return dominated(dict(work), dict(access), constraints)


def _dominated_ids(wk: tuple, wid: int, key: tuple, kid: int, problem: SubProblem, cons: int) -> bool:
    """:func:`dominated` of the work ``wk`` and the access key ``key`` under ``problem``'s order constraints,
    cached by their numbers (``wid``, ``kid``, ``cons``: equal numbers, equal arguments) so a lookup hashes
    no ``Fraction`` exponent."""
    got = _DOMINATED.get((wid, kid, cons))
    if got is None:
        if len(_DOMINATED) > 65536:
            _DOMINATED.clear()
        got = _DOMINATED[wid, kid, cons] = _dominated_key(wk, key, problem.constraints)
    return got


#: :func:`_dominated_ids`'s answers, and the work exponent keys' numbers (never cleared: few per program)
_DOMINATED: dict[tuple[int, int, int], bool] = {}
_WORK_IDS: dict[tuple, int] = {}


def linear_domination(problem: SubProblem):
    """``z`` with χ(X) ≤ z·X, from spreading each work monomial over access monomials ≥ it
    (once per access table, order constraints and work)."""
    key = (*structure(problem)[1:], tuple(cls for _, cls in problem.work))
    return cached(_LINEAR, key, lambda: _solve_linear_domination(problem))


_LINEAR: dict = {}


def _solve_linear_domination(problem: SubProblem):
    """``z`` with χ(X) ≤ z·X, from spreading each work monomial over access monomials ≥ it.

    If a work monomial ``m_s`` is ≤ an access monomial ``n_j`` for all |D| ≥ 1
    (under the case's order constraints, :func:`dominated`), any fractional
    assignment ``a_sj ≥ 0`` with ``Σ_j a_sj = 1`` gives
    ``Σ_s m_s ≤ Σ_j (Σ_s a_sj) n_j ≤ max_j (Σ_s a_sj / c_j) · Σ_j c_j n_j ≤ z·X``.
    The best ``z`` is an LP, solved exactly: with ``b = a/z`` and ``θ = 1/z``,
    ``max θ  s.t.  Σ_s b_sj ≤ c_j,  θ ≤ Σ_j b_sj,  b, θ ≥ 0``.  Tighter than the
    AM-GM sum when several statements share the work (``None`` when some work
    monomial is dominated by no access monomial).
    """
    monos = monomials(problem)
    keys = [k for k in monos if k]
    works = [dict((v, Fraction(cls.count(v))) for v in set(cls)) for _, cls in problem.work]
    pairs = []                       # (s, j) with m_s ≤ n_j
    reach = []                       # per statement, the access monomials dominating it
    kids = access_key_ids(problem)
    cons = structure(problem)[2]
    for si, w in enumerate(works):
        wk = tuple(sorted(w.items()))
        wid = _WORK_IDS.setdefault(wk, len(_WORK_IDS))
        cands = [j for j, (k, kid) in enumerate(zip(keys, kids)) if _dominated_ids(wk, wid, k, kid, problem, cons)]
        if not cands:
            return None
        pairs += [(si, j) for j in cands]
        reach.append(frozenset(cands))
    if len(works) <= HALL_MAX_STATEMENTS:
        return _hall(reach, [monos[k] for k in keys])
    nvar = len(pairs) + 1            # b_sj ..., θ
    rows, rhs = [], []
    for j, k in enumerate(keys):     # Σ_s b_sj ≤ c_j   (0/±1 entries: integer rows, as the simplex keeps them)
        rows.append(([int(pj == j) for _, pj in pairs] + [0], 1))
        rhs.append(monos[k])
    for si in range(len(works)):     # θ − Σ_j b_sj ≤ 0
        rows.append(([-int(ps == si) for ps, _ in pairs] + [1], 1))
        rhs.append(Fraction(0))
    res = solve_rows([Fraction(0)] * (nvar - 1) + [Fraction(1)], rows, rhs)
    if res is None or res[0] <= 0:
        return None
    return 1 / res[0]


#: up to this many statements the LP's optimum is read off its 2^n − 1 Hall conditions (:func:`_hall`);
#: past it the simplex is cheaper (deriche's 12-statement subgraphs: the same time, 14: three times the LP's)
HALL_MAX_STATEMENTS = 10


def _hall(reach: list[frozenset], c: list[Fraction]) -> Fraction:
    """``z = 1/θ*`` of :func:`_solve_linear_domination`'s LP without the simplex.  The LP is a flow: each
    statement sends ``θ`` to the access monomials dominating it (``reach``), monomial ``j`` takes at most
    ``c_j``; by max-flow/min-cut (Hall's condition) every statement can send ``θ`` iff
    ``θ·|T| ≤ Σ_{j ∈ N(T)} c_j`` for every set ``T`` of statements (``N(T)`` the monomials they reach),
    so ``θ* = min_T c(N(T))/|T|`` and ``z = max_T |T|/c(N(T))`` — the LP's optimal value, which is unique,
    as an exact ``Fraction`` (the same value the simplex returns)."""
    n = len(reach)
    # in integers: caps over the coefficients' common denominator L, statement sets and their
    # neighbourhoods as bit masks (each union from the mask without its lowest statement), ratios compared
    # by cross-multiplying; the maximum |T|/c(N(T)) is the same Fraction as summing Fractions per subset
    L = 1
    for cj in c:
        L = L * cj.denominator // math.gcd(L, cj.denominator)
    ci = [cj.numerator * (L // cj.denominator) for cj in c]
    bits = [sum(1 << j for j in r) for r in reach]
    union = [0] * (1 << n)
    best_k, best_cap = 0, 1
    for mask in range(1, 1 << n):
        low = mask & -mask
        u = union[mask] = union[mask ^ low] | bits[low.bit_length() - 1]
        cap = 0
        while u:
            b = u & -u
            cap += ci[b.bit_length() - 1]
            u ^= b
        k = mask.bit_count()
        if k * best_cap > best_k * cap:
            best_k, best_cap = k, cap
    return Fraction(best_k * L, best_cap)
