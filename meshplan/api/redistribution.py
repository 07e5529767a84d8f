"""Redistribution of distributed arrays without exceeding the larger tile (paper §7; docs/redistribute.md).

The spine: :class:`~meshplan.models.redistribution.problem.RedistributionProblem` → :func:`plan_redistribution`
→ :class:`RedistributionPlan` → ``plan.bind(comm)`` (a
:class:`~meshplan.exec.redistribution.executor.RedistributionExecutor`) → :class:`RedistributionRun` (what
:func:`run_redistribution` measured).  ``meshplan redistribute SRC DST --mesh …`` prints
``plan.to_json()``; with ``--run`` the plan carries its ``run``.
"""

from __future__ import annotations

from typing import Any

from meshplan.api.inputs import as_mesh, as_type
from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, library_field, optional_field, value
from meshplan.models.redistribution.problem import RedistributionProblem

__all__ = ["RedistributionStep", "RedistributionProgram", "RedistributionPlan", "ProgramRunStats",
           "RedistributionRun", "plan_redistribution", "run_redistribution"]


@value
class RedistributionStep(Value):
    """One step of a program: the collective (``op``), its mesh ``axes`` and tensor ``dims`` (of a multi-pair
    all-to-all: every move's), the type after it
    (over the user's mesh, and over the prime mesh), the local tile after it and the bytes it moves per device;
    ``moved_devices`` (an ``allpermute`` only) counts the devices that receive, and ``chunks`` (an
    ``allpermute`` split among the replicas of each tile, planned by the wire cost) the holders each of them
    takes an equal chunk from."""

    op: str
    axes: tuple[str, ...]
    dims: tuple[int, ...]
    type: str
    prime_type: str
    local_size: int
    local_bytes: int
    cost_bytes: int
    moved_devices: int | None = optional_field()  # an allpermute's only
    chunks: int | None = optional_field()  # a split allpermute's only


@value
class RedistributionProgram(Value):
    """A program's steps, its height (the largest tile a device holds) and cost (elements moved per device),
    in elements and bytes."""

    program: tuple[RedistributionStep, ...]
    height: int
    height_bytes: int
    cost: int
    cost_bytes: int


@value
class ProgramRunStats(Value):
    """One program on MPI: verified against numpy after every step, the largest tile and live bytes a rank
    held, the median time of the slowest rank."""

    verified: bool
    peak_tile_bytes: int
    peak_live_bytes: int
    time_s: float | None


@value
class RedistributionRun(Value):
    """Both programs run on ``np`` ranks (:func:`run_redistribution`)."""

    np: int
    search: ProgramRunStats
    baseline: ProgramRunStats


@value
class RedistributionPlan(Value):
    """The searched program (``program``, ``height``, ``cost`` …, in elements and bytes), the XLA-style
    ``baseline``, the ``dtype`` and, after :func:`run_redistribution`, the MPI ``run`` (docs/redistribute.md,
    JSON).  ``search`` and ``baseline_plan`` hold the planner's values, ``problem`` the problem."""

    mesh: str
    prime_mesh: str
    src: str
    dst: str
    itemsize: int
    bound: int
    bound_bytes: int
    program: tuple[RedistributionStep, ...]
    height: int
    height_bytes: int
    cost: int
    cost_bytes: int
    weak_cost_bytes: int
    within_bound: bool
    baseline: RedistributionProgram
    dtype: str
    run: RedistributionRun | None = optional_field()  # only when the plans ran
    cost_model: str | None = optional_field()  # "wire" when costs count bytes sent; absent for Fig. 11
    search: Any = library_field()
    baseline_plan: Any = library_field()
    problem: Any = library_field()

    @property
    def verified(self) -> bool:
        """Whether every program that ran was verified (True when nothing ran)."""
        return self.run is None or (self.run.search.verified and self.run.baseline.verified)

    def bind(self, comm: Any, *, program: str = "search"):
        """The executor of the searched program (``program="baseline"``: the XLA-style one) on ``comm``, one
        rank per mesh device (collective over ``comm``): ``ex(x_tile)`` redistributes, ``ex.source_tile(x)`` and
        ``ex.target_tile(x)`` cut this rank's tiles out of a global array."""
        from meshplan.exec.redistribution.executor import RedistributionExecutor

        if program not in ("search", "baseline"):
            raise ModelError(f"program must be 'search' or 'baseline', got {program!r}", param="program")
        p = self.search if program == "search" else self.baseline_plan
        return RedistributionExecutor(p.decomposition, p.src, p.ops, comm)


