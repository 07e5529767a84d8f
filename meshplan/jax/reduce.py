"""``meshplan.jax.psum(x, program)``: a synthesized hierarchical reduction inside ``shard_map`` ("P2":
placement and reduction synthesis, §3.2–3.4, with the chunk semantics of Figure 8).

:func:`level_mesh` is the device mesh of the program's placement with every parallelism axis split into its
hierarchy levels: one mesh axis ``<axis>_<level>`` per entry > 1 of the parallelism matrix, levels outermost
first and, within a level, axis 0 outermost — the system's device numbering, so ``level_mesh`` lays the
devices of ``meshplan export --format jax-mesh`` out with the reduction axis split by level.  Inside
``shard_map`` over that mesh, :func:`psum` sums ``x`` over the device's reduction group by the program's steps,
each a JAX collective over the mesh axes its device groups vary along: AllReduce ``lax.psum``, ReduceScatter
``lax.psum_scatter``, AllGather ``lax.all_gather`` (member ``i`` of a group keeps block ``i``; per-device
tables put the blocks where the semantics wants them), Reduce a ``psum`` the non-roots then drop, Broadcast a
``psum`` of the root's chunks.  ``x`` is viewed as ``k`` chunks (``k`` the reduction-group size, zero padded).
The result equals ``lax.psum`` over the reduction axes' level axes.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError, VerificationError

__all__ = ["level_mesh", "level_axes", "psum"]


def level_axes(program: Any, axis_names: Any = None) -> tuple[tuple[str, int], ...]:
    """``(name, size)`` of the mesh axes of :func:`level_mesh`: ``<axis>_<level>`` for every matrix entry > 1,
    levels outer first, axis 0 first within a level (``axis_names``: the parallelism axes' names, default
    ``a0, a1, …``)."""
    rows = program.matrix
    names = list(axis_names.split(",") if isinstance(axis_names, str) else axis_names or
                 [f"a{i}" for i in range(len(rows))])
    if len(names) != len(rows):
        raise ModelError(f"axis_names has {len(names)} names for {len(rows)} axes", param="axis_names")
    levels = [lv.name for lv in program.system_value.levels]
    return tuple((f"{names[i]}_{lv}", rows[i][j]) for j, lv in enumerate(levels) for i in range(len(rows))
                 if rows[i][j] > 1)


def level_mesh(program: Any, axis_names: Any = None, devices: Any = None):
    """The ``jax.sharding.Mesh`` of :func:`level_axes` over ``devices`` (default the first devices of
    ``jax.devices()``, in system order)."""
    from jax.sharding import Mesh

    axes = level_axes(program, axis_names)
    n = program.num_devices
    devs = np.asarray(jax.devices()[:n] if devices is None else devices)
    if devs.size != n:
        raise ModelError(f"the program runs on {n} devices, got {devs.size}", param="devices")
    return Mesh(devs.reshape(tuple(k for _, k in axes) or (1,)), tuple(a for a, _ in axes) or ("all",))


def _coords(axes) -> np.ndarray:
    sizes = [k for _, k in axes]
    return np.indices(sizes).reshape(len(sizes), -1).T if sizes else np.zeros((1, 0), dtype=int)


def _group_axes(axes, coords, g) -> tuple[str, ...]:
    return tuple(a for k, (a, _) in enumerate(axes) if len({int(coords[d, k]) for d in g}) > 1)


def _position(axes, coords, names, d) -> int:
    v = 0
    for a in names:
        k = [x for x, _ in axes].index(a)
        v = v * axes[k][1] + int(coords[d, k])
    return v


def _compile(program: Any, axis_names: Any):
    from meshplan.exec.reduction.driver import chunk_layouts
    from meshplan.models.reduction.checker import replay

    lowered, rgroups = program.lowered, program.reduction_groups
    verdict = replay(lowered, rgroups)
    if not verdict.valid:
        raise VerificationError(f"the program does not compute the reduction: {verdict.reason()}")
    axes = level_axes(program, axis_names)
    coords = _coords(axes)
    n, k = lowered.num_devices, len(rgroups[0])
    layouts = chunk_layouts(lowered, k)
    steps = []
    for st, before, after in zip(lowered.steps, layouts, layouts[1:]):
        c = Collective.parse(st.collective)
        gaxes = {_group_axes(axes, coords, g) for g in st.groups}
        covered = sorted(d for g in st.groups for d in g)
        if len(gaxes) != 1:
            raise ModelError(f"the groups of step {st.collective} are not cosets of one set of mesh axes",
                             param="program")
        names = gaxes.pop()
        if any(math.prod(dict(axes)[a] for a in names) != len(g) for g in st.groups):
            raise ModelError(f"the groups of step {st.collective} are not whole cosets of mesh axes",
                             param="program")
        # order the axes so that JAX's positions follow the group order where they can
        best = None
        for perm in itertools.permutations(names):
            pos = {d: _position(axes, coords, perm, d) for g in st.groups for d in g}
            ident = all(pos[d] == i for g in st.groups for i, d in enumerate(g))
            if best is None or ident:
                best = (perm, pos)
            if ident:
                break
        names, pos = best
        member = np.zeros(n, dtype=bool)
        member[covered] = True
        held_in = max(len(before[d]) for d in covered)
        held_out = max([len(after[d]) for d in covered] + [held_in * len(st.groups[0])])
        rows_in = np.full((n, held_in), k, dtype=np.int32)    # the labels a device hands the collective (k: 0)
        rows_out = np.full((n, held_out), k, dtype=np.int32)  # where its result lands (k: dropped)
        root = np.zeros(n, dtype=bool)
        for g in st.groups:
            root[g[0]] = True
            by_pos = sorted(g, key=lambda d: pos[d])
            for d in g:
                lab = list(before[d])
                if c is Collective.REDUCE_SCATTER:   # block i of the group's chunks to member i: JAX order
                    b = len(lab) // len(g)
                    lab = [x for m in by_pos for x in before[d][g.index(m) * b:(g.index(m) + 1) * b]]
                rows_in[d, :len(lab)] = lab
                if c is Collective.ALL_GATHER:
                    out = [x for m in by_pos for x in before[m]]
                else:
                    out = list(after[d])
                rows_out[d, :len(out)] = out
        steps.append((c, names, member, root, rows_in, rows_out))
    return tuple(steps), k, tuple(a for a, _ in axes)


_CACHE: dict = {}


def psum(x: Any, program: Any, axis_names: Any = None) -> Any:
    """Inside ``shard_map`` over :func:`level_mesh` (``program``, ``axis_names``): the sum of ``x`` over the
    device's reduction group, by the collectives of ``program`` (a ReductionPlan)."""
    key = (id(program.lowered), program.reduction_groups, str(axis_names))
    compiled = _CACHE.get(key)
    if compiled is None:
        compiled = _CACHE[key] = _compile(program, axis_names)
    steps, k, mesh_names = compiled
    shape, n = x.shape, math.prod(x.shape)
    E = -(-n // k)
    buf = jnp.zeros(k * E + E, x.dtype).at[:n].set(x.reshape(-1)).reshape(k + 1, E)   # row k: a sink
    d = 0
    sizes = dict(level_axes(program, axis_names))
    for a in mesh_names:
        d = d * sizes[a] + jax.lax.axis_index(a)
    for c, names, member, root, rows_in, rows_out in steps:
        mine = jnp.take(buf, jnp.asarray(rows_in)[d], axis=0)
        if c is Collective.ALL_REDUCE:
            got = jax.lax.psum(mine, names)
        elif c is Collective.REDUCE_SCATTER:
            got = jax.lax.psum_scatter(mine, names, scatter_dimension=0, tiled=True)
        elif c is Collective.ALL_GATHER:
            got = jax.lax.all_gather(mine, names, axis=0, tiled=True)
        elif c is Collective.REDUCE:
            got = jax.lax.psum(mine, names)
        else:  # Broadcast: the root's chunks, summed with the others' zeros
            got = jax.lax.psum(jnp.where(jnp.asarray(root)[d], mine, jnp.zeros_like(mine)), names)
        new = jnp.zeros_like(buf).at[jnp.asarray(rows_out)[d, :got.shape[0]]].set(got)
        buf = jnp.where(jnp.asarray(member)[d], new, buf)
    return buf[:k].reshape(-1)[:n].reshape(shape)
