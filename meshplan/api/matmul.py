"""Distributed matrix multiplication C = A·B: plan, run, and use inside your MPI program (thesis ch. 3, COSMA).

The capability's spine (docs/matmul.md):

* :class:`~meshplan.models.matmul.problem.MatmulProblem` — m, n, k, p, memory, dtype, validated once;
* :func:`plan_matmul` → :class:`MatmulPlan` — the communication-optimal grid and rounds
  (:func:`~meshplan.solvers.matmul.plan.schedule_matmul`) with the bounds and baselines next to them; its
  fields are the keys of ``meshplan matmul --json``;
* ``plan.bind(comm)`` → :class:`~meshplan.exec.matmul.executor.MatmulExecutor` — runs the plan on this
  rank's pieces inside the caller's MPI program;
* :func:`run_matmul` → the same plan with :class:`MatmulRun` (``run``) and the baselines' runs filled:
  ``meshplan matmul --run --json``.  It launches the rank program :mod:`meshplan.exec.matmul.rank`, whose
  COSMA cases run through the executor.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Sequence

from meshplan.models.core.checks import check_repeats
from meshplan.models.core.errors import ModelError, quote
from meshplan.models.core.values import Value, freeze, library_field, optional_field, value
from meshplan.models.matmul.costs import domain_words, sequential_bound, table33, thesis_rounds
from meshplan.models.matmul.layouts import check_layout, scalapack_block
from meshplan.models.matmul.problem import Grid, MatmulProblem
from meshplan.models.matmul.time import Rates, TimeModel, check_objective
from meshplan.solvers.matmul.plan import MatmulSchedule, schedule_matmul

__all__ = ["check_run_options", "MatmulPlan", "MatmulRun", "SummaModel", "SummaBaseline", "ScalapackBaseline", "WordsPerRank", "Seconds",
           "plan_matmul", "run_matmul", "BASELINES"]

#: the baselines :func:`run_matmul` can run next to meshplan's schedule
BASELINES = ("summa", "scalapack")


@value
class WordsPerRank(Value):
    """Words received from other ranks: the maximum and mean over ranks, and every rank's."""

    max: int
    mean: float
    per_rank: tuple[int, ...]

    @classmethod
    def of(cls, words: Sequence[int] | None) -> "WordsPerRank | None":
        if words is None:
            return None
        w = tuple(int(x) for x in words)
        return cls(max(w), sum(w) / len(w), w)


@value
class Seconds(Value):
    """The slowest rank's time of the timed runs: the fastest run and the median (seconds)."""

    min: float | None
    median: float | None


@value
class MatmulRun(Value):
    """meshplan's schedule run on MPI (the ``run`` object of ``--run --json``): C verified against numpy
    (max-norm relative error), words received per rank by the Python and the PMPI counter next to the
    model, and the time; ``layout`` is where A, B and C started and ended."""

    verified: bool
    max_rel_error: float
    measured_words_per_rank: WordsPerRank | None
    pmpi_words_per_rank: WordsPerRank | None
    model_words_per_rank: WordsPerRank | None
    time_s: Seconds
    layout: str


@value
class SummaModel(Value):
    """2-D SUMMA on the pr×pc ``grid`` as planned: the words each rank would receive (its exact model)."""

    grid: tuple[int, int]
    model_words_per_rank: WordsPerRank


@value
class SummaBaseline(Value):
    """2-D SUMMA on the pr×pc ``grid`` after it ran: its model and the run fields of :class:`MatmulRun`."""

    grid: tuple[int, int]
    model_words_per_rank: WordsPerRank
    verified: bool
    max_rel_error: float
    measured_words_per_rank: WordsPerRank | None
    pmpi_words_per_rank: WordsPerRank | None
    time_s: Seconds


@value
class ScalapackBaseline(Value):
    """ScaLAPACK's pdgemm, run on the pr×pc ``grid`` in ``block``×``block`` blocks (measured by PMPI only);
    ``blas``: the library, version and kernel (``architecture``) of the OpenBLAS it ran on, and the
    ``OPENBLAS_CORETYPE`` its ranks were given (:func:`meshplan.exec.runtime.scalapack.kernel`)."""

    verified: bool
    max_rel_error: float
    measured_words_per_rank: WordsPerRank | None
    pmpi_words_per_rank: WordsPerRank | None
    model_words_per_rank: WordsPerRank | None
    time_s: Seconds
    grid: tuple[int, int]
    block: int
    blas: Mapping[str, Any] | None = optional_field()


