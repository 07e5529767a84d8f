"""Schedule a distributed matrix multiplication: the COSMA grid and rounds (thesis sections 3.6.3, 3.7.1).

:func:`schedule_matmul` chooses the processor grid [pm, pn, pk] (at most a fraction ``idle_tolerance`` of
the ranks idle) and the number of sequential rounds minimizing the maximum words a rank receives, ties broken
by fewer rounds, under the memory limit S per rank including the receive buffers.  The choice is made by
CP-SAT (:mod:`meshplan.encodings.matmul.grid`) and re-checked by the solver-free :func:`grid_cost` and, when
affordable, by :func:`exhaustive_grid` (plain enumeration of every grid); ``method="exhaustive"`` skips the
solver.  The :class:`MatmulSchedule` carries the exact per-rank volumes of the schedule and of 2-D SUMMA's;
the front door's ``MatmulPlan`` (:mod:`meshplan.api.matmul`) adds the bounds and Table 3.3's models.
:func:`fixed_schedule` is the COSMA schedule on a grid given by the caller (tests, benchmarks).
"""

from __future__ import annotations

import math
from dataclasses import replace

from meshplan.models.core.errors import Infeasible, SolverTimeout, VerificationError, quote
from meshplan.models.core.values import Value, value
from meshplan.models.matmul.costs import (cosma_max_words, cosma_rank_words, cosma_rounds, domain_words,
                                          lower_bound, strategy, summa_grid, summa_rank_words, cosma_memory)
from meshplan.models.matmul.problem import Grid, MatmulError, MatmulProblem
from meshplan.models.matmul.time import Rates, TimeModel, check_objective, cosma_time

__all__ = ["MatmulSchedule", "grid_cost", "enumerate_grids", "exhaustive_grid", "choose_grid", "schedule_matmul",
           "time_grid",
           "fixed_schedule", "reduction_vs_all_ranks", "METHODS"]

#: the grid search methods
METHODS = ("auto", "cpsat", "exhaustive")
#: enumerate every grid to re-check the solver up to this many ranks
RECHECK_MAX_P = 4096


def _check_tolerance(tol: float) -> None:
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < 1:
        raise MatmulError(f"idle_tolerance must be a fraction in [0, 1), e.g. 0.03, got {quote(tol)}",
                          param="idle_tolerance")


def grid_cost(prob: MatmulProblem, grid: Grid) -> tuple[int, int] | None:
    """``(max words received per rank, rounds)`` of the COSMA schedule on ``grid``, or None when its
    buffers do not fit the memory (solver-free; the checker of every answer)."""
    t = cosma_rounds(prob.m, prob.n, prob.k, grid.pm, grid.pn, grid.pk, prob.memory)
    if t is None:
        return None
    return cosma_max_words(prob.m, prob.n, prob.k, grid.pm, grid.pn, grid.pk), t


