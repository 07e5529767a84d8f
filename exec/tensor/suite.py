"""The rank side of the tensor check suite (DistDL paper, section 3.3): one call runs every case of
:mod:`meshplan.models.tensor.cases` on this rank and agrees on one verdict per case.

* Primitive cases: the dot-product adjoint test, eq. (26), on seeded random blocks in f64 (≤ 1e-13), and
  the bytes each rank handed to MPI in ``forward`` (counted by the runtime's ``CountingComm``) equal to
  the model's transfers exactly.
* Layer cases: the global input scattered from rank 0, forward, backward, gathered and compared with the
  element-wise sequential reference (≤ 1e-12): output, input gradient, weight and bias gradients.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.verify import max_relative_error
from meshplan.exec.tensor import layers as L
from meshplan.exec.tensor.partition import Partition
from meshplan.exec.tensor.primitives import (AllGather, AllSumReduce, Broadcast, HaloExchange, ReduceScatter,
                                             Repartition, SumReduce)
from meshplan.models.tensor import reference as R

__all__ = ["run_suite", "ADJOINT_TOL", "LAYER_TOL"]

ADJOINT_TOL = 1e-13
LAYER_TOL = 1e-12


def _part(ctx, spec) -> Partition:
    return Partition(spec["shape"], spec["ranks"], comm=ctx.comm, comms=ctx.comms)


def _build(ctx, case):
    kind = case["kind"]
    if kind == "repartition":
        return Repartition(_part(ctx, case["px"]), _part(ctx, case["py"]), case["shape"])
    if kind == "broadcast":
        return Broadcast(_part(ctx, case["px"]), _part(ctx, case["py"]), case["shape"])
    if kind == "sumreduce":
        return SumReduce(_part(ctx, case["px"]), _part(ctx, case["py"]), case["shape"])
    if kind == "allgather":
        return AllGather(_part(ctx, case["p"]), case["axes"], case["shape"])
    if kind == "reducescatter":
        return ReduceScatter(_part(ctx, case["p"]), case["axes"], case["shape"])
    if kind == "halo":
        return HaloExchange(_part(ctx, case["p"]), case["shape"], case["kernel"], case["stride"], case["padding"],
                            case["dilation"])
    if kind == "allsumreduce":
        return AllSumReduce(_part(ctx, case["p"]), case["axes"])
    raise ValueError(f"unknown case kind {kind!r}")


def _adjoint_case(ctx, case, seed: int) -> dict:
    prim = _build(ctx, case)
    rng = np.random.default_rng([seed, ctx.rank])
    if isinstance(prim, AllSumReduce):
        in_shape = out_shape = tuple(case["block"]) if prim.P.active else None
    else:
        in_shape, out_shape = prim.in_shape, prim.out_shape
    x = None if in_shape is None else rng.standard_normal(in_shape)
    y = None if out_shape is None else rng.standard_normal(out_shape)
    before, before_shared = ctx.counter.sent, ctx.counter.shared
    fx = prim.forward(x)
    sent = ctx.counter.sent - before
    shared = ctx.counter.shared - before_shared
    fty = prim.adjoint(y)
    in_place = _broadcast_in_place(ctx, prim, x, fx)
    if isinstance(prim, AllSumReduce):
        want = prim.bytes_sent(0 if x is None else x.nbytes).get(ctx.rank, 0)
    else:
        want = prim.bytes_sent().get(ctx.rank, 0)
    dot = lambda a, b: 0.0 if a is None else float(np.vdot(a, b))
    local = np.array([dot(fx, y), dot(x, fty), dot(fx, fx), dot(y, y), dot(x, x), dot(fty, fty)])
    tot = ctx.world.allreduce(local, op=MPI.SUM)
    denom = max(np.sqrt(tot[2] * tot[3]), np.sqrt(tot[4] * tot[5]))
    rel = abs(tot[0] - tot[1]) / denom if denom > 0 else abs(tot[0] - tot[1])
    bytes_ok = ctx.world.allreduce(int(sent + shared == want), op=MPI.MIN) == 1
    sent_all = ctx.world.gather(int(sent), root=0)
    shared_all = ctx.world.gather(int(shared), root=0)
    return {"name": case["name"], "kind": case["kind"], "ok": bool(rel <= ADJOINT_TOL and bytes_ok and in_place),
            "rel_error": float(rel), "bytes_exact": bytes_ok, "bytes_sent": sent_all, "bytes_shared": shared_all,
            "in_place_equal": in_place}


def _broadcast_in_place(ctx, prim, x, fx) -> bool:
    """A broadcast run again with ``out=x`` on the ranks whose output block is their own input block gives
    the same output on every rank (True for the other primitives)."""
    if not isinstance(prim, Broadcast):
        return True
    xi = None if x is None else x.copy()
    got = prim.forward(xi, out=xi if prim.in_place_ok else None)
    same = (got is None and fx is None) or (got is not None and fx is not None and np.array_equal(got, fx)
                                             and (not prim.in_place_ok or got is xi))
    return ctx.world.allreduce(int(same), op=MPI.MIN) == 1


def _errs(pairs) -> dict:
    return {k: (max_relative_error(g, w) if g is not None else 0.0) for k, (g, w) in pairs.items()}


def _layer_case(ctx, case, seed: int) -> dict:
    kind = case["kind"]
    rng = np.random.default_rng(seed)       # the same global data on every rank; rank 0 scatters it
    root = ctx.rank == 0
    if kind == "linear":
        px, py, pw = (_part(ctx, case[k]) for k in ("px", "py", "pw"))
        layer = L.Linear(px, py, pw, case["in_features"], case["out_features"], seed=seed)
        x = rng.standard_normal((case["batch"], case["in_features"]))
        dy = rng.standard_normal((case["batch"], case["out_features"]))
        pin, pout = px, py
    else:
        P = _part(ctx, {"shape": case["p"], "ranks": list(range(int(np.prod(case["p"]))))})
        n = len(case["x"]) - 2
        x = rng.standard_normal(case["x"])
        if kind == "conv":
            cls = (L.Conv1d, L.Conv2d, L.Conv3d)[n - 1]
            layer = cls(P, case["x"][1], case["out_channels"], case["kernel"], case["stride"], case["padding"],
                        case["dilation"], bias=case.get("bias", True), seed=seed)
        else:
            cls = {"maxpool": (L.MaxPool1d, L.MaxPool2d, L.MaxPool3d),
                   "avgpool": (L.AvgPool1d, L.AvgPool2d, L.AvgPool3d)}[kind][n - 1]
            layer = cls(P, case["kernel"], case["stride"], case["padding"], case["dilation"])
        pin = pout = P
        dy = None
    y_loc = layer.forward(pin.scatter(x if root else None))
    y = pout.gather(y_loc)
    if dy is None:
        dy = rng.standard_normal(ctx.world.bcast(None if y is None else y.shape, root=0))
    dx = pin.gather(layer.backward(pout.scatter(dy if root else None)))
    out = {"name": case["name"], "kind": kind}
    if root:
        w = getattr(layer, "weight", None)
        b = getattr(layer, "bias", None)
        if kind == "linear":
            yr = R.linear_ref(x, w, b)
            dxr, dwr, dbr = R.linear_ref_grad(x, w, dy)
        elif kind == "conv":
            yr = R.conv_ref(x, w, b, case["stride"], case["padding"], case["dilation"])
            dxr, dwr, dbr = R.conv_ref_grad(x, w, dy, case["stride"], case["padding"], case["dilation"])
        else:
            mode = kind[:3]
            yr = R.pool_ref(x, case["kernel"], case["stride"], case["padding"], case["dilation"], mode)
            dxr = R.pool_ref_grad(x, dy, case["kernel"], case["stride"], case["padding"], case["dilation"], mode)
        errs = {"y": max_relative_error(y, yr), "dx": max_relative_error(dx, dxr)}
        if w is not None:
            errs["dw"] = max_relative_error(layer.weight_grad, dwr)
            if b is not None:
                errs["db"] = max_relative_error(layer.bias_grad, dbr)
        out["errors"] = errs
    grads_same = True
    if getattr(layer, "weight_grad", None) is not None:
        ref = ctx.world.bcast(layer.weight_grad if root else None, root=0)
        grads_same = bool(np.array_equal(ref, layer.weight_grad))
    grads_same = ctx.world.allreduce(int(grads_same), op=MPI.MIN) == 1
    if root:
        out["grads_on_every_rank"] = grads_same
        out["ok"] = bool(grads_same and all(e <= LAYER_TOL for e in out["errors"].values()))
    return out


def _error_cases(ctx) -> list[dict]:
    """Bad input raises a ModelError naming the argument on every rank alike (so no rank is left waiting)."""
    from meshplan.models.core.errors import ModelError

    N = ctx.size
    mk = lambda shape, ranks=None: Partition(shape, ranks, comm=ctx.comm, comms=ctx.comms)
    P = mk((1, 1, N))
    x = P.scatter(np.ones((1, 2, 3 * N)) if ctx.rank == 0 else None)
    bx = np.ones(2)
    checks = [
        ("partition-too-big", lambda: mk((1, 1, N + 1)), "needs"),
        ("ranks-outside-comm", lambda: mk((2,), (0, N)), "ranks="),
        ("tensor-smaller-than-window", lambda: L.Conv1d(P, 2, 1, 3 * N + 2).forward(x), "smaller than the window"),
        ("negative-padding", lambda: HaloExchange(P, (1, 2, 3 * N), kernel=3, padding=-1), "padding"),
        ("zero-kernel", lambda: L.MaxPool1d(P, 0), "kernel_size"),
        ("pool-padding-over-half", lambda: L.AvgPool1d(P, 2, padding=2), "padding"),
        ("partition-order-mismatch", lambda: Repartition(mk((N,)), mk((1, N)), (8,)), "numbers of dimensions"),
        ("broadcast-rule", lambda: Broadcast(mk((2, 1), (0, 1)), mk((1, 2), (0, 1)), (4, 4)), "P_x"),
        ("channels-mismatch", lambda: L.Conv1d(P, 3, 1, 1).forward(x), "in_channels"),
        ("scatter-ndim", lambda: P.scatter(np.ones((4, 4)) if ctx.rank == 0 else np.ones((1, 1, 1))), "dimensions"),
        ("linear-partitions", lambda: L.Linear(mk((1, 1)), mk((1, 1)), mk((2, 1), (0, 1)), 3, 4), "Linear needs"),
        ("broadcast-out-is-x", lambda: _bcast_rotated(mk, N).forward(bx, out=bx), "out"),
        ("block-shape", lambda: HaloExchange(P, (1, 2, 3 * N), kernel=(1, 1, 3)).forward(np.ones((1, 2, 1))),
         "has shape"),
    ]
    if N < 2:  # these need partitions of two ranks
        checks = [c for c in checks if c[0] not in ("broadcast-rule", "linear-partitions", "broadcast-out-is-x")]
    out = []
    for name, fn, needle in checks:
        try:
            fn()
            msg, ok = "no error raised", False
        except ModelError as err:
            msg, ok = str(err), needle in str(err)
        ok = ctx.world.allreduce(int(ok), op=MPI.MIN) == 1
        out.append({"name": f"error:{name}", "kind": "error", "ok": bool(ok), "message": msg})
    return out


def _bcast_rotated(mk, N: int) -> Broadcast:
    """A broadcast of (2N,) from the blocks of ranks 0..N-1 to ranks 1..N-1, 0: no rank keeps its own block."""
    return Broadcast(mk((N,)), mk((N,), tuple(range(1, N)) + (0,)), (2 * N,))


def run_suite(ctx, adjoint: list[dict], layer: list[dict], seed: int = 0, errors: bool = False) -> list[dict]:
    """Run every case on this rank (collective); rank 0's list holds the verdicts."""
    results = _error_cases(ctx) if errors else []
    for n, case in enumerate(adjoint):
        results.append(_adjoint_case(ctx, case, seed * 100003 + n))
    for n, case in enumerate(layer):
        results.append(_layer_case(ctx, case, seed * 100003 + 5000 + n))
        ctx.comms.trim()
    return results
