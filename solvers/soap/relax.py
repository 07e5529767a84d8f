"""The certified relaxation of problem (5.8) and its closed form (sections 4.3.2, 5.4.5).

Each access term is bounded below by a posynomial (Lemma 5.3 by ∏|D|;
Corollary 5.1 by the mean of its leading monomials ``t_i ∏_{k≠i} |D_k|``).
With the dual ``(w, μ)`` of the exponent LP — rows for the access monomials
and for the order constraints ``∏ D^g ≤ 1`` of a max case (section 5.5.3) —
weighted AM–GM gives ``χ(X) ≤ X^W ∏_j (w_j/(W c_j))^{w_j}``; the weights are
chosen on the LP's optimal face to make the constant smallest
(:mod:`dual`).  Exact when every term is a monomial (:func:`closed_form`), an
upper bound on χ (so a valid I/O bound) otherwise.

The problems here are single cases (:func:`meshplan.models.soap.cases.split_cases`):
one variable per side, no unions.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import sympy as sp

from meshplan.models.soap.sdg import SubProblem, Term
from meshplan.models.soap.symbolic import simplified
from meshplan.solvers.soap.dual import best_dual
from meshplan.solvers.soap.lp import max_le_one
from meshplan.solvers.soap.symbols import X

__all__ = ["relaxation", "joint_relaxation", "unbounded_statements", "linear_domination", "equality_tiles", "closed_form"]


def _sides(vs: tuple[str, ...]) -> list[tuple[Fraction, dict[str, Fraction]]]:
    """A box side as a monomial (one variable; a max must be split into cases first)."""
    if not vs:
        return [(Fraction(1), {})]
    if len(vs) > 1:
        raise ValueError(f"side max({', '.join(vs)}): split the max cases first (models.soap.cases)")
    return [(Fraction(1), {vs[0]: Fraction(1)})]


def _mul(a, b):
    return [(ca * cb, _add(ea, eb)) for ca, ea in a for cb, eb in b]


def _add(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _posynomial(term: Term) -> list[tuple[Fraction, dict[str, Fraction]]]:
    """Monomials ``c·∏ D^e`` whose sum is ≤ the term's size for all |D| ≥ t̂."""
    def box(dims):
        out = [(Fraction(1), {})]
        for d in dims:
            out = _mul(out, _sides(d))
        return out

    if term.kind == "union":
        raise ValueError(f"union term {term.array}: split the max cases first (models.soap.cases)")
    sides = [_sides(d) for d in term.dims]
    t = list(term.t)
    if term.kind == "inout":
        sides.append([(Fraction(1), {v: Fraction(1) for v in term.version})])
        t.append(term.t_version)
        act = [i for i, ti in enumerate(t) if ti > 0]
        out = []
        for i in act:   # ∏s - ∏(s-t) ≥ t_i ∏_{k≠i} s_k for every i, so ≥ their mean
            mon = [(Fraction(t[i], len(act)), {})]
            for k, sd in enumerate(sides):
                if k != i:
                    mon = _mul(mon, sd)
            out += mon
        return out
    out = [(Fraction(1), {})]
    for sd in sides:
        out = _mul(out, sd)
    return out   # Lemma 5.3: ≥ ∏ s


def _exponent_lp(problem: SubProblem, monos: dict, work_cls):
    """The exponent LP of one work monomial: ``(W, x, w, μ, keys, A, G)`` or ``None`` if unbounded."""
    return _cached(_LP_CACHE, _lp_key(problem, work_cls), lambda: _solve_exponent_lp(problem, monos, work_cls))


def _cached(store: dict, key, compute):
    """``store[key]``, computed on a miss; a store past :data:`_CACHE_LIMIT` entries is emptied first."""
    if key not in store:
        if len(store) > _CACHE_LIMIT:
            store.clear()
        store[key] = compute()
    return store[key]


_CACHE_LIMIT = 8192
#: exponent LPs (and their best duals) by problem structure: relaxation and equality_tiles share them
_LP_CACHE: dict = {}


def _lp_rows(problem: SubProblem, monos: dict, work_cls):
    """``(keys, A, G, a)`` of the exponent LP ``max a·x, A x ≤ 1, G x ≤ 0`` (``None``: no access)."""
    keys = [k for k in monos if k]
    classes = list(problem.classes)
    if not keys:
        return None
    _, monos_id, constraints_id = _structure(problem)
    A = _cached(_ROWS, ("A", monos_id, problem.classes),
                lambda: [[kd.get(v, Fraction(0)) for v in classes] for kd in map(dict, keys)])
    G = _cached(_ROWS, ("G", constraints_id, problem.classes),
                lambda: [[Fraction(gd.get(v, 0)) for v in classes] for gd in map(dict, problem.constraints)])
    a = [Fraction(work_cls.count(v)) for v in classes]
    return keys, A, G, a


