"""The MPI program of the tensor check suite: ``mpiexec -n N python -m meshplan.exec.tensor.rank_main JOB``.

JOB: ``{"suite": "all" | "adjoint" | "layers", "only": [case-name prefix, …] (optional), "seed": 0,
"pack_limit": bytes (optional: the exchange's packing threshold, 0 sends every strided box as an MPI
datatype), "stage_min": bytes or null (optional: the exchange's node-staging threshold, 0 stages every
strided send box up to ``STAGE_MAX`` between ranks of one node, null stages none)}``; rank 0
prints ``{"np": N, "cases": [verdict, …]}`` (see :mod:`meshplan.exec.tensor.suite`).  Without
``stage_min`` or ``pack_limit``, the primitive cases run a second time with every strided send box between ranks of one node
staged (verdicts named ``staged:<case>``): the suite's boxes are below the staging threshold, and a check
on a new cluster should cover the path large boxes take.

Test hook ``"bad_input": {"rank": r, "op": "forward" | "adjoint"}``: rank ``r`` alone hands a halo exchange a
block of the wrong shape, raising inside the primitive while the other ranks are already exchanging — the
job must abort with one error, not hang.

Test hook ``"resources": true``: instead of the suite, check that primitives and layers free their committed
MPI datatypes — on ``close()``, on leaving a ``with`` block and on garbage collection — that a closed
primitive refuses to run, and that a primitive built before the node staging window grew still moves its
boxes correctly afterwards; rank 0 prints ``{"np": N, "resources": {check: bool agreed by every rank}}``."""

from __future__ import annotations

from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.tensor.suite import run_suite
from meshplan.models.tensor.cases import adjoint_cases, layer_cases

__all__ = ["handle"]


def _bad_input(ctx: RankContext, spec: dict) -> None:
    import numpy as np

    from meshplan.exec.tensor.partition import Partition
    from meshplan.exec.tensor.primitives import HaloExchange

    P = Partition((1, 1, ctx.size), comm=ctx.comm, comms=ctx.comms)
    h = HaloExchange(P, (1, 1, 4 * ctx.size), kernel=(1, 1, 5), padding=(0, 0, 2))
    wrong = ctx.rank == int(spec["rank"])
    x = np.zeros((1, 1, 5 if wrong and spec.get("op") == "forward" else 4))
    y = h.forward(x)
    h.adjoint(np.zeros(y.shape[:2] + (y.shape[2] + 1,)) if wrong else y)


def _resources(ctx: RankContext) -> dict:
    import gc

    import numpy as np
    from mpi4py import MPI

    from meshplan.exec.tensor import exchange
    from meshplan.exec.tensor.layers import Conv1d
    from meshplan.exec.tensor.partition import Partition
    from meshplan.exec.tensor.primitives import Repartition
    from meshplan.models.core.errors import ModelError

    N = ctx.size
    part = lambda shape: Partition(shape, comm=ctx.comm, comms=ctx.comms)
    # a transpose repartition: strided send boxes forward, strided receive boxes in the adjoint
    make = lambda: Repartition(part((N, 1)), part((1, N)), (2 * N, 2 * N))
    null = lambda ts: all(t == MPI.DATATYPE_NULL for t in ts)
    live = lambda ts: len(ts) > 0 and not null(ts)
    saved, exchange.PACK_LIMIT = exchange.PACK_LIMIT, 0        # every strided box as a datatype
    try:
        checks = {}
        r = make()
        ts = r.datatypes
        x = np.arange(4.0 * N).reshape(2, 2 * N) + ctx.rank
        y = r.forward(x)
        checks["types_while_open"] = live(ts) and np.array_equal(r.adjoint(y), x)
        r.close()
        r.close()                                              # idempotent
        checks["close_frees"] = null(ts) and r.datatypes == ()
        try:
            r.forward(x)
            checks["closed_refuses"] = False
        except ModelError as err:
            checks["closed_refuses"] = "closed" in str(err)
        with make() as r2:
            ts = r2.datatypes
            ok = live(ts)
        checks["with_frees"] = ok and null(ts)
        r3 = make()
        ts = r3.datatypes
        ok = live(ts)
        del r3
        gc.collect()
        checks["gc_frees"] = ok and null(ts)
        conv = Conv1d(part((1, 1, N)), 2, 1, 5, padding=2)       # two channels: strided halo boxes
        conv.forward(np.ones((1, 2, 3)))
        ts = tuple(t for plan in conv._plans.values() for p in plan if hasattr(p, "datatypes") for t in p.datatypes)
        ok = live(ts) if N > 1 else True
        conv.close()
        checks["layer_close_frees"] = ok and null(ts)
        checks["staging_survives_growth"] = _staging_growth(ctx, part) if N > 1 else True
    finally:
        exchange.PACK_LIMIT = saved
    return {k: ctx.world.allreduce(bool(v), op=MPI.LAND) for k, v in checks.items()}


