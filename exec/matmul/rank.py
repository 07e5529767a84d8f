"""The MPI program: ``mpiexec -n P python -m meshplan.exec.matmul.rank JOB.json`` (via the runtime).

JOB: ``{"seed", "repeats", "cases": [{"name", "algo": "cosma" | "summa", "m", "n", "k", "dtype",
"grid": [pm, pn, pk] | [pr, pc], "rounds", "overlap", "layout", "nb", "bc_grid"}]}``.  Every case, on every
rank:

* builds its pieces of A and B in the algorithm's layout from the seeded global test matrices (any element
  ``A[i, j] = (linear index mod INDEX_MOD)/INDEX_MOD − ½`` is built from its indices alone:
  :func:`matrix_entries`);
* runs the schedule once counted — Python counter (:class:`~meshplan.exec.runtime.comms.CountingComm`)
  and, when preloaded, the PMPI counter (:mod:`meshplan.exec.runtime.pmpi`) — then ``repeats`` timed runs
  (:func:`~meshplan.exec.runtime.timing.time_repeats`);
* checks its piece of C against numpy (max-norm relative error, combined over ranks).

COSMA runs through the library's own :class:`~meshplan.exec.matmul.executor.MatmulExecutor` (the schedule
of sections 3.6.3, 3.7.2, 3.7.3 and 3.7.6, in the blocked or ScaLAPACK's block-cyclic layout), bound to
``COMM_WORLD`` with the job's grid, rounds and double buffering, so every verification run tests the library
path.  2-D SUMMA, the baseline, is written here: on a pr×pc grid, for each K segment (the common refinement
of the A column and B row blocks) the owner column broadcasts its A panel along grid rows and the owner row
its B panel along grid columns.

Words received from other ranks, from the Python counter's buffers: an Allgatherv receives its receive
buffer minus its own piece (received − sent), a Reduce_scatter (g−1)·|own block|, an Alltoallv its
receive buffer minus its own block, a Bcast's non-root its buffer.  Rank 0 returns per case and rank: words
(per matrix), PMPI words, max relative error, times.
"""

from __future__ import annotations

import numpy as np

from meshplan.exec.matmul.executor import MatmulExecutor
from meshplan.exec.runtime import pmpi
from meshplan.exec.runtime.data import INDEX_MOD, numpy_dtype
from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_repeats
from meshplan.models.matmul.problem import Grid, MatmulProblem, split
from meshplan.solvers.matmul.plan import fixed_schedule

__all__ = ["handle", "matrix_block", "matrix_values", "matrix_entries", "product_entries"]


def matrix_entries(which: str, shape: tuple[int, int], rows, cols, dtype) -> np.ndarray:
    """Entries at ``(rows, cols)`` (integer arrays, broadcast against each other) of test matrix ``which``
    ("A" or "B") of global ``shape``: ``(linear index mod INDEX_MOD)/INDEX_MOD − ½``, B shifted by 7919
    columns (so A ≠ B)."""
    off = 0 if which == "A" else 7919
    r = np.asarray(rows, dtype=np.int64)
    c = np.asarray(cols, dtype=np.int64) + off
    return ((r * (shape[1] + off) + c) % INDEX_MOD / INDEX_MOD - 0.5).astype(dtype)


def matrix_values(which: str, shape: tuple[int, int], rows, cols, dtype) -> np.ndarray:
    """Entries ``rows × cols`` (1-D index arrays: the outer grid) of test matrix ``which`` of ``shape``."""
    return matrix_entries(which, shape, np.asarray(rows)[:, None], np.asarray(cols)[None, :], dtype)


def matrix_block(which: str, shape: tuple[int, int], r0: int, r1: int, c0: int, c1: int, dtype) -> np.ndarray:
    """Rows r0:r1, columns c0:c1 of test matrix ``which`` (C-contiguous)."""
    return np.ascontiguousarray(matrix_values(which, shape, np.arange(r0, r1), np.arange(c0, c1), dtype))


def product_entries(m: int, n: int, k: int, rows, cols) -> np.ndarray:
    """Entries at ``(rows, cols)`` (integer arrays of one shape) of the test product C = A·B, in f64."""
    rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
    ri, rpos = np.unique(rows, return_inverse=True)
    ci, cpos = np.unique(cols, return_inverse=True)
    full = matrix_values("A", (m, k), ri, np.arange(k), np.float64) @ \
        matrix_values("B", (k, n), np.arange(k), ci, np.float64)
    return full[rpos.reshape(rows.shape), cpos.reshape(cols.shape)]


def _len(r) -> int:
    return r[1] - r[0]


class _Count:
    """Words one rank received from others in a counted SUMMA run, per matrix, from the Python counter."""

    def __init__(self, ctx: RankContext, item: int) -> None:
        self.ctx, self.item, self.words = ctx, item, {"a": 0, "b": 0, "c": 0}

    def bcast(self, key: str, fn) -> None:
        _, r0 = self.ctx.counter.snapshot()
        fn()
        _, r1 = self.ctx.counter.snapshot()
        self.words[key] += (r1 - r0) // self.item


