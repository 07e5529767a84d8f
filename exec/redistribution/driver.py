"""Run redistribution plans on MPI ranks and collect what they measured (paper §7).

Many problems go into one ``mpiexec`` launch (the machine has few cores):
:func:`run_plans` hands them to :mod:`meshplan.exec.redistribution.rank_main`
through the runtime's :func:`meshplan.exec.runtime.launch.run_job`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from meshplan.exec.runtime.launch import run_job
from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.serialize import step_to_dict
from meshplan.solvers.redistribution.plan import Plan

__all__ = ["RunResult", "run_plans"]


@dataclass(frozen=True, slots=True)
class RunResult:
    verified: bool
    peak_tile_bytes: int
    peak_live_bytes: int
    time_s: float | None
    times_s: tuple[float, ...]


def run_plans(jobs: Sequence[dict[str, Plan]], *, np: int | None = None, dtype: str = "f32",
              repeats: int = 3, timeout_s: float = 300.0,
              inject_fault: bool = False) -> list[dict[str, RunResult]]:
    """Run every plan of every job (``{name: plan}``, all plans of a job solve one problem).

    All problems must live on meshes with ``np`` devices.  Returns, per job, a
    :class:`RunResult` per plan name.  ``inject_fault`` (a test) makes rank 0
    corrupt its source tile (the runtime's ``corrupt`` fault), so no program may verify.
    """
    if not jobs:
        return []
    problems = []
    for job in jobs:
        plans = list(job.values())
        first = plans[0]
        n = first.decomposition.original.num_devices
        np = n if np is None else np
        if n != np:
            raise ModelError(f"np {np} does not match the {n} devices of the mesh "
                             f"{first.decomposition.original.cli()}; use np {n}", param="np")
        problems.append({
            "mesh": first.decomposition.original.cli(),
            "src": str(first.src),
            "dst": str(first.dst),
            "programs": {name: [step_to_dict(s.step) for s in p.steps] for name, p in job.items()},
        })
    job = {"dtype": dtype, "repeats": repeats, "problems": problems,
           "fault": {"rank": 0, "kind": "corrupt"} if inject_fault else None}
    out = run_job(np, "meshplan.exec.redistribution.rank_main", job, timeout_s=timeout_s)
    results = []
    for res in out["results"]:
        results.append({name: RunResult(r["verified"], r["peak_tile_bytes"], r["peak_live_bytes"],
                                        r["time_s"], tuple(r["times_s"])) for name, r in res.items()})
    return results
