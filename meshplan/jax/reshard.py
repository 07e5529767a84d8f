"""``meshplan.jax.reshard(x, sharding)``: a JAX resharding carried out by meshplan's plan under ``shard_map``.

The same result as ``jax.device_put(x, sharding)``, computed by the memory-bounded program of
"Memory-efficient array redistribution through portable collective communication" (Rink, Kwasniewski et al.,
§7) as explicit collectives on each device's block inside ``jax.shard_map`` over the mesh of prime sub-axes
(:func:`meshplan.jax.layout.prime_mesh`): ``lax.all_gather`` for an all-gather, ``lax.all_to_all`` for an
all-to-all (one pair of dimensions or several: its pieces cut and joined by the step's exchange layout,
:func:`meshplan.models.redistribution.pieces.exchange_layout`; a layout that cuts one dimension and joins one in
JAX's order is ``lax.all_to_all``'s own ``split_axis``/``concat_axis``), ``lax.ppermute`` for the final
permutation and ``lax.dynamic_slice_in_dim`` for a dynamic slice.  The permutation moves whole tiles
(``split=False`` in the plan): split among the replicas of each tile (:mod:`meshplan.models.redistribution.split`)
its chunks are separate XLA buffers beside the tile, and the compiled program's peak exceeds XLA's own
resharding (``[8,8,{a}24] → [8,8,{b}24]`` on ``a=2,b=4``, int32: 6916 B against 6144 B).
A step's device group is a set of physical sub-axes; where the plan's order of the group's pieces differs from
JAX's (after the lowering renamed axes, §6), a per-device table reorders them.  Usable under ``jax.jit``
(pass the source sharding as ``src`` when ``x`` is traced).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from meshplan.api.framework_plan import FrameworkPlan, framework_plan, padded_types
from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, groups
from meshplan.models.redistribution.offsets import axes_tile_index
from meshplan.models.redistribution.pieces import exchange_layout
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice
from meshplan.jax.layout import mesh_of, prime_mesh, spec_of, split_axes

__all__ = ["plan", "reshard"]


def _shardings(x: Any, sharding: Any, src: Any):
    from jax.sharding import NamedSharding

    src = src if src is not None else getattr(x, "sharding", None)
    for name, s in (("src", src), ("sharding", sharding)):
        if not isinstance(s, NamedSharding):
            raise ModelError(f"{name} must be a jax.sharding.NamedSharding, got {type(s).__name__}"
                             + (" (pass src= when x is traced under jit)" if name == "src" else ""), param=name)
    if src.mesh.devices.shape != sharding.mesh.devices.shape or src.mesh.axis_names != sharding.mesh.axis_names \
            or not np.array_equal(np.vectorize(lambda d: d.id)(src.mesh.devices),
                                  np.vectorize(lambda d: d.id)(sharding.mesh.devices)):
        raise ModelError("the source and target shardings must be on the same mesh", param="sharding")
    return src, sharding


def plan(x: Any, sharding: Any, *, src: Any = None, cost: str = "wire") -> FrameworkPlan:
    """meshplan's program for ``jax.device_put(x, sharding)`` without moving data: its steps, the bytes every
    device sends and the largest block it holds (``cost``: ``wire`` — the default here — or ``paper``)."""
    s, d = _shardings(x, sharding, src)
    return _plan(s.mesh, tuple(x.shape), tuple(s.spec), tuple(d.spec), str(jnp.dtype(x.dtype)), cost)


@lru_cache(maxsize=512)
def _plan(jmesh, shape, src_spec, dst_spec, dtype, cost) -> FrameworkPlan:
    from jax.sharding import PartitionSpec

    mesh = mesh_of(jmesh)
    for spec in (src_spec, dst_spec):
        for i, axes in enumerate(split_axes(PartitionSpec(*spec), len(shape), mesh.names)):
            k = math.prod(mesh.size(a) for a in axes)
            if shape[i] % k:
                raise ModelError(f"dimension {i} of size {shape[i]} is not divisible by {k}, the size of its mesh "
                                 "axes; JAX shardings need divisible sizes", param="sharding")
    src, dst = padded_types(mesh, shape, split_axes(PartitionSpec(*src_spec), len(shape), mesh.names),
                            split_axes(PartitionSpec(*dst_spec), len(shape), mesh.names), nested_uneven=True)
    return framework_plan("jax", mesh, shape, src, dst, (str(PartitionSpec(*src_spec)), str(PartitionSpec(*dst_spec))),
                          as_dtype(dtype, what="dtype").short, cost, split=False)   # whole tiles: see the module docstring


def _physical(mesh, coords0, members: list[int]) -> tuple[str, ...]:
    """The prime axes (mesh order) along which the ``members`` of one group differ."""
    return tuple(a for k, a in enumerate(mesh.names) if len({int(coords0[m, k]) for m in members}) > 1)


def _position(mesh, coords0, axes: tuple[str, ...], d: int) -> int:
    """JAX's index of device ``d`` in a collective over ``axes`` (the first axis major)."""
    v = 0
    for a in axes:
        v = v * mesh.size(a) + int(coords0[d, mesh.index(a)])
    return v


