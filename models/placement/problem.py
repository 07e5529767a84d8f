"""A placement question: where do the parallelism axes live on the system, and how is the gradient reduced
(P2 §3.1–3.5, §5)?

:class:`PlacementProblem` is validated once, here: the axes against the system (equation 2), the reduction
axes, the axis names, the synthesis size, the simulated bytes per device, the collective algorithm and the
user's constraints (pins and inside).  :func:`meshplan.api.placement.solve_placement` builds it from its
arguments and answers it.
"""

from __future__ import annotations

from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.core.system import System
from meshplan.models.core.values import Value, value
from meshplan.models.placement.constraints import PlacementConstraints
from meshplan.models.placement.matrix import check_axes, check_reduce

__all__ = ["PlacementProblem", "axis_names"]


def axis_names(names: Any, n: int, what: str = "axis_names") -> tuple[str, ...]:
    """The names of ``n`` parallelism axes from ``"data,model"`` or a sequence; ``None`` (or empty) gives the
    defaults ``a0, a1, …``.  Names must be ``n`` distinct Python identifiers (they become JAX / PyTorch mesh
    axis names), and the message says which rule failed."""
    from meshplan.models.core.errors import quote

    if names is None or (isinstance(names, str) and not names.strip()) or (
            not isinstance(names, str) and hasattr(names, "__len__") and len(names) == 0):
        return tuple(f"a{i}" for i in range(n))
    if isinstance(names, str):
        items = [x.strip() for x in names.split(",")]
    elif isinstance(names, (list, tuple)):
        items = list(names)
    else:
        raise ModelError(f"{what} must be names separated by commas, e.g. data,model; got {type(names).__name__}",
                         param=what)
    if len(items) != n:
        example = ",".join(("data", "model", "pipe", "seq")[:n]) if n <= 4 else "a0,a1,…"
        raise ModelError(f"{what} needs {n} names, one per axis of axes, got {len(items)} in "
                         f"{quote(','.join(map(str, items)))}; e.g. {example}", param=(what, "axes"))
    bad = [x for x in items if not (isinstance(x, str) and x.isidentifier())]
    if bad:
        raise ModelError(f"{what}: {bad[0]!r} is not a name; use letters, digits and _ (not starting with a digit)",
                         param=what)
    dup = sorted({x for x in items if items.count(x) > 1})
    if dup:
        raise ModelError(f"{what}: {dup[0]!r} names more than one axis; names must be distinct", param=what)
    return tuple(items)


@value
class PlacementProblem(Value):
    """Place parallelism ``axes`` on ``system`` and reduce over the axes ``reduce`` (P2 §3.1): synthesize
    programs of up to ``max_size`` steps in DSL ``dsl``, simulate ``bytes_per_device`` with collective
    algorithm ``algo``, enumerate matrices with solver backend ``solver`` under ``constraints``."""

    system: System
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    axis_names: tuple[str, ...] = ()
    max_size: int = 5
    dsl: str = "full"
    bytes_per_device: int = 2**30
    algo: str = "ring"
    solver: str = "cpsat"
    constraints: PlacementConstraints = PlacementConstraints()

    def __post_init__(self) -> None:
        from meshplan.models.reduction.simulator import ALGORITHMS

        if not isinstance(self.system, System):
            raise ModelError(f"system must be a System, got {type(self.system).__name__}", param="system")
        object.__setattr__(self, "axes", check_axes(self.system, tuple(self.axes)))
        object.__setattr__(self, "reduce", check_reduce(self.axes, tuple(self.reduce)))
        object.__setattr__(self, "axis_names", axis_names(self.axis_names or None, len(self.axes)))
        if isinstance(self.max_size, bool) or not isinstance(self.max_size, int) or self.max_size < 1:
            raise ModelError(f"max_size must be at least 1, got {self.max_size!r}", param="max_size")
        if isinstance(self.bytes_per_device, bool) or not isinstance(self.bytes_per_device, int) \
                or self.bytes_per_device < 1:
            raise ModelError(f"bytes must be a positive number of bytes, got {self.bytes_per_device!r}",
                             param="bytes")
        if self.algo not in ALGORITHMS:
            raise ModelError(f"algo must be one of {', '.join(ALGORITHMS)}, got {self.algo!r}", param="algo")
        if not isinstance(self.constraints, PlacementConstraints):
            raise ModelError("constraints must be PlacementConstraints (pin= and inside= build them)",
                             param="constraints")
        self.constraints.validate(self.system, self.axes)

    def to_json(self) -> dict[str, Any]:
        doc = Value.to_json(self)
        doc["system"] = self.system.short()
        doc["constraints"] = {"pins": [list(p) for p in self.constraints.pins],
                              "inside": [list(i) for i in self.constraints.inside]}
        return doc
