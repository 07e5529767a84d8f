"""The certified relaxation of problem (5.8) and its closed form (sections 4.3.2, 5.4.5).

Each access term is bounded below by a posynomial (Lemma 5.3 by ∏|D|;
Corollary 5.1 by the mean of its leading monomials ``t_i ∏_{k≠i} |D_k|``).
With the dual ``(w, μ)`` of the exponent LP — rows for the access monomials
and for the order constraints ``∏ D^g ≤ 1`` of a max case (section 5.5.3) —
weighted AM–GM gives ``χ(X) ≤ X^W ∏_j (w_j/(W c_j))^{w_j}``; the weights are
chosen on the LP's optimal face to make the constant smallest
(:mod:`dual`).  Exact when every term is a monomial
(:func:`meshplan.solvers.soap.closed.closed_form`), an upper bound on χ (so a
valid I/O bound) otherwise.

The problems here are single cases (:func:`meshplan.models.soap.cases.split_cases`):
one variable per side, no unions.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import sympy as sp

from meshplan.models.soap.sdg import SubProblem
from meshplan.solvers.soap.dual import best_dual
from meshplan.solvers.soap.lp import max_le_one
from meshplan.solvers.soap.monomials import cached, lp_key, monomials, structure

__all__ = ["relaxation", "joint_relaxation", "am_gm_constant", "simplex", "exponent_lp"]


def exponent_lp(problem: SubProblem, monos: dict, work_cls):
    """The exponent LP of one work monomial: ``(W, x, w, μ, keys, A, G)`` or ``None`` if unbounded."""
    return cached(_LP_CACHE, lp_key(problem, work_cls), lambda: _solve_exponent_lp(problem, monos, work_cls))


#: exponent LPs (and their best duals) by problem structure: relaxation and equality_tiles share them
_LP_CACHE: dict = {}


def _lp_rows(problem: SubProblem, monos: dict, work_cls):
    """``(keys, A, G, a)`` of the exponent LP ``max a·x, A x ≤ 1, G x ≤ 0`` (``None``: no access)."""
    keys = [k for k in monos if k]
    classes = list(problem.classes)
    if not keys:
        return None
    _, monos_id, constraints_id = structure(problem)
    zero = Fraction(0)   # (one object for every absent entry: a Fraction is immutable)
    A = cached(_ROWS, ("A", monos_id, problem.classes),
                lambda: [[kd.get(v, zero) for v in classes] for kd in map(dict, keys)])
    G = cached(_ROWS, ("G", constraints_id, problem.classes),
                lambda: [[Fraction(gd.get(v, 0)) for v in classes] for gd in map(dict, problem.constraints)])
    a = [Fraction(work_cls.count(v)) for v in classes]
    return keys, A, G, a


#: the dense rows of the access monomials and order constraints per table and tile classes (shared by the
#: LPs of every statement of a subgraph and its cases; read only)
_ROWS: dict = {}


def simplex(problem: SubProblem, work_cls):
    """``(keys, A, G, a, (W, x, y))`` of one work monomial's exponent LP and its simplex optimum
    (``None`` when there is no access or the LP is unbounded), cached by :func:`lp_key`: the
    relaxation, the boundedness test and screening share it."""
    def solve():
        rows = _lp_rows(problem, monomials(problem), work_cls)
        if rows is None:
            return None
        keys, A, G, a = rows
        opt = max_le_one(a, A + G, [Fraction(1)] * len(A) + [Fraction(0)] * len(G))
        return None if opt is None else (keys, A, G, a, opt)

    return cached(_SIMPLEX, lp_key(problem, work_cls), solve)


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
    monos = monomials(problem)
    classes = list(problem.classes)
    out = []
    for _, cls in problem.work:
        lp = exponent_lp(problem, monos, cls)
        if lp is None:
            return None
        W, x, w, _, keys, _, _ = lp
        C = am_gm_constant(tuple((wj, monos[k]) for wj, k in zip(w, keys) if wj > 0), W)
        out.append((C, W, dict(zip(classes, x))))
    return out


#: the largest exponent denominator (root degree) and base size the AM-GM constant is kept exact for; beyond,
#: sympy would factor numbers of millions of digits (a dual with denominators ~10^8 ran for hours)
EXACT_ROOT, EXACT_BASE = 1000, 10 ** 12


@functools.lru_cache(maxsize=4096)
def am_gm_constant(weights: tuple, W: Fraction) -> sp.Expr:
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
    key = (lp_key(problem, ()), tuple(tuple(cls) for _, cls in problem.work),
           tuple((C, W) for C, W, _ in relax))
    return cached(_JOINT, key, lambda: _joint_relaxation(problem, relax))


_JOINT: dict = {}


def _joint_relaxation(problem: SubProblem, relax):
    monos = monomials(problem)
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
        lps = [exponent_lp(problem, monos, problem.work[k][1]) for k in idx]
        keys = sorted({kk for lp in lps for kk in lp[4]})
        weights = [dict(zip(lp[4], lp[2])) for lp in lps]
        wm = tuple(tuple(float(ws.get(kk, 0)) for kk in keys) for ws in weights)
        C = _joint_constant(wm, tuple(float(monos[kk]) for kk in keys), W, tuple(Cs))
        out.append((C, W))
    return out, ("χ(X): joint Loomis–Whitney bound of the fused statements with one shared budget "
                 "(section 5.5.4), not the sum of their separate maxima" if len(problem.work) > 1 else "")


@functools.lru_cache(maxsize=4096)
def _joint_constant(weights: tuple, coeffs: tuple, W: Fraction, Cs: tuple) -> sp.Expr:
    """``C_W`` of :func:`joint_relaxation` for one exponent from the statements' dual weights (rows of
    ``weights`` over the access monomials, ``coeffs`` their coefficients) and own constants ``Cs``: a
    deterministic function of these numbers, so subgraphs whose statements have the same weights
    (equal up to the names of their tile classes) share it."""
    import numpy as np

    wm = np.array(weights, dtype=float)
    c = np.array(coeffs, dtype=float)
    n = len(Cs)
    Wf = float(W)
    Wc, wmT = Wf * c, wm.T

    def g(pi):                       # pi: (n, k) rows on the simplex
        y = (pi @ wm) / Wc
        ly = np.log(np.maximum(y, 1e-300))          # y_j = 0 only where no statement of weight > 0 uses j
        return np.exp(ly @ wmT)                       # (n, k): each statement's term

    start, noise = _draws(n)
    pts = np.vstack([np.eye(n), np.full((1, n), 1.0 / n), start])
    for scale in (0.03, 0.003):      # refine the best points: fixed point π_s ← m_s/Σm, and local jitter
        vals = g(pts).sum(axis=1)    # (all points again: BLAS may round a row differently in a larger product)
        best = pts[np.argsort(vals)[-10:]]
        fp = best.copy()
        for _ in range(40):
            t = g(fp)
            nxt = t / np.maximum(t.sum(axis=1, keepdims=True), 1e-300)
            if np.array_equal(nxt, fp):   # an exact fixed point: the remaining steps would repeat it
                break
            fp = nxt
        jit = np.abs(best[:, None, :] + noise[scale]).reshape(-1, n)
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
    return C


@functools.lru_cache(maxsize=64)
def _draws(n: int):
    """The random points of :func:`_joint_constant` for ``n`` statements: 1000 Dirichlet starts and the jitter
    of each refinement scale, drawn from one generator seeded 0 in that order — the same numbers for every
    call with the same ``n``, so they are drawn once (read-only arrays)."""
    import numpy as np

    rng = np.random.default_rng(0)
    start = rng.dirichlet(np.ones(n), 1000)
    noise = {scale: rng.normal(0, scale, (10, 100, n)) for scale in (0.03, 0.003)}
    for a in (start, *noise.values()):
        a.setflags(write=False)
    return start, noise
