"""The rows of ``bench/library.py`` for the reduction, redistribution and halo executors: each executor call
next to the plain mpi4py program that makes the same MPI calls on the same data (bench/library_rank.py says
how a row is measured; the matmul and factorization rows are in bench/library_kernels.py).

* reduction (P2 §3.2): the fastest synthesized program on ``node=2,gpu=p/2`` — ReduceScatter inside each node,
  AllReduce across the nodes, AllGather inside each node — vs ``Reduce_scatter_block`` / ``Allreduce``
  (in place) / ``Allgather`` on two ``Comm.Split`` communicators; and the single-AllReduce program vs
  ``COMM_WORLD.Allreduce``; 1 and 16 MiB per rank, integer-valued floats (exact sums).  A control row times
  ``COMM_WORLD.Allreduce`` after 2 µs of Python against itself: what a little per-call Python costs when
  four ranks share two cores.
* redistribution (Rink et al. §5–7): a row-to-column transpose on ``x=p`` (one ``Alltoall``, the send pieces
  packed by a numpy transpose), a reshard on ``x=2,y=p/2`` that is one ``Alltoall`` inside each y-group (a
  Split communicator), and a pure tile permutation (one ``Sendrecv``); 4 MiB per rank.  Each step's arrays
  are allocated per call on both sides (the memory bound: no step keeps another step's buffers); the
  last step writes into ``out=``.
* halo (DistDL §3.2.5): a (8, 16, L) tensor split along L over the ranks, kernel 5, padding 2, 4 MiB per
  rank: forward (copy the owned block into the extended one, pack the two edges and ``Isend`` them,
  ``Irecv`` the neighbours' edges through a subarray datatype) and adjoint (send the halo back, add it
  into its owner); a reference row does the adjoint by hand as the primitive does it locally (the owned
  block zeroed, then the local box added, instead of copied).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import meshplan as mp
from library_kernels import factorization, matmul
from library_rank import Side, measure, mismatch, rounds as _rounds, spin

__all__ = ["CASES", "reduction", "redistribution", "halo"]


def _program(plan, steps):
    """The index and ReductionPlan of the first program of placement 0 with exactly ``steps``
    (``[(collective name, groups), …]``)."""
    for j in range(len(plan.study.placements[0].programs)):
        rp = plan.program(0, j)
        if [(str(s.collective), tuple(map(tuple, s.groups))) for s in rp.steps] == list(steps):
            return j, rp
    raise LookupError(f"no synthesized program {steps}")


def _intermediate(red, x: np.ndarray, out: np.ndarray, size: int) -> np.ndarray:
    """The executor's own buffer between its first and second step, flat (after one call has made it): the
    hand-written side reduces into the same memory.  Two arrays of one size differ in speed by where they lie:
    the same hand-written calls ran 5–8% apart at 16 MiB per rank on their own buffer and on the executor's,
    either way round from one launch to the next — a difference of placement, not of the code."""
    red.allreduce(x, out=out)
    (bufs,) = [b for b in red._buffers.values() if b.dtype == x.dtype and b.E * red.k == x.size]
    part = bufs.arrays[("out", 0)].reshape(-1)
    if part.size != size:
        raise AssertionError(f"the executor's first step leaves {part.size} elements, by hand {size}")
    return part


def reduction(ctx, quick: bool, repeats) -> list[dict]:
    world, p, me = ctx.world, ctx.size, ctx.rank
    g = p // 2 if p >= 4 and p % 2 == 0 else p          # ranks per node
    nodes = p // g
    system = f"node={nodes},gpu={g}"
    plan = mp.solve_placement(system, axes=str(p), reduce="0", max_size=3)
    node_groups = tuple(tuple(range(i * g, (i + 1) * g)) for i in range(nodes))
    cross_groups = tuple(tuple(range(j, p, g)) for j in range(g))
    hier = [("ReduceScatter", node_groups)] + ([("AllReduce", cross_groups)] if nodes > 1 else []) \
        + [("AllGather", node_groups)]
    j_h, hier_plan = _program(plan, hier)
    j_1, single_plan = _program(plan, [("AllReduce", (tuple(range(p)),))])
    # by hand: the two communicators of the hierarchy, made once
    node = world.Split(me // g, me)
    cross = world.Split(me % g, me) if nodes > 1 else None
    rows = []
    with hier_plan.bind(world) as red_h, single_plan.bind(world) as red_1:
        for size in ([1 << 18] if quick else [1 << 20, 1 << 24]):
            n = size // 8 // p * p
            x = np.random.default_rng(me).integers(-1000, 1000, n).astype(np.float64)
            want = sum(np.random.default_rng(r).integers(-1000, 1000, n) for r in range(p)).astype(np.float64)
            out = np.empty(n)                           # one output for both sides
            poison = lambda: out.fill(np.nan)  # noqa: E731
            part = _intermediate(red_h, x, out, n // g)

            def by_hand():
                node.Reduce_scatter_block(x, part, MPI.SUM)
                if cross is not None:
                    cross.Allreduce(MPI.IN_PLACE, part, MPI.SUM)
                node.Allgather(part, out)

            ok = lambda: np.array_equal(out, want)  # noqa: E731
            why = lambda: mismatch(out, want)  # noqa: E731
            steps = " ; ".join(s for s, _ in hier)
            rounds = _rounds(repeats, 200 if size <= 1 << 20 else 40, quick)
            rows.append(measure(
                ctx, f"reduction {system} program {j_h}: {steps}",
                "Reduce_scatter_block ; Allreduce ; Allgather (Split comms; the same intermediate buffer)"
                if cross else "Reduce_scatter_block ; Allgather (the same intermediate buffer)", n * 8, red_h,
                Side(lambda: red_h.allreduce(x, out=out), ok, why), Side(by_hand, ok, why), rounds, poison))
            rows.append(measure(
                ctx, f"reduction {system} program {j_1}: AllReduce", "COMM_WORLD.Allreduce", n * 8, red_1,
                Side(lambda: red_1.allreduce(x, out=out), ok, why),
                Side(lambda: world.Allreduce(x, out, MPI.SUM), ok, why), rounds, poison))
            if size == 1 << 20 or quick:  # the sensitivity: a few µs of Python before the same call
                rows.append(measure(
                    ctx, "control: 2 µs of Python, then COMM_WORLD.Allreduce", "COMM_WORLD.Allreduce", n * 8, None,
                    Side(lambda: (spin(2e-6), world.Allreduce(x, out, MPI.SUM)), ok),
                    Side(lambda: world.Allreduce(x, out, MPI.SUM), ok), rounds, poison))
    node.Free()
    if cross is not None:
        cross.Free()
    return rows


def _redistribution_row(ctx, quick, repeats, src, dst, mesh, ops, baseline, by_hand_of) -> dict:
    """One redistribution row: ``by_hand_of(x, out)`` is the hand-written call on this rank's tile."""
    plan = mp.plan_redistribution(src, dst, mesh, dtype="f64")
    got = [s.op for s in plan.program]
    if got != ops:
        raise AssertionError(f"{src} -> {dst} on {mesh}: planned {got}, the hand-written version does {ops}")
    with plan.bind(ctx.world) as ex:
        R, C = ex.global_shape
        xg = np.arange(R * C, dtype=np.float64).reshape(R, C)
        x, want = ex.source_tile(xg), ex.target_tile(xg)
        out = np.empty_like(want)                          # one output for both sides
        ok, why = lambda: np.array_equal(out, want), lambda: mismatch(out, want)  # noqa: E731
        return measure(ctx, f"redistribution {src} -> {dst} on {mesh}: {' ; '.join(ops)}", baseline, x.nbytes,
                       ex, Side(lambda: ex(x, out=out), ok, why), Side(by_hand_of(x, out), ok, why),
                       _rounds(repeats, 200, quick), lambda: out.fill(np.nan))


