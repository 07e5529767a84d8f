"""meshplan.jax against XLA on fake CPU devices (the tests and bench/frameworks.py).

:func:`compare` starts one Python process with ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (jax
reads it once, at import) and runs every :class:`~meshplan.api.framework_family.FamilyProblem` JAX can
express (JAX needs divisible sizes): ``meshplan.jax.reshard`` and ``jax.device_put`` on integer data, compared
bit for bit block by block, then both compiled (``jax.jit`` of the reshard, and of the identity with the target
``out_shardings``, as XLA's SPMD partitioner reshards): the bytes sent are read from the compiled HLO's
collectives (:func:`meshplan.exec.redistribution.xla.read_hlo`, :attr:`HloCollective.wire`) and the peak from
``compiled.memory_analysis()`` (arguments + outputs + temporaries − aliased bytes, per device).  Beside the
busiest device's bytes, each record has the bytes all devices send together and, from JAX's own index maps,
floors under both that no program can beat (``need_busiest_bytes``, ``need_total_bytes``: :func:`_need`).

``jit`` with ``out_shardings`` is what a user's resharding compiles to: ``with_sharding_constraint`` inside
``jit`` (alone or amid other operations) and ``jax.sharding.reshard`` on a mesh of explicit axes give the
same collectives, and across processes ``jax.device_put`` compiles that very program (jax's dispatch: ``jit``
of the identity with ``out_shardings``).  ``jax.device_put`` of an array whose every
block this one process holds compiles nothing: it copies blocks through the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

__all__ = ["compare"]


def _memory(compiled) -> int:
    ma = compiled.memory_analysis()
    return int(ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
               - ma.alias_size_in_bytes)


def _child(specs: list[dict], cost: str) -> list[dict]:
    import math

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding

    import meshplan.jax as mj
    from meshplan.exec.redistribution.xla import read_hlo
    from meshplan.jax.layout import spec_of

    out = []
    for spec in specs:
        shape = tuple(spec["shape"])
        names, sizes = [a for a, _ in spec["mesh"]], [k for _, k in spec["mesh"]]
        mesh = Mesh(np.array(jax.devices()[:math.prod(sizes)]).reshape(sizes), tuple(names))
        s = NamedSharding(mesh, spec_of([tuple(d) for d in spec["src"]]))
        d = NamedSharding(mesh, spec_of([tuple(d) for d in spec["dst"]]))
        x = jax.device_put(jnp.arange(math.prod(shape), dtype=jnp.int32).reshape(shape), s)
        y, r = mj.reshard(x, d), jax.device_put(x, d)
        key = lambda sh: sh.device.id  # noqa: E731
        equal = y.sharding.is_equivalent_to(d, len(shape)) and all(
            a.device == b.device and np.array_equal(np.asarray(a.data), np.asarray(b.data))
            for a, b in zip(sorted(y.addressable_shards, key=key), sorted(r.addressable_shards, key=key)))
        equal = equal and np.array_equal(np.asarray(y), np.arange(math.prod(shape)).reshape(shape))
        fp = mj.plan(x, d, cost=cost)
        rec = {"problem": spec["name"], "equal": bool(equal), "plan_sent_bytes": fp.sent_bytes,
               "plan_peak_bytes": fp.peak_bytes, "program": [f"{p.op}{list(p.axes)}" for p in fp.program]}
        for way, fn in (("meshplan", jax.jit(lambda v: mj.reshard(v, d, src=s, cost=cost))),
                        ("xla", jax.jit(lambda v: v, out_shardings=d))):
            c = fn.lower(x).compile()
            if way == "meshplan":   # under jit too
                rec["equal"] = rec["equal"] and np.array_equal(np.asarray(c(x)), np.asarray(r))
            rep = read_hlo(c.as_text())
            rec[way] = {"sent_bytes": rep.wire * 4, "total_sent_bytes": rep.total * 4, "fig11_bytes": rep.cost * 4,
                        "peak_bytes": _memory(c), "hlo_height_bytes": rep.height * 4,
                        "collectives": [str(k) for k in rep.communication]}
        rec["need_busiest_bytes"], rec["need_total_bytes"] = (4 * k for k in _need(shape, s, d))
        rec["grad_equal"] = _grad_equal(mj, shape, s, d, cost)
        out.append(rec)
    return out


def _need(shape: tuple, s, d) -> tuple[int, int]:
    """Floors under any program's bytes, from JAX's own index maps (elements): all devices together send at
    least the elements each device's target block lacks of its source block (each is received once at
    least); the busiest device sends at least the average of that, and at least once each element that it
    alone holds and another device lacks (a relay may forward it further).  Independent of the HLO."""
    import math

    import numpy as np

    idx = np.arange(math.prod(shape)).reshape(shape)
    src, dst = s.devices_indices_map(shape), d.devices_indices_map(shape)
    devs = list(dst)
    held = np.zeros((len(devs), idx.size), dtype=bool)
    want = np.zeros_like(held)
    for k, dev in enumerate(devs):
        held[k, idx[src[dev]].ravel()] = True
        want[k, idx[dst[dev]].ravel()] = True
    need = want & ~held
    total = int(need.sum())
    only = held & (held.sum(axis=0) == 1)             # an element only this device holds
    forced = int((only & need.any(axis=0)).sum(axis=1).max(initial=0))
    return max(-(-total // len(devs)), forced), total


def _grad_equal(mj, shape: tuple, s, d, cost: str) -> bool:
    """``jax.grad`` through :func:`meshplan.jax.reshard` (the redistribution back) gives the weights of the loss
    ``Σ y·W``, bit for bit, as the source sharding: a redistribution is the identity on the array."""
    import math

    import jax
    import jax.numpy as jnp
    import numpy as np

    n = math.prod(shape)
    w = (jnp.arange(n, dtype=jnp.float32) % 7 - 3).reshape(shape)
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32).reshape(shape), s)
    g = jax.jit(jax.grad(lambda v: (mj.reshard(v, d, src=s, cost=cost) * w).sum()))(x)
    return bool(np.array_equal(np.asarray(g), np.asarray(w)) and g.sharding.is_equivalent_to(s, len(shape)))


def _psum_child(jobs: list) -> list[dict]:
    """Every program (or the first ``limit`` of each placement) of every schedule, by meshplan.jax.psum inside
    one jitted ``shard_map`` per placement, against ``lax.psum`` over the reduction axes' level axes."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import meshplan
    from meshplan.jax.reduce import level_axes, level_mesh, psum

    out = []
    for system, axes, reduce, limit in jobs:
        plan = meshplan.solve_placement(system, axes, reduce)
        for i, pl in enumerate(plan.study.placements):
            progs = [plan.program(i, j) for j in range(len(pl.programs))][:limit]
            mesh = level_mesh(progs[0])
            names = tuple(a for a, _ in level_axes(progs[0]))
            red = tuple(a for a in names if int(a.split("_")[0][1:]) in progs[0].reduce)
            x = jnp.arange(mesh.size * 37, dtype=jnp.int32).reshape(mesh.size, 37) * 7 - 100

            def body(v, progs=progs, red=red):
                ref = jax.lax.psum(v, red)
                return jnp.stack([jnp.all(psum(v, p) == ref) for p in progs])[None]
            ok = np.asarray(jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(names), out_specs=P(names),
                                                  check_vma=False))(x)).all(axis=0)
            out += [{"schedule": f"{system} axes {axes} reduce {reduce}", "placement": i, "program": j,
                     "equal": bool(o)} for j, o in enumerate(ok)]
    return out


