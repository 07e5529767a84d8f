"""``NamedSharding`` as the paper's distributed types, and the mesh of prime sub-axes ``shard_map`` runs on.

A ``jax.sharding.Mesh`` is meshplan's mesh with the same axis names, sizes and order; device ``d`` is
``mesh.devices.flat[d]`` (row-major over the mesh axes), the numbering ``shard_map``'s ``axis_index`` gives.
A ``PartitionSpec`` entry lists the mesh axes of a dimension *major first* (``P(("a", "b"))``: ``b`` varies
fastest); the paper lists them minor first ("Memory-efficient array redistribution through portable collective
communication", Rink, Kwasniewski et al., §2.1), so the entry ``("a", "b")`` is ``c{b,a}n``.

meshplan plans over prime sub-axes (§3): ``b=4`` becomes ``b_0`` (minor) and ``b_1``.  :func:`prime_mesh`
builds the JAX mesh of those sub-axes over the same devices (sub-axes major first within their axis), so a
step over ``b_0`` alone is a JAX collective over the axis ``b_0``; a sharding over ``b`` is the same sharding
over ``(b_1, b_0)`` there, so moving between the two meshes moves no data.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.mesh import Mesh

__all__ = ["mesh_of", "split_axes", "spec_of", "prime_mesh"]


def mesh_of(jmesh) -> Mesh:
    """meshplan's mesh of a ``jax.sharding.Mesh``: same axis names, sizes and order."""
    return Mesh(tuple((str(n), int(k)) for n, k in zip(jmesh.axis_names, jmesh.devices.shape)))


def split_axes(spec, ndim: int, names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """For every array dimension, the mesh axes of the ``PartitionSpec`` entry, minor first."""
    entries = tuple(spec)
    if len(entries) > ndim:
        raise ModelError(f"the PartitionSpec {spec} has {len(entries)} entries for a {ndim}-dimensional array",
                         param="sharding")
    out: list[tuple[str, ...]] = []
    for e in entries + (None,) * (ndim - len(entries)):
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        for a in axes:
            if a not in names:
                raise ModelError(f"axis {a!r} of the PartitionSpec {spec} is not a mesh axis {names}",
                                 param="sharding")
        out.append(tuple(reversed(axes)))
    return out


def spec_of(axes: list[tuple[str, ...]]):
    """The ``PartitionSpec`` of a type whose dimension ``i`` is split over ``axes[i]`` (minor first)."""
    from jax.sharding import PartitionSpec

    return PartitionSpec(*[tuple(reversed(a)) if a else None for a in axes])


def prime_mesh(jmesh, decomposition):
    """The JAX mesh of the prime sub-axes of ``decomposition`` over the devices of ``jmesh``."""
    from jax.sharding import Mesh as JMesh

    names, sizes = [], []
    for a, subs in decomposition.subaxes:
        for s in reversed(subs):   # major first, as a row-major reshape of the axis lays them out
            names.append(s)
            sizes.append(decomposition.prime.size(s))
    devices = np.asarray(jmesh.devices).reshape(tuple(sizes) if sizes else (1,))
    if not sizes:
        raise ModelError("the mesh has no axis of size > 1; there is nothing to redistribute", param="sharding")
    return JMesh(devices, tuple(names))
