"""MPI program of ``bench/tensor.py``: every primitive on payloads of ``sizes`` bytes per rank, its bytes
counted by the runtime's ``CountingComm`` against the model (the primitive's lowering), and its time next to
the plain mpi4py collective moving the same payload (timed interleaved in one launch, slowest rank,
median).  The primitive is timed writing into a preallocated output (``out=``, as the baseline reuses its
receive buffer), interleaved with the baseline run twice per round (the ratio of the baseline's two medians,
an A/A control, shows how far noise alone moves a ratio); and, in a second interleaving with the baseline,
allocating a fresh output per call.

JOB ``{"sizes": [1048576, …], "repeats": 7}``; rank 0 prints ``{"np", "rows": [...]}``.  ``repeats`` is the
count at 16 MiB per rank; smaller payloads run more rounds (×√(16 MiB / size): 4× at 1 MiB, where a call
takes ~1 ms and a median of 25 moved by up to 15% between the baseline's two runs).

Pairs: AllSumReduce vs ``Allreduce``; Repartition ``N×1 → 1×N`` (a transpose) vs ``Alltoallv`` of a
pre-packed buffer (no rearranging at all) and vs numpy's transpose into that buffer + ``Alltoallv``, and the
same repartition built with node staging off (``exchange.stage_min(None)``: the packing path) vs the
pre-packed ``Alltoallv``; Broadcast ``1 → N`` with the root in place (``out=x``) vs ``Bcast``, and with the
root keeping ``x`` (copying it into its output) vs ``Bcast`` + the root's copy, and a control row: the
same ``Bcast`` after 5 µs of Python vs at once; SumReduce ``N → 1`` vs ``Reduce``; AllGather vs
``Allgather``; ReduceScatter vs ``Reduce_scatter_block``; HaloExchange (kernel 5, feature dimension over N
ranks) vs the same exchange written by hand (copy into the extended array, ``Isend``/``Irecv`` of the edges);
AllGather of unequal blocks (rank 0 holds one more element: point-to-point transfers) vs ``Allgatherv``, and
for reference vs ``Allgather`` of equal blocks of the same payload (a different operation: every block lands
at its input's offset mod 4 KiB, where the unequal one's land 8 bytes further — the kernel's copy is slower
then, docs/tensor.md).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_interleaved
from meshplan.exec.tensor import exchange
from meshplan.exec.tensor.partition import Partition
from meshplan.exec.tensor.primitives import (AllGather, AllSumReduce, Broadcast, HaloExchange, ReduceScatter,
                                             Repartition, SumReduce)

__all__ = ["handle", "combine_launches", "rounds_for"]


def _row(ctx, name, prim, x, baseline, repeats, model_bytes, baseline_name="", out=None):
    """``out``: the baseline's receive buffer where it has the primitive's output shape — then both write
    into the same memory (two different arrays differ in speed by their placement alone, by up to ~5%)."""
    before, before_shared = ctx.counter.sent, ctx.counter.shared
    buf = prim.forward(x, out=out)            # this rank's output block (None if it has none), reused below
    sent = ctx.counter.sent - before
    shared = ctx.counter.shared - before_shared
    exact = ctx.world.allreduce(int(sent + shared == model_bytes), op=MPI.MIN) == 1
    total = ctx.world.allreduce(sent)
    total_shared = ctx.world.allreduce(shared)
    fns = {"meshplan": lambda: prim.forward(x, out=buf)}
    if baseline is not None:
        fns["mpi4py"] = baseline
        fns["mpi4py_again"] = baseline        # an A/A control: the noise floor of the ratio
    med = {k: v.median_s for k, v in time_interleaved(ctx.world, fns, repeats=repeats, warmup=1).items()}
    # a fresh output per call, timed apart: its allocations and page faults would otherwise slow whichever
    # call follows it in the interleaving (the baseline's A/A control read 0.5–0.85 that way)
    fresh = {"meshplan_new": lambda: prim.forward(x)}
    if baseline is not None:
        fresh["mpi4py"] = baseline
    t_new = {k: v.median_s for k, v in time_interleaved(ctx.world, fresh, repeats=repeats, warmup=1).items()}
    med["meshplan_new"] = t_new["meshplan_new"]
    base = med.get("mpi4py")
    rel = lambda k: (med[k] / base) if base else None
    return {"primitive": name, "baseline": baseline_name, "lowering": getattr(getattr(prim, "lowering", None), "kind", "allreduce"),
            "bytes_sent_total": int(total), "bytes_shared_total": int(total_shared),
            "bytes_equal_model": bool(exact),
            "time_s": med["meshplan"], "time_new_array_s": med["meshplan_new"], "baseline_s": base,
            "ratio": rel("meshplan"), "ratio_new_array": (t_new["meshplan_new"] / t_new["mpi4py"]) if base else None,
            "ratio_baseline_again": rel("mpi4py_again") if base else None}


def _spin(seconds: float) -> None:
    """Busy-wait (Python, as a primitive's own per-call steps are)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


def _control_row(ctx, buf, repeats: int, delay_s: float = 5e-6) -> dict:
    """The sensitivity control: a plain ``Bcast`` after ``delay_s`` of Python on every rank vs the same
    ``Bcast`` at once — how much a primitive's few µs of per-call Python can cost in a collective when ranks
    share cores (docs/tensor.md, "Benchmark")."""
    bcast = lambda: ctx.world.Bcast(buf, 0)
    fns = {"delayed": lambda: (_spin(delay_s), bcast()), "mpi4py": bcast, "mpi4py_again": bcast}
    med = {k: v.median_s for k, v in time_interleaved(ctx.world, fns, repeats=repeats, warmup=1).items()}
    return {"primitive": f"control: {delay_s * 1e6:.0f} µs of Python, then Bcast", "baseline": "Bcast",
            "lowering": "", "bytes_sent_total": 0, "bytes_shared_total": 0, "bytes_equal_model": None,
            "time_s": med["delayed"], "time_new_array_s": None, "baseline_s": med["mpi4py"],
            "ratio": med["delayed"] / med["mpi4py"], "ratio_new_array": None,
            "ratio_baseline_again": med["mpi4py_again"] / med["mpi4py"]}


def rounds_for(size: int, repeats: int) -> int:
    """Timed rounds for a payload of ``size`` bytes per rank: ``repeats`` at 16 MiB, ×√(16 MiB / size) below."""
    return max(1, round(repeats * max(1.0, ((16 << 20) / max(size, 1)) ** 0.5)))


def combine_launches(launches: list[list[dict]]) -> list[dict]:
    """The rows of several launches of the rank program (the same rows in the same order in each) as one:
    bytes as counted (they must not differ between launches), ``bytes_equal_model`` only if it held in every
    launch, times and ratios the median over the launches, and ``ratio_min`` / ``ratio_max`` their range."""
    if not launches or any(len(rows) != len(launches[0]) for rows in launches):
        raise ValueError("every launch must report the same rows")
    median = lambda vals: None if any(v is None for v in vals) else float(statistics.median(vals))
    out = []
    for same in zip(*launches):
        first = same[0]
        for key in ("primitive", "baseline", "bytes_per_rank", "bytes_sent_total", "bytes_shared_total"):
            if any(r[key] != first[key] for r in same):
                raise ValueError(f"launches disagree on {key!r} of row {first['primitive']!r}: "
                                 f"{sorted({str(r[key]) for r in same})}")
        exact = [r["bytes_equal_model"] for r in same]
        ratios = [r["ratio"] for r in same]
        out.append({**first,
                    "bytes_equal_model": None if exact[0] is None else all(exact),
                    **{k: median([r[k] for r in same]) for k in ("time_s", "time_new_array_s", "baseline_s", "ratio",
                                                                  "ratio_new_array", "ratio_baseline_again")},
                    "ratio_min": None if ratios[0] is None else min(ratios),
                    "ratio_max": None if ratios[0] is None else max(ratios)})
    return out


def _halo_by_hand(comm, x, ext) -> None:
    """The plain mpi4py halo of width 2 along the last dimension (neighbours rank ± 1)."""
    me, size = comm.Get_rank(), comm.Get_size()
    ext[..., 2:-2] = x
    reqs = []
    if me > 0:
        reqs += [comm.Irecv(ext[0, 0, :2], me - 1), comm.Isend(x[0, 0, :2], me - 1)]
    if me < size - 1:
        reqs += [comm.Irecv(ext[0, 0, -2:], me + 1), comm.Isend(x[0, 0, -2:], me + 1)]
    MPI.Request.Waitall(reqs)


def handle(ctx: RankContext, job: dict) -> dict:
    N, me = ctx.size, ctx.rank
    repeats = int(job.get("repeats", 7))
    rows = []
    allr = list(range(N))
    base_repeats = repeats
    sizes = job.get("sizes", [1 << 20])
    for done, size in enumerate(sizes):
        ctx.progress(done, len(sizes), f"{size >> 10} KiB per rank")
        repeats = rounds_for(size, base_repeats)
        n = max(N, size // 8)                     # float64 elements per rank
        rng = np.random.default_rng(me)
        mk = lambda shape, ranks: Partition(shape, ranks, comm=ctx.comm, comms=ctx.comms)
        # all-sum-reduce of one block per rank
        P = mk((1, N), allr)
        x = rng.standard_normal((n, 1))
        asr = AllSumReduce(P, [1])
        out = np.empty_like(x)
        r = _row(ctx, "AllSumReduce", asr, x, lambda: ctx.world.Allreduce(x, out, MPI.SUM), repeats,
                 x.nbytes if N > 1 else 0, "Allreduce", out=out)
        rows.append({"bytes_per_rank": x.nbytes, **r})
        # repartition N×1 -> 1×N of an (m, m) matrix: a transpose, vs Alltoallv of a pre-packed buffer
        m = int(np.sqrt(n * N)) // N * N
        g = (m, m)
        rep = Repartition(mk((N, 1), allr), mk((1, N), allr), g)
        xr = rng.standard_normal(rep.in_shape)
        per = (m // N) * (m // N)
        sendb = np.ascontiguousarray(xr.reshape(m // N, N, m // N).transpose(1, 0, 2))
        recvb = np.empty_like(sendb)
        counts = [per] * N
        displs = [i * per for i in range(N)]
        model = rep.bytes_sent().get(me, 0)
        a2av = lambda: ctx.world.Alltoallv([sendb, counts, displs, MPI.DOUBLE], [recvb, counts, displs, MPI.DOUBLE])
        into = recvb.reshape(rep.out_shape)   # the baseline's receive buffer, as the primitive's output block
        r = _row(ctx, "Repartition", rep, xr, a2av, repeats, model, "Alltoallv (pre-packed)", out=into)
        rows.append({"bytes_per_rank": xr.nbytes, **r})

        def pack_a2av():                      # what a plain mpi4py program does: transpose, then Alltoallv
            np.copyto(sendb, xr.reshape(m // N, N, m // N).transpose(1, 0, 2))
            a2av()
        r = _row(ctx, "Repartition", rep, xr, pack_a2av, repeats, model, "numpy pack + Alltoallv", out=into)
        rows.append({"bytes_per_rank": xr.nbytes, **r})
        # the same repartition with node staging off (each strided box packed, then a CMA read)
        with exchange.stage_min(None):
            unstaged = Repartition(mk((N, 1), allr), mk((1, N), allr), g)
        r = _row(ctx, "Repartition, staging off", unstaged, xr, a2av, repeats, model, "Alltoallv (pre-packed)",
                 out=into)
        rows.append({"bytes_per_rank": xr.nbytes, **r})
        unstaged.close()
        # broadcast 1 -> N and sum-reduce N -> 1 of an n-vector
        # (the root broadcasting in place, out=x, as Bcast does; and keeping x, copying it into its output)
        b = Broadcast(mk((1,), [0]), mk((N,), allr), (n,))
        buf = rng.standard_normal(n)
        rows.append({"bytes_per_rank": n * 8, **_row(ctx, "Broadcast (in place on the root)", b,
                                                     buf if me == 0 else None, lambda: ctx.world.Bcast(buf, 0),
                                                     repeats, b.bytes_sent().get(me, 0), "Bcast", out=buf)})
        rows.append({"bytes_per_rank": n * 8, **_control_row(ctx, buf, repeats)})
        xb = rng.standard_normal(n) if me == 0 else None

        def bcast_copy():                     # the root sends from x, then copies x into its output
            ctx.world.Bcast(xb if me == 0 else buf, 0)
            if me == 0:
                np.copyto(buf, xb)
        rows.append({"bytes_per_rank": n * 8, **_row(ctx, "Broadcast (root keeps x)", b, xb, bcast_copy, repeats,
                                                     b.bytes_sent().get(me, 0), "Bcast + root copy", out=buf)})
        s = SumReduce(mk((N,), allr), mk((1,), [0]), (n,))
        xs = rng.standard_normal(n)
        red = np.empty(n)
        rows.append({"bytes_per_rank": n * 8, **_row(ctx, "SumReduce", s, xs,
                                                     lambda: ctx.world.Reduce(xs, red, MPI.SUM, 0), repeats,
                                                     s.bytes_sent().get(me, 0), "Reduce",
                                                     out=red if me == 0 else None)})
        # all-gather along the partitioned dimension
        ag = AllGather(mk((N,), allr), [0], (n * N,))
        xa = rng.standard_normal(ag.in_shape)
        gat = np.empty(n * N)
        rows.append({"bytes_per_rank": xa.nbytes, **_row(ctx, "AllGather", ag, xa,
                                                         lambda: ctx.world.Allgather(xa, gat), repeats,
                                                         ag.bytes_sent().get(me, 0), "Allgather", out=gat)})
        # all-gather of unequal blocks (n + 1 elements on rank 0): point-to-point transfers, vs the plain
        # Allgatherv (the same operation), and vs Allgather of equal n-blocks (a reference, not the same
        # operation: its blocks land at the offsets they have in the input, mod 4 KiB; docs/tensor.md)
        agu = AllGather(mk((N,), allr), [0], (n * N + 1,))
        xu = rng.standard_normal(agu.in_shape)
        gu = np.empty(n * N + 1)
        counts_u = [n + 1] + [n] * (N - 1)
        displs_u = [0] + [n + 1 + i * n for i in range(N - 1)]
        rows.append({"bytes_per_rank": n * 8, **_row(
            ctx, "AllGather (unequal)", agu, xu,
            lambda: ctx.world.Allgatherv(xu, [gu, counts_u, displs_u, MPI.DOUBLE]), repeats,
            agu.bytes_sent().get(me, 0), "Allgatherv", out=gu)})
        rows.append({"bytes_per_rank": n * 8, **_row(ctx, "AllGather (unequal)", agu, xu,
                                                     lambda: ctx.world.Allgather(xa, gat), repeats,
                                                     agu.bytes_sent().get(me, 0),
                                                     "reference: Allgather of equal blocks")})
        # reduce-scatter along the partitioned dimension (the adjoint of the all-gather)
        rsc = ReduceScatter(mk((N,), allr), [0], (n * N,))
        xg = rng.standard_normal(rsc.in_shape)
        part = np.empty(n)
        rows.append({"bytes_per_rank": xg.nbytes, **_row(ctx, "ReduceScatter", rsc, xg,
                                                         lambda: ctx.world.Reduce_scatter_block(xg, part, MPI.SUM),
                                                         repeats, rsc.bytes_sent().get(me, 0),
                                                         "Reduce_scatter_block", out=part)})
        # halo exchange of a kernel-5 window over the feature dimension, vs the same by hand: copy the
        # block into the extended array and Isend/Irecv the two-element edges with the neighbours
        h = HaloExchange(mk((1, 1, N), allr), (1, 1, n * N), kernel=(1, 1, 5), padding=(0, 0, 2))
        xh = rng.standard_normal(h.in_shape)
        ext = np.zeros(h.out_shape)
        rows.append({"bytes_per_rank": xh.nbytes, **_row(ctx, "HaloExchange", h, xh,
                                                         lambda: _halo_by_hand(ctx.world, xh, ext), repeats,
                                                         h.bytes_sent().get(me, 0), "by hand: copy + Isend/Irecv",
                                                         out=ext)})
        ctx.comms.trim(0)
    ctx.progress(len(sizes), len(sizes))
    return {"np": N, "rows": rows, "repeats": {str(size): rounds_for(size, base_repeats) for size in sizes}}


if __name__ == "__main__":
    rank_main(handle)