def enumerate_grids(prob: MatmulProblem, idle_tolerance: float = 0.03):
    """Every admissible grid: ``p − ⌊δp⌋ ≤ pm·pn·pk ≤ p``, each factor at most its dimension."""
    _check_tolerance(idle_tolerance)
    p = prob.p
    lo = p - int(idle_tolerance * p)
    for pm in range(1, min(p, prob.m) + 1):
        for pn in range(1, min(p // pm, prob.n) + 1):
            mn = pm * pn
            for pk in range(max(1, -(-lo // mn)), min(p // mn, prob.k) + 1):
                yield Grid(pm, pn, pk)


def exhaustive_grid(prob: MatmulProblem, idle_tolerance: float = 0.03) -> tuple[Grid, int, int] | None:
    """The best grid by enumeration: ``(grid, words, rounds)`` or None when no grid fits (ties: fewer
    rounds, more ranks used, then the smallest (pk, pm, pn))."""
    _check_tolerance(idle_tolerance)
    m, n, k, p, mem = prob.m, prob.n, prob.k, prob.p, prob.memory
    lo = p - int(idle_tolerance * p)
    best = None
    for pm in range(1, min(p, m) + 1):
        for pn in range(1, min(p // pm, n) + 1):
            mn = pm * pn
            for pk in range(max(1, -(-lo // mn)), min(p // mn, k) + 1):
                w = cosma_max_words(m, n, k, pm, pn, pk)
                if best is not None and w > best[0][0]:
                    continue
                t = cosma_rounds(m, n, k, pm, pn, pk, mem)
                if t is None:
                    continue
                key = (w, t, -mn * pk, pk, pm, pn)
                if best is None or key < best[0]:
                    best = (key, (pm, pn, pk))
    if best is None:
        return None
    return Grid(*best[1]), best[0][0], best[0][1]


def _infeasible(prob: MatmulProblem, idle_tolerance: float) -> Infeasible:
    return Infeasible(f"no processor grid for {prob} with at most {int(idle_tolerance * prob.p)} idle ranks: "
                      f"raise memory, raise idle_tolerance, or use fewer ranks (p)",
                      param=("memory", "idle_tolerance", "p"))


def choose_grid(prob: MatmulProblem, idle_tolerance: float = 0.03, *, method: str = "cpsat",
                time_limit_s: float = 10.0) -> tuple[Grid, int, int]:
    """``(grid, max words per rank, rounds)``: CP-SAT's answer re-checked by :func:`grid_cost` and (for
    p ≤ 4096) by :func:`exhaustive_grid`, whose grid it returns; beyond, the grid of that cost that
    :func:`tie_break_grid` picks in the same order (so the answer is the same in every call); or the
    enumeration's with ``method="exhaustive"``;
    ``method="auto"`` asks CP-SAT and falls back to the enumeration when CP-SAT hits its time limit
    (large sizes make its division and product constraints slow)."""
    _check_tolerance(idle_tolerance)
    if method == "auto":
        try:
            return choose_grid(prob, idle_tolerance, method="cpsat", time_limit_s=time_limit_s)
        except SolverTimeout:
            return choose_grid(prob, idle_tolerance, method="exhaustive")
    if method == "exhaustive":
        got = exhaustive_grid(prob, idle_tolerance)
        if got is None:
            raise _infeasible(prob, idle_tolerance)
        return got
    if method != "cpsat":
        raise MatmulError(f"unknown grid method {quote(method)}; use {', '.join(METHODS)}", param="method")
    from meshplan.encodings.matmul.grid import encode_grid
    from meshplan.solvers.backends.base import Status, get_backend

    backend = get_backend("cpsat")
    sols = []
    for fixed in ((None, "words") if prob.memory is not None else (None,)):
        enc = encode_grid(prob, idle_tolerance, None if fixed is None else int(sols[0].values["words"]))
        sol = backend.solve(enc, time_limit_s=time_limit_s)
        if sol.status == Status.INFEASIBLE and not sols:
            raise _infeasible(prob, idle_tolerance)
        if sol.status != Status.OPTIMAL:
            why = "timed out" if sol.status == Status.TIMEOUT else f"answered {sol.status.value}"
            raise SolverTimeout(f"CP-SAT did not prove a grid optimal within {time_limit_s} s ({why}); "
                                f"use method='exhaustive' or a longer time limit")
        sols.append(sol)
    grid, rounds = enc.decode(sol.values)
    cost = _recheck(prob, idle_tolerance, grid, (int(sol.values["words"]), rounds))
    # CP-SAT returns any optimal grid (its parallel workers race), so every rank of an MPI program that plans
    # for itself could get a different one of equal cost: take the one the enumeration's fixed order picks
    # (the most ranks used, then the smallest pk, pm), so the plan is the same on every rank and in every run
    if prob.p <= RECHECK_MAX_P:
        ref = exhaustive_grid(prob, idle_tolerance)
        if ref is None or (ref[1], ref[2]) != cost:
            raise VerificationError(f"CP-SAT's grid {grid} {cost} differs from enumeration's {ref}")
        grid = ref[0]
    else:  # the enumeration is too slow (26 s at p = 2**20): CP-SAT picks it among the grids of this cost
        grid = tie_break_grid(prob, idle_tolerance, cost, time_limit_s)
        _recheck(prob, idle_tolerance, grid, cost)
    return grid, cost[0], cost[1]


def _recheck(prob: MatmulProblem, idle_tolerance: float, grid: Grid, claimed: tuple[int, int]) -> tuple[int, int]:
    cost = grid_cost(prob, grid)
    if cost is None or cost != claimed or grid.used > prob.p or grid.used < prob.p - int(idle_tolerance * prob.p):
        raise VerificationError(f"CP-SAT's grid {grid} with {claimed[1]} rounds fails the re-check "
                                f"(solver-free cost {cost})")
    return cost


def tie_break_grid(prob: MatmulProblem, idle_tolerance: float, cost: tuple[int, int],
                   time_limit_s: float = 10.0) -> Grid:
    """Among the grids of ``cost`` = (least words, fewest rounds), the first in :func:`exhaustive_grid`'s
    order — the most ranks used, then the smallest pk, then pm — found by CP-SAT (one solve with a weighted
    objective, or one per term for very large p; :func:`~meshplan.encodings.matmul.grid.encode_grid`)."""
    from meshplan.encodings.matmul.grid import encode_grid, tie_break_fits
    from meshplan.solvers.backends.base import Status, get_backend

    backend = get_backend("cpsat")
    solves = 1 if tie_break_fits(prob.p, min(prob.p, max(prob.m, prob.k)) + 1) else 3
    tie: tuple[int, ...] = ()
    for i in range(solves):
        enc = encode_grid(prob, idle_tolerance, cost[0], cost[1], tie)
        sol = backend.solve(enc, time_limit_s=time_limit_s)
        if sol.status != Status.OPTIMAL:
            raise SolverTimeout(f"CP-SAT did not break the tie among grids of {cost[0]} words and {cost[1]} rounds "
                                f"within {time_limit_s} s ({sol.status.value}); use method='exhaustive'")
        tie += (int(sol.values["used" if i == 0 else "pk"]),)
    return enc.decode(sol.values)[0]


@value
class MatmulSchedule(Value):
    """The COSMA schedule of a distributed MMM: grid, rounds (double-buffered or not), the exact words each
    rank receives and the memory it holds, next to 2-D SUMMA's grid and words (all volumes in words
    received per rank; section 3.7)."""

    problem: MatmulProblem
    grid: Grid
    rounds: int
    idle_tolerance: float
    method: str
    double_buffered: bool
    fewest_rounds: int
    words_per_rank: tuple[int, ...]
    memory_per_rank: int
    summa_grid: tuple[int, int]
    summa_words_per_rank: tuple[int, ...]
    #: what the grid minimizes: ``words`` (exact words per rank, the default) or modelled ``time``
    objective: str = "words"
    #: the modelled time of the schedule (with ``objective="time"``)
    model_time: TimeModel | None = None
    #: how the grid was chosen (with ``objective="time"``): the winner and the runners-up, each with its cost
    explanation: tuple[str, ...] = ()

    @property
    def ranks_used(self) -> int:
        return self.grid.used

    @property
    def strategy(self) -> str:
        return strategy(self.grid, self.rounds)

    @property
    def max_words(self) -> int:
        return max(self.words_per_rank)

    @property
    def local_domain(self) -> tuple[int, int, int]:
        pr = self.problem
        return (-(-pr.m // self.grid.pm), -(-pr.n // self.grid.pn), -(-pr.k // self.grid.pk))

    @property
    def lower_bound(self) -> float:
        pr = self.problem
        return lower_bound(pr.m, pr.n, pr.k, pr.p, pr.memory)


def _check_time_limit(time_limit_s: object) -> None:
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) \
            or not (0 < time_limit_s < math.inf):
        raise MatmulError(f"time_limit_s must be a positive number of seconds, got {quote(time_limit_s)}",
                          param="time_limit_s")


def schedule_matmul(problem: MatmulProblem, idle_tolerance: float = 0.03, method: str = "auto",
                    time_limit_s: float = 10.0, objective: str = "words", rates: Rates | None = None) -> MatmulSchedule:
    """The communication-optimal COSMA schedule of ``problem`` (sections 3.6.3, 3.7.1, 3.7.3): the grid of
    :func:`choose_grid` with the fewest rounds that fit the memory, double-buffered when two panel pairs
    fit with at most twice those rounds.  With ``objective="time"`` (and the machine's ``rates``) the grid
    and rounds of the least modelled time instead (:func:`time_grid`; words break ties).

    >>> s = schedule_matmul(MatmulProblem(64, 64, 64, 8))
    >>> s.grid.as_list(), s.strategy
    ([2, 2, 2], 'pm2,pn2,pk2')
    """
    if not isinstance(problem, MatmulProblem):
        raise MatmulError(f"problem must be a MatmulProblem, got {type(problem).__name__}", param="problem")
    _check_tolerance(idle_tolerance)
    _check_time_limit(time_limit_s)
    if method not in METHODS:
        raise MatmulError(f"unknown grid method {quote(method)}; use {', '.join(METHODS)}", param="method")
    if check_objective(objective) == "time":
        if not isinstance(rates, Rates):
            raise MatmulError("objective='time' needs the machine's rates (a system measured by calibrate)",
                              param="system")
        grid, rounds, lines = time_grid(problem, idle_tolerance, rates)
        sched = _schedule(problem, grid, rounds, float(idle_tolerance), "exhaustive (modelled time)")
        t = cosma_time(problem.m, problem.n, problem.k, *grid.as_list(), sched.rounds, rates, problem.itemsize)
        return replace(sched, objective="time", model_time=t, explanation=lines)
    if method == "auto":
        try:
            grid, _, rounds = choose_grid(problem, idle_tolerance, method="cpsat", time_limit_s=time_limit_s)
            method = "cpsat"
        except SolverTimeout:
            grid, _, rounds = choose_grid(problem, idle_tolerance, method="exhaustive")
            method = "exhaustive (CP-SAT timed out)"
    else:
        grid, _, rounds = choose_grid(problem, idle_tolerance, method=method, time_limit_s=time_limit_s)
    return _schedule(problem, grid, rounds, float(idle_tolerance), method)


def fixed_schedule(problem: MatmulProblem, grid: Grid, rounds: int | None = None, *,
                   double_buffered: bool = False) -> MatmulSchedule:
    """The COSMA schedule of ``problem`` on a given ``grid`` in ``rounds`` slabs (default: the fewest that fit
    the memory), double-buffered if asked (no search; ``method`` is ``"fixed"``)."""
    grid.check_fits(problem)
    fewest = cosma_rounds(problem.m, problem.n, problem.k, grid.pm, grid.pn, grid.pk, problem.memory)
    if rounds is None:
        if fewest is None:
            raise MatmulError(f"grid {grid} does not fit memory={problem.memory} words per rank", param="memory")
        rounds = fewest
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise MatmulError(f"rounds must be a positive integer, got {quote(rounds)}", param="rounds")
    words = tuple(cosma_rank_words(problem, grid, r).total for r in range(problem.p))
    pr, pc = summa_grid(problem.p, problem.m, problem.n)
    sw = tuple(summa_rank_words(problem, pr, pc, r).total for r in range(problem.p))
    mem = cosma_memory(problem.m, problem.n, problem.k, grid.pm, grid.pn, grid.pk, rounds,
                       2 if double_buffered else 1)
    return MatmulSchedule(problem, grid, rounds, 1 - grid.used / problem.p, "fixed", bool(double_buffered),
                          fewest if fewest is not None else rounds, words, mem, (pr, pc), sw)


def _schedule(prob: MatmulProblem, grid: Grid, rounds: int, tol: float, method: str) -> MatmulSchedule:
    m, n, k, p, memory = prob.m, prob.n, prob.k, prob.p, prob.memory
    words = tuple(cosma_rank_words(prob, grid, r).total for r in range(p))
    pr, pc = summa_grid(p, m, n)
    sw = tuple(summa_rank_words(prob, pr, pc, r).total for r in range(p))
    fewest = rounds
    double = False
    if rounds > 1:  # double-buffer (section 3.7.3) with up to twice the rounds if two panel pairs then fit
        t2 = _double_buffer_rounds(m, n, k, grid, rounds, memory)
        if t2 is not None:
            rounds, double = t2, True
    mem = cosma_memory(m, n, k, grid.pm, grid.pn, grid.pk, rounds, 2 if double else 1)
    return MatmulSchedule(prob, grid, rounds, tol, method, double, fewest, words, mem, (pr, pc), sw)


def _double_buffer_rounds(m: int, n: int, k: int, grid: Grid, rounds: int, memory: int) -> int | None:
    """The fewest rounds t ≤ 2·``rounds`` whose two pairs of receive panels fit ``memory`` (the thesis's
    "t₂ > t rounds to exploit more overlap", section 3.7.3), or None."""
    ck = -(-k // grid.pk)
    for t in range(rounds, min(2 * rounds, ck) + 1):
        if cosma_memory(m, n, k, grid.pm, grid.pn, grid.pk, t, 2) <= memory:
            return t
    return None


def time_grid(prob: MatmulProblem, idle_tolerance: float, rates: Rates) -> tuple[Grid, int, tuple[str, ...]]:
    """The grid and rounds of the least modelled time (:func:`~meshplan.models.matmul.time.cosma_time`) among
    every admissible grid whose buffers fit (fewest rounds each); ties: fewer words, fewer rounds, more ranks
    used.  Returns the grid, its rounds and an explanation: the winner and the next three, each with its
    messages, words and flops, and what makes the winner faster."""
    found = []
    for g in enumerate_grids(prob, idle_tolerance):
        t = cosma_rounds(prob.m, prob.n, prob.k, g.pm, g.pn, g.pk, prob.memory)
        if t is None:
            continue
        tm = cosma_time(prob.m, prob.n, prob.k, g.pm, g.pn, g.pk, t, rates, prob.itemsize)
        found.append(((round(tm.total_s, 12), tm.words, t, -g.used, g.pk, g.pm, g.pn), g, t, tm))
    if not found:
        raise _infeasible(prob, idle_tolerance)
    found.sort(key=lambda c: c[0])
    _, g0, t0, tm0 = found[0]
    lines = [f"searched {len(found)} grids that fit; minimized modelled time (latency {rates.latency * 1e6:.2f} us "
             f"per message, {rates.bandwidth / 1e9:.2f} GB/s, {rates.flop_rate / 1e9:.2f} Gflop/s per rank), "
             f"then words",
             f"chosen {g0} in {t0} round(s): {tm0.describe()}"]
    for _, g, t, tm in found[1:4]:
        terms = {"latency": tm.latency_s - tm0.latency_s, "bandwidth": tm.bandwidth_s - tm0.bandwidth_s,
                 "compute": tm.compute_s - tm0.compute_s}
        why = max(terms, key=terms.get)
        lines.append(f"next {g} in {t} round(s): {tm.describe()} (+{(tm.total_s / tm0.total_s - 1) * 100:.1f}%, "
                     f"mostly {why}: +{terms[why] * 1e3:.2f} ms)" if tm0.total_s else f"next {g}: {tm.describe()}")
    return g0, t0, tuple(lines)


def reduction_vs_all_ranks(schedule: MatmulSchedule) -> float | None:
    """How much less domain I/O the schedule's grid has than the best grid using all p ranks (Figure 3.5)."""
    pr = schedule.problem
    full = [domain_words(pr.m, pr.n, pr.k, *g.as_list()) for g in enumerate_grids(pr, 0.0)]
    if not full:
        return None
    return 1 - domain_words(pr.m, pr.n, pr.k, *schedule.grid.as_list()) / min(full)