@value
class MatmulPlan(Value):
    """A planned C = A·B: the COSMA grid, rounds and strategy, its exact words per rank next to the
    Theorem 3.2 bound and the baselines; ``run`` after :func:`run_matmul`.  The fields are the keys of
    ``meshplan matmul --json`` (docs/matmul.md); ``schedule`` holds the solver's
    :class:`~meshplan.solvers.matmul.plan.MatmulSchedule`, which :meth:`bind` runs."""

    problem: MatmulProblem
    grid: Grid
    ranks_used: int
    idle_ranks: int
    local_domain: tuple[int, int, int]
    strategy: str
    rounds: int
    rounds_section_3_6_3: int
    method: str
    double_buffered: bool
    fewest_rounds: int
    memory_per_rank_words: int
    model_words_per_rank: WordsPerRank
    domain_words: int
    lower_bound_words: float
    sequential_bound_words: float | None
    baselines: Mapping[str, SummaModel | SummaBaseline | ScalapackBaseline]
    table33: Mapping[str, float]
    objective: str = "words"
    model_time: TimeModel | None = None
    explanation: tuple[str, ...] | None = None
    run: MatmulRun | None = None
    schedule: MatmulSchedule = library_field()

    @property
    def summa_grid(self) -> tuple[int, int]:
        """SUMMA's pr×pc grid (that of the ScaLAPACK layout and baseline too)."""
        return self.baselines["summa"].grid

    def bind(self, comm: Any, layout: str = "blocked", block: Any = None, grid: Any = None):
        """The :class:`~meshplan.exec.matmul.executor.MatmulExecutor` of this plan on ``comm`` (any mpi4py
        communicator of ``p`` ranks, or a CountingComm), collective.  ``layout="scalapack"`` takes and
        returns ScaLAPACK block-cyclic pieces in ``block=(mb, nb)`` blocks on the row-major ``grid=(pr, pc)``
        (defaults: the SUMMA grid of the plan and the ScaLAPACK baseline's block)."""
        from meshplan.exec.matmul.executor import MatmulExecutor

        if self.schedule is None:
            raise ModelError("this plan has no schedule to run; make it with plan_matmul", param="plan")
        return MatmulExecutor(comm, self.schedule, layout=layout, block=block, grid=grid)

    @property
    def verified(self) -> bool:
        """Whether the run and every baseline that ran were verified (True when nothing ran)."""
        ran = [self.run, *(b for b in self.baselines.values() if not isinstance(b, SummaModel))]
        return all(r.verified for r in ran if r is not None)

    def __str__(self) -> str:
        w = self.model_words_per_rank
        return (f"C = A·B, {self.problem}: grid {self.grid} ({self.ranks_used} used), strategy "
                f"'{self.strategy}', {self.rounds} round(s), {w.max:,} words per rank "
                f"(bound {self.lower_bound_words:,.1f})")


def _plan_of(sched: MatmulSchedule) -> MatmulPlan:
    pr, g = sched.problem, sched.grid
    return MatmulPlan(
        problem=pr, grid=g, ranks_used=g.used, idle_ranks=pr.p - g.used, local_domain=sched.local_domain,
        strategy=sched.strategy, rounds=sched.rounds,
        rounds_section_3_6_3=thesis_rounds(pr.m, pr.n, pr.k, pr.p, pr.memory), method=sched.method,
        double_buffered=sched.double_buffered, fewest_rounds=sched.fewest_rounds,
        memory_per_rank_words=sched.memory_per_rank, model_words_per_rank=WordsPerRank.of(sched.words_per_rank),
        domain_words=domain_words(pr.m, pr.n, pr.k, *g.as_list()), lower_bound_words=sched.lower_bound,
        sequential_bound_words=sequential_bound(pr.m, pr.n, pr.k, pr.memory) if pr.memory is not None else None,
        baselines=freeze({"summa": SummaModel(tuple(sched.summa_grid), WordsPerRank.of(sched.summa_words_per_rank))}),
        table33=freeze(table33(pr.m, pr.n, pr.k, pr.p, pr.memory)), objective=sched.objective,
        model_time=sched.model_time, explanation=sched.explanation or None, schedule=sched)


