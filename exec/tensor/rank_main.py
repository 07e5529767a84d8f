"""The MPI program of the tensor check suite: ``mpiexec -n N python -m meshplan.exec.tensor.rank_main JOB``.

JOB: ``{"suite": "all" | "adjoint" | "layers", "only": [case-name prefix, …] (optional), "seed": 0,
"pack_limit": bytes (optional: the exchange's packing threshold, 0 sends every strided box as an MPI
datatype)}``; rank 0
prints ``{"np": N, "cases": [verdict, …]}`` (see :mod:`meshplan.exec.tensor.suite`).

Test hook ``"bad_input": {"rank": r, "op": "forward" | "adjoint"}``: rank ``r`` alone hands a halo exchange a
block of the wrong shape, raising inside the primitive while the other ranks are already exchanging — the
job must abort with one error, not hang."""

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


def handle(ctx: RankContext, job: dict) -> dict:
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
    return {"np": ctx.size, "cases": run_suite(ctx, adj, lay, int(job.get("seed", 0)), errors=errors)}


if __name__ == "__main__":
    rank_main(handle)