def _staging_growth(ctx: RankContext, part) -> bool:
    """A transpose repartition staged through the node window, run again after a larger one has grown the
    window (its slot views must be rebuilt), against the same repartition sent through MPI."""
    import numpy as np

    from meshplan.exec.tensor import exchange
    from meshplan.exec.tensor.primitives import Repartition

    N = ctx.size
    with exchange.stage_min(None):
        plain = Repartition(part((N, 1)), part((1, N)), (4 * N, 4 * N))
    with exchange.stage_min(0):
        small = Repartition(part((N, 1)), part((1, N)), (4 * N, 4 * N))
        x = np.arange(16.0 * N).reshape(4, 4 * N) + 100 * ctx.rank
        first = small.forward(x)
        staging = ctx.comms.staging()
        before = staging.generation, staging.capacity
        big = Repartition(part((N, 1)), part((1, N)), (64 * N, 64 * N))
        big.forward(np.ones((64, 64 * N)))
    grew = staging.generation > before[0] and staging.capacity > before[1]
    ok = grew and small._fwd.sync and np.array_equal(first, plain.forward(x)) \
        and np.array_equal(small.forward(x), plain.forward(x)) \
        and np.array_equal(small.adjoint(first), plain.adjoint(first))
    # every slot the small one stores into or copies out of lies in the live window, not the freed one
    live = [(a, a + 2 * staging.capacity) for a in (staging.segment(r).ctypes.data for r in range(N))]
    addr = lambda v: v.__array_interface__["data"][0]
    return ok and all(any(lo <= addr(v) and addr(v) + v.nbytes <= hi for lo, hi in live)
                      for v in small._fwd._views().values())


def handle(ctx: RankContext, job: dict) -> dict:
    if job.get("resources"):
        return {"np": ctx.size, "resources": _resources(ctx)}
    if job.get("bad_input"):
        _bad_input(ctx, job["bad_input"])
    if "pack_limit" in job:
        from meshplan.exec.tensor import exchange
        exchange.PACK_LIMIT = int(job["pack_limit"])
    suite = job.get("suite", "all")
    only = tuple(job.get("only") or ())
    keep = (lambda c: not only or c["name"].startswith(only))
    adj = [c for c in adjoint_cases(ctx.size) if keep(c)] if suite in ("all", "adjoint") else []
    lay = [c for c in layer_cases(ctx.size) if keep(c)] if suite in ("all", "layers") else []
    errors = suite == "all" and not only
    seed = int(job.get("seed", 0))
    if "stage_min" in job:
        from meshplan.exec.tensor import exchange
        with exchange.stage_min(None if job["stage_min"] is None else int(job["stage_min"])):
            return {"np": ctx.size, "cases": run_suite(ctx, adj, lay, seed, errors=errors)}
    cases = run_suite(ctx, adj, lay, seed, errors=errors)
    if adj and "pack_limit" not in job:
        cases += _staged_pass(ctx, adj, seed)
    return {"np": ctx.size, "cases": cases}


def _staged_pass(ctx: RankContext, adj: list[dict], seed: int) -> list[dict]:
    """The primitive cases again with every strided send box between ranks of one node staged (the path
    boxes of 64 KiB–4 MiB take; the suite's own boxes are smaller), as ``staged:<name>``."""
    from meshplan.exec.tensor import exchange

    with exchange.stage_min(0):
        got = run_suite(ctx, adj, [], seed)
    return [{**c, "name": f"staged:{c['name']}"} for c in got]


if __name__ == "__main__":
    rank_main(handle)
