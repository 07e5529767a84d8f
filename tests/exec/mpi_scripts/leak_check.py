"""Executors are reusable: 100 calls of each executor in one process create no MPI handle and leave memory flat,
and ``close()`` frees every communicator, datatype and window the executor made
(``mpiexec -n 4 python leak_check.py`` with the PMPI counter preloaded, which counts the handles:
:func:`meshplan.exec.runtime.pmpi.handles`).

Per executor, on every rank: bind; 20 warm-up calls; live handles and resident memory (``/proc/self/statm``)
before and after two rounds of 100 calls; the Python memory tracemalloc sees grow over 100 more calls; close;
handles after close.  Rank 0 prints ``{"executors": {name: {"calls", "handles_bind", "handles_calls",
"handles_after_close", "rss_growth_first_bytes", "rss_growth_second_bytes", "traced_growth_bytes"}}}`` with the
worst rank's numbers.
"""

from __future__ import annotations

import json
import os
import sys
import tracemalloc

import numpy as np
from mpi4py import MPI

import meshplan as mp
from meshplan.exec.runtime import pmpi
from meshplan.exec.runtime.guard import abort_on_error

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def live() -> tuple[int, int, int]:
    h = pmpi.handles()
    return (h["comms_created"] - h["comms_freed"], h["types_committed"] - h["types_freed"],
            h["windows_created"] - h["windows_freed"])


def measure(name: str, bind, call, calls: int = 100) -> dict:
    """Bind, warm up (20 calls: what a call keeps, such as buffers of its shape, is made then), then ``calls``
    calls twice measuring live handles and resident memory, then ``calls`` traced by tracemalloc (a separate
    pass: tracing itself takes memory), then close."""
    before = live()
    ex = bind()
    bound = live()
    for _ in range(20):
        call(ex)
    h0, m0 = live(), rss()
    for _ in range(calls):
        call(ex)
    m1 = rss()
    for _ in range(calls):
        call(ex)
    h2, m2 = live(), rss()
    tracemalloc.start()
    t0 = tracemalloc.take_snapshot()
    for _ in range(calls):
        call(ex)
    t1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    traced = sum(s.size_diff for s in t1.compare_to(t0, "filename"))
    ex.close()
    closed = live()
    return {"calls": 3 * calls, "handles_bind": [b - a for a, b in zip(before, bound)],
            "handles_calls": [b - a for a, b in zip(h0, h2)],
            "handles_after_close": [b - a for a, b in zip(before, closed)],
            "rss_growth_first_bytes": m1 - m0, "rss_growth_second_bytes": m2 - m1, "traced_growth_bytes": traced}


def cases():
    red = mp.solve_placement(f"node=2,gpu={SIZE // 2}", str(SIZE), "0", max_size=3).program(0, 0)
    x = np.ones(100_003, dtype=np.float32)
    yield "reduction", (lambda: red.bind(COMM)), (lambda ex: ex.allreduce(x.copy()))
    plan = mp.plan_redistribution(f"[8{{x}}{8 * SIZE},{6 * SIZE}]", f"[{8 * SIZE},6{{x}}{6 * SIZE}]", f"x={SIZE}",
                                  dtype="f64")
    g = np.arange(8 * SIZE * 6 * SIZE, dtype=np.float64).reshape(8 * SIZE, 6 * SIZE)
    yield "redistribution", (lambda: plan.bind(COMM)), (lambda ex: ex(ex.source_tile(g)))
    halo = mp.plan_halo((1, 1, SIZE), (2, 3, 10 * SIZE + 3), kernel=5, padding=2)
    blocks = {}

    def halo_call(ex):
        if "x" not in blocks:
            blocks["x"] = np.ones(ex.in_shape)
        ex.adjoint(ex.forward(blocks["x"]))
    yield "halo", (lambda: halo.bind(COMM)), halo_call
    mm = mp.plan_matmul(90, 70, 100, SIZE)
    A, B = np.ones((90, 100)), np.ones((100, 70))
    pieces = {}

    def mm_call(ex):
        if "A" not in pieces:
            pieces["A"], pieces["B"] = ex.distribute("A", A if RANK == 0 else None), \
                ex.distribute("B", B if RANK == 0 else None)
        ex(pieces["A"], pieces["B"])
    yield "matmul", (lambda: mm.bind(COMM)), mm_call
    yield "matmul scalapack layout", (lambda: mm.bind(COMM, layout="scalapack")), mm_call_scalapack(mm)
    for kind in ("lu", "cholesky"):
        fp = mp.plan_factorization(kind, 90, SIZE)
        M = np.random.default_rng(0).standard_normal((90, 90))
        A_ = M @ M.T + 90 * np.eye(90)
        b = np.ones(90)
        local = {}

        def f_call(ex, A_=A_, b=b, local=local):
            if "A" not in local:
                local["A"] = ex.distribute(A_ if RANK == 0 else None)
                local["b"] = ex.distribute_rhs(b if RANK == 0 else None)
            ex.factor(local["A"]).solve(local["b"])
        yield f"factorization {kind}", (lambda fp=fp: fp.bind(COMM)), f_call


def mm_call_scalapack(mm):
    pieces = {}

    def call(ex):
        if "A" not in pieces:
            pieces["A"] = ex.distribute("A", np.ones((90, 100)) if RANK == 0 else None)
            pieces["B"] = ex.distribute("B", np.ones((100, 70)) if RANK == 0 else None)
        ex(pieces["A"], pieces["B"])
    return call


def main() -> None:
    out = {}
    with abort_on_error(COMM):
        if not pmpi.active():
            raise RuntimeError("run with the PMPI counter preloaded (meshplan.exec.runtime.pmpi.preload_env())")
        for name, bind, call in cases():
            r = measure(name, bind, call)
            worst = COMM.gather(r, root=0)
            if RANK == 0:
                out[name] = {k: (max(w[k] for w in worst) if isinstance(r[k], int) else
                                 [max(w[k][i] for w in worst) for i in range(3)] if isinstance(r[k], list) else r[k])
                             for k in r}
    if RANK == 0:
        sys.stdout.write(json.dumps({"ranks": SIZE, "executors": out}) + "\n")


if __name__ == "__main__":
    main()
