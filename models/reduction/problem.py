"""A reduction program to place: the program, the system, the parallelism axes and the reduction axes (P2 §3.4).

:class:`ReductionProblem` is validated once, here: the axes against the system (their product is its device
count), the reduction axes against the axes, and a given parallelism matrix against both.  Planning it
(:func:`meshplan.api.reduction_plan.plan_reduction`) resolves the program's steps on the placement.
"""

from __future__ import annotations

from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.core.system import System
from meshplan.models.core.values import Value, value
from meshplan.models.placement.matrix import ParallelismMatrix, check_axes, check_reduce, matrix_rows

__all__ = ["ReductionProblem"]


@value
class ReductionProblem(Value):
    """``program`` (a parsed text program or DSL program) on ``system`` with parallelism ``axes``, reducing over
    the axes ``reduce``; ``matrix`` (a :class:`ParallelismMatrix`, its rows or their text) chooses the
    placement when several exist."""

    program: Any
    system: System
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    matrix: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.system, System):
            raise ModelError(f"system must be a System, got {type(self.system).__name__}", param="system")
        object.__setattr__(self, "axes", check_axes(self.system, tuple(self.axes)))
        object.__setattr__(self, "reduce", check_reduce(self.axes, tuple(self.reduce)))
        if self.matrix is not None:
            if not isinstance(self.matrix, ParallelismMatrix):  # rows, or their text '[[2,2],[2,8]]'
                object.__setattr__(self, "matrix", ParallelismMatrix.of(self.system, matrix_rows(self.matrix),
                                                                        self.axes))
            if self.matrix.system != self.system or tuple(self.matrix.axes) != self.axes:
                raise ModelError(f"matrix {self.matrix} places axes {list(self.matrix.axes)} on "
                                 f"{self.matrix.system}, not axes {list(self.axes)} on {self.system}",
                                 param="matrix")

    def to_json(self) -> dict[str, Any]:
        items = getattr(self.program, "items", None) or getattr(self.program, "instructions", ())
        return {"program": "\n".join(str(i) for i in items), "system": self.system.short(), "axes": list(self.axes),
                "reduce": list(self.reduce), "matrix": None if self.matrix is None else self.matrix.tolist()}
