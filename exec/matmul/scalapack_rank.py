"""The MPI program of the ScaLAPACK baseline: pdgemm on block-cyclic matrices (``python -m`` via the runtime).

JOB: ``{"repeats", "cases": [{"name", "m", "n", "k", "grid": [pr, pc], "nb"}]}``.  On the first pr·pc
ranks (a row-major BLACS grid, :mod:`meshplan.exec.runtime.scalapack`) every case builds its local,
Fortran-ordered block-cyclic pieces of the same test matrices as :mod:`meshplan.exec.matmul.rank`, runs
``pdgemm`` once counted by the PMPI counter (if preloaded), then ``repeats`` timed runs, and checks its
local C against numpy.  f64 only (pdgemm).  With ``"numpy": true`` in a case (one rank, whose local
matrices are the whole ones) the timed runs alternate with ``numpy.dot`` on the same arrays
(:func:`~meshplan.exec.runtime.timing.time_interleaved`): is the baseline's BLAS as fast as numpy's?
Every result names the BLAS kernel the baseline ran (:func:`meshplan.exec.runtime.scalapack.kernel`).
"""

from __future__ import annotations

import numpy as np

from meshplan.exec.matmul.rank import matrix_values
from meshplan.exec.runtime import pmpi, scalapack
from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_interleaved, time_repeats

__all__ = ["handle"]


def _case(ctx: RankContext, sl, case: dict):
    m, n, k, nb = case["m"], case["n"], case["k"], case["nb"]
    pr, pc = case["grid"]
    g = scalapack.grid(sl, pr, pc)
    if not g.inside:
        return None, None, g
    ri_a = scalapack.local_indices(m, nb, pr, g.myrow)
    ci_a = scalapack.local_indices(k, nb, pc, g.mycol)
    ri_b = scalapack.local_indices(k, nb, pr, g.myrow)
    ci_b = scalapack.local_indices(n, nb, pc, g.mycol)
    ci_c = scalapack.local_indices(n, nb, pc, g.mycol)

    def local(which, shape, ri, ci):
        buf = np.zeros((max(1, len(ri)), max(1, len(ci))), dtype=np.float64, order="F")
        buf[:len(ri), :len(ci)] = matrix_values(which, shape, ri, ci, np.float64)
        return buf

    a = local("A", (m, k), ri_a, ci_a)
    b = local("B", (k, n), ri_b, ci_b)
    c = np.zeros((max(1, len(ri_a)), max(1, len(ci_c))), dtype=np.float64, order="F")
    da = scalapack.descriptor(sl, g, m, k, nb, nb, len(ri_a))
    db = scalapack.descriptor(sl, g, k, n, nb, nb, len(ri_b))
    dc = scalapack.descriptor(sl, g, m, n, nb, nb, len(ri_a))

    def run():
        sl.pdgemm("N", "N", m, n, k, 1.0, a, 1, 1, da, b, 1, 1, db, 0.0, c, 1, 1, dc)
        return c[:len(ri_a), :len(ci_c)]

    if case.get("numpy"):
        out = np.empty(c.shape)  # C-ordered, as np.dot requires
        run.numpy = lambda: np.dot(a, b, out=out)

    want = matrix_values("A", (m, k), ri_a, np.arange(k), np.float64) @ \
        matrix_values("B", (k, n), np.arange(k), ci_c, np.float64)
    return run, want, g


def handle(ctx: RankContext, job: dict) -> dict:
    sl = scalapack.load()
    blas = scalapack.kernel()
    results = []
    for case in job["cases"]:
        run, want, g = _case(ctx, sl, case)
        ctx.world.Barrier()
        before = pmpi.read()
        got = run() if run else None
        pm = pmpi.diff(before)
        diff = float(np.max(np.abs(got - want))) if run and want.size else 0.0
        scale = float(np.max(np.abs(want))) if run and want.size else 0.0
        reps = int(job.get("repeats", 1))
        ref = None
        if case.get("numpy") and ctx.world.Get_size() == 1:
            both = time_interleaved(ctx.comm, {"pdgemm": run, "numpy": run.numpy}, repeats=reps, warmup=1)
            timing, ref = both["pdgemm"], both["numpy"]
        else:
            timing = time_repeats(ctx.comm, run if run else (lambda: None), repeats=reps, warmup=0)
        rows = ctx.world.gather({"diff": diff, "scale": scale, "pmpi": pm}, root=0)
        if g.inside:
            sl.close_blacs_context(g.ctx)
        if ctx.rank == 0:
            d, s = max(x["diff"] for x in rows), max(x["scale"] for x in rows)
            results.append({
                "name": case["name"], "algo": "scalapack", "grid": case["grid"], "nb": case["nb"],
                "max_rel_error": (d / s) if s > 0 else (0.0 if d == 0 else float("inf")),
                "pmpi_words_per_rank": (None if rows[0]["pmpi"] is None else [x["pmpi"][1] // 8 for x in rows]),
                "times_s": list(timing.times_s), "time_min_s": timing.min_s, "time_median_s": timing.median_s,
                "blas": blas,
            } | ({} if ref is None else {"numpy_dot_time_median_s": ref.median_s}))
    return {"cases": results, "pmpi": pmpi.active(), "blas": blas}


if __name__ == "__main__":
    rank_main(handle)
