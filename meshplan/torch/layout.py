"""DTensor placements as the paper's distributed types, and back.

A ``DeviceMesh`` of shape ``(k0, k1, …)`` is meshplan's mesh with one axis per mesh dimension, named by
``mesh_dim_names`` (``m0, m1, …`` when it has none) in the same order; device ``d`` is the ``d``-th entry of
``device_mesh.mesh`` read row-major, so meshplan's device numbering and DTensor's coordinates agree.

**The order of several mesh dimensions sharding one tensor dimension.**  DTensor shards a tensor dimension
over the mesh dimensions listed in its *shard order*, the first one outermost: ``[Shard(0), Shard(0)]`` on
mesh ``(a, b)`` cuts dimension 0 into ``|a|`` chunks, then each chunk into ``|b|``, so ``b`` varies fastest.
The paper lists the axes of a dimension minor to major (the first one varies fastest), so this is
``c{b,a}n``: meshplan's axis list is DTensor's shard order reversed.  The other order, ``c{a,b}n``, is
DTensor's ``[_StridedShard(0, split_factor=|b|), Shard(0)]`` (its "right-to-left" FSDP + TP sharding), which
``DTensorSpec`` decodes into the shard order ``(b, a)``.  ``Replicate()`` leaves an axis out of every dimension.
"""

from __future__ import annotations

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.mesh import Mesh

__all__ = ["mesh_of", "split_axes", "placements_of", "device_ranks"]


def mesh_of(device_mesh) -> Mesh:
    """meshplan's mesh of a ``DeviceMesh``: one axis per mesh dimension, same names and order."""
    names = device_mesh.mesh_dim_names or tuple(f"m{i}" for i in range(device_mesh.ndim))
    return Mesh(tuple((str(n), int(k)) for n, k in zip(names, device_mesh.mesh.shape)))


def device_ranks(device_mesh) -> tuple[int, ...]:
    """The global rank of every meshplan device (``device_mesh.mesh`` read row-major)."""
    return tuple(int(r) for r in device_mesh.mesh.flatten().tolist())


def split_axes(device_mesh, placements, ndim: int) -> list[tuple[str, ...]]:
    """For every tensor dimension, the mesh axes that shard it, minor first (DTensor's shard order reversed);
    ``Partial`` is refused (a redistribution moves data, it does not reduce)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec
    from torch.distributed.tensor.placement_types import _StridedShard

    placements = tuple(placements)
    names = mesh_of(device_mesh).names
    if len(placements) != len(names):
        raise ModelError(f"placements has {len(placements)} entries but the mesh has {len(names)} dimensions",
                         param="placements")
    norm = []
    for p in placements:
        if isinstance(p, _StridedShard):
            norm.append(_StridedShard(p.dim % ndim, split_factor=p.split_factor) if p.dim < 0 else p)
        elif isinstance(p, Shard):
            norm.append(Shard(p.dim % ndim) if p.dim < 0 else p)
        elif isinstance(p, Replicate):
            norm.append(p)
        else:
            raise ModelError(f"placement {p} is not Shard, _StridedShard or Replicate; meshplan.torch "
                             "redistributes sharded and replicated tensors (reduce a Partial first)",
                             param="placements")
        if isinstance(p, Shard) and not 0 <= norm[-1].dim < ndim:
            raise ModelError(f"placement {p} shards dimension {p.dim} of a {ndim}-dimensional tensor",
                             param="placements")
    order = DTensorSpec._maybe_convert_StridedShard_to_shard_order(tuple(norm), device_mesh)
    if order is None:
        raise ModelError(f"placements {placements} have split factors that no shard order explains",
                         param="placements")
    axes: list[tuple[str, ...]] = [()] * ndim
    for entry in order:
        axes[entry.tensor_dim] = tuple(names[m] for m in reversed(entry.mesh_dims))
    return axes


def placements_of(device_mesh, axes: list[tuple[str, ...]]) -> tuple:
    """DTensor placements of the tensor whose dimension ``i`` is split over ``axes[i]`` (minor first)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry

    names = mesh_of(device_mesh).names
    order = tuple(ShardOrderEntry(tensor_dim=i, mesh_dims=tuple(names.index(a) for a in reversed(ax)))
                  for i, ax in enumerate(axes) if ax)
    plain = [Replicate()] * len(names)
    for i, ax in enumerate(axes):
        for a in ax:
            plain[names.index(a)] = Shard(i)
    if all(e.mesh_dims == tuple(sorted(e.mesh_dims)) for e in order):
        return tuple(plain)
    return tuple(DTensorSpec._convert_shard_order_to_StridedShard(order, tuple(plain), device_mesh))

