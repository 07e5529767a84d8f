"""The MPI program: ``mpiexec -n N python -m meshplan.exec.redistribution.mpi_main JOB.json``.

JOB.json holds ``{"dtype", "repeats", "problems": [{"mesh", "src", "dst",
"programs": {name: [step, …]}}]}`` (types over the prime mesh, steps as in
:mod:`~meshplan.models.redistribution.serialize`).  Every program runs on real
numpy tiles: all-gather and all-to-all on sub-communicators (one per device
group, :func:`~meshplan.models.redistribution.lowlevel.groups`), dynamic slices
locally, ``allpermute`` as a point-to-point exchange.  A first run checks the
tile of every rank against the global array after *every* step; ``repeats``
timed runs follow.  Rank 0 prints one JSON line with, per problem and program,
``verified``, ``peak_tile_bytes`` (largest tile held), ``peak_live_bytes``
(input, buffers and output alive during a step; maximum over ranks) and
``time_s`` (median over repeats of the slowest rank).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from mpi4py import MPI

from meshplan.exec.mpi_guard import abort_on_error
from meshplan.exec.redistribution.tiles import make_tile, numpy_dtype
from meshplan.models.redistribution.collectives import AllGather, AllPermute, AllToAll, DynSlice
from meshplan.models.redistribution.decompose import decompose
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, groups
from meshplan.models.redistribution.mesh import parse_mesh
from meshplan.models.redistribution.serialize import step_from_dict
from meshplan.models.redistribution.types import parse_type

__all__ = ["run_program", "main"]


class _Comms:
    """Sub-communicators by device partition (every rank creates them in the same order)."""

    def __init__(self, comm) -> None:
        self.comm = comm
        self.cache: dict = {}

    def get(self, color: np.ndarray, key: np.ndarray):
        k = (color.tobytes(), key.tobytes())
        if k not in self.cache:
            r = self.comm.Get_rank()
            self.cache[k] = self.comm.Split(int(color[r]), int(key[r]))
        return self.cache[k]

    def free(self) -> None:
        for c in self.cache.values():
            c.Free()
        self.cache.clear()


def run_program(comm, comms: _Comms, mesh, coords0, src, steps, dtype, *, check: bool, fault: bool = False):
    """Run ``steps`` from the tiles of ``src``; returns (ok, peak_tile_bytes, peak_live_bytes).

    ``fault`` corrupts one element on rank 0 before the first step (to test the checker).
    """
    rank = comm.Get_rank()
    state = Assignment(src, coords0)
    tile = make_tile(src.globaltype, state.offsets(mesh)[rank], src.localtype, dtype)
    if fault and rank == 0:
        tile.flat[0] += 1
    ok = True
    peak_tile = tile.nbytes
    peak_live = tile.nbytes
    for step in steps:
        new_state = apply_lowlevel(mesh, state, step, coords0)
        if isinstance(step, (AllGather, AllToAll)):
            color, key, n = groups(mesh, state, step)
            sub = comms.get(color, key)
            if isinstance(step, AllGather):
                recv = np.empty((n,) + tile.shape, dtype=tile.dtype)
                sub.Allgather(tile, recv)
                new = np.concatenate(list(recv), axis=step.dim)
                live = tile.nbytes + recv.nbytes + new.nbytes
            else:
                send = np.ascontiguousarray(np.stack(np.split(tile, n, axis=step.dst)))
                recv = np.empty_like(send)
                sub.Alltoall(send, recv)
                new = np.concatenate(list(recv), axis=step.src)
                live = tile.nbytes + send.nbytes + recv.nbytes + new.nbytes
            del recv
        elif isinstance(step, DynSlice):
            d_new = new_state.type.dims[step.dim]
            v = 0
            w = 1
            for a in step.axes:
                v += int(state.coords[rank, mesh.index(a)]) * w
                w *= mesh.size(a)
            sl = [slice(None)] * tile.ndim
            sl[step.dim] = slice(v * d_new.local, (v + 1) * d_new.local)
            new = np.ascontiguousarray(tile[tuple(sl)])
            live = tile.nbytes + new.nbytes
        elif isinstance(step, AllPermute):
            source = step.source
            dest = source.index(rank)
            new = np.empty_like(tile)
            if dest == rank and source[rank] == rank:
                new[...] = tile
            else:
                comm.Sendrecv(tile, dest=dest, sendtag=7, recvbuf=new, source=source[rank], recvtag=7)
            live = tile.nbytes + new.nbytes
        else:  # pragma: no cover - step_from_dict only builds the four kinds
            raise TypeError(f"unknown step {step!r}")
        del tile
        tile, state = new, new_state
        peak_tile = max(peak_tile, tile.nbytes)
        peak_live = max(peak_live, live)
        if check:
            want = make_tile(src.globaltype, state.offsets(mesh)[rank], state.type.localtype, dtype)
            ok = ok and tile.shape == want.shape and bool(np.array_equal(tile, want))
    if check and not steps:
        want = make_tile(src.globaltype, state.offsets(mesh)[rank], src.localtype, dtype)
        ok = bool(np.array_equal(tile, want))
    return ok, peak_tile, peak_live


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        with open(argv[0]) as fh:
            job = json.load(fh)
        dtype = numpy_dtype(job.get("dtype", "f32"))
        repeats = int(job.get("repeats", 3))
        comms = _Comms(comm)
        results = []
        for prob in job["problems"]:
            dec = decompose(parse_mesh(prob["mesh"]))
            if dec.original.num_devices != comm.Get_size():
                raise ValueError(f"mesh {prob['mesh']} has {dec.original.num_devices} devices but the job "
                                 f"has {comm.Get_size()} ranks")
            mesh, coords0 = dec.prime, dec.coords()
            src = parse_type(prob["src"])
            out = {}
            for name, raw in prob["programs"].items():
                steps = tuple(step_from_dict(s) for s in raw)
                ok, pt, pl = run_program(comm, comms, mesh, coords0, src, steps, dtype, check=True,
                                         fault=bool(job.get("inject_fault")))
                times = []
                for _ in range(repeats):
                    comm.Barrier()
                    t0 = time.perf_counter()
                    run_program(comm, comms, mesh, coords0, src, steps, dtype, check=False)
                    times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
                out[name] = {
                    "verified": bool(comm.allreduce(ok, op=MPI.LAND)),
                    "peak_tile_bytes": int(comm.allreduce(pt, op=MPI.MAX)),
                    "peak_live_bytes": int(comm.allreduce(pl, op=MPI.MAX)),
                    "time_s": float(np.median(times)) if times else None,
                    "times_s": times,
                }
            results.append(out)
            comms.free()
        if comm.Get_rank() == 0:
            sys.stdout.write(json.dumps({"ranks": comm.Get_size(), "results": results}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
