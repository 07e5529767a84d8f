"""A redistribution problem: move an array from type ``src`` to type ``dst`` on ``mesh`` (paper §2.5, §7).

:class:`RedistributionProblem` is validated once, by :func:`check_problem` (well-formed types over the mesh's
axes, the same global shape on both sides); the planner (:mod:`meshplan.solvers.redistribution.plan`) checks
its inputs with the same function.
"""

from __future__ import annotations

from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, value
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import DistType, check_well_formed

__all__ = ["RedistributionProblem", "check_problem"]


def check_problem(mesh: Mesh, src: DistType, dst: DistType) -> None:
    """Raise :class:`ModelError` unless ``src`` and ``dst`` are well-formed types over ``mesh`` (WF rules) with
    the same global shape (§2.5)."""
    check_well_formed(mesh, src, what="source type")
    check_well_formed(mesh, dst, what="target type")
    if src.globaltype != dst.globaltype:
        raise ModelError(f"source {src} and target {dst} have different global shapes "
                         f"{list(src.globaltype)} and {list(dst.globaltype)}; a redistribution keeps the "
                         "global array (§2.5)", param=("src", "dst"))


@value
class RedistributionProblem(Value):
    """Redistribute an array of element type ``dtype`` (its short name; the byte figures) from ``src`` to
    ``dst`` on ``mesh``."""

    src: DistType
    dst: DistType
    mesh: Mesh
    dtype: str = "f32"

    def __post_init__(self) -> None:
        for name, cls in (("src", DistType), ("dst", DistType), ("mesh", Mesh)):
            if not isinstance(getattr(self, name), cls):
                raise ModelError(f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}",
                                 param=name)
        object.__setattr__(self, "dtype", as_dtype(self.dtype).short)
        check_problem(self.mesh, self.src, self.dst)

    @property
    def itemsize(self) -> int:
        return as_dtype(self.dtype).itemsize
