"""Distributed LU (COnfLUX) and Cholesky (COnfCHOX) on 2.5-D grids (thesis ch. 4; docs/factor.md).

:func:`plan_factorization` is ``meshplan factor KIND N --np P`` and :func:`run_factorization` adds ``--run``;
both return a :class:`FactorPlan` whose fields are the keys of that verb's ``--json``.
``plan.bind(comm)`` gives a :class:`~meshplan.exec.factorization.executor.FactorExecutor` that factors and
solves inside the caller's MPI program::

    ex = mp.plan_factorization("lu", N, comm.Get_size()).bind(comm)
    F = ex.factor(ex.distribute(A))                    # A on rank 0, None elsewhere
    x = ex.collect(F.solve(ex.distribute_rhs(b)))       # the global x on rank 0, None elsewhere
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from meshplan.models.core.checks import check_repeats
from meshplan.models.core.errors import ModelError, quote
from meshplan.models.core.values import Value, freeze, library_field, value
from meshplan.models.factorization.problem import FactorProblem

__all__ = ["FactorPlan", "FactorRun", "FactorProblem", "plan_factorization", "run_factorization",
           "check_run_options", "BASELINES"]

#: the baselines :func:`run_factorization` can run next to the plan
BASELINES = ("2d", "scalapack")


@value
class FactorRun(Value):
    """A verified run (the ``run`` object of ``factor --run --json``): the scaled residual (≤ 10 to verify)
    and growth factor of the factors, the words per rank the Python counter (mean and max over ranks) and
    the PMPI counter (``None`` without it) measured, the fastest time in seconds (slowest rank) and the
    model's words."""

    verified: bool
    scaled_residual: float | None
    growth_factor: float | None
    measured_words_per_rank: float
    measured_words_max: float
    pmpi_words_per_rank: float | None
    time_s: float | None
    model_words_per_rank: float


@value
class FactorPlan(Value):
    """The grid ``(Px, Py, Pz)`` and ``block`` of COnfLUX / COnfCHOX with the exact modeled words per rank
    (per phase in ``model_phases``, totals over ranks), the footprint, the section 4.6 lower bound, how the
    plan was chosen, the best one-layer grid's 2-D model, and after :func:`run_factorization` the ``run``
    and its ``baselines`` (docs/factor.md, JSON).  ``schedule`` holds the solver's
    :class:`~meshplan.solvers.factorization.plan.FactorSchedule`."""

    kind: str
    N: int
    p: int
    memory: int | None
    grid: tuple[int, int, int]
    block: int
    model_words_per_rank: float
    model_phases: Mapping[str, float]
    memory_words_per_rank: int
    lower_bound_words: float
    candidates: int
    explanation: tuple[str, ...]
    two_d_model_words_per_rank: float | None
    objective: str = "words"
    model_time: Any = None
    run: FactorRun | None = None
    baselines: Mapping[str, Mapping] = field(default_factory=lambda: freeze({}))
    schedule: Any = library_field()

    @property
    def problem(self) -> FactorProblem:
        return self.schedule.problem

    @property
    def verified(self) -> bool:
        """Whether the run and every baseline that ran verified (True for a plan that did not run)."""
        return self.run is None or (self.run.verified and all(b.get("verified", True) is not False
                                                              for b in self.baselines.values()))

    def bind(self, comm: Any):
        """The :class:`~meshplan.exec.factorization.executor.FactorExecutor` of this plan on ``comm`` (an
        mpi4py communicator of ``p`` ranks, or a ``CountingComm``); collective."""
        from meshplan.exec.factorization.executor import FactorExecutor

        return FactorExecutor(self.schedule, comm)


def _plan(problem: FactorProblem, objective: str = "words", system: Any = None) -> FactorPlan:
    from meshplan.api.matmul import rates_for
    from meshplan.solvers.factorization.plan import schedule_factorization, two_d_words

    rates = rates_for(objective, system)
    if rates is not None:  # a step's messages are waits of busy ranks: the latency measured at p ranks
        from meshplan.api.inputs import as_system
        from meshplan.models.factorization.time import step_rates

        rates = step_rates(rates, as_system(system), problem.p)
    s = schedule_factorization(problem, objective, rates)
    g = s.grid
    return FactorPlan(kind=problem.kind, N=problem.N, p=problem.p, memory=problem.memory, grid=(g.Px, g.Py, g.Pz),
                      block=g.v, model_words_per_rank=s.cost.per_rank,
                      model_phases=freeze({k: float(v) for k, v in s.cost.phases.items()}),
                      memory_words_per_rank=s.memory_words, lower_bound_words=s.lower_bound_words,
                      candidates=s.candidates, explanation=s.explanation,
                      two_d_model_words_per_rank=two_d_words(problem), objective=s.objective,
                      model_time=s.model_time, schedule=s)


