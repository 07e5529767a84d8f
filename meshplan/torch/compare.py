"""meshplan.torch against DTensor, side by side on gloo processes (the tests and bench/frameworks.py).

:func:`compare` starts ``nprocs`` processes (``torch.multiprocessing.spawn``, gloo), and in each one runs every
problem of a :class:`~meshplan.api.framework_family.FamilyProblem` list three or four ways on integer data:
``meshplan`` (:func:`meshplan.torch.redistribute`), DTensor's default (greedy) planner, its min-cost graph
planner, and — ``dtensor_a2a`` — the default planner with its all-to-all as on NCCL (on CPU DTensor gathers and
chunks instead).  Each run is inside a :class:`~meshplan.torch.count.CollectiveCounter`; every rank's result is
compared bit for bit with DTensor's and with the tile cut from the global array by meshplan's offsets.
Returns one record per problem: the largest sent bytes and peak over ranks for each way, and ``equal``.
"""

from __future__ import annotations

import json
import math
import os
import socket
import tempfile
import time
from contextlib import contextmanager

__all__ = ["compare", "WAYS"]

WAYS = ("meshplan", "dtensor", "dtensor_graph", "dtensor_a2a")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _dtensor_way(way: str):
    import torch.distributed.tensor.placement_types as pt
    from torch.distributed.tensor import _redistribute as rd

    rd._gen_transform_infos.cache_clear()
    saved = pt.shard_dim_alltoall
    try:
        if way == "dtensor_graph":
            with rd.use_min_cost_redistribution_plan(True):
                yield
        elif way == "dtensor_a2a":
            import torch
            import torch.distributed._functional_collectives as funcol

            def a2a(input, gather_dim, shard_dim, mesh, mesh_dim):  # DTensor's GPU path
                group = funcol._resolve_group((mesh, mesh_dim))
                return torch.ops._dtensor.shard_dim_alltoall(input, gather_dim, shard_dim,
                                                             funcol._group_or_group_name(group))
            pt.shard_dim_alltoall = a2a
            yield
        else:
            with rd.use_min_cost_redistribution_plan(False):
                yield
    finally:
        pt.shard_dim_alltoall = saved
        rd._gen_transform_infos.cache_clear()


def _worker(rank: int, nprocs: int, port: int, problems: list, out: str, cost: str, ways: tuple,
            reductions: list) -> None:
    import logging

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    import meshplan.torch as mpt
    from meshplan.api.framework_family import FamilyProblem
    from meshplan.torch.layout import placements_of

    logging.getLogger("torch.distributed.tensor._collective_utils").setLevel(logging.ERROR)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=nprocs)
    meshes: dict = {}
    records = []
    try:
        for spec in problems:
            p = FamilyProblem(spec["kind"], tuple((a, k) for a, k in spec["mesh"]), tuple(spec["shape"]),
                              tuple(tuple(d) for d in spec["src"]), tuple(tuple(d) for d in spec["dst"]))
            key = p.mesh
            if key not in meshes:
                meshes[key] = init_device_mesh("cpu", tuple(k for _, k in p.mesh),
                                               mesh_dim_names=tuple(a for a, _ in p.mesh))
            mesh = meshes[key]
            src_pl, dst_pl = placements_of(mesh, list(p.src)), placements_of(mesh, list(p.dst))
            g = torch.arange(math.prod(p.shape), dtype=torch.int64).reshape(p.shape)
            shape, off = compute_local_shape_and_global_offset(p.shape, mesh, src_pl)
            local = g[tuple(slice(o, o + s) for o, s in zip(off, shape))].contiguous()
            x = DTensor.from_local(local, mesh, src_pl, run_check=False, shape=g.shape, stride=g.stride())
            rec = {"problem": str(p), "kind": p.kind, "devices": p.devices, "src_placements": str(src_pl),
                   "dst_placements": str(dst_pl)}
            fp = mpt.plan(x, dst_pl, cost=cost)
            rec["plan_sent_bytes"], rec["plan_peak_bytes"] = fp.sent_bytes, fp.peak_bytes
            rec["program"] = [f"{s.op}{list(s.axes)}" for s in fp.program]
            results = {}
            for way in ways:
                t0 = time.perf_counter()
                with mpt.CollectiveCounter() as c:
                    if way == "meshplan":
                        y = mpt.redistribute(x, dst_pl, cost=cost)
                    else:
                        with _dtensor_way(way):
                            y = x.redistribute(mesh, dst_pl)
                results[way] = y.to_local()
                rec[way] = {"sent_bytes": c.sent_bytes, "peak_bytes": c.peak_bytes,
                            "collectives": [f"{k.op}/{k.group_size}" for k in c.calls],
                            "first_call_s": time.perf_counter() - t0}
            # the tile this rank must hold, cut from the global array by meshplan's own offsets
            from meshplan.models.redistribution.lowlevel import Assignment

            search = fp.plan.search
            offs = Assignment(search.dst, search.decomposition.coords()).offsets(search.mesh)[
                mpt_device(mesh)]
            want_shape, _ = compute_local_shape_and_global_offset(p.shape, mesh, dst_pl)
            want = g[tuple(slice(int(o), int(o) + s) for o, s in zip(offs, want_shape))]
            rec["equal"] = all(torch.equal(results[w], results["dtensor"]) for w in ways) and \
                torch.equal(results["meshplan"], want)
            if "meshplan" in ways:
                rec["grad_equal"] = _grad_equal(mpt, local, p.shape, mesh, src_pl, dst_pl, cost)
            records.append(rec)
        red = _reductions(reductions)
        gathered = [None] * nprocs
        dist.all_gather_object(gathered, records)
        reds = [None] * nprocs
        dist.all_gather_object(reds, red)
        if rank == 0:
            merged = []
            for k, rec in enumerate(records):
                m = dict(rec)
                m["equal"] = all(r[k]["equal"] for r in gathered)
                if "grad_equal" in rec:
                    m["grad_equal"] = all(r[k]["grad_equal"] for r in gathered)
                for way in ways:
                    m[way] = {"sent_bytes": max(r[k][way]["sent_bytes"] for r in gathered),
                              "peak_bytes": max(r[k][way]["peak_bytes"] for r in gathered),
                              "collectives": rec[way]["collectives"], "first_call_s": max(r[k][way]["first_call_s"] for r in gathered)}
                merged.append(m)
            merged_red = [dict(r, equal=all(x[k]["equal"] for x in reds)) for k, r in enumerate(red)]
            from meshplan.models.core.outputs import write_output

            write_output(out, json.dumps({"redistribution": merged, "reduction": merged_red}), what="result file")
    finally:   # every group ends here, while the interpreter is alive (meshplan.torch.groups)
        from meshplan.torch.groups import release

        meshes.clear()
        release()
        dist.destroy_process_group()


