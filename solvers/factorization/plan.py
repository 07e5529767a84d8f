"""Choose the 2.5-D grid ``[Px, Py, Pz]`` and block size ``v`` of COnfLUX / COnfCHOX (thesis 4.7–4.8).

Exhaustive search: every ordered factorization ``Px·Py·Pz = p`` and every block size from
:func:`block_candidates` (``v ≥ Pz``, section 4.7.2; powers of two from :data:`MIN_BLOCK`, the
hardware-friendly sizes section 4.7.2 asks for, and the multiples ``a·Pz``, up to ``v = a·c`` with
``a ≤`` :data:`MAX_A`).  A candidate is
feasible when every grid row and column owns a block and its footprint
(:func:`~meshplan.models.factorization.cost.memory_words`) fits the memory ``S``.  Among feasible
candidates the plan minimizes the modeled words per rank (the exact step sum), then — the thesis's
tie-breaks (section 4.8: depth in the third dimension costs latency and smaller local BLAS calls;
section 4.7.2: ``v = a·c`` for a small constant ``a``, at least a vector-friendly size) — fewer layers
``Pz``, the squarer 2-D grid, the smaller block (better balance of the block-cyclic layout).  The winner is re-checked by :func:`check_plan`, which recomputes everything from the
models alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshplan.models.core.errors import Infeasible
from meshplan.models.factorization.cost import (Cost, factor_cost, lower_bound, lu2d_cost, confchox_cost,
                                                memory_words)
from meshplan.models.factorization.problem import FactorGrid, FactorModelError, FactorProblem

__all__ = ["FactorPlan", "MIN_BLOCK", "MAX_A", "block_candidates", "grids", "plan_factorization", "plan_2d",
           "check_plan", "search"]

#: the smallest block size the search proposes on its own (a vector-friendly size; --block overrides)
MIN_BLOCK = 16
#: the largest ``a`` of section 4.7.2's ``v = a·max(c, MIN_BLOCK)`` the search proposes (--block overrides)
MAX_A = 8


class NoGrid(Infeasible):
    """No grid and block size fit the problem."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class FactorPlan:
    """A chosen grid and block with its modeled words, footprint, lower bound and explanation."""

    problem: FactorProblem
    grid: FactorGrid
    cost: Cost
    memory_words: int
    lower_bound_words: float
    candidates: int
    explanation: tuple[str, ...]

    @property
    def model_words_per_rank(self) -> float:
        return self.cost.per_rank

    def to_json(self) -> dict:
        g = self.grid
        return {"kind": self.problem.kind, "N": self.problem.N, "p": self.problem.p,
                "memory": self.problem.S, "grid": [g.Px, g.Py, g.Pz], "block": g.v,
                "model_words_per_rank": self.cost.per_rank, "model_phases": self.cost.to_json()["phases"],
                "memory_words_per_rank": self.memory_words, "lower_bound_words": self.lower_bound_words,
                "candidates": self.candidates, "explanation": list(self.explanation)}


