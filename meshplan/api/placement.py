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

from meshplan.api.inputs import as_bytes, as_int_tuple, as_system
from meshplan.api.results import Result, value, freeze, library_field
from meshplan.models.core.errors import ModelError

__all__ = ["PlacementPlan", "solve_placement", "DEFAULT_PROGRAMS", "schedule_document", "write_schedule"]

#: programs per placement that a plan, ``--json`` and ``--export`` keep by default (the fastest ones;
#: ``programs=None`` / ``--all-programs`` keeps all); docs/solve.md
DEFAULT_PROGRAMS = 5


@value
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
    programs_per_placement: int | None
    placements: tuple[Mapping, ...]
    study: Any = library_field()

    def save(self, path: str | Path, *, programs: Any = "plan") -> Path:
        """Write the schedule file (the input of check, run, export and show) to ``path``, streamed
        placement by placement.  ``programs``: how many programs per placement (default: as many as the
        plan holds; ``None``: all that were synthesized)."""
        from meshplan.models.core.outputs import write_output

        def write(fp) -> None:
            for chunk in self.iter_json(programs=programs):
                fp.write(chunk.encode())

        return write_output(path, write, what="schedule file")

    def iter_json(self, *, programs: Any = "plan", indent: int | None = None):
        """The schedule document as text chunks, one placement at a time (see :func:`write_schedule`)."""
        k = self.programs_per_placement if programs == "plan" else programs
        return write_schedule(self.study, axis_names=self.axis_names, programs=k, indent=indent)

    def program(self, placement: int = 0, program: int = 0):
        """Program ``program`` (0 = the fastest simulated) of placement ``placement`` (0 = the fastest) as a
        :class:`~meshplan.api.reduction_plan.ReductionPlan`, ready for ``.bind(comm)``; indices count every
        synthesized program (``study``), also those the plan's JSON leaves out."""
        from meshplan.api.reduction_plan import reduction_plan_of

        pls = self.study.placements
        i = _index(placement, len(pls), "placement", "placements")
        pl = pls[i]
        j = _index(program, len(pl.programs), "program", f"programs in placement {i}")
        pr = pl.programs[j]
        st = self.study
        return reduction_plan_of(st.system, st.axes, st.reduce, pl.matrix, pr.lowered, pr.program, None,
                                 pl.hierarchy, pl.reduction_groups)

    def schedule(self):
        """The plan as a :class:`~meshplan.schedule.Schedule` (what :func:`~meshplan.schedule.load_schedule`
        returns for the saved file)."""
        from meshplan.schedule import schedule_from_json

        return schedule_from_json(self.to_json(), source="solve_placement")


