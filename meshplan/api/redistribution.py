"""Redistribution of distributed arrays without exceeding the larger tile (paper §7; docs/redistribute.md).

:func:`plan_redistribution` is ``meshplan redistribute SRC DST --mesh …``, :func:`run_redistribution`
adds ``--run``; both return a :class:`RedistributionPlan` whose fields are the keys of that verb's
``--json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshplan.api.inputs import as_mesh, as_positive, as_type
from meshplan.api.results import Result, value, freeze, library_field

__all__ = ["RedistributionPlan", "plan_redistribution", "run_redistribution", "plan_json"]


def _program_json(plan, itemsize: int) -> dict[str, Any]:
    steps = []
    for s in plan.steps:
        entry = {
            "op": s.step.op,
            "axes": list(s.step.axes),
            "dims": list(s.step.dims),
            "type": plan.display(s.type),
            "prime_type": str(s.type),
            "local_size": s.localsize,
            "local_bytes": s.localsize * itemsize,
            "cost_bytes": s.cost * itemsize,
        }
        if s.step.op == "allpermute":
            entry["moved_devices"] = s.step.moved
        steps.append(entry)
    return {
        "program": steps,
        "height": plan.height,
        "height_bytes": plan.height * itemsize,
        "cost": plan.cost,
        "cost_bytes": plan.cost * itemsize,
    }


def plan_json(search, baseline, itemsize: int) -> dict[str, Any]:
    """The ``redistribute --json`` document of a searched program and its baseline (docs/redistribute.md)."""
    dec = search.decomposition
    out = {
        "mesh": dec.original.cli(),
        "prime_mesh": dec.prime.cli(),
        "src": str(dec.recompose(search.src)),
        "dst": str(dec.recompose(search.dst)),
        "itemsize": itemsize,
        "bound": search.bound,
        "bound_bytes": search.bound * itemsize,
        **_program_json(search, itemsize),
        "weak_cost_bytes": search.weak_cost * itemsize,
        "within_bound": search.height <= search.bound,
    }
    out["baseline"] = _program_json(baseline, itemsize)
    return out


@value
class RedistributionPlan(Result):
    """The searched program (``program``, ``height``, ``cost`` …, in elements and bytes), the XLA-style
    ``baseline``, the ``dtype`` and, after :func:`run_redistribution`, the MPI ``run`` (docs/redistribute.md,
    JSON).  ``search`` and ``baseline_plan`` hold the library's plan values."""

    mesh: str
    prime_mesh: str
    src: str
    dst: str
    itemsize: int
    bound: int
    bound_bytes: int
    program: tuple
    height: int
    height_bytes: int
    cost: int
    cost_bytes: int
    weak_cost_bytes: int
    within_bound: bool
    baseline: Mapping
    dtype: str
    run: Mapping | None = None
    search: Any = library_field()
    baseline_plan: Any = library_field()

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document (``run`` only when the plans ran)."""
        doc = Result.to_json(self)
        if doc["run"] is None:
            del doc["run"]
        return doc

    @property
    def verified(self) -> bool:
        """Whether every program that ran was verified (True when nothing ran)."""
        return self.run is None or all(v["verified"] for k, v in self.run.items() if k != "np")


def plan_redistribution(mesh: Any, src: Any, dst: Any, *, dtype: str = "f32") -> RedistributionPlan:
    """The memory-bounded program of the shortest-path search (§7) that redistributes an array from type
    ``src`` to ``dst`` on ``mesh`` (e.g. ``"x=4,y=4"``, ``"[4{x}16,16]"``, ``"[16,4{x}16]"``), never holding
    more per device than the larger tile, next to the XLA-style baseline.  ``dtype`` (``f32``, ``f64``,
    ``bf16``, ``i32`` …) sets the byte figures."""
    from meshplan.models.core.dtypes import dtype_bytes
    from meshplan.solvers.redistribution.baseline import baseline_plan
    from meshplan.solvers.redistribution.plan import plan_redistribution as _plan

    m, s, d = as_mesh(mesh), as_type(src), as_type(dst)
    itemsize = dtype_bytes(dtype)
    search = _plan(m, s, d)
    base = baseline_plan(m, s, d)
    doc = plan_json(search, base, itemsize)
    doc["dtype"] = dtype
    return RedistributionPlan(**{k: freeze(v) for k, v in doc.items()}, search=search, baseline_plan=base)


def run_redistribution(mesh: Any, src: Any, dst: Any, *, dtype: str = "f32", np: int | None = None,
                       repeats: int = 3) -> RedistributionPlan:
    """:func:`plan_redistribution`, then run the searched and the baseline program on MPI ranks (one per
    mesh device), verify the result against numpy and report peak memory and time (``run``)."""
    from dataclasses import replace

    from meshplan.exec.redistribution.driver import run_plans

    as_positive(repeats, "--repeats")
    plan = plan_redistribution(mesh, src, dst, dtype=dtype)
    res = run_plans([{"search": plan.search, "baseline": plan.baseline_plan}], np=np, dtype=dtype,
                    repeats=repeats)[0]
    run = {"np": plan.search.decomposition.original.num_devices,
           **{name: {"verified": r.verified, "peak_tile_bytes": r.peak_tile_bytes,
                     "peak_live_bytes": r.peak_live_bytes, "time_s": r.time_s} for name, r in res.items()}}
    return replace(plan, run=freeze(run))
