"""The schedule file: what ``solve placement --json/--export`` writes (docs/schedule-format.md).

Versioned by ``schema`` = ``meshplan.schedule/1``.  :func:`study_to_json`
writes it; :func:`load_schedule` reads it back into model values (system,
placement, lowered programs) for ``check``, ``run``, ``export`` and ``show``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError
from meshplan.models.core.limits import check_limit
from meshplan.models.core.units import parse_bytes
from meshplan.models.placement.matrix import ParallelismMatrix, check_reduce
from meshplan.models.reduction.dsl import Instruction, Program, parse_form
from meshplan.models.reduction.hierarchy import synthesis_hierarchy
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep, lower_instruction
from meshplan.models.core.system import System
from meshplan.solvers.placement.study import PlacementStudy

__all__ = ["SCHEMA", "study_to_json", "load_schedule", "Schedule", "ScheduledPlacement", "ScheduledProgram"]

SCHEMA = "meshplan.schedule/1"


def _program_json(pid: int, pr) -> dict[str, Any]:
    return {
        "id": pid,
        "text": str(pr.program),
        "size": len(pr.program),
        "time_s": pr.time.time_s,
        "steps": [
            {
                "collective": st.collective,
                "slice": st.instruction.slice if st.instruction else None,
                "form": str(st.instruction.form) if st.instruction else None,
                "groups": [list(g) for g in st.groups],
                "time_s": t.time_s,
                "bottleneck": t.bottleneck,
                "bytes_sent_max": max(t.bytes_sent) if t.bytes_sent else 0.0,
            }
            for st, t in zip(pr.lowered.steps, pr.time.steps)
        ],
    }


def study_to_json(study: PlacementStudy, axis_names: Any = None) -> dict[str, Any]:
    """The schedule document of a placement study (docs/schedule-format.md); ``axis_names`` name the
    parallelism axes (default ``a0, a1, …``)."""
    from meshplan.models.placement.problem import axis_names as as_axis_names

    placements = []
    for pid, pl in enumerate(study.placements):
        placements.append({
            "id": pid,
            "matrix": pl.matrix.tolist(),
            "synthesis_hierarchy": [{"name": lv.name, "size": lv.size} for lv in pl.hierarchy.levels],
            "reduction_groups": [list(g) for g in pl.reduction_groups],
            "allreduce_time_s": pl.allreduce.time_s,
            "best_time_s": pl.best.time.time_s,
            "speedup": pl.speedup,
            "num_programs": len(pl.programs),
            "synthesis_seconds": pl.synthesis_seconds,
            "programs": [_program_json(i, pr) for i, pr in enumerate(pl.programs)],
        })
    return {
        "schema": SCHEMA,
        "system": study.system.to_dict(),
        "axes": list(study.axes),
        "axis_names": list(as_axis_names(axis_names, len(study.axes))),
        "reduce": list(study.reduce),
        "bytes_per_device": study.bytes_per_device,
        "algo": study.algo,
        "dsl": study.dialect,
        "max_size": study.max_size,
        "synthesis_seconds": study.synthesis_seconds,
        "best": {"placement": 0, "program": 0, "time_s": study.best.best.time.time_s,
                 "allreduce_time_s": study.best.allreduce.time_s},
        "placements": placements,
    }


@dataclass(frozen=True, slots=True)
class ScheduledProgram:
    """One program of a placement: its id, text, DSL program (when every step has one), lowered program
    and simulated time."""

    id: int
    text: str
    program: Program | None
    lowered: LoweredProgram
    time_s: float | None


@dataclass(frozen=True, slots=True)
class ScheduledPlacement:
    """One placement of a schedule: its id, parallelism matrix, reduction groups and programs."""

    id: int
    matrix: ParallelismMatrix
    reduction_groups: tuple[tuple[int, ...], ...]
    programs: tuple[ScheduledProgram, ...]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule read back: the system, axes, reduction axes, simulated size and algorithm, and the
    placements (fastest first) with their programs (docs/schedule-format.md)."""

    system: System
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    bytes_per_device: int
    algo: str
    placements: tuple[ScheduledPlacement, ...]
    #: the axes' names (``axis_names`` of the file; ``a0, a1, …`` when a file predates the field)
    axis_names: tuple[str, ...] = ()

    def select(self, placement: Any = None, program: Any = None
               ) -> list[tuple[ScheduledPlacement, ScheduledProgram]]:
        """``[(placement, program)]`` chosen by indices, as ``--placement``/``--program`` mean in every
        verb (docs/schedule-format.md): ``placement`` indexes :attr:`placements` (0 = fastest),
        ``program`` the programs inside each selected placement (0 = fastest simulated); each is an
        int, a sequence of ints or text like ``"0,2"``, and ``None`` means all.  Errors name the flag."""
        pls = self.placements
        if placement is not None:
            ids = _indices(placement, "placement")
            for i in ids:
                if not 0 <= i < len(pls):
                    raise ModelError(f"placement {i} out of range: the schedule has {len(pls)} placements "
                                     f"(0..{len(pls) - 1})", param="placement")
            pls = tuple(self.placements[i] for i in ids)
        out = []
        for pl in pls:
            if program is None:
                out += [(pl, pr) for pr in pl.programs]
                continue
            for k in (_indices(program, "program") if program != () else ()):
                if not 0 <= k < len(pl.programs):
                    raise ModelError(f"program {k} out of range: placement {pl.id} has {len(pl.programs)} "
                                     f"programs (0..{len(pl.programs) - 1})", param="program")
                out.append((pl, pl.programs[k]))
        return out

    def pick(self, placement: Any = 0, program: Any = 0) -> tuple[ScheduledPlacement, ScheduledProgram | None]:
        """The one ``(placement, program)`` that verbs acting on a single program use (export, show):
        :meth:`select` with exactly one index each (default 0, the fastest); ``program=None`` picks only
        the placement (and returns ``None`` for the program)."""
        placement = 0 if placement is None else placement
        for value, flag in ((placement, "placement"), (program, "program")):
            if value is not None and len(_indices(value, flag)) != 1:
                raise ModelError(f"{flag} takes one index here, got {value!r}", param=flag)
        if program is None:
            self.select(placement, ())  # range check of the placement only
            (i,) = _indices(placement, "placement")
            return self.placements[i], None
        return self.select(placement, program)[0]

    def program(self, placement: Any = 0, program: Any = 0):
        """Program ``program`` (0 = the fastest simulated) of placement ``placement`` (0 = the fastest) as a
        :class:`~meshplan.api.reduction_plan.ReductionPlan`, ready for ``.bind(comm)``."""
        from meshplan.api.reduction_plan import reduction_plan_of

        pl, pr = self.pick(placement, program)
        return reduction_plan_of(self.system, self.axes, self.reduce, pl.matrix, pr.lowered, pr.program,
                                 None, None, pl.reduction_groups)