#: the dense rows of the access monomials and order constraints per table and tile classes (shared by the
#: LPs of every statement of a subgraph and its cases; read only)
_ROWS: dict = {}


def simplex(problem: SubProblem, work_cls):
    """``(keys, A, G, a, (W, x, y))`` of one work monomial's exponent LP and its simplex optimum
    (``None`` when there is no access or the LP is unbounded), cached by :func:`_lp_key`: the
    relaxation, the boundedness test and screening share it."""
    def solve():
        rows = _lp_rows(problem, _monomials(problem), work_cls)
        if rows is None:
            return None
        keys, A, G, a = rows
        opt = max_le_one(a, A + G, [Fraction(1)] * len(A) + [Fraction(0)] * len(G))
        return None if opt is None else (keys, A, G, a, opt)

    return _cached(_SIMPLEX, _lp_key(problem, work_cls), solve)


_SIMPLEX: dict = {}


def _solve_exponent_lp(problem: SubProblem, monos: dict, work_cls):
    lp = simplex(problem, work_cls)
    if lp is None:
        return None
    keys, A, G, a, res = lp
    W, x, y = res
    w, mu = y[:len(A)], y[len(A):]
    w, mu = best_dual(A, G, a, [monos[k] for k in keys], W, w, mu, x)
    return W, x, w, mu, keys, A, G


def relaxation(problem: SubProblem):
    """Per work monomial ``(C, W, x)`` with ``χ_s(X) ≤ C·X^W``; ``None`` if χ is unbounded."""
    monos = _monomials(problem)
    classes = list(problem.classes)
    out = []
    for _, cls in problem.work:
        lp = _exponent_lp(problem, monos, cls)
        if lp is None:
            return None
        W, x, w, _, keys, _, _ = lp
        C = _am_gm_constant(tuple((wj, monos[k]) for wj, k in zip(w, keys) if wj > 0), W)
        out.append((C, W, dict(zip(classes, x))))
    return out


#: the largest exponent denominator (root degree) and base size the AM-GM constant is kept exact for; beyond,
#: sympy would factor numbers of millions of digits (a dual with denominators ~10^8 ran for hours)
EXACT_ROOT, EXACT_BASE = 1000, 10 ** 12


@functools.lru_cache(maxsize=4096)
def _am_gm_constant(weights: tuple, W: Fraction) -> sp.Expr:
    """``∏_j (w_j/(W c_j))^{w_j}`` over ``(w_j, c_j)`` pairs with ``w_j > 0`` (simplified once).

    Exact for the small rationals of real loop nests; when a degenerate LP dual has exponents with large
    denominators (or the bases large parts), a rational just above the value (52 digits of mpmath, then up
    by 1e-12 relative): ``χ ≤ C·X^W`` stays an upper bound, the I/O bound a valid (negligibly weaker) one."""
    bases = [(Fraction(wj) / (Fraction(W) * Fraction(cj)), Fraction(wj)) for wj, cj in weights]
    if all(e.denominator <= EXACT_ROOT and max(b.numerator, b.denominator) <= EXACT_BASE for b, e in bases):
        C = sp.Integer(1)
        for b, e in bases:
            C *= sp.Rational(b) ** sp.Rational(e)
        return sp.nsimplify(C)
    import mpmath

    with mpmath.workdps(52):
        value = mpmath.exp(mpmath.fsum(mpmath.mpf(e.numerator) / e.denominator
                                       * mpmath.log(mpmath.mpf(b.numerator) / b.denominator) for b, e in bases))
        return sp.Rational(int(mpmath.ceil(value * (1 + mpmath.mpf(10) ** -12) * 10 ** 15)), 10 ** 15)