def _order(mesh, coords0, color, key, n: int, axes: tuple[str, ...]) -> np.ndarray:
    """``order[d, k]``: JAX's position (in a collective over ``axes``) of the member of ``d``'s group whose
    piece is ``k``; every group must be the devices that differ only along ``axes``."""
    order = np.zeros((len(color), n), dtype=np.int32)
    for c in sorted(set(color.tolist())):
        members = [m for m in range(len(color)) if color[m] == c]
        if _physical(mesh, coords0, members) != tuple(a for a in mesh.names if a in axes) \
                or math.prod(mesh.size(a) for a in axes) != n:
            raise ModelError("internal: the groups of a step are not sets of mesh sub-axes")
        row = np.zeros(n, dtype=np.int32)
        for m in members:
            row[int(key[m])] = _position(mesh, coords0, axes, m)
        order[members] = row
    return order


def _aligned(mesh, coords0, color, key, n: int):
    """``(axes, order)`` for a step whose every group is the devices differing only along ``axes`` (``order``:
    :func:`_order`, the identity where JAX's order is the plan's), else None."""
    best = None
    for axes in itertools.permutations(_physical(mesh, coords0, [m for m in range(len(color))
                                                                 if color[m] == color[0]])):
        try:
            order = _order(mesh, coords0, color, key, n, axes)   # [d, k]: JAX position of piece k
        except ModelError:
            return None
        if best is None or (order == np.arange(n)).all():
            best = (axes, order)
        if (order == np.arange(n)).all():
            break
    return best


def _rounds(step, color, key, n: int, layout=None):
    """A step over groups that no mesh axes describe, as ``n − 1`` rounds of ``ppermute`` over the whole mesh:
    in round ``r`` the member with key ``k`` sends to the member with key ``k + r`` (mod ``n``) of its group its
    block (all-gather) or the piece that member keeps (all-to-all: the piece whose index is its key), so each
    device sends what the collective would, ``(n−1)·block`` or ``(n−1)/n·block``.  Tables per device:
    ``send[r, d]`` the piece sent in round ``r``; ``slot[d, k]`` where the block from key ``k`` arrived."""
    ndev = len(color)
    member = {(int(color[d]), int(key[d])): d for d in range(ndev)}
    pairs = [tuple((d, member[(int(color[d]), (int(key[d]) + r) % n)]) for d in range(ndev)) for r in range(1, n)]
    send = np.array([[(int(key[d]) + r) % n for d in range(ndev)] for r in range(n)], dtype=np.int32)
    slot = np.array([[(int(key[d]) - k) % n for k in range(n)] for d in range(ndev)], dtype=np.int32)
    dims = (step.dim,) if isinstance(step, AllGather) else (step.src, step.dst)
    return ("rounds", dims, n, pairs, send, slot, layout)