def _placement(system: System, m: ParallelismMatrix, reduce: tuple[int, ...], pl: dict, i: int,
               source: str) -> ScheduledPlacement:
    """One placement re-derived from first principles (P2 §2–3): its reduction groups come from the matrix
    and ``reduce``, and every step that names a DSL instruction is lowered again over the synthesis
    hierarchy; a stored field that disagrees (an edited file) is rejected, naming the field.  The stored
    groups are never trusted: a reader proves or runs what it re-derived."""
    where = f"{source}: placements[{i}]"
    groups = tuple(tuple(g) for g in m.reduction_groups(reduce))
    stored = pl.get("reduction_groups")
    if stored is not None and sorted(tuple(int(d) for d in g) for g in stored) != sorted(groups):
        raise ModelError(f"{where}.reduction_groups {stored} disagree with the groups of matrix {m} for reduce "
                         f"{list(reduce)} ({[list(g) for g in groups]}); the file was edited — export it again")
    if not pl["programs"]:
        raise ModelError(f"{where}.programs is empty; export the schedule again")
    h = synthesis_hierarchy(m, reduce)
    progs = []
    for k, pr in enumerate(pl["programs"]):
        check_limit("steps", len(pr["steps"]), f"{where}.programs[{k}]")
        steps, ins = [], []
        for j, st in enumerate(pr["steps"]):
            field_ = f"{where}.programs[{k}].steps[{j}]"
            if not isinstance(st, dict):
                raise ModelError(f"{field_} is not a step object")
            collective = Collective.parse(st["collective"])
            stored_groups = tuple(tuple(int(d) for d in g) for g in st["groups"])
            if st.get("slice") is not None and st.get("form") is not None:
                instr = Instruction(collective, st["slice"], parse_form(st["form"]))
                ins.append(instr)
                step = lower_instruction(h, instr)
                if step.groups != stored_groups:
                    raise ModelError(f"{field_}.groups {[list(g) for g in stored_groups]} are not what "
                                     f"{collective} slice={st['slice']} form={st['form']} lowers to on matrix {m} "
                                     f"({[list(g) for g in step.groups]}); the file was edited — export it again")
                steps.append(step)
            else:
                steps.append(LoweredStep(collective, stored_groups, None))
        prog = Program(tuple(ins)) if len(ins) == len(steps) else None
        text = pr.get("text")
        if prog is not None and text is not None and str(text) != str(prog):
            raise ModelError(f"{where}.programs[{k}].text {str(text)[:80]!r} is not the program its steps spell "
                             f"({str(prog)[:80]!r}); the file was edited — export it again")
        progs.append(ScheduledProgram(int(pr.get("id", k)), str(text or ""), prog,
                                      LoweredProgram(tuple(steps), system.num_devices), pr.get("time_s")))
    return ScheduledPlacement(int(pl.get("id", i)), m, groups, tuple(progs))