def joint_relaxation(problem: SubProblem, relax):
    """χ(X) ≤ Σ_W C_W·X^W with one budget shared by the statements of a fused subgraph.

    Per statement ``s`` the exponent LP's dual gives ``m_s ≤ ∏_j M_j^{w_sj}``
    (``Σ_j w_sj = W_s``) over the access monomials ``M_j``, whose budget
    shares ``u_j = c_j M_j`` satisfy ``Σ_j u_j ≤ X``.  For the statements of
    one exponent ``W`` the joint Loomis–Whitney problem is
    ``max Σ_s ∏_j (u_j/c_j)^{w_sj}`` on that simplex (homogeneous of degree
    ``W``, so ``= C_W X^W``) — not ``Σ_s`` of each statement's maximum with the
    whole ``X`` (for 2mm the latter doubles χ).  At a maximum the KKT
    conditions with Euler's identity give ``u_j = X·Σ_s π_s w_sj / W`` with
    ``π_s = m_s/Σ m`` the statements' shares of the work, so the maximum is
    one over the statement simplex of ``g(π)``; its vertices are the
    statements' own constants ``C_s`` (exact).  ``g`` is maximized numerically
    (vertices, grid, fixed-point refinement); when no point beats the best
    vertex (relative 1e-9) ``C_W = max_s C_s`` exactly, otherwise a rational
    just above the numeric maximum, never above ``Σ_s C_s``.  Returns
    ``[(C_W, W), …]`` and a note.  Cached by the problem's structure and ``relax`` (the screen's
    relaxation stage and the derivation ask for the same subgraphs; the search is deterministic).
    """
    key = (_lp_key(problem, ()), tuple(tuple(cls) for _, cls in problem.work),
           tuple((C, W) for C, W, _ in relax))
    return _cached(_JOINT, key, lambda: _joint_relaxation(problem, relax))


_JOINT: dict = {}


def _joint_relaxation(problem: SubProblem, relax):
    import numpy as np

    monos = _monomials(problem)
    groups: dict = {}
    for k, (_, cls) in enumerate(problem.work):
        groups.setdefault(relax[k][1], []).append(k)
    out = []
    for W, idx in groups.items():
        Cs = [relax[k][0] for k in idx]
        if len(idx) == 1:
            out.append((Cs[0], W))
            continue
        if W == 0:  # constant counts share no budget: the bound is their sum (and g below would divide by W)
            out.append((sum(Cs), W))
            continue
        lps = [_exponent_lp(problem, monos, problem.work[k][1]) for k in idx]
        keys = sorted({kk for lp in lps for kk in lp[4]})
        wm = np.zeros((len(idx), len(keys)))
        for r, lp in enumerate(lps):
            for wj, kk in zip(lp[2], lp[4]):
                wm[r, keys.index(kk)] = float(wj)
        c = np.array([float(monos[kk]) for kk in keys])
        Wf = float(W)

        Wc, wmT = Wf * c, wm.T

        def g(pi):                       # pi: (n, k) rows on the simplex
            y = (pi @ wm) / Wc
            ly = np.log(np.maximum(y, 1e-300))          # y_j = 0 only where no statement of weight > 0 uses j
            return np.exp(ly @ wmT)                       # (n, k): each statement's term

        rng = np.random.default_rng(0)
        n = len(idx)
        pts = np.vstack([np.eye(n), np.full((1, n), 1.0 / n), rng.dirichlet(np.ones(n), 1000)])
        for scale in (0.03, 0.003):      # refine the best points: fixed point π_s ← m_s/Σm, and local jitter
            vals = g(pts).sum(axis=1)    # (all points again: BLAS may round a row differently in a larger product)
            best = pts[np.argsort(vals)[-10:]]
            fp = best.copy()
            for _ in range(40):
                t = g(fp)
                fp = t / np.maximum(t.sum(axis=1, keepdims=True), 1e-300)
            jit = np.abs(best[:, None, :] + rng.normal(0, scale, (10, 100, n))).reshape(-1, n)
            jit = jit / jit.sum(axis=1, keepdims=True)
            pts = np.vstack([pts, fp, jit])
        top = float(g(pts).sum(axis=1).max())
        cmax = max(Cs, key=lambda e: float(e))
        if top <= float(cmax) * (1 + 1e-9):
            C = cmax
        else:
            C = sp.Rational(math.ceil(top * (1 + 1e-7) * 10 ** 12), 10 ** 12)
            total = sp.Add(*Cs)
            if float(C) >= float(total):
                C = total
        out.append((C, W))
    return out, ("χ(X): joint Loomis–Whitney bound of the fused statements with one shared budget "
                 "(section 5.5.4), not the sum of their separate maxima" if len(problem.work) > 1 else "")


def unbounded_statements(problem: SubProblem) -> tuple[str, ...]:
    """The statements of ``problem`` whose work monomial no combination of access monomials bounds
    (the exponent LP is unbounded: some of its loop variables appear in no access).

    The rays (:func:`_ray_support`) depend on the accesses and order rows only, so they are found
    once for all the statements; the simplex decides the rest."""
    keys = [k for k in _monomials(problem) if k]
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


