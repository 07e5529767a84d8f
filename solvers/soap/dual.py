"""The tightest AM–GM certificate on the optimal face of the exponent LP (section 5.4.5).

The relaxation of :mod:`meshplan.solvers.soap.relax` bounds the work of a tile
by ``C(w)·X^W`` for every dual-feasible weight vector ``(w, μ)`` of the
exponent LP with ``Σ w = W``::

    C(w) = ∏_j (w_j / (W c_j))^{w_j},   Aᵀw + Gᵀμ ≥ c,  w, μ ≥ 0.

The simplex returns one vertex of that face, whose constant may be loose (the
thesis's convolution, Example 5.6: ``1/4`` at both vertices, ``1/8`` in the
middle of the face — the exact χ(X) = X²/8).  :func:`best_dual` finds vertices
of the face with exact LPs (minimizing and maximizing each ``w_j`` on it),
minimizes the convex ``log C`` over their convex hull numerically
(exponentiated gradient on the mixing weights), and snaps the mixing weights
to small-denominator fractions: a convex combination of exactly feasible
vertices is exactly feasible, so the certificate stays exact — the numeric
step only chooses it.  For a geometric program with monomial terms the
minimum over the whole face is the exact χ constant (strong duality).
"""

from __future__ import annotations

import math
from fractions import Fraction

from meshplan.solvers.soap.lp import dual_rows, int_rows

__all__ = ["log_constant", "feasible", "face_vertices", "best_dual", "nondegenerate"]

_DENOMINATORS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 1024)


def log_constant(w, coeffs, W) -> float:
    """``log C(w)`` (terms with ``w_j = 0`` contribute nothing)."""
    W = float(W)
    return sum(float(wj) * math.log(float(wj) / (W * float(cj))) for wj, cj in zip(w, coeffs) if wj > 0)


