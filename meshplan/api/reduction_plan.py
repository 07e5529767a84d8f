"""A reduction program on a placement, ready to run in your MPI program (P2 §3.2–3.4; docs/library.md).

:class:`ReductionPlan` is one program resolved on one placement: its steps (a collective over device groups
each), the reduction groups it must reach, the system and the placement.  It comes from

* :func:`plan_reduction` — a text program (docs/check.md) with its system, axes, reduction axes and matrix;
* ``mp.solve_placement(…).program(placement=i, program=j)`` — a synthesized program of a placement study;
* ``mp.load_schedule(path).program(placement=i, program=j)`` — a program of a saved schedule.

``plan.bind(comm)`` gives the :class:`~meshplan.exec.reduction.executor.ReductionExecutor` whose
``allreduce(x)`` sums any array over the rank's reduction group by the program's collectives.
"""

from __future__ import annotations

from typing import Any

from meshplan.api.inputs import as_int_tuple, as_system, choose_placement, is_file
from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, library_field, value
from meshplan.models.reduction.problem import ReductionProblem

__all__ = ["ReductionStep", "ReductionPlan", "plan_reduction", "reduction_plan_of"]


@value
class ReductionStep(Value):
    """One step: a collective over disjoint device groups (the first device of a group is a rooted
    collective's root)."""

    collective: Collective
    groups: tuple[tuple[int, ...], ...]


@value
class ReductionPlan(Value):
    """A reduction program resolved on a placement: ``text`` (the program, one step per line), the system
    (``system``, its short form), ``axes``, ``reduce``, the parallelism ``matrix``, the ``reduction_groups``
    every member of which must end with the group's sum, and the lowered ``steps``.  Library fields: the
    :class:`~meshplan.models.reduction.lowering.LoweredProgram` (``lowered``), the parsed ``program``, the
    :class:`~meshplan.models.core.system.System` (``system_value``), the
    :class:`~meshplan.models.placement.matrix.ParallelismMatrix` (``placement``) and the synthesis
    ``hierarchy``."""

    text: str
    system: str
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    matrix: tuple[tuple[int, ...], ...]
    reduction_groups: tuple[tuple[int, ...], ...]
    steps: tuple[ReductionStep, ...]
    source: str | None = None
    lowered: Any = library_field()
    program: Any = library_field()
    system_value: Any = library_field()
    placement: Any = library_field()
    hierarchy: Any = library_field()

    def __str__(self) -> str:
        return self.text

    @property
    def num_devices(self) -> int:
        return self.lowered.num_devices

    def bind(self, comm: Any, *, check: bool = True):
        """The executor of this program on ``comm`` (one rank per device; collective over ``comm``): see
        :class:`~meshplan.exec.reduction.executor.ReductionExecutor`.  The program is re-checked first
        (P2 Figure 8 replay); ``check=False`` runs it unchecked."""
        from meshplan.exec.reduction.executor import ReductionExecutor

        return ReductionExecutor(self.lowered, self.reduction_groups, comm, check=check)


def _text_of(program: Any, lowered) -> str:
    from meshplan.models.reduction.program_text import from_lowered

    if program is not None and hasattr(program, "items"):
        return "\n".join(str(i) for i in program.items)
    if program is not None:
        return "\n".join(str(i) for i in program.instructions) if hasattr(program, "instructions") else str(program)
    return "\n".join(str(i) for i in from_lowered(lowered).items)


def reduction_plan_of(system, axes, reduce, matrix, lowered, program: Any = None, source: str | None = None,
                      hierarchy: Any = None, groups: Any = None) -> ReductionPlan:
    """The :class:`ReductionPlan` of an already lowered program on a placement (what a schedule holds)."""
    from meshplan.models.reduction.hierarchy import synthesis_hierarchy

    h = hierarchy if hierarchy is not None else synthesis_hierarchy(matrix, reduce)
    rg = tuple(tuple(g) for g in (groups if groups is not None else matrix.reduction_groups(reduce)))
    steps = tuple(ReductionStep(Collective.parse(s.collective), tuple(tuple(g) for g in s.groups))
                  for s in lowered.steps)
    return ReductionPlan(_text_of(program, lowered), system.short(), tuple(axes), tuple(reduce),
                         tuple(tuple(r) for r in matrix.rows), rg, steps, source, lowered=lowered, program=program,
                         system_value=system, placement=matrix, hierarchy=h)


def _parse(program: Any):
    """``(parsed program, source)`` from text, a path or a parsed program."""
    from meshplan.models.reduction.program_text import TextProgram, parse_program

    if isinstance(program, TextProgram):
        return program, program.source
    if hasattr(program, "__fspath__") or (isinstance(program, str) and "\n" not in program and is_file(program)):
        from meshplan.models.core.files import read_text

        return parse_program(read_text(program, what="program file"), source=str(program)), str(program)
    if isinstance(program, str):
        return parse_program(program), None
    raise ModelError(f"program must be text (docs/check.md), a file path or a parsed program, "
                     f"got {type(program).__name__}", param="program")


def plan_reduction(program: Any, system: Any = None, axes: Any = None, reduce: Any = None, *,
                   matrix: Any = None) -> ReductionPlan:
    """Resolve a reduction program on a placement (P2 §3.4).  ``program``: a :class:`ReductionProblem`, or
    text in the format of docs/check.md (``AllReduce slice=gpu``, ``Reduce groups=[[0,1]]``, one step per
    line), a path to such a file, or a parsed program — then with ``system`` (any form), ``axes``,
    ``reduce`` and, when several placements exist, ``matrix``."""
    from meshplan.models.reduction.hierarchy import synthesis_hierarchy
    from meshplan.models.reduction.program_text import resolve

    if isinstance(program, ReductionProblem):
        problem, source = program, getattr(program.program, "source", None)
    else:
        missing = [n for n, v in (("system", system), ("axes", axes), ("reduce", reduce)) if v is None]
        if missing:
            raise ModelError(f"a text program needs {', '.join(missing)} (the system and placement it runs on)",
                             param=tuple(missing))
        parsed, source = _parse(program)
        problem = ReductionProblem(parsed, as_system(system), as_int_tuple(axes, "axes"),
                                   as_int_tuple(reduce, "reduce"), matrix)
    m = problem.matrix if problem.matrix is not None else choose_placement(problem.system, problem.axes, None)
    h = synthesis_hierarchy(m, problem.reduce)
    lowered = resolve(problem.program, h)
    return reduction_plan_of(problem.system, problem.axes, problem.reduce, m, lowered, problem.program, source, h)