def redistribution(ctx, quick: bool, repeats) -> list[dict]:
    world, p, me = ctx.world, ctx.size, ctx.rank
    R, C = (128, 256) if quick else (1024, 2048)          # 4 MiB per rank on 4 ranks

    def transpose(x, out):          # rows over all ranks -> columns over all ranks: one Alltoall
        r, c = R // p, C // p
        recv = out.reshape(p, r, c)
        return lambda: world.Alltoall(np.ascontiguousarray(x.reshape(r, p, c).transpose(1, 0, 2)), recv)

    rows = [_redistribution_row(ctx, quick, repeats, f"[{R // p}{{x}}{R},{C}]", f"[{R},{C // p}{{x}}{C}]",
                                f"x={p}", ["alltoall"], "numpy transpose + Alltoall", transpose)]
    if p < 4 or p % 2:
        return rows
    y = p // 2
    ix, iy = divmod(me, y)           # rank = ix·|y| + iy (the mesh's first axis outermost)
    ygroup = world.Split(ix, iy)

    def in_y_groups(x, out):        # rows block iy + y·ix = rank -> rows over x, columns over y
        r, c = R // p, C // y
        recv = out.reshape(y, r, c)
        return lambda: ygroup.Alltoall(np.ascontiguousarray(x.reshape(r, y, c).transpose(1, 0, 2)), recv)

    dest = ix + 2 * iy               # my rows block (x minor) is the destination's rank (y minor)
    source = (me % 2) * y + me // 2

    def permute(x, out):
        if dest == me:
            return lambda: np.copyto(out, x)
        return lambda: world.Sendrecv(x, dest, 7, out, source, 7)

    mesh = f"x=2,y={y}"
    rows.append(_redistribution_row(ctx, quick, repeats, f"[{R // p}{{y,x}}{R},{C}]",
                                    f"[{R // 2}{{x}}{R},{C // y}{{y}}{C}]", mesh, ["alltoall"],
                                    "numpy transpose + Alltoall (Split comm)", in_y_groups))
    rows.append(_redistribution_row(ctx, quick, repeats, f"[{R // p}{{x,y}}{R},{C}]", f"[{R // p}{{y,x}}{R},{C}]",
                                    mesh, ["allpermute"], "Sendrecv", permute))
    ygroup.Free()
    return rows