def feasible(w, mu, A, G, c, W) -> bool:
    """Exact check of ``Σ w = W``, ``w, μ ≥ 0`` and ``Aᵀw + Gᵀμ ≥ c`` (integers over one denominator:
    the same verdict as the check in Fractions, without their per-operation normalization)."""
    if any(x < 0 for x in w) or any(x < 0 for x in mu) or sum(w, Fraction(0)) != W:
        return False
    terms = [(wj, row) for wj, row in zip(w, A) if wj] + [(mk, row) for mk, row in zip(mu, G) if mk]
    if not terms:
        return all(cv <= 0 for cv in c)
    # every product x·row[v] over the common denominator L of all weights and row entries
    ratios = [(x.as_integer_ratio(), [a.as_integer_ratio() for a in row]) for x, row in terms]
    L = 1
    for (_, xd), row in ratios:
        L = L * xd // math.gcd(L, xd)
        for _, ad in row:
            if ad != 1:
                L = L * ad // math.gcd(L, ad)
    L2 = L * L
    for v, cv in enumerate(c):
        lhs = 0
        for (xn, xd), row in ratios:
            an, ad = row[v]
            if an:
                lhs += (xn * (L // xd)) * (an * (L // ad))
        cn, cd = cv.as_integer_ratio()
        if lhs * cd < cn * L2:
            return False
    return True


def _face_min(A, G, c, W, d, rows=None):
    """A dual point minimizing ``d·w`` (``d ≥ 0``) on the optimal face, by LP duality.

    ``min d·w  s.t.  Aᵀw + Gᵀμ ≥ c, Σw ≤ W, w, μ ≥ 0`` has the dual
    ``max c·x − W·s  s.t.  A x − s ≤ d, G x ≤ 0, x, s ≥ 0`` — the simplex's form
    (right-hand sides ``d, 0 ≥ 0``); its row duals are ``(w, μ)``.
    """
    if rows is None:
        rows = _face_rows(A, G)
    res = dual_rows(list(c) + [-Fraction(W)], rows, list(d) + [0] * len(G))
    if res is None or not _feasible_rows(*res, rows, len(A), c, W):
        return None
    y = [Fraction(v, res[1]) for v in res[0]]
    return y[:len(A)], y[len(A):]


def _feasible_rows(ints, den, rows, m, c, W) -> bool:
    """:func:`feasible` of the dual ``(w, μ) = ints/den`` (``den > 0``; ``w`` the first ``m``) against the
    rows of :func:`_face_rows` (whose entries before the last are ``A``'s and ``G``'s over the row's
    denominator): the same verdict in integers, before any ``Fraction`` is made."""
    if any(v < 0 for v in ints) or sum(ints[:m]) * W.denominator != W.numerator * den:
        return False
    used = [(y, row, rd) for y, (row, rd) in zip(ints, rows) if y]
    if not used:
        return all(cv <= 0 for cv in c)
    L = 1
    for _, _, rd in used:
        L = L * rd // math.gcd(L, rd)
    scaled = [(y * (L // rd), row) for y, row, rd in used]
    for v, cv in enumerate(c):
        lhs = sum(y * row[v] for y, row in scaled)
        cn, cd = cv.as_integer_ratio()
        if lhs * cd < cn * den * L:
            return False
    return True


def _face_rows(A, G):
    """The constraint rows of :func:`_face_min`'s LP (the same for every ``d``), converted once per pair of
    row lists (:func:`_converted`)."""
    return _converted(A, G)[2]


def _converted(A, G) -> tuple:
    """``(A, G, face rows, rows)``: :func:`_face_min`'s LP rows and the rows of ``A`` then ``G`` as integers
    over one denominator each (:func:`~meshplan.solvers.soap.lp.int_rows`), once per pair of row lists —
    the exponent LPs of a subgraph share them (read only), and the face search, its shortcuts and
    :func:`nondegenerate` ask for them per statement.  Looked up by the lists' identities; the entry holds
    the lists, so an identity is not reused while it is stored."""
    got = _CONVERTED.get((id(A), id(G)))
    if got is not None and got[0] is A and got[1] is G:
        return got
    face = int_rows([list(r) + [Fraction(-1)] for r in A] + [list(r) + [Fraction(0)] for r in G])
    out = (A, G, face, int_rows(list(A) + list(G)))
    if len(_CONVERTED) > 4096:
        _CONVERTED.clear()
    _CONVERTED[id(A), id(G)] = out
    return out


_CONVERTED: dict[tuple[int, int], tuple] = {}


def _activities(A, G, x) -> tuple[list[int], int, list[tuple[list[int], int]]]:
    """``x = xs/L`` as integers over one denominator ``L`` and the converted rows of ``A`` then ``G``: row
    ``r`` (``ints/den``) has ``a·x = Σ ints·xs / (den·L)``, compared exactly without a ``Fraction``."""
    ratios = [v.as_integer_ratio() for v in x]
    L = 1
    for _, d in ratios:
        if d != 1:
            L = L * d // math.gcd(L, d)
    return [n * (L // d) for n, d in ratios], L, _converted(A, G)[3]


#: the optimal face is explored (2 exact LPs per access monomial) only up to this many access
#: monomials; larger problems (many fused statements) keep the simplex's dual vertex — a valid,
#: possibly weaker constant — so that every example stays fast
MAX_FACE_ROWS = 10


def face_vertices(A, G, c, W, w0, mu0):
    """Distinct dual points of the optimal face: the simplex's, and those minimizing and
    maximizing each ``w_j`` on the face (in that order: min and max of ``w_0``, then of ``w_1``, …).

    First, for each ``j`` with ``w0_j > 0``, the least ``w_j`` on the face: when every one is ``w0_j``,
    every point of the face has ``w ≥ w0`` (``w_j ≥ 0 = w0_j`` elsewhere) and ``Σ w = W = Σ w0``, so
    ``w0`` is the face's only ``w`` and every LP below could only return it again: the answer is
    ``[w0]`` without them."""
    m = len(A)
    out = [(list(w0), list(mu0))]
    rows = _face_rows(A, G)
    lows: dict[int, tuple | None] = {}

    def low(j):
        if j not in lows:
            lows[j] = _face_min(A, G, c, W, [int(i == j) for i in range(m)], rows)
        return lows[j]

    if all(low(j) is not None and low(j)[0][j] == w0[j] for j in range(m) if w0[j] > 0):
        return out
    for j in range(m):
        for p in (low(j), _face_min(A, G, c, W, [int(i != j) for i in range(m)], rows)):
            if p is not None and all(p[0] != q[0] for q in out):
                out.append((list(p[0]), list(p[1])))
    return out


def nondegenerate(A, G, x) -> bool:
    """The primal vertex ``x`` of ``max c·x, A x ≤ 1, G x ≤ 0, x ≥ 0`` has exactly one positive
    component (variable or slack) per row: every basic variable is positive, so complementary
    slackness fixes the dual — the optimal face is the one point the simplex returned."""
    xs, L, rows = _activities(A, G, x)
    m = len(A)
    positive = sum(1 for v in x if v > 0)
    for r, (ints, den) in enumerate(rows):     # slack b − a·x > 0, b = 1 on A's rows and 0 on G's
        ax = sum([a * v for a, v in zip(ints, xs) if a])
        positive += ax < den * L if r < m else ax < 0
    return positive == len(rows)


def _descend(verts: list[list[float]], coeffs: list[float], W: float) -> tuple[list[float], float]:
    """Mixing weights ``λ`` (on the simplex) of the vertices ``verts`` minimizing ``log C(Σ_k λ_k w_k)``, by
    exponentiated gradient with step halving, and that minimum.  Plain floats: a face has a few
    vertices of at most :data:`MAX_FACE_ROWS` weights, where array calls cost more than they compute.
    (The sums run in a fixed order — over ``k`` for a mixed weight, over ``j`` for a gradient entry — so
    the iterates are the same floats on every run.)"""
    K = len(verts)
    scale = [W * cj for cj in coeffs]
    cols = [list(col) for col in zip(*verts)]          # cols[j][k] = verts[k][j]
    log, exp = math.log, math.exp

    def mix(lam):
        return [sum([a * b for a, b in zip(col, lam)]) for col in cols]

    def f(mixed):
        return sum([wj * log(wj / sj) for wj, sj in zip(mixed, scale) if wj > 1e-15])

    lam = [1.0 / K] * K
    at = mix(lam)                   # the mixed weights of the current λ
    cur = f(at)
    eta = 1.0
    g = None                        # the gradient at λ (the same after a rejected step: only η changes)
    for _ in range(400):
        if g is None:
            t = [log(max(wj, 1e-15) / sj) + 1.0 for wj, sj in zip(at, scale)]
            g = [sum([a * b for a, b in zip(vk, t)]) for vk in verts]
            gmin = min(g)
        trial = [lk * exp(-eta * (gk - gmin)) for lk, gk in zip(lam, g)]
        total = sum(trial)
        trial = [x / total for x in trial]
        there = mix(trial)
        val = f(there)
        if val < cur - 1e-15:
            lam, cur, at, g = trial, val, there, None
            eta = min(eta * 1.5, 64.0)
        else:
            eta /= 2
            if eta < 1e-9:
                break
    return lam, cur


def _face_floor(A, G, coeffs, W, x) -> float:
    """A lower bound on ``log C(w)`` over the optimal face: its ``w`` vanish on the rows with slack at the
    primal optimum ``x`` (complementary slackness) and sum to ``W``, and on that simplex the convex
    ``Σ w_j log(w_j/(W c_j))`` is least at ``w_j ∝ c_j``, where it is ``−W·log Σ_{tight} c_j``."""
    xs, L, rows = _activities(A, G, x)
    tight = [cj for (ints, den), cj in zip(rows, coeffs) if sum([a * v for a, v in zip(ints, xs) if a]) == den * L]
    return -float(W) * math.log(float(sum(tight, Fraction(0)))) if tight else -math.inf


def _least_at(A, G, c, coeffs, W, w0) -> bool:
    """Whether ``w0`` minimizes ``log C`` on the optimal face up to ``1e-10``, by two exact LPs.

    ``log C(w) = Σ w_j log(w_j/(W c_j))`` is convex; when every point of the face vanishes where ``w0``
    does (the least ``Σ`` of ``w`` over ``w0``'s support is ``W``), its gradient ``g`` at ``w0`` exists on the
    face, and ``log C(w) ≥ log C(w0) + g·(w − w0)`` there.  So when the least ``g·w`` on the face is at
    least ``g·w0 − 1e-10``, no point of the face (nor :func:`best_dual`'s search within it) goes below
    ``log C(w0) − 1e-10``.  ``g`` is taken in floats and shifted to be ``≥ 0`` (``Σ w = W`` on the face,
    so a shift changes ``g·(w − w0)`` by nothing); the LPs and the comparison are exact."""
    m = len(A)
    rows = _face_rows(A, G)
    supp = [j for j in range(m) if w0[j] > 0]
    if len(supp) < m:
        p = _face_min(A, G, c, W, [int(w0[j] > 0) for j in range(m)], rows)
        if p is None or sum((p[0][j] for j in supp), Fraction(0)) != W:
            return False
    if not supp:
        return True        # W = 0: every w on the face is 0 = w0
    g = {j: math.log(float(w0[j]) / (float(W) * float(coeffs[j]))) + 1.0 for j in supp}
    low = min(g.values())
    d = [Fraction(g[j] - low) if j in g else Fraction(0) for j in range(m)]
    p = _face_min(A, G, c, W, d, rows)
    if p is None:
        return False
    return sum((dj * (pj - wj) for dj, pj, wj in zip(d, p[0], w0)), Fraction(0)) >= Fraction(-1, 10 ** 10)


def best_dual(A, G, c, coeffs, W, w0, mu0, x=None):
    """``(w, μ)`` on the optimal face with the smallest exact ``C(w)`` found; ``(w0, μ0)`` if
    the face is one point (the primal vertex ``x``, when given, is nondegenerate) or no
    combination beats the vertex."""
    if len(A) <= 1 or len(A) > MAX_FACE_ROWS or (x is not None and nondegenerate(A, G, x)):
        return w0, mu0
    if x is not None and log_constant(w0, coeffs, W) <= _face_floor(A, G, coeffs, W, x) + 1e-10:
        return w0, mu0     # nothing on the face beats w0 by the margin below (1e-9), so the search keeps it
    if _least_at(A, G, c, coeffs, W, w0):
        return w0, mu0     # w0 minimizes log C on the face: nothing there beats it by the margin (1e-9)
    verts = face_vertices(A, G, c, W, w0, mu0)
    if len(verts) == 1:
        return w0, mu0
    lam, cur = _descend([[float(v) for v in w] for w, _ in verts], [float(v) for v in coeffs], float(W))
    K = len(verts)
    best = (log_constant(w0, coeffs, W), w0, mu0)
    if not cur < best[0] - 1e-9:
        return w0, mu0
    for den in _DENOMINATORS:
        lr = [max(Fraction(0), Fraction(float(x)).limit_denominator(den)) for x in lam]
        total = sum(lr, Fraction(0))
        if total == 0:
            continue
        lr = [x / total for x in lr]
        w = [sum((lr[i] * verts[i][0][j] for i in range(K)), Fraction(0)) for j in range(len(A))]
        mu = [sum((lr[i] * verts[i][1][k] for i in range(K)), Fraction(0)) for k in range(len(G))]
        if not feasible(w, mu, A, G, c, W):   # cannot happen (convex combination); checked anyway
            continue
        val = log_constant(w, coeffs, W)
        if val < best[0] - 1e-12:
            best = (val, w, mu)
            if val <= cur + 1e-9:             # as good as the numeric optimum: the simplest such
                break
    return best[1], best[2]
