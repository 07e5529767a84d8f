"""MPI program of ``bench/tensor.py --repartition-study``: ways to run the transpose repartition
``N×1 → 1×N`` of an (m, m) float64 matrix, side by side with a pre-packed ``Alltoallv`` in one launch
(docs/tensor.md, "The transpose repartition: from packing to node staging").

JOB ``{"size": 4194304, "repeats": 25}`` (bytes per rank); rank 0 prints ``{"np", "m", "ms": {variant: median
of the slowest rank}, "ratio": {variant: ms / ms of the Alltoallv}}``.  Every variant is checked against the
primitive's output before timing.  Variants:

* ``alltoallv``, ``alltoallv_again`` — the baseline (pre-packed boxes, no rearranging) and its A/A control;
* ``primitive`` — ``Repartition.forward(x, out=)`` (boxes through the node's staging window: each rank
  stores its boxes into the receivers' slots, a node barrier, each copies its slots out);
* ``primitive_packed`` — the same primitive built with node staging off (``exchange.stage_min(None)``): each
  box packed just before its ``Isend``;
* ``exchange_prepacked`` — the ``Isend``/``Irecv`` pattern of ``primitive_packed`` from boxes packed
  beforehand (no packing);
* ``pack_only`` — the packing of the three remote boxes alone, no communication;
* ``subarray_types`` / ``alltoallw`` — every box as a subarray datatype, through ``Isend`` / ``Alltoallw``;
* ``one_buffer_pack`` — one numpy copy of every box (own included) into one buffer, then ``Isend`` s;
* ``chunked4`` — each box in 4 row chunks, packing chunk k+1 while chunk k moves;
* ``first_peer_type`` — the first peer's box as a datatype (its reads start at once), the others packed;
* ``shared_window`` — outputs in an MPI shared-memory window, every rank writes its boxes straight into the
  peers' outputs (one copy, no kernel), a barrier before and after (one node only);
* ``staging_put`` — ``primitive``'s two copies with ``MPI_Put`` of the strided box (a subarray datatype)
  into the receiver's slot between two ``Win_fence`` s instead of numpy stores between barriers.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_interleaved
from meshplan.exec.tensor.exchange import stage_min
from meshplan.exec.tensor.partition import Partition
from meshplan.exec.tensor.primitives import Repartition

__all__ = ["handle"]

_TAG = 0x5D


def handle(ctx: RankContext, job: dict) -> dict:
    comm, N, me = ctx.world, ctx.size, ctx.rank
    n = int(job.get("size", 1 << 22)) // 8
    m = int(np.sqrt(n * N)) // N * N
    b = m // N
    mk = lambda shape: Partition(shape, list(range(N)), comm=ctx.comm, comms=ctx.comms)
    rep = Repartition(mk((N, 1)), mk((1, N)), (m, m))
    with stage_min(None):
        packed_rep = Repartition(mk((N, 1)), mk((1, N)), (m, m))      # the path before node staging
    x = np.random.default_rng(me).standard_normal((b, m))
    y = np.empty((m, b))
    ref = rep.forward(x)
    D = MPI.DOUBLE
    per = b * b
    sendb = np.ascontiguousarray(x.reshape(b, N, b).transpose(1, 0, 2))
    recvb = np.empty_like(sendb)
    counts, displs = [per] * N, [i * per for i in range(N)]
    peers = [(me + k) % N for k in range(1, N)]
    packs = {j: np.empty((b, b)) for j in peers}
    box = lambda j: x[:, j * b:(j + 1) * b]
    rows = lambda i: y[i * b:(i + 1) * b]
    sub = {j: D.Create_subarray([b, m], [b, b], [0, j * b]).Commit() for j in range(N)}
    whole = D.Create_contiguous(per).Commit()
    big = np.empty((N, b, b))
    node = ctx.comms.staging().node              # the runtime's node communicator (the primitive made it)
    shared = node.Get_size() == N
    win = MPI.Win.Allocate_shared(m * b * 8 if shared else 0, 8, comm=node)
    outs = [np.frombuffer(win.Shared_query(r)[0], dtype=np.float64, count=m * b).reshape(m, b)
            for r in range(N)] if shared else []

    def exchange(send):                   # receives posted first, then ``send(j)`` per peer, own box, wait
        reqs = [comm.Irecv(rows(i), i, _TAG) for i in peers[::-1]]
        reqs += [send(j) for j in peers]
        rows(me)[...] = box(me)
        MPI.Request.Waitall(reqs)

    def packed(j):
        np.copyto(packs[j], box(j))
        return comm.Isend(packs[j], j, _TAG)

    def one_buffer():
        np.copyto(big, x.reshape(b, N, b).transpose(1, 0, 2))
        reqs = [comm.Irecv(rows(i), i, _TAG) for i in peers[::-1]]
        reqs += [comm.Isend(big[j], j, _TAG) for j in peers]
        rows(me)[...] = big[me]
        MPI.Request.Waitall(reqs)

    def chunked(k=4):
        cuts = [c * b // k for c in range(k + 1)]
        reqs = [comm.Irecv(rows(i)[lo:hi], i, _TAG + c) for i in peers[::-1]
                for c, (lo, hi) in enumerate(zip(cuts, cuts[1:]))]
        for c, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
            for j in peers:
                np.copyto(packs[j][lo:hi], box(j)[lo:hi])
                reqs.append(comm.Isend(packs[j][lo:hi], j, _TAG + c))
        rows(me)[...] = box(me)
        MPI.Request.Waitall(reqs)

    def shared_window():
        node.Barrier()
        for j in peers:
            np.copyto(outs[j][me * b:(me + 1) * b], box(j))
        outs[me][me * b:(me + 1) * b] = box(me)
        node.Barrier()

    def staging_put():
        win.Fence()
        for j in peers:
            win.Put([x, 1, sub[j]], j, (me * per, per, D))
        rows(me)[...] = box(me)
        win.Fence()
        for i in peers:
            rows(i)[...] = outs[me][i * b:(i + 1) * b]

    a2av = lambda: comm.Alltoallv([sendb, counts, displs, D], [recvb, counts, displs, D])
    fns = {"alltoallv": a2av, "alltoallv_again": a2av,
           "primitive": lambda: rep.forward(x, out=y),
           "primitive_packed": lambda: packed_rep.forward(x, out=y),
           "exchange_prepacked": lambda: exchange(lambda j: comm.Isend(packs[j], j, _TAG)),
           "pack_only": lambda: [np.copyto(packs[j], box(j)) for j in peers],
           "subarray_types": lambda: exchange(lambda j: comm.Isend([x, 1, sub[j]], j, _TAG)),
           "alltoallw": lambda: comm.Alltoallw([x, [1] * N, [0] * N, [sub[j] for j in range(N)]],
                                               [y, [1] * N, [i * per * 8 for i in range(N)], [whole] * N]),
           "one_buffer_pack": one_buffer, "chunked4": chunked,
           "first_peer_type": lambda: exchange(lambda j: comm.Isend([x, 1, sub[j]], j, _TAG) if j == peers[0]
                                               else packed(j))}
    if shared:
        fns["shared_window"] = shared_window
        fns["staging_put"] = staging_put
    for j in peers:                       # valid boxes for the variant that does not pack
        np.copyto(packs[j], box(j))
    wrong = []
    for name, fn in fns.items():
        if name in ("alltoallv", "alltoallv_again", "pack_only"):
            continue
        y.fill(np.nan)
        if shared:
            outs[me].fill(np.nan)
        fn()
        got = outs[me] if name == "shared_window" else y
        if not np.array_equal(got, ref):
            wrong.append(name)
    wrong = sorted(set().union(*comm.allgather(set(wrong))))
    if wrong:
        raise RuntimeError(f"repartition variants disagree with the primitive: {wrong}")
    t = time_interleaved(comm, fns, repeats=int(job.get("repeats", 25)), warmup=2)
    comm.Barrier()
    win.Free()
    for d in list(sub.values()) + [whole]:
        d.Free()
    rep.close()
    packed_rep.close()
    base = t["alltoallv"].median_s
    return {"np": N, "m": m, "box_bytes": per * 8,
            "ms": {k: v.median_s * 1e3 for k, v in t.items()},
            "ratio": {k: v.median_s / base for k, v in t.items()}}


if __name__ == "__main__":
    rank_main(handle)