def _linear(mesh, coords0, lo: np.ndarray):
    """A per-device offset as ``{axis: weight}`` when it is a weighted sum of the device's mesh coordinates
    (then the device computes it from ``axis_index``, as XLA's own slices do, and holds no table), else the
    table ``lo[d]``."""
    a = np.asarray(coords0[:len(lo)], dtype=np.int64)
    w = np.rint(np.linalg.lstsq(a.astype(float), lo.astype(float), rcond=None)[0]).astype(np.int64)
    return {n: int(k) for n, k in zip(mesh.names, w) if k} if np.array_equal(a @ w, lo) else lo


def _compile(fp: FrameworkPlan):
    """The per-device function of the plan (for ``shard_map`` over the prime mesh) and its two specs."""
    search = fp.plan.search
    mesh, coords0 = search.mesh, search.decomposition.coords()
    ndev = mesh.num_devices
    state = Assignment(search.src, coords0)
    actions = []
    for step in search.ops:
        new = apply_lowlevel(mesh, state, step, coords0)
        if isinstance(step, (AllGather, AllToAll)):
            color, key, n = groups(mesh, state, step)
            best = _aligned(mesh, coords0, color, key, n)
            # an all-to-all (one pair of dimensions or several): its pieces and joins by its layout
            layout = exchange_layout(mesh, state.type, step) if isinstance(step, AllToAll) else None
            if best is None:    # groups along no set of mesh axes (renamed axes, §6): n − 1 ppermute rounds
                actions.append(_rounds(step, color, key, n, layout))
                state = new
                continue
            axes, order = best
            same = bool((order == np.arange(n)).all())
            inverse = np.argsort(order, axis=1).astype(np.int32)  # inverse[d, r]: key of the piece at position r
            if isinstance(step, AllGather):
                actions.append(("allgather", step.dim, axes, None if same else order))
            else:
                actions.append(("alltoall", axes, n, None if same else (order, inverse), layout))
        elif isinstance(step, DynSlice):
            c = new.type.dims[step.dim].local
            lo = (axes_tile_index(mesh, step.axes, state.coords)[:ndev] * c).astype(np.int32)
            actions.append(("dynslice", step.dim, _linear(mesh, coords0, lo), c))
        elif isinstance(step, AllPermute):
            actions.append(("allpermute", tuple((int(step.source[d]), d) for d in range(ndev))))
        state = new
    # the JAX prime mesh's axis order (sub-axes major first): row-major over it is the device number
    names = tuple(s for _, subs in search.decomposition.subaxes for s in reversed(subs))

    def device_id():
        d = 0
        for a in names:
            d = d * mesh.size(a) + jax.lax.axis_index(a)
        return d

    def body(t):
        d = device_id() if any(a[0] == "rounds" or (a[0] == "dynslice" and not isinstance(a[2], dict))
                               or (a[0] == "allgather" and a[3] is not None)
                               or (a[0] == "alltoall" and a[3] is not None) for a in actions) else None
        for act in actions:
            kind = act[0]
            if kind == "allgather":
                _, dim, axes, order = act
                if order is None:
                    t = jax.lax.all_gather(t, axes, axis=dim, tiled=True)
                else:
                    g = jax.lax.all_gather(t, axes, axis=0, tiled=False)
                    g = jnp.take(g, jnp.asarray(order)[d], axis=0)
                    t = _join(g, dim)
            elif kind == "alltoall":
                _, axes, n, perm, lay = act
                if perm is None and lay.tiled is not None:   # one dimension cut, one joined: XLA's own form
                    t = jax.lax.all_to_all(t, axes, split_axis=lay.tiled[0], concat_axis=lay.tiled[1], tiled=True)
                else:
                    send = _pack(t, lay)
                    if perm is not None:
                        send = jnp.take(send, jnp.asarray(perm[1])[d], axis=0)
                    recv = jax.lax.all_to_all(send, axes, split_axis=0, concat_axis=0, tiled=True)
                    if perm is not None:
                        recv = jnp.take(recv, jnp.asarray(perm[0])[d], axis=0)
                    t = _unpack(recv, lay)
            elif kind == "rounds":
                _, dims, n, pairs, send, slot, lay = act
                if len(dims) == 1:          # all-gather: every block to every other member
                    got = [t] + [jax.lax.ppermute(t, names, list(p)) for p in pairs]
                    dim = dims[0]
                else:                       # all-to-all: the piece of its layout each member keeps
                    pieces = _pack(t, lay)
                    got = [jnp.take(pieces, jnp.asarray(send)[r][d], axis=0) for r in range(n)]
                    got = [got[0]] + [jax.lax.ppermute(g, names, list(p)) for g, p in zip(got[1:], pairs)]
                got = jnp.take(jnp.stack(got), jnp.asarray(slot)[d], axis=0)
                t = _join(got, dims[0]) if lay is None else _unpack(got, lay)
            elif kind == "dynslice":
                _, dim, lo, c = act
                if isinstance(lo, dict):
                    lo = sum((k * jax.lax.axis_index(a) for a, k in lo.items()), jnp.int32(0))
                else:
                    lo = jnp.asarray(lo)[d]
                t = jax.lax.dynamic_slice_in_dim(t, lo, c, axis=dim)
            else:
                _, pairs = act
                t = jax.lax.ppermute(t, names, list(pairs))   # fixed points keep their block
        return t

    src_spec = spec_of([d.axes for d in search.src.dims])
    dst_spec = spec_of([d.axes for d in search.dst.dims])
    return body, src_spec, dst_spec