def _indices(value: Any, flag: str) -> tuple[int, ...]:
    from meshplan.api.inputs import as_int_tuple

    return as_int_tuple(value, flag)


def load_schedule(path: Any) -> Schedule:
    """Read a schedule: a file path, its parsed JSON, a :class:`Schedule` (returned as is) or a
    :class:`~meshplan.api.placement.PlacementPlan`; errors name the offending field."""
    if isinstance(path, Schedule):
        return path
    if isinstance(path, dict):
        return schedule_from_json(path)
    if hasattr(path, "study") and hasattr(path, "to_json"):
        return schedule_from_json(path.to_json(), source="placement plan")
    from meshplan.models.core.files import read_json

    data = read_json(path, what="schedule file")
    return schedule_from_json(data, source=str(path))


def schedule_from_json(data: Any, source: str = "schedule") -> Schedule:
    """A :class:`Schedule` from the parsed JSON of a schedule file; errors name ``source`` and the field."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ModelError(f"{source}: not a meshplan schedule (expected \"schema\": \"{SCHEMA}\"); "
                         "save one with solve_placement(...).save(path) (the CLI: solve placement with an export "
                         "file)")
    try:
        system = System.from_dict(data["system"], source=source)
        axes = tuple(int(a) for a in data["axes"])
        reduce = check_reduce(axes, [int(r) for r in data["reduce"]])
        if not data["placements"]:
            raise ModelError(f"{source}: the schedule has no placements; nothing to check, run or export")
        placements = []
        for i, pl in enumerate(data["placements"]):
            m = ParallelismMatrix.of(system, pl["matrix"], axes)
            placements.append(_placement(system, m, reduce, pl, i, source))
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, ModelError):
            raise
        raise ModelError(f"{source}: malformed schedule ({type(err).__name__}: {err})") from err
    from meshplan.models.placement.problem import axis_names as as_axis_names

    names = as_axis_names(data.get("axis_names"), len(axes), what=f"{source}: axis_names")
    nbytes = data.get("bytes_per_device", 2**30)
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise ModelError(f"{source}: bytes_per_device must be a positive integer number of bytes, got {nbytes!r}")
    return Schedule(system, axes, reduce, parse_bytes(nbytes), str(data.get("algo", "ring")),
                    tuple(placements), names)


