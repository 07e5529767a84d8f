"""``meshplan export --format jax``: a standalone JAX program for one lowered reduction program.

The script needs only numpy and jax.  It carries the placement's device mesh (``DEVICE_ORDER``, as
``--format jax-mesh`` prints it), the program's steps as data, and the mesh of the placement with every
parallelism axis split into its hierarchy levels (``LEVEL_AXES``, one mesh axis ``<axis>_<level>`` per entry
> 1 of the parallelism matrix, in the system's device numbering).  Inside ``shard_map`` over that mesh every
step is one JAX collective over the mesh axes its device groups vary along ("P2": placement and reduction
synthesis, §3.2–3.4, chunk semantics of Figure 8): AllReduce and Reduce ``lax.psum``, ReduceScatter
``lax.psum_scatter``, AllGather ``lax.all_gather``, Broadcast a ``psum`` of the root's chunks; per-device
tables (``rows_in``/``rows_out``) put the chunk blocks where the semantics wants them.  ``main`` runs the
program on integer data and checks it against ``lax.psum`` over the reduction axes' level axes.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

__all__ = ["jax_script"]

_RUNTIME = '''

def level_mesh(devices=None):
    """The jax.sharding.Mesh of LEVEL_AXES over the first NUM_DEVICES devices (in system order)."""
    import jax
    from jax.sharding import Mesh

    devs = np.asarray(jax.devices()[:NUM_DEVICES] if devices is None else devices)
    return Mesh(devs.reshape(tuple(k for _, k in LEVEL_AXES) or (1,)), tuple(a for a, _ in LEVEL_AXES) or ("all",))


def device_mesh(devices=None):
    """The placement's jax.sharding.Mesh over AXIS_NAMES (as `meshplan export --format jax-mesh` builds it)."""
    import jax
    from jax.sharding import Mesh

    devs = np.asarray(jax.devices()[:NUM_DEVICES] if devices is None else devices)
    return Mesh(devs[np.asarray(DEVICE_ORDER)], axis_names=AXIS_NAMES)


