"""The ScaLAPACK baseline of the factorizations: pdgetrf / pdpotrf on a block-cyclic ``nprow × npcol`` grid
(thesis Table 4.2's 2-D algorithms), through :mod:`meshplan.exec.runtime.scalapack`.

JOB: ``{"cases": [{"kind", "N", "grid": [nprow, npcol], "nb", "matrix", "repeats"}]}``.  Every rank of
the grid builds its Fortran-ordered local tile of the same matrix as the COnfLUX runs
(:func:`meshplan.exec.factorization.matrices.make_matrix`), factors it once while the PMPI counter
(when preloaded) counts, then ``repeats`` timed runs on fresh copies; rank 0 gathers the factors and
the pivots (uncounted) and checks the scaled residual and the growth factor.  Every result names the
BLAS kernel the baseline ran (:func:`meshplan.exec.runtime.scalapack.kernel`).
"""

from __future__ import annotations

import ctypes

import numpy as np

from meshplan.exec.factorization.matrices import make_matrix
from meshplan.exec.runtime import pmpi, scalapack
from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_repeats

__all__ = ["handle"]


def _case(ctx: RankContext, sl, case: dict) -> dict | None:
    kind, N, nb = case["kind"], int(case["N"]), int(case["nb"])
    pr, pc = case["grid"]
    A = make_matrix(kind, N, case.get("matrix", {}))
    g = scalapack.grid(sl, pr, pc)
    ri = scalapack.local_indices(N, nb, pr, g.myrow) if g.inside else np.zeros(0, dtype=np.int64)
    ci = scalapack.local_indices(N, nb, pc, g.mycol) if g.inside else np.zeros(0, dtype=np.int64)
    desc = scalapack.descriptor(sl, g, N, N, nb, nb, len(ri)) if g.inside else None

    def fresh():
        a = np.zeros((max(1, len(ri)), max(1, len(ci))), dtype=np.float64, order="F")
        a[:len(ri), :len(ci)] = A[np.ix_(ri, ci)]
        return a

    ipiv = np.zeros(len(ri) + nb, dtype=np.int32)
    info = ctypes.c_int(0)

    def run(a):
        if not g.inside:
            return
        if kind == "lu":
            sl.pdgetrf(N, N, a, 1, 1, desc, ipiv, ctypes.byref(info))
        else:
            sl.pdpotrf("L", N, a, 1, 1, desc, ctypes.byref(info))

    a = fresh()
    ctx.world.Barrier()
    before = pmpi.read()
    run(a)
    pm = pmpi.diff(before)
    status = int(info.value)
    repeats = int(case.get("repeats", 1))
    timing = time_repeats(ctx.world, run, repeats=repeats, warmup=0, setup=fresh) if repeats > 0 else None
    parts = ctx.world.gather((ri, ci, a[:len(ri), :len(ci)].copy(), ipiv[:len(ri)].copy(),
                              g.mycol if g.inside else -1, status, None if pm is None else pm[1]), root=0)
    if g.inside:
        sl.close_blacs_context(g.ctx)
    if ctx.rank != 0:
        return None
    out = {"kind": kind, "N": N, "grid": [pr, pc], "block": nb,
           "pmpi_words_per_rank": (None if any(p[6] is None for p in parts)
                                   else float(np.mean([p[6] for p in parts]) / 8)),
           "time_s": None if timing is None else timing.min_s, "blas": scalapack.kernel()}
    bad = [p[5] for p in parts if p[5] != 0]
    if bad:
        out.update(verified=False, scaled_residual=None, growth_factor=None,
                   reason=f"ScaLAPACK returned info = {bad[0]}")
        return out
    F = np.zeros((N, N))
    piv = np.arange(N)
    for rows, cols, loc, ip, col, _s, _p in parts:
        if len(rows) and len(cols):
            F[np.ix_(rows, cols)] = loc
        if col == 0 and len(rows):
            piv[rows] = ip.astype(np.int64) - 1
    eps = np.finfo(np.float64).eps
    if kind == "lu":
        perm = np.arange(N)
        for k in range(N):
            r = piv[k]
            perm[[k, r]] = perm[[r, k]]
        L = np.tril(F, -1) + np.eye(N)
        U = np.triu(F)
        R = A[perm] - L @ U
        growth = float(np.max(np.abs(U)) / np.max(np.abs(A)))
    else:
        L = np.tril(F)
        R = A - L @ L.T
        growth = float(np.max(np.abs(L)) ** 2 / np.max(np.abs(A)))
    res = float(np.linalg.norm(R) / (np.linalg.norm(A) * N * eps))
    out.update(verified=bool(res <= 10.0), scaled_residual=res, growth_factor=growth)
    return out


def handle(ctx: RankContext, job: dict) -> dict | None:
    sl = scalapack.load()
    results = [_case(ctx, sl, case) for case in job["cases"]]
    return {"results": results, "pmpi": pmpi.active()} if ctx.rank == 0 else None


if __name__ == "__main__":
    rank_main(handle)
