"""Redistribution plans as values, and the planner (paper §7, with the re-check of DESIGN.md).

:func:`plan_redistribution` decomposes the mesh into prime axes (§3), searches
the memory-bounded weak graph (§7.2), lowers the shortest path with at most one
final ``allpermute`` (§6, §7.3) and replays the result with the solver-free
checker :func:`~meshplan.models.redistribution.lowlevel.check_program` before
returning it.  Types in a plan are over the prime mesh; ``display`` merges
complete runs of sub-axes back (``x_0,x_1`` → ``x``).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshplan.models.core.errors import VerificationError
from meshplan.models.redistribution.steps import AllToAll, Step, axes_size
from meshplan.models.redistribution.cost import check_cost, op_cost
from meshplan.models.redistribution.decompose import Decomposition, decompose
from meshplan.models.redistribution.lowlevel import check_program
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.problem import check_problem as validate
from meshplan.models.redistribution.types import DistType
from meshplan.models.redistribution.weak import mesh_primes, weak_of
from meshplan.solvers.redistribution.lower import LoweringOptions, lower_best, lower_wire
from meshplan.solvers.redistribution.search import shortest_weak_path

__all__ = ["PlannedStep", "Plan", "plan_redistribution", "make_plan", "check_problem"]


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One step of a redistribution plan with the type, local size and cost after it (Figure 11)."""

    step: Step
    type: DistType      # type after the step (prime mesh, w.r.t. the current device map)
    localsize: int      # elements per device after the step
    cost: int           # elements per device moved by the step (under the plan's cost model)


@dataclass(frozen=True, slots=True)
class Plan:
    """A redistribution program ``src →* dst`` with its height and cost (elements per device)."""

    strategy: str
    decomposition: Decomposition
    src: DistType            # over the prime mesh
    dst: DistType
    steps: tuple[PlannedStep, ...]
    height: int
    cost: int
    bound: int               # max(localsize(src), localsize(dst))
    weak_cost: int | None = None   # cost of the weak shortest path (search only)
    cost_model: str = "paper"      # "paper" (Fig. 11) or "wire" (bytes sent per device)

    @property
    def mesh(self) -> Mesh:
        """The prime mesh the plan runs on."""
        return self.decomposition.prime

    @property
    def ops(self) -> tuple[Step, ...]:
        """The plan's steps without their annotations."""
        return tuple(s.step for s in self.steps)

    def display(self, t: DistType) -> str:
        """A type of the prime mesh written over the user's mesh."""
        return str(self.decomposition.recompose(t))


def check_problem(mesh: Mesh, src: DistType, dst: DistType) -> Decomposition:
    """Validate a problem (:func:`meshplan.models.redistribution.problem.check_problem`: WF rules, equal
    global types, §2.5) and decompose its mesh."""
    validate(mesh, src, dst)
    return decompose(mesh)


def step_group(mesh: Mesh, op: Step) -> int | None:
    """The number of devices in each group of a step (an all-to-all's; ``None`` where the size alone says)."""
    return axes_size(mesh, op.group_axes) if isinstance(op, AllToAll) else None


def make_plan(strategy: str, dec: Decomposition, src: DistType, dst: DistType, ops: tuple[Step, ...],
              weak_cost: int | None = None, cost: str = "paper") -> Plan:
    """Replay ``ops`` with the checker, then attach types, costs (model ``cost``) and the height."""
    coords0 = dec.coords()
    states = check_program(dec.prime, coords0, src, dst, ops)
    steps = []
    for k, op in enumerate(ops):
        before, after = states[k].type, states[k + 1].type
        steps.append(PlannedStep(op, after, after.localsize,
                                 op_cost(op, before.localsize, after.localsize, step_group(dec.prime, op), cost)))
    return Plan(strategy, dec, src, dst, tuple(steps),
                height=max(s.type.localsize for s in states), cost=sum(s.cost for s in steps),
                bound=max(src.localsize, dst.localsize), weak_cost=weak_cost, cost_model=cost)


def plan_redistribution(mesh: Mesh, src: DistType, dst: DistType,
                        opts: LoweringOptions = LoweringOptions(), cost: str = "paper") -> Plan:
    """The memory-bounded near-optimal program of §7 for ``src ⇝ dst`` on ``mesh``, cheapest under the cost
    model ``cost`` (``paper``: Fig. 11, the paper's search and step model; ``wire``: bytes sent per device, with
    multi-pair all-to-alls and the final permutation priced, :mod:`meshplan.solvers.redistribution.merged`)."""
    check_cost(cost)
    dec = check_problem(mesh, src, dst)
    psrc, pdst = dec.type(src), dec.type(dst)
    if cost == "wire":   # with multi-pair all-to-alls; the final permutation priced (merged.py)
        ops, weak_cost = lower_wire(dec.prime, dec.coords(), psrc, pdst, opts)
    else:
        path = shortest_weak_path(mesh_primes(dec.prime), weak_of(psrc), weak_of(pdst), cost=cost)
        ops = lower_best(dec.prime, dec.coords(), psrc, pdst, path.alternatives or (path.steps,), opts)
        weak_cost = path.cost
    plan = make_plan("search", dec, psrc, pdst, ops, weak_cost=weak_cost, cost=cost)
    if plan.height > plan.bound:
        raise VerificationError(f"internal: program height {plan.height} exceeds the bound {plan.bound}")
    return plan