def _bounded(rows) -> bool | None:
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


def _dominated(work: dict, access: dict, constraints) -> bool:
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
    return _dominated(dict(work), dict(access), constraints)


def linear_domination(problem: SubProblem):
    """``z`` with χ(X) ≤ z·X, from spreading each work monomial over access monomials ≥ it
    (once per access table, order constraints and work)."""
    key = (*_structure(problem)[1:], tuple(cls for _, cls in problem.work))
    return _cached(_LINEAR, key, lambda: _solve_linear_domination(problem))


_LINEAR: dict = {}


def _solve_linear_domination(problem: SubProblem):
    """``z`` with χ(X) ≤ z·X, from spreading each work monomial over access monomials ≥ it.

    If a work monomial ``m_s`` is ≤ an access monomial ``n_j`` for all |D| ≥ 1
    (under the case's order constraints, :func:`_dominated`), any fractional
    assignment ``a_sj ≥ 0`` with ``Σ_j a_sj = 1`` gives
    ``Σ_s m_s ≤ Σ_j (Σ_s a_sj) n_j ≤ max_j (Σ_s a_sj / c_j) · Σ_j c_j n_j ≤ z·X``.
    The best ``z`` is an LP, solved exactly: with ``b = a/z`` and ``θ = 1/z``,
    ``max θ  s.t.  Σ_s b_sj ≤ c_j,  θ ≤ Σ_j b_sj,  b, θ ≥ 0``.  Tighter than the
    AM-GM sum when several statements share the work (``None`` when some work
    monomial is dominated by no access monomial).
    """
    monos = _monomials(problem)
    keys = [k for k in monos if k]
    works = [dict((v, Fraction(cls.count(v))) for v in set(cls)) for _, cls in problem.work]
    pairs = []                       # (s, j) with m_s ≤ n_j
    for si, w in enumerate(works):
        wk = tuple(sorted(w.items()))
        cands = [j for j, k in enumerate(keys) if _dominated_key(wk, k, problem.constraints)]
        if not cands:
            return None
        pairs += [(si, j) for j in cands]
    nvar = len(pairs) + 1            # b_sj ..., θ
    rows, rhs = [], []
    for j, k in enumerate(keys):     # Σ_s b_sj ≤ c_j
        rows.append([Fraction(int(pj == j)) for _, pj in pairs] + [Fraction(0)])
        rhs.append(monos[k])
    for si in range(len(works)):     # θ − Σ_j b_sj ≤ 0
        rows.append([Fraction(-int(ps == si)) for ps, _ in pairs] + [Fraction(1)])
        rhs.append(Fraction(0))
    res = max_le_one([Fraction(0)] * (nvar - 1) + [Fraction(1)], rows, rhs)
    if res is None or res[0] <= 0:
        return None
    return 1 / res[0]


def _monomials(problem: SubProblem) -> dict[tuple, Fraction]:
    """The access monomials ``∏ D^e`` of the problem's terms and their coefficients (shared: read only)."""
    return _structure(problem)[0]


def _lp_key(problem: SubProblem, work_cls) -> tuple:
    """The identity of one exponent LP: the problem's classes, access monomials (by an interned number)
    and order constraints, and the work monomial."""
    _, monos_id, constraints_id = _structure(problem)
    return (problem.classes, monos_id, constraints_id, tuple(work_cls))


def _structure(problem: SubProblem) -> tuple[dict, int, int]:
    """``(access monomials, their number, the order constraints' number)`` of ``problem``, looked up by
    the object itself (a frozen value, asked for thousands of times per program) before its terms and
    constraints are hashed again (hashing their ``Fraction`` exponents dominated the lookups)."""
    got = _BY_OBJECT.get(id(problem))
    if got is not None and got[0] is problem:
        return got[1]
    monos, monos_id = _monomials_of(problem.terms)
    out = (monos, monos_id, _intern(_CONSTRAINT_IDS, problem.constraints))
    if len(_BY_OBJECT) > _CACHE_LIMIT:
        _BY_OBJECT.clear()
    _BY_OBJECT[id(problem)] = (problem, out)   # the entry holds the object, so its id is not reused
    return out


_BY_OBJECT: dict[int, tuple] = {}


#: access-monomial tables and order constraints → a number (the cache keys hold the number, so a
#: lookup does not hash the exponents again); numbers are never reused (the caches keyed by them
#: stay right when a table is cleared)
_MONO_IDS: dict[tuple, int] = {}
_CONSTRAINT_IDS: dict[tuple, int] = {}
_NEXT_ID = itertools.count()


