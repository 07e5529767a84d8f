"""Numeric continuous tiles (a local search in log space; a reference point, not certified)."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from meshplan.models.soap.sdg import SubProblem

__all__ = ["numeric_tiles"]


def numeric_tiles(problem: SubProblem, budget: float, *, starts: int = 4, caps: dict | None = None,
                  lower: dict | None = None, initial: list[dict] | None = None):
    """Real tiles with the most work subject to Σ|A|(D) ≤ budget (a local search, not certified)."""
    classes = list(problem.classes)
    Dsym = [problem.symbols[c] for c in classes]
    Pf = sp.lambdify([Dsym], problem.work_expr(), np)
    Ff = sp.lambdify([Dsym], problem.access_expr(), np)
    lo = np.array([math.log(lower[c]) if lower and c in lower else 0.0 for c in classes])
    hi = np.array([math.log(caps[c]) if caps and c in caps else 40.0 for c in classes])
    if float(Ff(np.exp(lo))) > budget:
        return None, 0.0

    def project(y):
        """Scale y (from the lower corner) back onto Σ|A| ≤ budget."""
        y = np.clip(y, lo, hi)
        if float(Ff(np.exp(y))) <= budget:
            return y
        a, b = 0.0, 1.0
        for _ in range(32):
            mid = (a + b) / 2
            if float(Ff(np.exp(lo + mid * (y - lo)))) <= budget:
                a = mid
            else:
                b = mid
        return lo + a * (y - lo)

    rng = np.random.default_rng(1)
    best_y, best = None, -math.inf
    n = len(classes)
    inits = [np.array([math.log(max(1.0, float(p[c]))) for c in classes]) for p in (initial or [])]
    inits += [lo + rng.random(n) * (hi - lo) for _ in range(starts)]
    for y0 in inits:
        y = project(y0)
        cur = float(Pf(np.exp(y)))
        step = 1.0
        while step > 1e-3:
            improved = False
            for i in range(n):
                for j in range(n):
                    for sgn in (1.0, -1.0):
                        z = y.copy()
                        z[i] += sgn * step
                        if j != i:
                            z[j] -= sgn * step
                        z = project(z)
                        v = float(Pf(np.exp(z)))
                        if v > cur * (1 + 1e-12):
                            y, cur, improved = z, v, True
            if not improved:
                step /= 2
        if cur > best:
            best, best_y = cur, y
    return {c: float(math.exp(v)) for c, v in zip(classes, best_y)}, best
