"""``solve placement``: placements × synthesized reductions × simulated times (P2 §3–§5).

For every parallelism matrix (enumerated by a solver, re-checked), build
synthesis hierarchy (d), synthesize every reduction program (re-checked by
replay), simulate each lowered program and the single-step AllReduce, and
rank.  Plans are values: the result is a tree of frozen dataclasses.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from meshplan.models.placement.matrix import ParallelismMatrix, check_axes, check_reduce
from meshplan.models.placement.constraints import PlacementConstraints
from meshplan.models.reduction.dsl import Program
from meshplan.models.reduction.hierarchy import SynthesisHierarchy, synthesis_hierarchy
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep
from meshplan.models.reduction.simulator import ProgramTime
from meshplan.models.reduction.symmetry import LocalMemo, Quotient, simulate_symmetric
from meshplan.models.core.errors import ModelError
from meshplan.models.core.limits import LIMITS, limit
from meshplan.models.core.system import System
from meshplan.solvers.placement.enumerate import enumerate_placements
from meshplan.solvers.reduction.synthesis import synthesize

__all__ = ["ProgramResult", "PlacementResult", "PlacementStudy", "solve_placement", "allreduce_program",
           "check_size"]


def check_size(system: System, axes: Sequence[int], reduce: Sequence[int]) -> None:
    """Refuse, before any work, a system or reduction group larger than the ``placement`` and ``group`` limits
    of :mod:`meshplan.models.core.limits` (docs/solve.md), saying the limit and how to raise it.  The work is
    linear in the devices (the quotient by the reduction groups), but a device list is still built per
    placement; a synthesis state holds ``k × k`` bits per member of a ``k``-device reduction group, so the
    search grows with ``k³`` (``k = 512``: ~30 s and ~2.5 GB)."""
    most, env = limit("placement"), LIMITS["placement"].env
    n = system.num_devices
    if n > most:
        raise ModelError(f"system {system.short()} has {n:,} devices; solve placement handles up to {most:,} "
                         f"(set {env}={n} to raise the limit; time and memory grow linearly with the devices)")
    most, env = limit("group"), LIMITS["group"].env
    k = math.prod(axes[i] for i in reduce)
    if k > most:
        raise ModelError(f"the reduction axes {list(reduce)} make reduction groups of {k:,} devices; synthesis "
                         f"handles groups of up to {most:,} (set {env}={k} to raise the limit; its states grow "
                         f"with the group size cubed)")


@dataclass(frozen=True, slots=True)
class ProgramResult:
    """One synthesized program of a placement, lowered, with its simulated time."""

    program: Program
    lowered: LoweredProgram
    time: ProgramTime


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """One parallelism matrix: its hierarchy, reduction groups, the baseline AllReduce and its programs, fastest
    first."""

    matrix: ParallelismMatrix
    hierarchy: SynthesisHierarchy
    reduction_groups: tuple[tuple[int, ...], ...]
    allreduce: ProgramTime
    programs: tuple[ProgramResult, ...]  # fastest first
    synthesis_seconds: float

    @property
    def best(self) -> ProgramResult:
        """The fastest program."""
        return self.programs[0]

    @property
    def speedup(self) -> float:
        """The baseline AllReduce's time over the fastest program's."""
        return self.allreduce.time_s / self.best.time.time_s if self.best.time.time_s > 0 else 1.0


@dataclass(frozen=True, slots=True)
class PlacementStudy:
    """The answer of ``meshplan solve placement``: every placement, fastest first, with its programs."""

    system: System
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    bytes_per_device: int
    algo: str
    dialect: str
    max_size: int
    placements: tuple[PlacementResult, ...]  # fastest best program first
    synthesis_seconds: float

    @property
    def best(self) -> PlacementResult:
        """The fastest placement."""
        return self.placements[0]


def allreduce_program(groups: Sequence[Sequence[int]], num_devices: int) -> LoweredProgram:
    """The default strategy: one AllReduce over the reduction groups."""
    return LoweredProgram((LoweredStep("AllReduce", tuple(tuple(g) for g in groups)),), num_devices)


def solve_placement(system: System, axes: Sequence[int], reduce: Sequence[int], *, max_size: int = 5,
                    dialect: str = "full", bytes_per_device: int = 2**30, algo: str = "ring",
                    backend: str = "cpsat", constraints: PlacementConstraints | None = None,
                    progress: Callable[[int, int], None] | None = None) -> PlacementStudy:
    """Enumerate the parallelism matrices of ``axes`` on ``system`` (P2 §3.1, with ``backend``), synthesize the
    reduction programs of each (§3.5), re-check and simulate them (§5); placements fastest first.

    The re-check and the simulation work by the quotient of the reduction groups
    (:mod:`meshplan.models.reduction.symmetry`): linear in the devices, exact."""
    axes = check_axes(system, axes)
    red = check_reduce(axes, reduce)
    check_size(system, axes, red)
    matrices = enumerate_placements(system, axes, backend=backend, constraints=constraints)
    results = []
    total_synth = 0.0
    memo = LocalMemo()  # shared by every placement: local replays, bit contexts, step times
    for idx, m in enumerate(matrices):
        h = synthesis_hierarchy(m, red)
        t0 = time.perf_counter()
        syn = synthesize(h, max_size=max_size, dialect=dialect, memo=memo)
        total_synth += time.perf_counter() - t0
        groups = tuple(m.reduction_groups(red))
        q = Quotient(groups, system.num_devices, memo)
        progs = [ProgramResult(p, lp, simulate_symmetric(system, lp, q, bytes_per_device=bytes_per_device,
                                                         algo=algo, memo=memo))
                 for p, lp in zip(syn.programs, syn.lowered)]
        order = sorted(range(len(progs)), key=lambda i: (progs[i].time.time_s, len(progs[i].program), i))
        ar = simulate_symmetric(system, allreduce_program(groups, system.num_devices), q,
                                bytes_per_device=bytes_per_device, algo=algo, memo=memo)
        results.append(PlacementResult(m, h, groups, ar, tuple(progs[i] for i in order), syn.seconds))
        if progress:
            progress(idx + 1, len(matrices))
    results.sort(key=lambda r: (r.best.time.time_s, r.matrix.rows))
    return PlacementStudy(system, axes, red, bytes_per_device, algo, dialect, max_size, tuple(results), total_synth)