def grids(p: int) -> list[tuple[int, int, int]]:
    """Every ordered ``(Px, Py, Pz)`` with ``Px·Py·Pz = p``."""
    divs = [d for d in range(1, p + 1) if p % d == 0]
    return [(a, b, p // (a * b)) for a in divs for b in divs if (p // a) % b == 0]


def block_candidates(N: int, Pz: int) -> list[int]:
    """Block sizes tried for ``Pz`` layers: section 4.7.2's ``v = a·c`` for a small constant ``a``, at
    least a vector-friendly size — the powers of two and the multiples ``a·Pz`` (``a`` = 1, 2, 4, 8)
    between ``max(Pz, MIN_BLOCK)`` and ``MAX_A·max(Pz, MIN_BLOCK)``, and ``≤ N`` (``N`` itself when
    ``N`` is smaller).  Without the cap the word count alone rewards ever larger blocks (fewer, wider
    steps) up to one block per grid column — a serial factorization, not a parallel plan."""
    lo = max(Pz, MIN_BLOCK)
    vals = {1 << k for k in range(MIN_BLOCK.bit_length() - 1, (MAX_A * lo).bit_length())}
    vals |= {a * Pz for a in (1, 2, 4, 8)}
    out = sorted(v for v in vals if lo <= v <= min(N, MAX_A * lo))
    return out or ([N] if N >= Pz else [])


def _key(problem: FactorProblem, grid: FactorGrid, cost: Cost):
    return (round(cost.per_rank, 6), grid.Pz, abs(grid.Px - grid.Py), grid.v, -grid.Px)


def search(problem: FactorProblem, *, block: int | None = None, grid: tuple[int, int, int] | None = None,
           layers: int | None = None):
    """All feasible ``(key, grid, cost, memory)`` candidates, best first, and the reasons others failed."""
    shapes = [grid] if grid is not None else grids(problem.p)
    if layers is not None:
        shapes = [s for s in shapes if s[2] == layers]
    found, rejected = [], {}
    for Px, Py, Pz in shapes:
        for v in ([block] if block is not None else block_candidates(problem.N, Pz)):
            try:
                g = FactorGrid(Px, Py, Pz, v)
                g.check(problem)
            except FactorModelError as err:
                rejected.setdefault("shape", str(err))
                continue
            mem = memory_words(problem, g)
            if problem.S is not None and mem > problem.S:
                rejected.setdefault("memory", f"grid {g} needs {mem} words per rank > S = {problem.S}")
                continue
            cost = factor_cost(problem, g)
            found.append((_key(problem, g, cost), g, cost, mem))
    found.sort(key=lambda c: c[0])
    return found, rejected


def plan_factorization(kind: str, N: int, p: int, *, memory: int | None = None, block: int | None = None,
                       grid: tuple[int, int, int] | None = None, dtype: str = "float64") -> FactorPlan:
    """The best grid and block for factoring an ``N × N`` matrix on ``p`` ranks (see module docstring).

    ``grid`` / ``block`` pin the grid or the block size; ``memory`` is ``S`` in words per rank
    (``None``: unbounded; the lower bound then uses the plan's own footprint as ``S``)."""
    problem = FactorProblem(kind, int(N), int(p), None if memory is None else int(memory), dtype)
    if grid is not None:
        FactorGrid(*grid, v=block if block is not None else max(grid[2], 1))  # validates v ≥ Pz early
    found, rejected = search(problem, block=block, grid=grid)
    if not found:
        why = "; ".join(rejected.values()) or "no candidate"
        raise NoGrid(f"no grid and block size fit N = {N} on p = {p} ranks"
                     f"{'' if memory is None else f' with S = {memory} words'}: {why}")
    key, g, cost, mem = found[0]
    S = problem.S if problem.S is not None else mem
    lines = [f"searched {len(found)} feasible (grid, block) candidates of {len(grids(p)) if grid is None else 1} "
             f"grid shapes; minimized modeled words per rank, then fewer layers, squarer grid, smaller block",
             f"chosen {g}: {cost.per_rank:,.0f} words per rank, footprint {mem:,} words"]
    for _k2, g2, c2, m2 in found[1:4]:
        rel = f" ({(c2.per_rank / cost.per_rank - 1) * 100:+.1f}%)" if cost.per_rank else ""
        lines.append(f"next {g2}: {c2.per_rank:,.0f} words per rank{rel}, footprint {m2:,} words")
    for why in rejected.values():
        lines.append(f"rejected: {why}")
    plan = FactorPlan(problem, g, cost, mem, lower_bound(problem, S), len(found), tuple(lines))
    check_plan(plan)
    return plan


def plan_2d(problem: FactorProblem, *, block: int | None = None) -> tuple[FactorGrid, Cost]:
    """The best one-layer grid for the 2-D baseline of the problem's kind and its modeled words."""
    best = None
    for Px, Py, Pz in grids(problem.p):
        if Pz != 1:
            continue
        for v in ([block] if block is not None else block_candidates(problem.N, 1)):
            try:
                g = FactorGrid(Px, Py, 1, v)
                g.check(problem)
            except FactorModelError:
                continue
            cost = lu2d_cost(problem, g) if problem.kind == "lu" else confchox_cost(problem, g)
            key = _key(problem, g, cost)
            if best is None or key < best[0]:
                best = (key, g, cost)
    if best is None:
        raise NoGrid(f"no 2-D grid fits N = {problem.N} on p = {problem.p} ranks")
    return best[1], best[2]


def check_plan(plan: FactorPlan) -> None:
    """Replay a plan from the models alone (solver-free re-check); raise if anything disagrees."""
    from meshplan.models.core.errors import VerificationError

    pr, g = plan.problem, plan.grid
    g.check(pr)
    if g.v < g.Pz:
        raise VerificationError(f"plan {g}: v < Pz")
    mem = memory_words(pr, g)
    if mem != plan.memory_words or (pr.S is not None and mem > pr.S):
        raise VerificationError(f"plan {g}: footprint {mem} does not fit S = {pr.S}")
    if abs(factor_cost(pr, g).total - plan.cost.total) > 1e-6 * max(1.0, plan.cost.total):
        raise VerificationError(f"plan {g}: recomputed cost differs from the search's")
    S = pr.S if pr.S is not None else mem
    if abs(lower_bound(pr, S) - plan.lower_bound_words) > 1e-9 * max(1.0, plan.lower_bound_words):
        raise VerificationError(f"plan {g}: recomputed lower bound differs")
