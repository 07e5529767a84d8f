"""Lowered reduction programs on MPI: chunk layouts, byte counting, the launcher (P2 §3.2, §3.5).

A lowered program (:class:`~meshplan.models.reduction.lowering.LoweredProgram`)
runs on ``N`` MPI ranks, rank ``r`` = device ``r`` of the system (devices are
numbered row-major over the hardware levels, so with ranks laid out node by
node by ``mpiexec`` the device groups the placement chose are the groups that
talk).  Each device's buffer is split into ``k`` chunks, ``k`` = the size of a
reduction group, exactly as in the checker (docs/run.md).

This module holds what does not need MPI:

* :func:`chunk_layouts` — which chunks every rank holds before and after every
  step, in buffer order, computed the way the executor moves data (the buffer
  model of :mod:`meshplan.models.reduction.referee`): reductions combine
  buffers position-wise and label the result as the root's buffer, member
  ``i`` of a ReduceScatter keeps block ``i``, Reduce empties the non-roots,
  Broadcast copies the root's chunks, AllGather concatenates the members'
  chunks (re-sorted by label locally).  For a valid program every member holds
  the same chunks, so this is the scatter of Figure 8.  It never rejects a program the
  semantics rejects — an invalid program still runs and gives wrong numbers —
  but raises :class:`NotExecutable` when MPI itself cannot run a step (members
  of one group hand over different chunk counts, or a ReduceScatter's count does
  not divide among its members), so no rank ever waits for a partner.
* :func:`model_handed_bytes` — the same bytes from the Figure 8 states, for the
  cross-check against what was counted.
* :func:`run_programs` — runs :mod:`meshplan.exec.reduction.rank_main` through
  the runtime's :func:`~meshplan.exec.runtime.launch.run_job` (one launch for
  many programs); byte counting, data, verification and timing are the
  runtime's (docs/runtime.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from meshplan.exec.runtime.launch import run_job
from meshplan.models.core.collectives import CannotRun, Collective, apply_collective
from meshplan.models.core.errors import ModelError
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep
from meshplan.models.reduction.semantics import RuleViolation, apply_step
from meshplan.models.reduction.state import initial_context, rows

__all__ = ["Layout", "NotExecutable", "step_layout", "chunk_layouts", "gather_order",
           "model_handed_bytes", "ProgramSpec", "ProgramRun", "run_programs", "chunk_elements"]

#: held chunk labels per device, in buffer order (ascending)
Layout = tuple[tuple[int, ...], ...]


class NotExecutable(ModelError):
    """A step that MPI cannot run on the chunks its members hold."""

    def __init__(self, step: int, st: LoweredStep, group: Sequence[int], detail: str) -> None:
        self.step = step
        self.group = tuple(group)
        super().__init__(f"not executable: step {step} ({st.collective} over devices {list(group)}): {detail}")


def step_layout(layout: Layout, st: LoweredStep, step: int = 1) -> Layout:
    """The layout after one step (see the module docstring); raises :class:`NotExecutable`.

    The labels move by :func:`~meshplan.models.core.collectives.apply_collective`
    (a reduction's result carries the root's labels: MPI combines position-wise)."""
    new = list(layout)
    for g in st.groups:
        try:
            after = apply_collective(st.collective, [(layout[d], layout[d]) for d in g], lambda blocks: blocks[0])
        except CannotRun as err:
            if err.kind == "indivisible":
                detail = f"{err.lengths[0]} chunks cannot be scattered evenly over {len(g)} devices"
            else:
                i = err.position
                detail = (f"members hold different chunk counts (device {g[0]} holds {err.lengths[0]}, "
                          f"device {g[i]} holds {err.lengths[i]}); MPI needs equal counts")
            raise NotExecutable(step, st, g, detail) from None
        for d, (labels, _) in zip(g, after):
            new[d] = tuple(labels)
    return tuple(new)


def chunk_layouts(program: LoweredProgram, chunks: int) -> list[Layout]:
    """Layouts before step 1, after step 1, …, after the last step (``len(steps) + 1`` entries)."""
    if chunks < 1:
        raise ModelError(f"need at least one chunk, got {chunks}")
    out = [tuple(tuple(range(chunks)) for _ in range(program.num_devices))]
    for i, st in enumerate(program.steps, 1):
        out.append(step_layout(out[-1], st, i))
    return out


def gather_order(layout: Layout, group: Sequence[int]) -> np.ndarray | None:
    """Permutation that sorts an AllGather's concatenation by chunk label (None if already sorted)."""
    concat = [lab for d in group for lab in layout[d]]
    perm = np.argsort(np.asarray(concat, dtype=np.int64), kind="stable")
    return None if np.array_equal(perm, np.arange(len(concat))) else perm