def _intern(table: dict, value: tuple) -> int:
    got = table.get(value)
    if got is None:
        if len(table) > 65536:
            table.clear()
        got = table[value] = next(_NEXT_ID)
    return got


@functools.lru_cache(maxsize=8192)
def _monomials_of(terms: tuple) -> tuple[dict[tuple, Fraction], int]:
    monos: dict[tuple, Fraction] = {}
    for term in terms:
        for c, e in _posynomial(term):
            key = tuple(sorted((k, v) for k, v in e.items() if v != 0))
            monos[key] = monos.get(key, Fraction(0)) + c
    return monos, _intern(_MONO_IDS, tuple(monos.items()))


def equality_tiles(problem: SubProblem, work_index: int = 0):
    """Tiles |D|(X) where weighted AM-GM is tight for one work monomial (``None`` if undetermined).

    Complementary slackness fixes the rest: an order constraint with ``μ > 0``
    holds with equality, and a tile whose dual row has slack
    (``(Aᵀw + Gᵀμ)_v > c_v``) sits at its lower bound ``|D^v| = 1``.
    """
    monos = _monomials(problem)
    classes = list(problem.classes)
    L = {c: sp.Symbol(f"L_{c}") for c in classes}
    cls = problem.work[work_index][1]
    lp = _exponent_lp(problem, monos, cls)
    if lp is None:
        return None
    W, _, w, mu, keys, A, G = lp
    Wr = sp.Rational(W)
    eqs = []
    for wj, k in zip(w, keys):
        if wj > 0:
            cj = sp.Rational(monos[k])
            eqs.append(sp.Add(*[sp.Rational(v) * L[n] for n, v in k]) - sp.log(sp.Rational(wj) * X / (Wr * cj)))
    for mk, g in zip(mu, problem.constraints):
        if mk > 0:
            eqs.append(sp.Add(*[sp.Rational(e) * L[n] for n, e in g]))
    for i, v in enumerate(classes):
        lhs = sum((w[j] * A[j][i] for j in range(len(w))), Fraction(0)) + \
            sum((mu[k] * G[k][i] for k in range(len(mu))), Fraction(0))
        if lhs > cls.count(v):
            eqs.append(L[v])
    sol = sp.linsolve(eqs, [L[c] for c in classes])
    if not sol:
        return None
    vals = next(iter(sol))
    free = set().union(*[v.free_symbols for v in vals]) & set(L.values())
    tiles = {c: simplified(sp.exp(v.subs({f: 0 for f in free}))) for c, v in zip(classes, vals)}
    for xv in (1e5, 1e9):
        try:
            num = {c: float(e.subs(X, xv)) for c, e in tiles.items()}
        except (TypeError, ValueError):
            return None
        if any(v < 1 - 1e-9 for v in num.values()) or not satisfies(problem, num):
            return None
    return tiles


def satisfies(problem: SubProblem, D: dict, rel: float = 1e-9) -> bool:
    """The order constraints of a max case hold at tiles ``D`` (floats, up to ``rel``)."""
    for g in problem.constraints:
        val = 1.0
        for v, e in g:
            val *= float(D[v]) ** float(e)
        if val > 1 + rel:
            return False
    return True


def closed_form(problem: SubProblem, relax):
    """χ and tiles when every access term is a monomial: the AM-GM equality point.

    Then the relaxation is exact; its equality conditions give the tiles, and
    a feasible point attaining the bound is the maximum (the KKT point of the
    geometric program).
    """
    if len(problem.work) != 1:
        return None
    P, F = problem.work_expr(), problem.access_expr()
    monos = _monomials(problem)
    D = problem.symbols
    lower = sp.Add(*[sp.Rational(c)
                     * sp.Mul(*[D[k] ** sp.Rational(v) for k, v in key])
                     for key, c in monos.items()])
    if sp.expand(F - lower) != 0:
        return None
    C, W, _ = relax[0]
    tiles = equality_tiles(problem, 0)
    if tiles is None:
        return None
    chi = C * X ** sp.Rational(W)
    for xv in (1e5, 1e9):
        num = {D[c]: float(e.subs(X, xv)) for c, e in tiles.items()}
        if not satisfies(problem, {c: num[D[c]] for c in tiles}):
            return None
        if abs(float(F.subs(num)) - xv) > 1e-6 * xv or \
                abs(float(P.subs(num)) - float(chi.subs(X, xv))) > 1e-6 * float(chi.subs(X, xv)):
            return None
    return chi, tiles