def _grad_equal(mpt, local, shape: tuple, mesh, src_pl, dst_pl, cost: str) -> bool:
    """The gradient through :func:`meshplan.torch.redistribute` equals the one through DTensor's own
    ``redistribute``, and both equal the weights' tile under the source placements (cut by DTensor from a
    replicated copy): the loss is ``Σ y·W`` over this rank's tile, in float64 on integer values (exact)."""
    import torch
    from torch.distributed.tensor import DTensor, Replicate

    grads = []
    stride = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
    for mine in (True, False):
        leaf = local.to(torch.float64).requires_grad_()
        x = DTensor.from_local(leaf, mesh, src_pl, run_check=False, shape=shape, stride=stride)
        y = mpt.redistribute(x, dst_pl, cost=cost) if mine else x.redistribute(mesh, dst_pl)
        w = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape) % 7 - 3
        whole = DTensor.from_local(w, mesh, [Replicate()] * mesh.ndim, run_check=False)
        (y.to_local() * whole.redistribute(mesh, dst_pl).to_local()).sum().backward()
        grads.append(leaf.grad)
    want = whole.redistribute(mesh, src_pl).to_local()
    return torch.equal(grads[0], grads[1]) and torch.equal(grads[0], want)


def _reductions(jobs: list) -> list[dict]:
    """Every program of every schedule ``(system, axes, reduce)`` in ``jobs``, by meshplan.torch.all_reduce on
    integer data, against ``dist.all_reduce`` over the reduction group (one record per program)."""
    import torch
    import torch.distributed as dist

    import meshplan
    from meshplan.torch.groups import process_group
    from meshplan.torch.reduce import all_reduce, reduction_group

    me, out = dist.get_rank(), []
    for system, axes, reduce in jobs:
        study = meshplan.solve_placement(system, axes, reduce)
        for i, pl in enumerate(study.study.placements):
            groups = [process_group(tuple(g)) for g in pl.reduction_groups]   # made by every rank, in order
            for j in range(len(pl.programs)):
                prog = study.program(i, j)
                mine = groups[[tuple(g) for g in pl.reduction_groups].index(reduction_group(prog))]
                for n in (37,):   # padded to whole chunks (the same path as a length k divides)
                    x = (torch.arange(n, dtype=torch.int64) - 11) * (me + 3) + 1000 * me
                    ref = x.clone()
                    dist.all_reduce(ref, group=mine)
                    got = all_reduce(x.clone(), prog)
                    ok = torch.equal(got, ref)
                out.append({"schedule": f"{system} axes {axes} reduce {reduce}", "placement": i, "program": j,
                            "steps": len(prog.steps), "equal": bool(ok)})
    return out


def mpt_device(device_mesh) -> int:
    """This rank's meshplan device number on ``device_mesh``."""
    import torch.distributed as dist

    from meshplan.torch.layout import device_ranks

    return device_ranks(device_mesh).index(dist.get_rank())


def compare(problems, nprocs: int, *, cost: str = "wire", ways: tuple = WAYS, reductions: tuple = (),
            with_reductions: bool = False):
    """Run ``problems`` (all on meshes of ``nprocs`` devices) in one launch of ``nprocs`` gloo processes; and
    every program of the schedules ``reductions`` (``(system, axes, reduce)`` of ``nprocs`` devices) by
    meshplan.torch.all_reduce against ``dist.all_reduce``.  Returns the redistribution records, or with
    ``with_reductions`` the pair (redistribution records, reduction records)."""
    import torch.multiprocessing as mp

    specs = [{"kind": p.kind, "mesh": [list(m) for m in p.mesh], "shape": list(p.shape),
              "src": [list(d) for d in p.src], "dst": [list(d) for d in p.dst]} for p in problems]
    if any(p.devices != nprocs for p in problems):
        raise ValueError("every problem's mesh must have nprocs devices")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        mp.spawn(_worker, args=(nprocs, _free_port(), specs, out, cost, tuple(ways), list(reductions)),
                 nprocs=nprocs)
        with open(out) as f:
            res = json.load(f)
    return (res["redistribution"], res["reduction"]) if with_reductions else res["redistribution"]
