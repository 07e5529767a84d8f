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
``Pz``, the squarer 2-D grid, the smaller block (better balance of the block-cyclic layout).  The winner is re-checked by :func:`check_schedule`, which recomputes everything from the
models alone.
"""

from __future__ import annotations

from functools import lru_cache

from meshplan.models.core.errors import Infeasible, VerificationError
from meshplan.models.core.values import Value, value
from meshplan.models.factorization.cost import (Cost, factor_cost, lower_bound, lu2d_cost, confchox_cost,
                                                memory_words)
from meshplan.models.factorization.problem import FactorGrid, FactorModelError, FactorProblem
from meshplan.models.factorization.time import factor_time
from meshplan.models.matmul.time import Rates, TimeModel, check_objective

__all__ = ["FactorSchedule", "NoGrid", "MIN_BLOCK", "MAX_A", "block_candidates", "grids", "schedule_factorization",
           "plan_2d", "two_d_words", "check_schedule", "search"]

#: the smallest block size the search proposes on its own (a vector-friendly size; a block pin overrides)
MIN_BLOCK = 16
#: the largest ``a`` of section 4.7.2's ``v = a·max(c, MIN_BLOCK)`` the search proposes (a block pin overrides)
MAX_A = 8


class NoGrid(Infeasible):
    """No grid and block size fit the problem."""

    exit_code = 2


@value
class FactorSchedule(Value):
    """A chosen grid and block (``grid.v``) with its modeled words (``cost``), footprint (``memory_words``),
    the section 4.6 lower bound, how many candidates were feasible and the explanation of the choice."""

    problem: FactorProblem
    grid: FactorGrid
    cost: Cost
    memory_words: int
    lower_bound_words: float
    candidates: int
    explanation: tuple[str, ...]
    #: what the search minimized: ``words`` (the default) or modelled ``time``
    objective: str = "words"
    #: the modelled time of the chosen grid and block (with ``objective="time"``)
    model_time: TimeModel | None = None

    @property
    def block(self) -> int:
        return self.grid.v

    @property
    def model_words_per_rank(self) -> float:
        return self.cost.per_rank


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


def _key(grid: FactorGrid, cost: Cost):
    return (round(cost.per_rank, 6), grid.Pz, abs(grid.Px - grid.Py), grid.v, -grid.Px)


def search(problem: FactorProblem, *, layers: int | None = None, rates: Rates | None = None):
    """All feasible ``(key, grid, cost, memory)`` candidates, best first, and the reasons others failed
    (the problem's ``grid`` / ``block`` pins restrict the candidates)."""
    shapes = [problem.grid] if problem.grid is not None else grids(problem.p)
    if layers is not None:
        shapes = [s for s in shapes if s[2] == layers]
    found, rejected = [], {}
    for Px, Py, Pz in shapes:
        for v in ([problem.block] if problem.block is not None else block_candidates(problem.N, Pz)):
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
            key = _key(g, cost)
            if rates is not None:  # modelled time first, then the words criterion
                tm = factor_time(problem, g, cost, rates)
                key = (round(tm.total_s, 12), *key)
            found.append((key, g, cost, mem))
    found.sort(key=lambda c: c[0])
    return found, rejected


@lru_cache(maxsize=128)
def schedule_factorization(problem: FactorProblem, objective: str = "words",
                           rates: Rates | None = None) -> FactorSchedule:
    """The best grid and block for the problem (see the module docstring); pure and cached.  With
    ``objective="time"`` (and the machine's ``rates``) the least modelled time
    (:func:`~meshplan.models.factorization.time.factor_time`) wins, words break ties.

    ``problem.grid`` / ``problem.block`` pin the grid or the block size; ``problem.S`` is the memory in
    words per rank (``None``: unbounded; the lower bound then uses the schedule's own footprint as ``S``).
    :class:`NoGrid` when nothing fits."""
    if check_objective(objective) == "time" and not isinstance(rates, Rates):
        raise FactorModelError("objective='time' needs the machine's rates (a system measured by calibrate)",
                               param="system")
    found, rejected = search(problem, rates=rates if objective == "time" else None)
    N, p, S0 = problem.N, problem.p, problem.S
    if not found:
        why = "; ".join(rejected.values()) or "no candidate"
        raise NoGrid(f"no grid and block size fit N = {N} on p = {p} ranks"
                     f"{'' if S0 is None else f' with S = {S0} words'}: {why}")
    _key0, g, cost, mem = found[0]
    S = S0 if S0 is not None else mem
    shapes = len(grids(p)) if problem.grid is None else 1
    if objective == "time":
        tm = factor_time(problem, g, cost, rates)
        lines = [f"searched {len(found)} feasible (grid, block) candidates of {shapes} grid shapes; minimized "
                 f"modelled time (latency {rates.latency * 1e6:.2f} us per message, {rates.bandwidth / 1e9:.2f} "
                 f"GB/s, {rates.flop_rate / 1e9:.2f} Gflop/s per rank, {rates.rate(g.v) / 1e9:.2f} at the "
                 f"chosen block's rank-{g.v} updates), then words",
                 f"chosen {g}: {tm.describe()}"]
        for _k2, g2, c2, _m2 in found[1:4]:
            t2 = factor_time(problem, g2, c2, rates)
            terms = {"latency": t2.latency_s - tm.latency_s, "bandwidth": t2.bandwidth_s - tm.bandwidth_s,
                     "compute": t2.compute_s - tm.compute_s}
            why = max(terms, key=terms.get)
            lines.append(f"next {g2}: {t2.describe()} ({(t2.total_s / tm.total_s - 1) * 100:+.1f}%, mostly {why}: "
                         f"+{terms[why] * 1e3:.2f} ms)")
    else:
        tm = None
        lines = [f"searched {len(found)} feasible (grid, block) candidates of {shapes} "
                 f"grid shapes; minimized modeled words per rank, then fewer layers, squarer grid, smaller block",
                 f"chosen {g}: {cost.per_rank:,.0f} words per rank, footprint {mem:,} words"]
        for _k2, g2, c2, m2 in found[1:4]:
            rel = f" ({(c2.per_rank / cost.per_rank - 1) * 100:+.1f}%)" if cost.per_rank else ""
            lines.append(f"next {g2}: {c2.per_rank:,.0f} words per rank{rel}, footprint {m2:,} words")
    for why in rejected.values():
        lines.append(f"rejected: {why}")
    schedule = FactorSchedule(problem, g, cost, mem, lower_bound(problem, S), len(found), tuple(lines),
                              objective, tm)
    check_schedule(schedule)
    return schedule


def plan_2d(problem: FactorProblem) -> tuple[FactorGrid, Cost]:
    """The best one-layer grid for the 2-D baseline of the problem's kind and its modeled words (the
    problem's block pin, if any, is kept; its grid pin is not: the baseline has its own grid)."""
    best = None
    for Px, Py, Pz in grids(problem.p):
        if Pz != 1:
            continue
        for v in ([problem.block] if problem.block is not None else block_candidates(problem.N, 1)):
            try:
                g = FactorGrid(Px, Py, 1, v)
                g.check(problem)
            except FactorModelError:
                continue
            cost = lu2d_cost(problem, g) if problem.kind == "lu" else confchox_cost(problem, g)
            key = _key(g, cost)
            if best is None or key < best[0]:
                best = (key, g, cost)
    if best is None:
        raise NoGrid(f"no 2-D grid fits N = {problem.N} on p = {problem.p} ranks")
    return best[1], best[2]


def two_d_words(problem: FactorProblem) -> float | None:
    """Modeled words per rank of the best one-layer grid (Table 4.2's 2-D model); ``None`` if none fits."""
    try:
        return plan_2d(problem)[1].per_rank
    except NoGrid:
        return None


def check_schedule(schedule: FactorSchedule) -> None:
    """Replay a schedule from the models alone (solver-free re-check); raise if anything disagrees."""
    pr, g = schedule.problem, schedule.grid
    g.check(pr)
    if g.v < g.Pz:
        raise VerificationError(f"schedule {g}: v < Pz")
    mem = memory_words(pr, g)
    if mem != schedule.memory_words or (pr.S is not None and mem > pr.S):
        raise VerificationError(f"schedule {g}: footprint {mem} does not fit S = {pr.S}")
    if abs(factor_cost(pr, g).total - schedule.cost.total) > 1e-6 * max(1.0, schedule.cost.total):
        raise VerificationError(f"schedule {g}: recomputed cost differs from the search's")
    S = pr.S if pr.S is not None else mem
    if abs(lower_bound(pr, S) - schedule.lower_bound_words) > 1e-9 * max(1.0, schedule.lower_bound_words):
        raise VerificationError(f"schedule {g}: recomputed lower bound differs")