def psum(x):
    """Inside shard_map over level_mesh(): the sum of ``x`` over this device's reduction group, by STEPS."""
    import jax
    import jax.numpy as jnp

    shape, n = x.shape, int(np.prod(x.shape))
    E = -(-n // CHUNKS)
    buf = jnp.zeros((CHUNKS + 1) * E, x.dtype).at[:n].set(x.reshape(-1)).reshape(CHUNKS + 1, E)  # row CHUNKS: a sink
    d = 0
    for a, k in LEVEL_AXES:
        d = d * k + jax.lax.axis_index(a)
    for name, axes, member, root, rows_in, rows_out in STEPS:
        axes = tuple(axes)
        mine = jnp.take(buf, jnp.asarray(rows_in, dtype=jnp.int32)[d], axis=0)
        if name == "ReduceScatter":
            got = jax.lax.psum_scatter(mine, axes, scatter_dimension=0, tiled=True)
        elif name == "AllGather":
            got = jax.lax.all_gather(mine, axes, axis=0, tiled=True)
        elif name == "Broadcast":   # the root's chunks, summed with the others' zeros
            got = jax.lax.psum(jnp.where(jnp.asarray(root)[d], mine, jnp.zeros_like(mine)), axes)
        else:                       # AllReduce; Reduce: the non-roots' rows_out drop the result
            got = jax.lax.psum(mine, axes)
        new = jnp.zeros_like(buf).at[jnp.asarray(rows_out, dtype=jnp.int32)[d, :got.shape[0]]].set(got)
        buf = jnp.where(jnp.asarray(member)[d], new, buf)
    return buf[:CHUNKS].reshape(-1)[:n].reshape(shape)


def main():
    nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 16
    if os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":   # fake CPU devices: set before jax is imported
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={NUM_DEVICES}").strip()
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    if len(jax.devices()) < NUM_DEVICES:
        print(f"need {NUM_DEVICES} devices, jax has {len(jax.devices())}", file=sys.stderr)
        raise SystemExit(2)
    mesh = level_mesh()
    names = mesh.axis_names
    elems = max(1, nbytes // 4)
    x = np.random.default_rng(0).integers(-1000, 1000, size=(NUM_DEVICES, elems)).astype(np.int32)

    def body(v):
        return psum(v), jax.lax.psum(v, REDUCE_AXES)   # ours, and XLA's own sum over the reduction axes

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(names), out_specs=(P(names), P(names)),
                              check_vma=False))
    ours, ref = jax.block_until_ready(f(x))
    t0 = time.perf_counter()
    jax.block_until_ready(f(x))
    elapsed = time.perf_counter() - t0
    ours, ref = np.asarray(ours), np.asarray(ref)
    want = np.empty_like(x)   # numpy's sum over each reduction group, independently of jax
    for g in REDUCTION_GROUPS:
        want[g] = x[g].sum(axis=0)
    bad = [d for d in range(NUM_DEVICES) if not (np.array_equal(ours[d], ref[d]) and np.array_equal(ours[d], want[d]))]
    print(("verified: every device holds jax.lax.psum (and numpy's sum) over its reduction group" if not bad
           else f"WRONG on devices {bad}"), file=sys.stderr)
    print(json.dumps({"verified": not bad, "devices": NUM_DEVICES, "bad_devices": bad, "time_s": elapsed}))
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
'''


def _rows(a: Any) -> str:
    return json.dumps([[int(v) for v in r] for r in a])


def jax_script(steps: Sequence[tuple], chunks: int, *, level_axes: Sequence[tuple[str, int]],
               reduce_axes: Sequence[str], reduction_groups: Sequence[Sequence[int]], device_order: Any,
               axis_names: Sequence[str], instructions: Sequence[Any] = (), header: Sequence[str] = ()) -> str:
    """The text of a standalone ``python prog.py [BYTES]`` program performing a reduction with JAX collectives
    on ``NUM_DEVICES`` devices (fake CPU ones by default).  ``steps``: per step ``(collective name, mesh axes,
    member[d], root[d], rows_in[d], rows_out[d])`` over the level mesh ``level_axes``; ``chunks`` the size of a
    reduction group; ``reduce_axes`` the level axes of the reduced parallelism axes."""
    n = sum(len(g) for g in reduction_groups)
    lines = ['#!/usr/bin/env python3', '"""A hierarchical reduction exported by meshplan (docs/export.md).', '']
    lines += [h.rstrip() for h in header]
    lines += ['', (f'Run:  python THIS_FILE.py [BYTES_PER_DEVICE]   ({n} fake CPU devices unless JAX_PLATFORMS '
               'is set)'), '',
              'Device d is device d of the system (row-major over the hardware levels). psum(x), inside',
              'shard_map over level_mesh(), sums x over the device\'s reduction group by the steps below;',
              'main() checks it against jax.lax.psum and prints one JSON line (exit code 1 when wrong).',
              '"""', '', 'import json', 'import os', 'import sys', 'import time', '', 'import numpy as np', '',
              f'NUM_DEVICES = {n}',
              f'CHUNKS = {chunks}  # chunks per buffer = size of a reduction group',
              f'REDUCTION_GROUPS = {json.dumps([list(map(int, g)) for g in reduction_groups])}',
              '# the placement as a device mesh: DEVICE_ORDER[i0][i1]... is the device at those axis coordinates',
              f'DEVICE_ORDER = {json.dumps(device_order)}', f'AXIS_NAMES = {tuple(axis_names)!r}',
              '# the same devices with every parallelism axis split into its hierarchy levels (outer first)',
              f'LEVEL_AXES = {json.dumps([[a, int(k)] for a, k in level_axes])}',
              f'REDUCE_AXES = {tuple(reduce_axes)!r}  # the level axes of the reduced parallelism axes', '',
              '# (collective, mesh axes, member[d], root[d], rows_in[d], rows_out[d]): device d hands the',
              '# collective its chunks rows_in[d] (CHUNKS: zeros) and stores the result in rows_out[d]',
              '# (CHUNKS: dropped); devices with member[d] false sit the step out',
              'STEPS = [']
    for i, (name, axes, member, root, rows_in, rows_out) in enumerate(steps):
        ins = instructions[i] if i < len(instructions) else None
        lines.append(f'    # {i + 1}. {ins}' if ins is not None else f'    # {i + 1}.')
        lines.append(f'    ("{name}", {tuple(axes)!r}, {[bool(v) for v in member]!r}, '
                     f'{[bool(v) for v in root]!r},')
        lines.append(f'     {_rows(rows_in)},')
        lines.append(f'     {_rows(rows_out)}),')
    lines.append(']')
    return "\n".join(lines) + "\n" + _RUNTIME