def _steps(plan, itemsize: int) -> tuple[RedistributionStep, ...]:
    return tuple(RedistributionStep(s.step.op, tuple(getattr(s.step, "group_axes", s.step.axes)),
                                    tuple(s.step.dims), plan.display(s.type),
                                    str(s.type), s.localsize, s.localsize * itemsize, s.cost * itemsize,
                                    s.step.moved if s.step.op == "allpermute" else None,
                                    getattr(s.step, "chunks", None))
                 for s in plan.steps)


def _program(plan, itemsize: int) -> RedistributionProgram:
    return RedistributionProgram(_steps(plan, itemsize), plan.height, plan.height * itemsize, plan.cost,
                                 plan.cost * itemsize)


def _problem(src: Any, dst: Any, mesh: Any, dtype: Any) -> RedistributionProblem:
    if isinstance(src, RedistributionProblem):
        return src
    if isinstance(src, str) and "=" in src and "[" not in src:
        raise ModelError(f"src {src!r} looks like a mesh: the arguments are (src, dst, mesh), e.g. "
                         "plan_redistribution('[4{x}16,16]', '[16,4{x}16]', 'x=4')", param="src")
    if mesh is None:
        raise ModelError("mesh is missing: give the mesh the types live on, e.g. mesh='x=4,y=2'", param="mesh")
    return RedistributionProblem(as_type(src), as_type(dst), as_mesh(mesh), dtype)


def plan_redistribution(src: Any, dst: Any = None, mesh: Any = None, *, dtype: str = "f32",
                        cost: str = "paper", split: bool = True) -> RedistributionPlan:
    """The memory-bounded program of the shortest-path search (§7) that redistributes an array from type
    ``src`` to ``dst`` on ``mesh`` (e.g. ``"[4{x}16,16]"``, ``"[16,4{x}16]"``, ``"x=4"``; or one
    :class:`RedistributionProblem`), never holding more per device than the larger tile, next to the
    XLA-style baseline.  ``dtype`` (``f32``, ``f64``, ``bf16``, ``i32`` …) sets the byte figures.  ``cost``
    is what the search minimises and the costs report: ``"paper"`` (Fig. 11, the default, reproduces the
    paper) or ``"wire"`` (the bytes each device sends, the (g−1)/g factors of each collective included).
    Under ``"wire"`` a permutation is split among the replicas of each tile where that sends fewer bytes
    from the busiest device (``split=False``: whole tiles, one source each, as the paper's step model)."""
    from meshplan.models.redistribution.cost import check_cost
    from meshplan.solvers.redistribution.lower import LoweringOptions
    from meshplan.solvers.redistribution.baseline import baseline_plan
    from meshplan.solvers.redistribution.plan import plan_redistribution as _plan

    check_cost(cost)
    pr = _problem(src, dst, mesh, dtype)
    item = pr.itemsize
    if not isinstance(split, bool):
        raise ModelError(f"split must be True or False, got {split!r}", param="split")
    search = _plan(pr.mesh, pr.src, pr.dst, LoweringOptions(split=split), cost=cost)
    base = baseline_plan(pr.mesh, pr.src, pr.dst, cost=cost)
    dec = search.decomposition
    return RedistributionPlan(
        mesh=dec.original.cli(), prime_mesh=dec.prime.cli(), src=str(dec.recompose(search.src)),
        dst=str(dec.recompose(search.dst)), itemsize=item, bound=search.bound, bound_bytes=search.bound * item,
        program=_steps(search, item), height=search.height, height_bytes=search.height * item, cost=search.cost,
        cost_bytes=search.cost * item, weak_cost_bytes=search.weak_cost * item,
        within_bound=search.height <= search.bound, baseline=_program(base, item), dtype=pr.dtype,
        search=search, baseline_plan=base, problem=pr, cost_model=None if cost == "paper" else cost)


def run_redistribution(src: Any, dst: Any = None, mesh: Any = None, *, dtype: str = "f32", np: int | None = None,
                       repeats: int = 3, cost: str = "paper") -> RedistributionPlan:
    """:func:`plan_redistribution`, then run the searched and the baseline program on MPI ranks (one per
    mesh device) through their executors, verify the result against numpy after every step and report
    peak memory and time (``run``)."""
    from dataclasses import replace

    from meshplan.exec.redistribution.driver import run_plans
    from meshplan.models.core.checks import check_ranks, check_repeats

    check_repeats(repeats)
    if np is not None:
        check_ranks(np, "np")
    plan = plan_redistribution(src, dst, mesh, dtype=dtype, cost=cost)
    res = run_plans([{"search": plan.search, "baseline": plan.baseline_plan}], np=np, dtype=plan.dtype,
                    repeats=repeats)[0]
    stats = {name: ProgramRunStats(r.verified, r.peak_tile_bytes, r.peak_live_bytes, r.time_s)
             for name, r in res.items()}
    run = RedistributionRun(plan.search.decomposition.original.num_devices, stats["search"], stats["baseline"])
    return replace(plan, run=run)