def _cosma(ctx: RankContext, case: dict, dt):
    """(executor, run(), want): the COSMA schedule of the case through :class:`MatmulExecutor`."""
    prob = MatmulProblem(case["m"], case["n"], case["k"], ctx.size, dtype=case.get("dtype", "f64"))
    sched = fixed_schedule(prob, Grid(*case["grid"]), int(case["rounds"]),
                           double_buffered=bool(case.get("overlap")))
    layout = case.get("layout", "blocked")
    kw = dict(block=int(case["nb"]), grid=tuple(case["bc_grid"])) if layout == "scalapack" else {}
    ex = MatmulExecutor(ctx.comm, sched, layout=layout, **kw)
    a = matrix_entries("A", (prob.m, prob.k), *ex.indices("A"), dt)
    b = matrix_entries("B", (prob.k, prob.n), *ex.indices("B"), dt)
    out = np.empty(ex.shape("C"), dtype=dt, order="F" if layout == "scalapack" else "C")
    want = product_entries(prob.m, prob.n, prob.k, *np.broadcast_arrays(*ex.indices("C")))
    return ex, (lambda: ex(a, b, out=out)), want


def _summa(ctx: RankContext, case: dict, dt):
    pr, pc = case["grid"]
    m, n, k = case["m"], case["n"], case["k"]
    r = ctx.rank
    row = ctx.comms.split([q // pc for q in range(ctx.size)], [q % pc for q in range(ctx.size)])
    col = ctx.comms.split([q % pc for q in range(ctx.size)], [q // pc for q in range(ctx.size)])
    i, j = divmod(r, pc)
    rows, cols = split(m, pr)[i], split(n, pc)[j]
    kc, kr = split(k, pc), split(k, pr)
    a_own = matrix_block("A", (m, k), *rows, *kc[j], dt)
    b_own = matrix_block("B", (k, n), *kr[i], *cols, dt)
    cuts = sorted({0, k, *(a for a, _ in kc), *(a for a, _ in kr)})
    segs = []
    for s0, s1 in zip(cuts, cuts[1:]):
        jo = next(q for q, (a, b) in enumerate(kc) if a <= s0 < b)
        io = next(q for q, (a, b) in enumerate(kr) if a <= s0 < b)
        segs.append((s0, s1, jo, io))
    mi, nj = _len(rows), _len(cols)
    width = max(s1 - s0 for s0, s1, _, _ in segs)
    a_buf, b_buf = np.empty(mi * width, dtype=dt), np.empty(width * nj, dtype=dt)
    c = np.empty((mi, nj), dtype=dt)

    def run(count: _Count | None):
        c[...] = 0
        for s0, s1, jo, io in segs:
            w = s1 - s0
            a_pan = a_buf[:mi * w].reshape(mi, w)
            b_pan = b_buf[:w * nj].reshape(w, nj)
            if j == jo:
                a_pan[...] = a_own[:, s0 - kc[j][0]:s1 - kc[j][0]]
            if i == io:
                b_pan[...] = b_own[s0 - kr[i][0]:s1 - kr[i][0], :]
            if pc > 1:
                op = (lambda: row.Bcast(a_pan, root=jo))
                count.bcast("a", op) if count else op()
            if pr > 1:
                op = (lambda: col.Bcast(b_pan, root=io))
                count.bcast("b", op) if count else op()
            c[...] += a_pan @ b_pan
        return c

    want = matrix_block("A", (m, k), *rows, 0, k, np.float64) @ matrix_block("B", (k, n), 0, k, *cols, np.float64)
    return run, want


def handle(ctx: RankContext, job: dict) -> dict:
    results = []
    for case in job["cases"]:
        dt = numpy_dtype(case.get("dtype", "f64"))
        ex = None
        if case["algo"] == "cosma":
            ex, run, want = _cosma(ctx, case, dt)
            before_words = dict(ex.words)
            counted = run
        else:
            summa, want = _summa(ctx, case, dt)
            count = _Count(ctx, dt.itemsize)
            counted, run = (lambda: summa(count)), (lambda: summa(None))
        ctx.world.Barrier()
        before = pmpi.read()
        got = counted()
        pm = pmpi.diff(before)
        words = ({k: v - before_words.get(k, 0) for k, v in ex.words.items()} if ex is not None
                 else count.words)
        diff = float(np.max(np.abs(got - want))) if want.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        timing = time_repeats(ctx.comm, run, repeats=int(job.get("repeats", 1)), warmup=0)
        row = {"words": words, "pmpi": None if pm is None else {"sent": pm[0], "received": pm[1]},
               "diff": diff, "scale": scale}
        rows = ctx.world.gather(row, root=0)
        if ctx.rank == 0:
            d = max(x["diff"] for x in rows)
            s = max(x["scale"] for x in rows)
            results.append({
                "name": case["name"], "algo": case["algo"], "grid": case["grid"],
                "max_rel_error": (d / s) if s > 0 else (0.0 if d == 0 else float("inf")),
                "words_per_rank": [sum(x["words"].values()) for x in rows],
                "words_by_matrix": [x["words"] for x in rows],
                "pmpi_words_per_rank": (None if rows[0]["pmpi"] is None
                                        else [x["pmpi"]["received"] // dt.itemsize for x in rows]),
                "times_s": list(timing.times_s), "time_min_s": timing.min_s, "time_median_s": timing.median_s,
            })
        if ex is not None:
            ex.close()
        ctx.comms.free()
    return {"cases": results, "pmpi": pmpi.active()}


if __name__ == "__main__":
    rank_main(handle)
