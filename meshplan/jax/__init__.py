"""meshplan's plans inside JAX (docs/frameworks.md): ``reshard(x, sharding)`` moves a ``jax.Array`` to a
``NamedSharding`` with meshplan's memory-bounded redistribution program as ``shard_map`` collectives,
``plan(x, sharding)`` shows that program without moving data, and ``psum(x, program, axis_names)`` runs a
synthesized hierarchical reduction inside ``shard_map``.  Needs jax (the ``test`` extra)."""

from meshplan.jax.reduce import level_axes, level_mesh, psum
from meshplan.jax.reshard import plan, reshard

__all__ = ["reshard", "plan", "psum", "level_mesh", "level_axes"]