def halo(ctx, quick: bool, repeats) -> list[dict]:
    world, p, me = ctx.world, ctx.size, ctx.rank
    w = 256 if quick else 4096                             # 8·16·4096 doubles: 4 MiB per rank
    shape, h = (8, 16, w * p), 2
    plan = mp.plan_halo((1, 1, p), shape, kernel=5, padding=h)
    xg = np.random.default_rng(0).integers(-100, 100, shape).astype(np.float64)
    x = np.ascontiguousarray(xg[..., me * w:(me + 1) * w])
    want_fwd = np.pad(xg, ((0, 0), (0, 0), (h, h)))[..., me * w:me * w + w + 2 * h]
    ext = (8, 16, w + 2 * h)
    ys = [np.random.default_rng(1 + r).integers(-100, 100, ext).astype(np.float64) for r in range(p)]
    acc = np.zeros((8, 16, w * p + 2 * h))
    for r, yr in enumerate(ys):
        acc[..., r * w:r * w + w + 2 * h] += yr
    want_adj, y = acc[..., h + me * w:h + (me + 1) * w], ys[me]
    left, right = (me - 1 if me > 0 else None), (me + 1 if me < p - 1 else None)
    edge = (8, 16, h)
    # by hand: the two receive boxes of the extended block as subarray datatypes (made once), packed edges
    lo = MPI.DOUBLE.Create_subarray(ext, edge, (0, 0, 0)).Commit()
    hi = MPI.DOUBLE.Create_subarray(ext, edge, (0, 0, w + h)).Commit()
    s_l, s_r, r_l, r_r = (np.empty(edge) for _ in range(4))
    out_h, adj_h = np.empty(ext), np.empty_like(x)        # one output for both sides

    def forward():
        reqs = []
        if left is not None:
            reqs.append(world.Irecv([out_h, 1, lo], left, 5))
        if right is not None:
            reqs.append(world.Irecv([out_h, 1, hi], right, 5))
        if left is not None:
            np.copyto(s_l, x[..., :h])
            reqs.append(world.Isend(s_l, left, 5))
        if right is not None:
            np.copyto(s_r, x[..., -h:])
            reqs.append(world.Isend(s_r, right, 5))
        out_h[..., h:-h] = x
        if left is None:
            out_h[..., :h] = 0
        if right is None:
            out_h[..., -h:] = 0
        MPI.Request.Waitall(reqs)

    def adjoint(fill_add: bool = False):
        reqs = []
        if left is not None:
            reqs.append(world.Irecv(r_l, left, 6))
        if right is not None:
            reqs.append(world.Irecv(r_r, right, 6))
        if left is not None:
            np.copyto(s_l, y[..., :h])
            reqs.append(world.Isend(s_l, left, 6))
        if right is not None:
            np.copyto(s_r, y[..., -h:])
            reqs.append(world.Isend(s_r, right, 6))
        if fill_add:                  # the reference: the executor's local compute (zeros, then add)
            adj_h.fill(0)
            np.add(adj_h, y[..., h:-h], out=adj_h)
        else:
            np.copyto(adj_h, y[..., h:-h])
        MPI.Request.Waitall(reqs)
        if left is not None:
            adj_h[..., :h] += r_l
        if right is not None:
            adj_h[..., -h:] += r_r

    rounds = _rounds(repeats, 200, quick)
    name = f"halo {shape} over (1,1,{p}), kernel 5, padding 2"
    with plan.bind(world) as ex:
        if ex.out_shape != ext:
            raise AssertionError(f"halo: the executor's extended block is {ex.out_shape}, by hand {ext}")
        ok_fwd, why_fwd = lambda: np.array_equal(out_h, want_fwd), lambda: mismatch(out_h, want_fwd)  # noqa: E731
        ok_adj, why_adj = lambda: np.array_equal(adj_h, want_adj), lambda: mismatch(adj_h, want_adj)  # noqa: E731
        rows = [measure(ctx, f"{name}: forward", "copy + packed Isend, subarray Irecv", x.nbytes, ex,
                        Side(lambda: ex.forward(x, out=out_h), ok_fwd, why_fwd), Side(forward, ok_fwd, why_fwd),
                        rounds, lambda: out_h.fill(np.nan)),
                measure(ctx, f"{name}: adjoint", "copy + packed Isend, Irecv + add", x.nbytes, ex,
                        Side(lambda: ex.adjoint(y, out=adj_h), ok_adj, why_adj), Side(adjoint, ok_adj, why_adj),
                        rounds, lambda: adj_h.fill(np.nan)),
                measure(ctx, f"{name}: adjoint", "reference: the same, the owned block zeroed then added to",
                        x.nbytes, ex, Side(lambda: ex.adjoint(y, out=adj_h), ok_adj, why_adj),
                        Side(lambda: adjoint(True), ok_adj, why_adj), rounds, lambda: adj_h.fill(np.nan))]
    lo.Free()
    hi.Free()
    return rows


CASES = {"reduction": reduction, "redistribution": redistribution, "halo": halo, "matmul": matmul,
         "factorization": factorization}
