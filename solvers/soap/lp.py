"""A tiny exact simplex (Bland's rule) for the exponent LP.

``max c·x  s.t.  A x ≤ b, x ≥ 0`` with ``b ≥ 0`` (rows of the access
monomials have ``b = 1``, the order constraints of a max case ``b = 0``) — the
form of the HBL-style exponent problem of the certified relaxation in
:mod:`meshplan.solvers.soap.relax`.  The origin is feasible, so no phase 1 is
needed; the final tableau also gives the dual optimum ``w``
(``min b·w  s.t.  Aᵀ w ≥ c, w ≥ 0``).

The arithmetic is exact and fraction-free: every tableau row is a vector of
Python integers over one positive row denominator, reduced by their gcd after
each pivot.  The pivots (Bland's rule, ties by the lowest basic index) are the
ones an exact rational simplex takes, so the vertex and the duals are the same
— only about ten times cheaper than ``fractions.Fraction`` entries, which
dominated the analysis of many-statement programs (ludcmp, deriche).
"""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["max_le_one", "int_rows", "solve_rows", "dual_rows"]


def _int_row(values) -> tuple[list[int], int]:
    """``values`` (ints or Fractions) as integers over one positive denominator (reduced)."""
    ratios = [v.as_integer_ratio() for v in values]   # one call per entry (Fraction's are Python-level)
    den = 1
    for _, d in ratios:
        if d != 1:
            den = den * d // math.gcd(den, d)
    if den == 1:
        return [n for n, _ in ratios], 1
    ints = [n * (den // d) for n, d in ratios]
    return _reduce(ints, den)


def _reduce(ints: list[int], den: int) -> tuple[list[int], int]:
    g = math.gcd(den, *ints)
    if g > 1:
        return [a // g for a in ints], den // g
    return ints, den


def max_le_one(c: list[Fraction], A: list[list[Fraction]], b: list[Fraction] | None = None):
    """Solve ``max c·x, A x ≤ b, x ≥ 0`` (``b`` all ones by default, every ``b_r ≥ 0``).

    Returns ``(value, x, w)`` (Fractions) with ``w`` the dual optimum per row, or ``None`` if
    unbounded.
    """
    return solve_rows(c, int_rows(A), b)


def int_rows(A: list[list[Fraction]]) -> list[tuple[list[int], int]]:
    """The rows of ``A`` as integers over one positive denominator each, for :func:`solve_rows`: LPs
    that differ only in ``b`` (the face search of :mod:`meshplan.solvers.soap.dual`) convert them once."""
    return [_int_row(row) for row in A]


def solve_rows(c: list[Fraction], rows: list[tuple[list[int], int]], b: list[Fraction] | None = None):
    """:func:`max_le_one` on rows from :func:`int_rows` (the same pivots and answer: each tableau row is
    the same rational vector, only scaled differently before its first reduction)."""
    res = _simplex(c, rows, b)
    if res is None:
        return None
    T, D, z, zd, basis = res
    m, n = len(rows), len(c)
    x = [Fraction(0)] * n
    for r, bv in enumerate(basis):
        if bv < n:
            x[bv] = Fraction(T[r][-1], D[r])
    w = [Fraction(z[n + r], zd) for r in range(m)]
    return Fraction(z[-1], zd), x, w


def dual_rows(c: list[Fraction], rows: list[tuple[list[int], int]], b: list[Fraction] | None = None):
    """The dual optimum ``w`` of :func:`solve_rows` as integers over one positive denominator,
    ``(numerators, denominator)`` (not reduced), or ``None`` if unbounded: for callers that test
    many duals and keep few, without a ``Fraction`` per entry."""
    res = _simplex(c, rows, b)
    if res is None:
        return None
    _, _, z, zd, _ = res
    n = len(c)
    return z[n:n + len(rows)], zd


def _simplex(c, rows, b):
    """The final tableau ``(T, D, z, zd, basis)`` of :func:`solve_rows` (``None``: unbounded)."""
    m, n = len(rows), len(c)
    rhs = [1] * m if b is None else list(b)
    if any(v < 0 for v in rhs):
        raise ValueError("max_le_one needs b >= 0 (the origin must be feasible)")
    # tableau rows: [A | I | b] / den; objective row: [-c | 0 | 0] / zden
    T, D = [], []
    for r, (ints, den) in enumerate(rows):
        bn, bd = rhs[r].as_integer_ratio() if not isinstance(rhs[r], int) else (rhs[r], 1)
        eye = [0] * m
        if bd == 1:     # rows from int_rows are reduced (gcd(den, ints) = 1), and so is [ints | den·e_r | b·den]
            eye[r] = den
            T.append(ints + eye + [bn * den])
            D.append(den)
            continue
        full = den * bd // math.gcd(den, bd)
        k = full // den
        eye[r] = full
        ints2, den2 = _reduce([a * k for a in ints] + eye + [bn * (full // bd)], full)
        T.append(ints2)
        D.append(den2)
    z, zd = _int_row(list(c) + [0] * (m + 1))
    z = [-v for v in z]                 # the objective row is -c (negating commutes with the reduction)
    basis = [n + r for r in range(m)]
    for _ in range(10_000):
        col = next((j for j in range(n + m) if z[j] < 0), None)  # Bland: lowest index
        if col is None:
            break
        best = None        # (numerator, denominator, row) of the smallest ratio b_r / a_r,col
        for r in range(m):
            a = T[r][col]
            if a > 0:
                num = T[r][-1]
                if best is None:
                    best = (num, a, r)
                    continue
                lhs, rhs_ = num * best[1], best[0] * a
                if lhs < rhs_ or (lhs == rhs_ and basis[r] < basis[best[2]]):
                    best = (num, a, r)
        if best is None:
            return None
        r = best[2]
        piv = T[r][col]                     # > 0: the row over denominator piv has a 1 in col
        prow, pden = _reduce(T[r], piv)
        T[r], D[r] = prow, pden
        for rr in range(m):
            f = T[rr][col]
            if rr != r and f != 0:
                T[rr], D[rr] = _reduce([a * pden - f * b_ for a, b_ in zip(T[rr], prow)], D[rr] * pden)
        f = z[col]
        if f != 0:
            z, zd = _reduce([a * pden - f * b_ for a, b_ in zip(z, prow)], zd * pden)
        basis[r] = col
    return T, D, z, zd, basis
