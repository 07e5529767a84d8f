"""The solver-free re-check of integer tiles (section 5.4.5 with integer sizes).

For integer tile sizes ``D`` of a (subgraph) statement this computes, exactly
and without a solver, the access-size lower bound of each term (Lemma 5.3,
Corollary 5.1, the bounded overlap of section 5.5.3), their sum
``F(D) = Σ_j |A_j(D)|`` and the work ``P(D) = Σ_s ∏ D``.  Every tile the
CP-SAT encoding (:mod:`meshplan.encodings.soap.tiles`) or a rounding proposes
is replayed here by :func:`check_tile` before it is returned.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping

from meshplan.models.core.errors import VerificationError
from meshplan.models.soap.sdg import SubProblem, Term

__all__ = ["term_value", "work_value", "access_size", "check_tile"]


def _side(d, D: Mapping[str, int]) -> int:
    if not d:
        return 1
    return max(D[v] for v in d)


def term_value(term: Term, D: Mapping[str, int]) -> Fraction:
    """The access-size lower bound of ``term`` at integer tiles ``D`` (exact, solver-free)."""
    if term.kind == "union":
        return Fraction(max(math.prod(_side(d, D) for d in part) for part in term.parts))
    if term.kind == "pair":     # a box tile's rows of a triangular pair: its two boxes (≥ the pair term)
        return Fraction(sum(math.prod(_side(d, D) for d in part) for part in term.parts))
    s = [_side(d, D) for d in term.dims]
    t = list(term.t)
    if term.kind == "inout":
        s.append(math.prod(D[v] for v in term.version))
        t.append(term.t_version)
        return Fraction(math.prod(s) - math.prod(a - b for a, b in zip(s, t)))
    if not any(t):
        return Fraction(math.prod(s))
    return Fraction(2 * math.prod(s) - math.prod(a - b for a, b in zip(s, t)))


def work_value(problem: SubProblem, D: Mapping[str, int]) -> int:
    """``P(D)``: the number of statement instances a tile ``D`` computes (exact)."""
    return sum(math.prod(D[c] for c in cls) for _, cls in problem.work)


def access_size(problem: SubProblem, D: Mapping[str, int]) -> Fraction:
    """``F(D)``: the dominator-size lower bound of tile ``D`` (exact, solver-free)."""
    return sum((term_value(t, D) for t in problem.terms), Fraction(0))


def check_tile(problem: SubProblem, D: Mapping[str, int], budget: int, low: Mapping[str, int],
               caps: Mapping[str, int]) -> None:
    """Raise :class:`VerificationError` unless every size of ``D`` lies in ``[low, cap]`` and the tile's
    dominator set fits the budget ``X0``: ``F(D) ≤ budget``."""
    for c, v in D.items():
        if not (low[c] <= v <= caps[c]):
            raise VerificationError(f"tile {c}={v} outside [{low[c]}, {caps[c]}]")
    if access_size(problem, D) > budget:
        raise VerificationError(f"tile {dict(D)} needs {float(access_size(problem, D)):.0f} > X0 = {budget} inputs")
