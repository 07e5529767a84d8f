"""A tiny exact simplex (Fractions, Bland's rule) for the exponent LP.

``max c·x  s.t.  A x ≤ b, x ≥ 0`` with ``b ≥ 0`` (rows of the access
monomials have ``b = 1``, the order constraints of a max case ``b = 0``) — the
form of the HBL-style exponent problem of the certified relaxation in
:mod:`meshplan.solvers.soap.relax`.  The origin is feasible, so no phase 1 is
needed; the final tableau also gives the dual optimum ``w``
(``min b·w  s.t.  Aᵀ w ≥ c, w ≥ 0``).
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["max_le_one"]


def max_le_one(c: list[Fraction], A: list[list[Fraction]], b: list[Fraction] | None = None):
    """Solve ``max c·x, A x ≤ b, x ≥ 0`` (``b`` all ones by default, every ``b_r ≥ 0``).

    Returns ``(value, x, w)`` with ``w`` the dual optimum per row, or ``None`` if unbounded.
    """
    m, n = len(A), len(c)
    rhs = [Fraction(1)] * m if b is None else [Fraction(v) for v in b]
    if any(v < 0 for v in rhs):
        raise ValueError("max_le_one needs b >= 0 (the origin must be feasible)")
    # tableau rows: [A | I | b]; objective row: [-c | 0 | 0]
    T = [[Fraction(a) for a in row] + [Fraction(int(i == r)) for i in range(m)] + [rhs[r]]
         for r, row in enumerate(A)]
    z = [-Fraction(x) for x in c] + [Fraction(0)] * m + [Fraction(0)]
    basis = [n + r for r in range(m)]
    for _ in range(10_000):
        col = next((j for j in range(n + m) if z[j] < 0), None)  # Bland: lowest index
        if col is None:
            break
        best = None
        for r in range(m):
            if T[r][col] > 0:
                ratio = T[r][-1] / T[r][col]
                if best is None or ratio < best[0] or (ratio == best[0] and basis[r] < basis[best[1]]):
                    best = (ratio, r)
        if best is None:
            return None
        r = best[1]
        piv = T[r][col]
        T[r] = [v / piv for v in T[r]]
        for rr in range(m):
            if rr != r and T[rr][col] != 0:
                f = T[rr][col]
                T[rr] = [a - f * b for a, b in zip(T[rr], T[r])]
        if z[col] != 0:
            f = z[col]
            z = [a - f * b for a, b in zip(z, T[r])]
        basis[r] = col
    x = [Fraction(0)] * n
    for r, b in enumerate(basis):
        if b < n:
            x[b] = T[r][-1]
    w = [z[n + r] for r in range(m)]
    return z[-1], x, w