def compare_psum(schedules, *, limit: int | None = None, devices: int = 8, timeout_s: float = 3600.0) -> list[dict]:
    """Every program (at most ``limit`` per placement) of the schedules ``(system, axes, reduce)`` by
    meshplan.jax.psum against ``lax.psum``, in one process on ``devices`` fake CPU devices."""
    jobs = [[s, a, r, limit] for s, a, r in schedules]
    return _run(jobs, ["psum"], devices, timeout_s)


def _run(payload, args: list[str], devices: int, timeout_s: float):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="2")
    # the child starts outside the working directory: from a checkout's root, `python -m` would import its
    # source folder meshplan/ (which lacks the mapped layer packages) instead of the installed package
    proc = subprocess.run([sys.executable, "-m", "meshplan.jax.compare", *args], input=json.dumps(payload),
                          env=env, capture_output=True, text=True, timeout=timeout_s, cwd=tempfile.gettempdir())
    if proc.returncode:
        raise RuntimeError("the jax comparison failed: " + proc.stderr[-2000:])
    return json.loads(proc.stdout)


def compare(problems, *, cost: str = "wire", devices: int = 8, timeout_s: float = 900.0) -> list[dict]:
    """Run the problems JAX can express (sizes divisible by their axes) in one process on ``devices`` fake CPU
    devices; one record per problem (``problem`` is its ``str``)."""
    specs = [{"name": str(p), "mesh": [list(m) for m in p.mesh], "shape": list(p.shape),
              "src": [list(d) for d in p.src], "dst": [list(d) for d in p.dst]} for p in problems]
    return _run(specs, [cost], devices, timeout_s)


if __name__ == "__main__":
    if sys.argv[1] == "psum":
        json.dump(_psum_child(json.load(sys.stdin)), sys.stdout)
    else:
        json.dump(_child(json.load(sys.stdin), sys.argv[1]), sys.stdout)
