"""The plan a framework adapter runs: meshplan's redistribution program for a framework array (PyTorch's
DTensor in :mod:`meshplan.torch`, JAX's ``jax.Array`` in :mod:`meshplan.jax`), in the framework's terms.

The adapters translate the framework's layouts to the paper's distributed types ("Memory-efficient array
redistribution through portable collective communication", Rink, Kwasniewski et al., §2.1), pad a dimension
the framework splits unevenly to the next multiple (the framework's chunks are then the padded tiles, cut
short), plan with :func:`meshplan.api.redistribution.plan_redistribution` and report what the program sends
and holds per device.  Nothing here imports a framework.
"""

from __future__ import annotations

import math
from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, library_field, value
from meshplan.models.redistribution.cost import op_cost
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import Dim, DistType

__all__ = ["FrameworkPlan", "padded_types", "framework_plan", "wire_bytes"]


@value
class FrameworkPlan(Value):
    """meshplan's program for one framework redistribution: the ``mesh`` and the paper's types ``src``/``dst``
    (over the padded ``padded_shape`` when the framework splits a dimension unevenly), the framework's
    placements as it prints them, the ``program`` (the steps of
    :class:`~meshplan.api.redistribution.RedistributionPlan`), the bytes every device sends (``sent_bytes``,
    the (g−1)/g factors of each collective included) and the largest tile it holds (``peak_bytes``), planned
    under ``cost_model``.  ``plan`` holds the :class:`~meshplan.api.redistribution.RedistributionPlan`."""

    framework: str
    mesh: str
    global_shape: tuple[int, ...]
    padded_shape: tuple[int, ...]
    src_layout: str
    dst_layout: str
    src: str
    dst: str
    dtype: str
    cost_model: str
    program: tuple[Any, ...]
    sent_bytes: int
    peak_bytes: int
    plan: Any = library_field()

    def __str__(self) -> str:
        steps = " -> ".join(f"{s.op}{tuple(s.axes)}" for s in self.program) or "(nothing to move)"
        return (f"{self.src} -> {self.dst} on mesh {self.mesh}: {steps}; sends {self.sent_bytes} B, "
                f"peak {self.peak_bytes} B per device")


def padded_types(mesh: Mesh, shape: tuple[int, ...], src_axes: list[tuple[str, ...]],
                 dst_axes: list[tuple[str, ...]], *, nested_uneven: bool = False) -> tuple[DistType, DistType]:
    """The paper's types of an array of ``shape`` whose dimension ``i`` is split over the mesh axes
    ``src_axes[i]`` (minor first) before and ``dst_axes[i]`` after, in chunks of ``ceil(n / k)`` as PyTorch and
    JAX cut them; an unevenly split dimension is padded to ``k · ceil(n / k)``, which must be the same on both
    sides (where both split it).  ``nested_uneven``: whether the framework cuts a dimension split over several
    axes as one chunking by their product (JAX) rather than one axis after the other (PyTorch)."""
    src, dst = [], []
    for i, n in enumerate(shape):
        pads = []
        for axes in (src_axes[i], dst_axes[i]):
            k = math.prod(mesh.size(a) for a in axes)
            if k > 1 and n % k and len(axes) > 1 and not nested_uneven:
                raise ModelError(f"dimension {i} of size {n} is split unevenly over several mesh axes "
                                 f"{', '.join(axes)}; the framework then cuts it axis by axis into chunks that are "
                                 "not tiles of one size: use a size divisible by their product", param="placements")
            pads.append(k * -(-n // k) if k > 1 else None)
        if None not in pads and pads[0] != pads[1]:
            raise ModelError(f"dimension {i} of size {n} is split into chunks that pad it to {pads[0]} before and "
                             f"{pads[1]} after; the two layouts have no common padded size: use a size divisible "
                             "by both splits", param="placements")
        size = next((p for p in pads if p is not None), n)
        src.append(Dim(size // math.prod(mesh.size(a) for a in src_axes[i]), tuple(src_axes[i]), size))
        dst.append(Dim(size // math.prod(mesh.size(a) for a in dst_axes[i]), tuple(dst_axes[i]), size))
    return DistType(tuple(src)), DistType(tuple(dst))


def wire_bytes(search: Any, itemsize: int) -> int:
    """The bytes each device sends in a planned program (the wire cost, whatever the program was planned by)."""
    from meshplan.solvers.redistribution.plan import step_group

    total, before = 0, search.src.localsize
    for s in search.steps:
        total += op_cost(s.step, before, s.localsize, step_group(search.mesh, s.step), "wire")
        before = s.localsize
    return total * itemsize


def framework_plan(framework: str, mesh: Mesh, shape: tuple[int, ...], src: DistType, dst: DistType,
                   layouts: tuple[str, str], dtype: str, cost: str, split: bool = True) -> FrameworkPlan:
    """Plan ``src ⇝ dst`` on ``mesh`` with :func:`~meshplan.api.redistribution.plan_redistribution` under
    ``cost`` and describe it for the framework (``dtype``: any name :func:`as_dtype` reads)."""
    from meshplan.api.redistribution import plan_redistribution

    p = plan_redistribution(src, dst, mesh, dtype=dtype, cost=cost, split=split)
    return FrameworkPlan(framework=framework, mesh=mesh.cli(), global_shape=tuple(shape),
                         padded_shape=tuple(src.globaltype), src_layout=layouts[0], dst_layout=layouts[1],
                         src=str(src), dst=str(dst), dtype=p.dtype, cost_model=cost, program=p.program,
                         sent_bytes=wire_bytes(p.search, p.itemsize), peak_bytes=p.height_bytes, plan=p)