def chunk_elements(nbytes: int, chunks: int, dtype: str) -> int:
    """Elements per chunk for a ``nbytes`` buffer split in ``chunks`` (rounded down, at least 1)."""
    return max(1, nbytes // (np.dtype(dtype).itemsize * chunks))


def model_handed_bytes(program: LoweredProgram, chunks: int, chunk_bytes: int) -> list[list[int]] | None:
    """Bytes each device hands to MPI per step according to the Figure 8 states
    (held chunks × chunk size; a Broadcast's non-roots hand nothing), ``[step][device]``;
    None when the semantics rejects the program."""
    ctx = initial_context(program.num_devices, chunks)
    out = []
    for st in program.steps:
        c = Collective.parse(st.collective)
        per = [0] * program.num_devices
        for g in st.groups:
            for i, d in enumerate(g):
                if i == 0 or c.reduces or c.gathers:  # a Broadcast's receivers hand nothing
                    per[d] = len(rows(ctx[d])) * chunk_bytes
        out.append(per)
        try:
            ctx = apply_step(ctx, st.collective, st.groups)
        except RuleViolation:
            return None
    return out


# -- the launcher (outside MPI) ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProgramSpec:
    """One program to run: a name, its lowered steps and the reduction groups it must reach.

    ``impl="handwritten"`` ignores ``program`` and runs one plain mpi4py
    ``Allreduce`` over the reduction groups (the baseline of bench/exec.py)."""

    name: str
    program: LoweredProgram
    reduction_groups: tuple[tuple[int, ...], ...]
    impl: str = "meshplan"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "impl": self.impl, "num_devices": self.program.num_devices,
                "reduction_groups": [list(g) for g in self.reduction_groups],
                "steps": [{"collective": str(s.collective), "groups": [list(g) for g in s.groups]}
                          for s in self.program.steps]}


@dataclass(frozen=True, slots=True)
class ProgramRun:
    """What one program did on MPI (times are the slowest rank's, over ``repeats`` runs)."""

    name: str
    verified: bool
    executable: bool
    reason: str
    time_min_s: float | None
    time_median_s: float | None
    step_min_s: tuple[float, ...]
    step_median_s: tuple[float, ...]
    times_s: tuple[float, ...]
    bytes_per_rank: tuple[int, ...]  # handed to MPI, counted in Python
    bytes_per_step: tuple[tuple[int, ...], ...]  # [step][rank]
    chunk_bytes: int
    buffer_bytes: int
    extra: dict = field(default_factory=dict, compare=False)


def run_programs(specs: Sequence[ProgramSpec], *, np: int, nbytes: int, repeats: int = 5,
                 dtype: str = "int64", seed: int = 0, timeout_s: float = 300.0,
                 fault: dict | None = None, progress: Any = None) -> list[ProgramRun]:
    """Run every program in one ``mpiexec -n np`` job; one :class:`ProgramRun` per spec, in order.

    A rank that fails aborts the job and a job that outlives ``timeout_s`` is
    killed; both raise :class:`~meshplan.exec.runtime.launch.MpiRunError`.  ``fault``
    is the runtime's test hook (``{"rank": r, "kind": "raise"|"hang"|"corrupt"}``):
    one rank fails, hangs while the others wait in MPI, or corrupts its input.  ``progress(done, total,
    name)`` is called as programs finish (:func:`~meshplan.exec.runtime.launch.run_job`)."""
    if not specs:
        return []
    for s in specs:
        if s.program.num_devices != np:
            raise ModelError(f"program {s.name} is for {s.program.num_devices} devices; run it with np "
                             f"{s.program.num_devices} (one MPI rank per device)", param="np")
    job = {"dtype": dtype, "bytes": int(nbytes), "repeats": int(repeats), "seed": int(seed),
           "programs": [s.to_json() for s in specs], "fault": fault}
    out = run_job(np, "meshplan.exec.reduction.rank_main", job, timeout_s=timeout_s, progress=progress)
    runs = []
    for r in out["programs"]:
        runs.append(ProgramRun(
            name=r["name"], verified=bool(r["verified"]), executable=bool(r["executable"]), reason=r["reason"],
            time_min_s=r["time_s"]["min"], time_median_s=r["time_s"]["median"],
            step_min_s=tuple(s["min"] for s in r["step_time_s"]),
            step_median_s=tuple(s["median"] for s in r["step_time_s"]),
            times_s=tuple(r["times_s"]), bytes_per_rank=tuple(r["bytes_per_rank"]),
            bytes_per_step=tuple(tuple(x) for x in r["bytes_per_step"]),
            chunk_bytes=int(r["chunk_bytes"]), buffer_bytes=int(r["buffer_bytes"])))
    return runs
