"""Placement: where each parallelism axis lives and how to reduce over it (P2 §3–§5; docs/solve.md).

:func:`solve_placement` is ``meshplan solve placement``: it enumerates the parallelism matrices, synthesizes
and re-checks every reduction program of each, simulates them and ranks; its result is the schedule
document (docs/schedule-format.md) as a frozen value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from meshplan.api.inputs import as_axis_names, as_bytes, as_int_tuple, as_system
from meshplan.api.results import Result, freeze, library_field
from meshplan.models.core.errors import ModelError

__all__ = ["PlacementPlan", "solve_placement"]


@dataclass(frozen=True, slots=True)
class PlacementPlan(Result):
    """The answer of :func:`solve_placement`: the fields of the schedule file (``schema`` …
    ``placements``, fastest first; docs/schedule-format.md).  ``study`` holds the library's
    :class:`~meshplan.solvers.placement.study.PlacementStudy` (matrices, lowered programs, times)."""

    schema: str
    system: Mapping
    axes: tuple[int, ...]
    axis_names: tuple[str, ...]
    reduce: tuple[int, ...]
    bytes_per_device: int
    algo: str
    dsl: str
    max_size: int
    synthesis_seconds: float
    best: Mapping
    placements: tuple[Mapping, ...]
    study: Any = library_field()

    def save(self, path: str | Path) -> Path:
        """Write the schedule file (the input of check, run, export and show) to ``path``."""
        from meshplan.models.core.outputs import write_output

        return write_output(path, json.dumps(self.to_json(), separators=(",", ":")) + "\n", what="--export file")

    def schedule(self):
        """The plan as a :class:`~meshplan.schedule.Schedule` (what :func:`~meshplan.schedule.load_schedule`
        returns for the saved file)."""
        from meshplan.schedule import schedule_from_json

        return schedule_from_json(self.to_json(), source="solve_placement")


def solve_placement(system: Any, axes: Any, reduce: Any, *, max_size: int = 5, dsl: str = "full",
                    bytes: Any = "1GiB", algo: str = "ring", solver: str = "cpsat",
                    pin: Iterable[str] = (), inside: Iterable[str] = (), axis_names: Any = None,
                    progress: Callable[[int, int], None] | None = None) -> PlacementPlan:
    """Every placement of ``axes`` on ``system`` with its synthesized reduction programs, fastest first
    (P2 §3.1 placement, §3.3–3.5 synthesis, §5 simulation).

    ``system``: a System, preset, file or ``node=4,gpu=16``; ``axes``/``reduce``: ``"4,16"`` or a
    sequence; ``bytes``: data per device (``"1GiB"`` or an int); ``pin``: entries ``"AXIS:LEVEL=F"``
    fixing a matrix entry; ``inside``: ``"AXIS:LEVEL"`` keeping an axis inside a level; ``axis_names``:
    the axes' names (``"data,model"``; default ``a0,a1,…``), carried into the schedule; ``solver``: a
    backend name (``meshplan.solvers.backends``); ``progress(done, total)`` is called per placement."""
    from meshplan.models.placement.constraints import PlacementConstraints
    from meshplan.schedule import study_to_json
    from meshplan.solvers.placement.study import solve_placement as _solve

    system = as_system(system)
    axes = as_int_tuple(axes, "--axes")
    reduce = as_int_tuple(reduce, "--reduce")
    names = as_axis_names(axis_names, len(axes))
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ModelError(f"--max-size must be at least 1, got {max_size}")
    nbytes = as_bytes(bytes)
    cons = PlacementConstraints.parse(system, list(pin), list(inside))
    try:
        study = _solve(system, axes, reduce, max_size=max_size, dialect=dsl, bytes_per_device=nbytes, algo=algo,
                       backend=solver, constraints=cons, progress=progress)
    except ValueError as err:  # a registered backend without a placement encoding
        if isinstance(err, ModelError) or "encoding" not in str(err):
            raise
        raise ModelError(f"--solver {solver}: {err}; choose another solver backend") from err
    doc = study_to_json(study, names)
    return PlacementPlan(**{k: freeze(v) for k, v in doc.items()}, study=study)
