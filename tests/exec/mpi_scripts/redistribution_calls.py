"""The redistribution executor's call paths on 4 real ranks (``mpiexec -n 4 python redistribution_calls.py``),
each compared with numpy; rank 0 prints ``{"cases": [{"name", "ok", "detail"}]}``.

Programs whose last step is each kind the executor runs (an all-to-all received in place, one whose pieces
are joined by a copy, an all-gather, a dynamic slice, a permutation, and the empty program), called the ways a
user's loop calls them: the same source and output arrays call after call while their contents change (the
remembered-arrays path), into ``out=`` of C order, of Fortran order (not contiguous in C: written by a
copy) and into the source tile itself, without ``out`` after an ``out`` that was dropped, with a new source
tile after the old one was dropped, in float32 after float64; the bytes counted per call are the same
on every call, and the source tile is never written."""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

import meshplan as mp
from meshplan.exec.runtime.guard import abort_on_error

COMM = MPI.COMM_WORLD
RANK = COMM.Get_rank()
CASES: list[dict] = []

#: (mesh, src, dst): the planned program's steps are checked to end with the kind named
PROBLEMS = [
    ("x=4", "[4{x}16,16]", "[16,4{x}16]"),                 # an all-to-all
    ("x=4", "[16,4{x}16]", "[4{x}16,16]"),                 # an all-to-all the other way
    ("x=2,y=2", "[8{x}16,8{y}16]", "[8{y}16,8{x}16]"),     # a permutation
    ("x=2,y=2", "[4{x,y}16,8]", "[4{y,x}16,8]"),           # a permutation with two tiles kept in place
    ("x=4", "[4{x}16,8]", "[16,8]"),                       # an all-gather
    ("x=4", "[16,8]", "[4{x}16,8]"),                       # a dynamic slice
    ("x=4", "[2{x}8]", "[2{x}8]"),                         # the empty program
    ("x=2,y=2", "[3{x}6,5{y}10,4]", "[6,10,1{x,y}4]"),
]


def record(name: str, ok: bool, detail: str = "") -> None:
    every = COMM.allgather(None if ok else detail)
    CASES.append({"name": name, "ok": all(d is None for d in every),
                  "detail": "; ".join(f"rank {r}: {d}" for r, d in enumerate(every) if d is not None)})


def calls(mesh: str, src: str, dst: str) -> None:
    plan = mp.plan_redistribution(src, dst, mesh, dtype="f64")
    ops = " ; ".join(s.op for s in plan.program) or "(empty)"
    name = f"{src} -> {dst} on {mesh} ({ops})"
    with plan.bind(COMM) as ex:
        n = int(np.prod(ex.global_shape))
        bad = []

        def check(what, got, g, x, keep):
            if not np.array_equal(got, ex.target_tile(g)):
                bad.append(f"{what}: wrong result")
            if not np.array_equal(x, keep):
                bad.append(f"{what}: the source tile was written")

        counted = []

        def counting(f):
            s0 = ex.counter.sent
            y = f()
            counted.append(ex.counter.sent - s0)
            return y

        g = np.arange(n, dtype=np.float64).reshape(ex.global_shape)
        x = ex.source_tile(g)
        out = np.empty(ex.target_shape)
        for step in range(4):  # the same arrays, their contents changing: the remembered path after the first
            g = g + step
            x[...] = ex.source_tile(g)
            keep = x.copy()
            y = counting(lambda: ex(x, out=out))
            check(f"call {step} into the same out", y, g, x, keep)
            if y is not out:
                bad.append(f"call {step}: did not return out")
            check(f"call {step} without out", counting(lambda: ex(x)), g, x, keep)
        fortran = np.empty(ex.target_shape, order="F")
        y = ex(x, out=fortran)
        check("into a Fortran-order out", fortran, g, x, x.copy())
        y2 = ex(x, out=fortran)
        check("into the same Fortran-order out again", y2, g, x, x.copy())
        if y is not fortran or y2 is not fortran:
            bad.append("a Fortran-order out was not returned")
        if ex.source_shape == ex.target_shape:  # the source tile as its own output
            z = ex.source_tile(g)
            for _ in range(2):
                z[...] = ex.source_tile(g)
                if ex(z, out=z) is not z or not np.array_equal(z, ex.target_tile(g)):
                    bad.append("out= the source tile: wrong result")
        out2 = np.empty(ex.target_shape)
        ex(x, out=out2)
        del out2                                   # dropped: the next call without out has none
        check("without out after a dropped out", ex(x), g, x, x.copy())
        del x                                      # dropped: a new source tile of other values
        x = ex.source_tile(g * 2)
        check("a new source tile", ex(x, out=out), g * 2, x, x.copy())
        x32 = ex.source_tile(g).astype(np.float32)
        y32 = ex(x32)
        if y32.dtype != np.float32 or not np.array_equal(y32, ex.target_tile(g).astype(np.float32)):
            bad.append("float32 after float64: wrong result")
        if len(set(counted)) != 1:
            bad.append(f"bytes counted per call differ: {counted}")
    record(name, not bad, "; ".join(bad[:4]))
    return ops


def main() -> None:
    with abort_on_error(COMM):
        kinds = set()
        for mesh, src, dst in PROBLEMS:
            ops = calls(mesh, src, dst)
            kinds.add(ops.split(" ; ")[-1])
    if RANK == 0:
        sys.stdout.write(json.dumps({"cases": CASES, "last_steps": sorted(kinds)}) + "\n")


if __name__ == "__main__":
    main()