def plan_factorization(kind: str | FactorProblem, N: int | None = None, p: int | None = None, *,
                       memory: int | None = None, block: int | None = None, grid: Any = None,
                       dtype: Any = "f64", objective: str = "words", system: Any = None) -> FactorPlan:
    """The 2.5-D grid and block size of COnfLUX (``kind="lu"``) or COnfCHOX (``"cholesky"``) for an ``N × N``
    matrix on ``p`` ranks with ``memory`` words per rank (``None``: unbounded), by exhaustive search
    minimizing the exact modeled words (thesis 4.7–4.8), re-checked by a solver-free replay.  ``block`` /
    ``grid`` (``(Px, Py, Pz)`` or ``"2,2,1"``) pin the block size / the grid; ``dtype`` (``f64``, ``f32``)
    is what :meth:`FactorPlan.bind`'s executor computes in.  ``objective="time"`` minimizes the modelled
    time instead (latency, bandwidth and flop rate of ``system``, a system file written by calibrate; words
    break ties).  ``plan_factorization(problem)`` takes a :class:`FactorProblem` instead."""
    if isinstance(kind, FactorProblem):
        if (N, p, memory, block, grid, dtype) != (None, None, None, None, None, "f64"):
            raise ModelError("give either a FactorProblem or kind, N, p and the keywords, not both", param="kind")
        return _plan(kind, objective, system)
    return _plan(FactorProblem(kind, N, p, memory, dtype, block=block, grid=grid), objective, system)


def check_run_options(baselines: Iterable[str] = (), repeats: int = 1, seed: int = 0) -> tuple[str, ...]:
    """Validate the options of a run (the one site for ``baselines`` and ``seed``; ``repeats`` by
    :func:`~meshplan.models.core.checks.check_repeats`, so ``repeats = 0`` is refused); the baselines."""
    if isinstance(baselines, str):
        baselines = [baselines]
    names = tuple(baselines)
    for b in names:
        if b not in BASELINES:
            raise ModelError(f"unknown name {quote(b)} in baselines; use {', '.join(BASELINES)}", param="baselines")
    check_repeats(repeats)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ModelError(f"seed must be a whole number ≥ 0, got {quote(seed)}", param="seed")
    return names


def run_factorization(kind: str, N: int, p: int, *, memory: int | None = None, block: int | None = None,
                      grid: Any = None, baselines: Iterable[str] = (), repeats: int = 1, seed: int = 0,
                      input: str | None = None, matrix: dict | None = None, pmpi: bool = True,
                      timeout: float = 600.0, plan: FactorPlan | None = None, objective: str = "words",
                      system: Any = None) -> FactorPlan:
    """:func:`plan_factorization` (or ``plan``), then factor on ``p`` MPI ranks through the same executor
    :meth:`FactorPlan.bind` gives, verify the factors (scaled residual ≤ 10), measure the words per rank
    (Python and PMPI counters) and the fastest of ``repeats`` (≥ 1) timed runs, and run the ``baselines``
    (``"2d"``, ``"scalapack"``).  The matrix is seeded random (LU; ``seed``) or SPD (Cholesky), the ``.npy``
    file ``input``, or a ``matrix`` spec.  A singular (LU) or non-SPD (Cholesky) matrix raises
    :class:`~meshplan.models.factorization.breakdown.FactorizationBreakdown` (a ``VerificationError``)
    naming the step and block.  ``objective`` and ``system`` choose the plan as in :func:`plan_factorization`."""
    from dataclasses import replace

    from meshplan.exec.factorization.driver import execute, matrix_spec
    from meshplan.exec.runtime.launch import check_np
    from meshplan.models.core.limits import check_memory

    names = check_run_options(baselines, repeats, seed)
    plan = plan or plan_factorization(kind, N, p, memory=memory, block=block, grid=grid, objective=objective,
                                      system=system)
    pr = plan.problem
    check_memory(2 * pr.N * pr.N * 8, f"factoring N = {pr.N:,} (the matrix and its factors)", "give a smaller N")
    spec = matrix_spec(pr.kind, pr.N, seed, input, matrix)
    check_np(pr.p)
    run, done = execute(plan.schedule, spec, baselines=names, repeats=repeats, pmpi=pmpi, timeout_s=timeout)
    return replace(plan, run=FactorRun(**run), baselines=freeze(done))
