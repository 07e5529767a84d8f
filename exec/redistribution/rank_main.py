"""The MPI program: ``mpiexec -n N python -m meshplan.exec.redistribution.rank_main JOB.json``.

JOB.json holds ``{"dtype", "repeats", "problems": [{"mesh", "src", "dst",
"programs": {name: [step, …]}}]}`` (types over the prime mesh, steps as in
:mod:`~meshplan.models.redistribution.serialize`).  Every program runs on real
numpy tiles through the executor a user's program binds
(:class:`~meshplan.exec.redistribution.executor.RedistributionExecutor`: all-gather and all-to-all on
sub-communicators, dynamic slices locally, ``allpermute`` as a point-to-point exchange).  A first run checks the
tile of every rank against the global array after *every* step; ``repeats``
timed runs follow.  Rank 0 prints one JSON line with, per problem and program,
``verified``, ``peak_tile_bytes`` (largest tile held), ``peak_live_bytes``
(input, buffers and output alive during a step; maximum over ranks) and
``time_s`` (median over repeats of the slowest rank; the programs of a problem
are timed interleaved, in alternating order).  It runs on the runtime
(:func:`~meshplan.exec.runtime.rank.rank_main`, docs/runtime.md): cached
sub-communicators, the linear-index test array, the fault hook (``corrupt``:
rank 0 changes one element, so verification must fail) and the timing loop.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from meshplan.exec.redistribution.executor import RedistributionExecutor, run_program
from meshplan.exec.runtime.data import index_tile, numpy_dtype
from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_interleaved
from meshplan.exec.runtime.verify import Verification
from meshplan.models.redistribution.decompose import decompose
from meshplan.models.redistribution.lowlevel import Assignment
from meshplan.models.redistribution.mesh import parse_mesh
from meshplan.models.redistribution.serialize import step_from_dict
from meshplan.models.redistribution.types import parse_type

__all__ = ["source_tile", "handle", "main"]


def source_tile(comm, mesh, coords0, src, dtype) -> np.ndarray:
    """This rank's tile of the test array under ``src`` (built outside the timed region)."""
    return index_tile(src.globaltype, Assignment(src, coords0).offsets(mesh)[comm.Get_rank()], src.localtype, dtype)


def _problem(ctx: RankContext, prob: dict, dtype, repeats: int) -> dict:
    """Compile, verify and time every program of one problem on this rank."""
    dec = decompose(parse_mesh(prob["mesh"]))
    if dec.original.num_devices != ctx.size:
        raise ValueError(f"mesh {prob['mesh']} has {dec.original.num_devices} devices but the job "
                         f"has {ctx.size} ranks")
    mesh, coords0 = dec.prime, dec.coords()
    src = parse_type(prob["src"])
    tile0 = source_tile(ctx.comm, mesh, coords0, src, dtype)
    execs, out = {}, {}
    for name, raw in prob["programs"].items():
        steps = tuple(step_from_dict(s) for s in raw)
        # the executor a user's program binds; the first run checks every step against the test array
        ex = execs[name] = RedistributionExecutor(dec, src, steps, ctx.comm)
        moved = run_program(ex.counted, ex.actions, tile0.copy(), check=True, initial=tile0,
                            globaltype=src.globaltype, fault=ctx.corrupt)
        # and the call a user makes, into a preallocated output as the timed runs below
        y = ex(tile0, out=np.empty(ex.target_shape, dtype=tile0.dtype))
        whole = ctx.corrupt or np.array_equal(y, index_tile(src.globaltype, ex.target_offsets, ex.target_shape,
                                                             tile0.dtype))
        out[name] = {
            "verified": Verification(moved.ok and bool(whole)).combine(ctx.comm).ok,
            "peak_tile_bytes": int(ctx.comm.allreduce(moved.peak_tile_bytes, op=MPI.MAX)),
            "peak_live_bytes": int(ctx.comm.allreduce(moved.peak_live_bytes, op=MPI.MAX)),
        }
    # programs interleaved, order alternating, to share warm-up and noise; each run on a fresh copy
    timings = time_interleaved(ctx.comm, {name: execs[name] for name in execs},
                               repeats=repeats, setup=lambda name: tile0.copy())
    for name, t in timings.items():
        out[name]["times_s"] = list(t.times_s)
        out[name]["time_s"] = t.median_s
    for ex in execs.values():
        ex.close()
    ctx.comms.free()
    return out


def handle(ctx: RankContext, job: dict) -> dict:
    """Every problem of the job on this rank; rank 0's result is ``{"ranks", "results"}``."""
    dtype = numpy_dtype(job.get("dtype", "f32"))
    repeats = int(job.get("repeats", 3))
    return {"ranks": ctx.size, "results": [_problem(ctx, prob, dtype, repeats) for prob in job["problems"]]}


def main(argv: list[str] | None = None) -> None:
    rank_main(handle, argv)


if __name__ == "__main__":
    main()