def _pack(t, lay):
    """An all-to-all's pieces, in key order on a new first axis (its ExchangeLayout)."""
    return jnp.transpose(t.reshape(lay.send_view), lay.send_perm).reshape(lay.pieces)


def _unpack(recv, lay):
    """The new tile from an all-to-all's received pieces (its ExchangeLayout)."""
    return jnp.transpose(recv.reshape(lay.recv_view), lay.recv_perm).reshape(lay.shape)


def _join(pieces, dim: int):
    n, shape = pieces.shape[0], list(pieces.shape[1:])
    shape[dim] *= n
    return jnp.moveaxis(pieces, 0, dim).reshape(shape)


@lru_cache(maxsize=512)
def _function(fp: FrameworkPlan, jmesh, src, dst, cost: str):
    """``x -> y`` under ``shard_map`` on the prime mesh, then the target sharding (same placement).

    Its derivative is the redistribution back, ``dst ⇝ src`` by meshplan's plan for that pair (a
    redistribution is the identity on the global array, so its cotangent is the output's, moved back), as
    DTensor's ``redistribute`` does.  The transposes of the ``shard_map`` collectives would give the same
    values, but with ``check_vma=False`` a block replicated over ``k`` devices comes back as ``k`` copies of
    ``1/k`` of it: not bit for bit when ``k`` is not a power of two."""
    body, src_spec, dst_spec = _compile(fp)
    pmesh = prime_mesh(jmesh, fp.plan.search.decomposition)
    f = jax.shard_map(body, mesh=pmesh, in_specs=src_spec, out_specs=dst_spec, check_vma=False)

    @jax.custom_vjp
    def run(x):
        return jax.lax.with_sharding_constraint(f(x), dst)

    def forward(x):
        return run(x), None

    def backward(_, ct):
        return (reshard(ct, src, src=dst, cost=cost),)
    run.defvjp(forward, backward)
    return run


def reshard(x: Any, sharding: Any, *, src: Any = None, cost: str = "wire") -> Any:
    """``jax.device_put(x, sharding)`` carried out by meshplan's plan (see the module docstring); under
    ``jax.jit`` pass ``src``, the sharding ``x`` has."""
    s, d = _shardings(x, sharding, src)
    fp = _plan(s.mesh, tuple(x.shape), tuple(s.spec), tuple(d.spec), str(jnp.dtype(x.dtype)), cost)
    if not fp.plan.search.ops:
        return jax.lax.with_sharding_constraint(x, d) if isinstance(x, jax.core.Tracer) else jax.device_put(x, d)
    run = _function(fp, s.mesh, s, d, cost)
    if isinstance(x, jax.core.Tracer):
        return run(x)
    return _jitted(run, d)(x)


@lru_cache(maxsize=512)
def _jitted(run, dst):
    return jax.jit(run, out_shardings=dst)