def solve_placement(system: Any, axes: Any = None, reduce: Any = None, *, max_size: int = 5, dsl: str = "full",
                    bytes: Any = "1GiB", algo: str = "ring", solver: str = "cpsat",
                    pin: Iterable[str] = (), inside: Iterable[str] = (), axis_names: Any = None,
                    programs: int | None = DEFAULT_PROGRAMS,
                    progress: Callable[[int, int], None] | None = None) -> PlacementPlan:
    """Every placement of ``axes`` on ``system`` with its synthesized reduction programs, fastest first
    (P2 §3.1 placement, §3.3–3.5 synthesis, §5 simulation).  ``system`` may also be a whole
    :class:`~meshplan.models.placement.problem.PlacementProblem`.

    ``system``: a System, preset, file or ``node=4,gpu=16``; ``axes``/``reduce``: ``"4,16"`` or a
    sequence; ``bytes``: data per device (``"1GiB"`` or an int); ``pin``: entries ``"AXIS:LEVEL=F"``
    fixing a matrix entry; ``inside``: ``"AXIS:LEVEL"`` keeping an axis inside a level; ``axis_names``:
    the axes' names (``"data,model"``; default ``a0,a1,…``), carried into the schedule; ``solver``: a
    backend name (``meshplan.solvers.backends``); ``programs``: how many of each placement's programs
    (the fastest) the plan's ``placements`` list (default :data:`DEFAULT_PROGRAMS`; ``None``: all — every
    one is synthesized, re-checked and simulated either way, and ``study`` holds them all);
    ``progress(done, total)`` is called per placement."""
    from meshplan.models.placement.constraints import PlacementConstraints
    from meshplan.models.placement.problem import PlacementProblem
    from meshplan.solvers.placement.study import solve_placement as _solve

    if isinstance(system, PlacementProblem):
        problem = system
    else:
        sysv = as_system(system)
        axes_t = as_int_tuple(axes, "axes")
        problem = PlacementProblem(sysv, axes_t, as_int_tuple(reduce, "reduce"), axis_names or (), max_size, dsl,
                                   as_bytes(bytes, "bytes"), algo, solver,
                                   PlacementConstraints.parse(sysv, list(pin), list(inside)))
    _check_programs(programs)
    p = problem
    try:
        study = _solve(p.system, p.axes, p.reduce, max_size=p.max_size, dialect=p.dsl,
                       bytes_per_device=p.bytes_per_device, algo=p.algo, backend=p.solver,
                       constraints=p.constraints, progress=progress)
    except ValueError as err:  # a registered backend without a placement encoding
        if isinstance(err, ModelError) or "encoding" not in str(err):
            raise
        raise ModelError(f"solver {p.solver}: {err}; choose another solver backend", param="solver") from err
    names = p.axis_names
    doc = schedule_document(study, names, programs)
    return PlacementPlan(**{k: freeze(v) for k, v in doc.items()}, study=study)


def _index(value: Any, n: int, what: str, things: str) -> int:
    """An index into ``n`` things (0 = the first, the fastest); errors name ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise ModelError(f"{what} must be an index 0..{n - 1} (there are {n} {things}), got {value!r}", param=what)
    return value


def _check_programs(programs: Any) -> None:
    if programs is not None and (isinstance(programs, bool) or not isinstance(programs, int) or programs < 1):
        raise ModelError(f"programs must be at least 1, got {programs!r} (or None for every program)", param="programs")


def _truncated(study, programs: int | None):
    from dataclasses import replace

    if programs is None:
        return study
    return replace(study, placements=tuple(replace(pl, programs=pl.programs[:programs]) for pl in study.placements))


def schedule_document(study, axis_names: Any = None, programs: int | None = DEFAULT_PROGRAMS) -> dict[str, Any]:
    """The schedule document (docs/schedule-format.md) of a placement study with the ``programs`` fastest
    programs of each placement (``None``: all); ``num_programs`` still counts every synthesized program
    and ``programs_per_placement`` says how many were kept."""
    from meshplan.schedule import study_to_json

    _check_programs(programs)
    doc = study_to_json(_truncated(study, programs), axis_names)
    for d, pl in zip(doc["placements"], study.placements):
        d["num_programs"] = len(pl.programs)
    placements = doc.pop("placements")
    doc["programs_per_placement"] = programs
    doc["placements"] = placements
    return doc


def write_schedule(study, *, axis_names: Any = None, programs: int | None = DEFAULT_PROGRAMS,
                   indent: int | None = None):
    """The schedule document of :func:`schedule_document` as text chunks, built and encoded one placement
    at a time, so a document of every program of thousands of devices never exists as one string or one
    object (``--json --all-programs``, ``--export``)."""
    from dataclasses import replace

    head = schedule_document(replace(study, placements=study.placements[:1]), axis_names, programs)
    head.pop("placements")
    sep = (",\n" + " " * indent) if indent else ","
    text = json.dumps(head, indent=indent)
    yield text[: text.rstrip().rindex("}")].rstrip() + sep.rstrip(" ") + (" " * (indent or 0)) + '"placements": ['
    for i, pl in enumerate(study.placements):
        one = schedule_document(replace(study, placements=(pl,)), axis_names, programs)["placements"][0]
        one["id"] = i
        yield ("," if i else "") + json.dumps(one, indent=indent)
    yield "]}\n"
