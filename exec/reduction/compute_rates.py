"""The compute side of ``meshplan calibrate``: the matrix-multiply rate, its half-performance inner
dimension and the synchronisation latency of busy ranks, measured inside the calibration job of
:mod:`meshplan.exec.reduction.calibrate` (the γ, the rate of narrow updates and the per-step waiting of
the matmul and factorization time models, Kwasniewski's thesis sections 3.7 and 4.8)."""

from __future__ import annotations

import numpy as np

__all__ = ["sync_counts", "sync_latency", "gemm_rate", "HALF_K_DIMS", "gemm_half_k"]


def sync_counts(n: int) -> list[int]:
    """The rank counts whose synchronisation latency calibrate measures on ``n`` ranks: 2, 4, 8, … and ``n``."""
    return sorted({1 << k for k in range(1, n.bit_length()) if 1 << k <= n} | {n})


def sync_latency(ctx, rounds: int = 40, n: int = 256) -> dict[str, float]:
    """Seconds one synchronisation of busy ranks costs, per rank count ``k`` of :func:`sync_counts` (the
    per-step waiting of a factorization, Kwasniewski's thesis section 4.8: the latency of many small steps).

    The first ``k`` ranks run ``rounds`` rounds of an ``n³`` matrix multiply (about a millisecond) followed by an
    8-byte exchange with a butterfly partner (``rank XOR 2^(round mod log2 k)``, so that every rank waits on
    every other within a few rounds), and the same rounds without the exchanges; the latency is the difference
    of the slowest rank's times per round (≥ 0), the median of three tries.  On a host with more ranks than
    cores a rank that waits holds its core while the rank it waits for is not running — about a scheduler
    timeslice per synchronisation, which the idle ping-pong cannot see.  The ranks beyond ``k`` sleep meanwhile
    (they poll a non-blocking barrier every millisecond), so that they take no core."""
    import time

    from mpi4py import MPI

    world, rank = ctx.world, ctx.rank
    a = np.ones((n, n))
    c = np.empty_like(a)
    one, got = np.zeros(1), np.zeros(1)
    out = {}
    for k in sync_counts(ctx.size):
        inside = rank < k
        bits = max(1, (k - 1).bit_length())

        def wait(req) -> None:  # the ranks beyond k sleep between polls; the first k poll as MPI does
            while not req.Test():
                if not inside:
                    time.sleep(1e-3)

        def run(exchange: bool) -> float:
            wait(world.Ibarrier())
            t0 = MPI.Wtime()
            if inside:
                for r in range(rounds):
                    np.matmul(a, a, out=c)
                    mate = rank ^ (1 << (r % bits))
                    if exchange and mate < k:
                        world.Sendrecv(one, mate, 77, got, mate, 77)
            mine = np.array([MPI.Wtime() - t0 if inside else 0.0])
            slowest = np.zeros(1)
            wait(world.Iallreduce(mine, slowest, MPI.MAX))
            return float(slowest[0])

        tries = sorted((run(True) - run(False)) / rounds for _ in range(3))
        out[str(k)] = max(0.0, tries[1])
    return out


def gemm_rate(ctx, n: int = 512, iters: int = 3) -> float:
    """The f64 matrix-multiply rate (flop/s) of the slowest rank while every rank multiplies ``n³`` at once
    (the γ of the matmul and factorization time models)."""
    from mpi4py import MPI

    a = np.ones((n, n))
    c = np.empty_like(a)
    np.matmul(a, a, out=c)  # warm-up
    ctx.world.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        np.matmul(a, a, out=c)
    slowest = ctx.world.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
    return 2.0 * n ** 3 * iters / slowest


#: the inner dimensions of the narrow multiplies :func:`gemm_half_k` times (a factorization's block sizes)
HALF_K_DIMS = (16, 32, 64)


def gemm_half_k(ctx, n: int = 512, dims: tuple[int, ...] = HALF_K_DIMS, flops: float = 4e8, tries: int = 3) -> float:
    """The half-performance inner dimension ``k½`` of a matrix multiply (Hockney's n½): a multiply of inner
    dimension ``k`` runs at ``r∞·k/(k + k½)``, where ``r∞`` is the rate of the ``n³`` multiply.

    Every rank at once multiplies ``n×k`` by ``k×n`` into an ``n×n`` block (``C -= A·B``, the rank-``k``
    trailing update of a factorization) for each ``k`` of ``dims`` and once with ``k = n``, about ``flops``
    each, through SciPy's BLAS (the library the factorization kernels call); the time of each is the
    slowest rank's, the fastest of ``tries``.  Each ``k`` gives ``k½ = k·(r_n/r_k − 1)``; the median of
    them (≥ 0) is returned."""
    from mpi4py import MPI
    from scipy.linalg.blas import dgemm

    def rate(k: int) -> float:
        a, b = np.ones((n, k), order="F"), np.ones((k, n), order="F")
        c = np.zeros((n, n), order="F")
        reps = max(1, int(flops / (2.0 * n * n * k)))
        dgemm(-1.0, a, b, 1.0, c, overwrite_c=1)  # warm-up
        best = float("inf")
        for _ in range(tries):
            ctx.world.Barrier()
            t0 = MPI.Wtime()
            for _ in range(reps):
                dgemm(-1.0, a, b, 1.0, c, overwrite_c=1)
            best = min(best, ctx.world.allreduce(MPI.Wtime() - t0, op=MPI.MAX))
        return 2.0 * n * n * k * reps / best

    full = rate(n)
    halves = sorted(k * (full / rate(k) - 1.0) for k in dims)
    return max(0.0, float(halves[len(halves) // 2]))