@functools.lru_cache(maxsize=64)
def _schedule(problem: MatmulProblem, idle_tolerance: float, method: str, time_limit_s: float,
              objective: str = "words", rates: Rates | None = None) -> MatmulSchedule:
    return schedule_matmul(problem, idle_tolerance, method, time_limit_s, objective, rates)


def rates_for(objective: Any, system: Any) -> Rates | None:
    """The machine rates the ``time`` objective needs (from ``system``, a calibrated system file or value);
    None for ``words``."""
    if check_objective(objective) == "words":
        return None
    if system is None:
        raise ModelError("objective='time' needs a system measured by calibrate (latency, bandwidth, flop_rate)",
                         param="system")
    from meshplan.api.inputs import as_system

    return Rates.of(as_system(system))


def plan_matmul(m: int | MatmulProblem, n: int | None = None, k: int | None = None, p: int | None = None, *,
                memory: int | None = None, idle_tolerance: float = 0.03, dtype: str = "f64",
                method: str = "auto", time_limit_s: float = 10.0, objective: str = "words",
                system: Any = None) -> MatmulPlan:
    """Plan C = A·B (A m×k, B k×n) on ``p`` ranks of ``memory`` words each (None = unlimited), in ``dtype``;
    or plan a :class:`MatmulProblem` given as the only positional argument.  ``method``: ``auto`` (CP-SAT,
    the enumeration when CP-SAT times out), ``cpsat`` or ``exhaustive``.  ``objective``: ``words`` (the
    fewest words per rank; the default) or ``time`` (the least modelled time with the latency, bandwidth and
    flop rate of ``system``, a system file written by calibrate; words break ties).  Pure, and cached.

    >>> plan = plan_matmul(64, 64, 64, 8)
    >>> plan.grid.as_list(), plan.strategy
    ([2, 2, 2], 'pm2,pn2,pk2')
    """
    if isinstance(m, MatmulProblem):
        if (n, k, p) != (None, None, None):
            raise ModelError("pass either a MatmulProblem or m, n, k, p", param="problem")
        problem = m
    else:
        problem = MatmulProblem(m, n, k, p, memory, dtype)
    rates = rates_for(objective, system)
    try:
        hash((idle_tolerance, method, time_limit_s))
    except TypeError:  # not a cache key: let the planner say what is wrong with it
        return _plan_of(schedule_matmul(problem, idle_tolerance, method, time_limit_s, objective, rates))
    return _plan_of(_schedule(problem, idle_tolerance, method, time_limit_s, objective, rates))


def check_run_options(baselines: Any = ("summa",), repeats: int = 3) -> tuple[str, ...]:
    """Validate the options of a run (the one site for ``baselines``; ``repeats`` by
    :func:`~meshplan.models.core.checks.check_repeats`, so ``repeats = 0`` is refused); the baselines."""
    names = (baselines,) if isinstance(baselines, str) else tuple(baselines or ())
    bad = [b for b in names if b not in BASELINES]
    if bad:
        raise ModelError(f"unknown name {quote(bad[0])} in baselines; choose from {', '.join(BASELINES)}",
                         param="baselines")
    check_repeats(repeats)
    return names


def _measured(got: dict) -> dict[str, Any]:
    return dict(verified=bool(got["verified"]), max_rel_error=float(got["max_rel_error"]),
                measured_words_per_rank=WordsPerRank.of(got["words_per_rank"]),
                pmpi_words_per_rank=WordsPerRank.of(got.get("pmpi_words_per_rank")),
                time_s=Seconds(got["time_min_s"], got["time_median_s"]))


def run_matmul(plan_or_m: int | MatmulPlan, n: int | None = None, k: int | None = None, p: int | None = None, *,
               memory: int | None = None, idle_tolerance: float = 0.03, dtype: str = "f64",
               baselines: Sequence[str] = ("summa",), repeats: int = 3, pmpi: bool = True,
               layout: str = "blocked", timeout: float = 600.0, objective: str = "words",
               system: Any = None) -> MatmulPlan:
    """Plan (unless given a plan) and run C = A·B on ``p`` MPI ranks with the ``baselines`` (``summa``,
    ``scalapack``) in one launch each: the plan with ``run`` and the baselines' runs filled, i.e.
    ``meshplan matmul --run --json``.  ``plan_or_m`` is a :class:`MatmulPlan`, a :class:`MatmulProblem` or
    the size m (then n, k, p, memory, idle_tolerance and dtype as for :func:`plan_matmul`).  ``layout="scalapack"`` starts from and ends in pdgemm's block-cyclic
    layout (block and grid of the ScaLAPACK baseline); the conversions are part of the measured and
    modelled words.  ``pmpi`` loads the PMPI counter; ``repeats`` timed runs; ``timeout`` seconds per launch;
    ``objective`` and ``system`` choose the plan as in :func:`plan_matmul`."""
    from meshplan.api.inputs import as_seconds
    from meshplan.exec.matmul.driver import run_cases, run_scalapack
    from meshplan.exec.runtime.launch import check_np
    from meshplan.models.core.limits import check_memory

    plan = plan_or_m if isinstance(plan_or_m, MatmulPlan) else None
    pr = plan.problem if plan is not None else plan_or_m if isinstance(plan_or_m, MatmulProblem) and \
        (n, k, p) == (None, None, None) else MatmulProblem(plan_or_m, n, k, p, memory, dtype)
    names = check_run_options(baselines, repeats)
    layout = check_layout(layout)
    timeout = as_seconds(timeout, "timeout")
    check_np(pr.p)  # this machine's rank limit, before planning
    check_memory((pr.m * pr.k + pr.k * pr.n + pr.m * pr.n) * pr.itemsize,
                 f"running {pr.m}x{pr.n}x{pr.k} (A, B and C once)", "give smaller matrices")
    if "scalapack" in names:
        if pr.dtype != "f64":
            raise ModelError("the ScaLAPACK baseline runs pdgemm, in f64 only; use dtype f64",
                             param=("baselines", "dtype"))
        from meshplan.exec.runtime import scalapack

        scalapack.library()  # ScalapackUnavailable (what to install) before anything runs
    if plan is None:
        plan = plan_matmul(pr, idle_tolerance=idle_tolerance, objective=objective, system=system)
    sg = plan.summa_grid
    block = scalapack_block(pr.m, pr.n, pr.k, *sg)
    sizes = {"m": pr.m, "n": pr.n, "k": pr.k, "dtype": pr.dtype}
    cases = [dict(sizes, name="meshplan", algo="cosma", grid=plan.grid.as_list(), rounds=plan.rounds,
                  overlap=plan.double_buffered)]
    if layout == "scalapack":
        cases[0].update(layout="scalapack", bc_grid=list(sg), nb=block)
    if "summa" in names:
        cases.append(dict(sizes, name="summa", algo="summa", grid=list(sg), rounds=1))
    got = run_cases(pr.p, cases, repeats=repeats, use_pmpi=pmpi, timeout_s=timeout)
    run = MatmulRun(model_words_per_rank=WordsPerRank.of(got[0]["model_words_per_rank"]), layout=layout,
                    **_measured(got[0]))
    base = dict(plan.baselines)
    if "summa" in names:
        base["summa"] = SummaBaseline(tuple(sg), WordsPerRank.of(got[1]["model_words_per_rank"]), **_measured(got[1]))
    if "scalapack" in names:
        case = dict(name="scalapack", m=pr.m, n=pr.n, k=pr.k, grid=list(sg), nb=block)
        got_s = run_scalapack(pr.p, [case], repeats=repeats, use_pmpi=pmpi, timeout_s=timeout)[0]
        base["scalapack"] = ScalapackBaseline(model_words_per_rank=None, grid=tuple(sg), block=block,
                                              blas=freeze(got_s.get("blas")), **_measured(got_s))
    return replace(plan, run=run, baselines=freeze(base))
