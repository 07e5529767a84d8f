"""The reduction and redistribution executors on real ranks, as a user's program calls them
(``mpiexec -n 4 python executors_check.py``): every case compares with numpy; rank 0 prints
``{"cases": [{"name", "ok", "detail"}]}``.  A failing rank aborts the job (the runtime's guard).

Reduction: every synthesized program of every placement of three problems on ``node=2,gpu=2`` (reductions over
one axis and over both), with lengths that divide the group size and lengths that do not (1, 3, 1001 …),
four dtypes, in place and into ``out=``, C- and Fortran-ordered 2-D arrays, one executor reused for every call;
the counted bytes of an AllReduce; a program bound on each half of a split communicator; an invalid program
refused at bind on every rank; a closed executor refused.
Redistribution: the paper's examples and random problems on 4 ranks: ``ex(source_tile)`` equals
``target_tile`` of the global array, reused, with ``out=``, the source tile never written.
"""

from __future__ import annotations

import json
import random
import sys

import numpy as np
from mpi4py import MPI

import meshplan as mp
from meshplan.exec.runtime.guard import abort_on_error

COMM = MPI.COMM_WORLD
RANK = COMM.Get_rank()
CASES: list[dict] = []


def record(name: str, ok: bool, detail: str = "") -> None:
    ok = COMM.allreduce(bool(ok), op=MPI.LAND)
    CASES.append({"name": name, "ok": ok, "detail": detail})


def data(rank: int, shape, dtype) -> np.ndarray:
    return np.random.default_rng([7, rank]).integers(-50, 50, size=shape).astype(dtype)


def reduction_cases() -> None:
    lengths = (1, 3, 4, 8, 1000, 1001)
    dtypes = ("int64", "int32", "float64", "float32")
    for axes, reduce in (("2,2", "0,1"), ("2,2", "0"), ("2,2", "1")):
        plan = mp.solve_placement("node=2,gpu=2", axes, reduce, max_size=3, programs=None)
        for i, pl in enumerate(plan.study.placements):
            for j in range(len(pl.programs)):
                prog = plan.program(placement=i, program=j)
                bad = []
                with prog.bind(COMM) as red:
                    assert red.groups == prog.reduction_groups
                    for n in lengths:
                        for dt in dtypes:
                            want = sum(data(r, n, np.int64) for r in red.group).astype(dt)
                            x = data(RANK, n, dt)
                            out = np.full_like(x, 99)
                            if red.allreduce(x, out=out) is not out or not np.array_equal(out, want) \
                                    or not np.array_equal(x, data(RANK, n, dt)):
                                bad.append(f"out= n={n} {dt}")
                            y = x.copy()
                            if red.allreduce(y) is not y or not np.array_equal(y, want):
                                bad.append(f"in place n={n} {dt}")
                    for order in ("C", "F"):  # 2-D arrays reduce elementwise whatever their memory order
                        x = np.asarray(data(RANK, (6, 7), np.float64), order=order)
                        want = sum(data(r, (6, 7), np.float64) for r in red.group)
                        if not np.array_equal(red.allreduce(x.copy(order=order)), want):
                            bad.append(f"2-D {order}")
                record(f"reduction {axes} reduce {reduce} placement {i} program {j}: {prog.text!r}", not bad,
                       "; ".join(bad[:4]))


def reduction_bytes_and_errors() -> None:
    plan = mp.solve_placement("node=2,gpu=2", "4", "0", max_size=1)
    prog = plan.program(0, 0)
    red = prog.bind(COMM)
    x = np.ones(1024, dtype=np.float64)
    before = red.counter.sent
    red.allreduce(x)
    sent = red.counter.sent - before
    record("an AllReduce hands MPI its buffer once", str(prog.steps[0].collective) == "AllReduce"
           and sent == x.nbytes, f"sent {sent}")
    red.close()
    try:
        red.allreduce(x)
        refused = False
    except mp.ModelError as err:
        refused = "closed" in str(err)
    record("a closed executor refuses to run", refused)
    bad = mp.plan_reduction("Reduce slice=root", "node=2,gpu=2", "2,2", "0", matrix=[[2, 1], [1, 2]])
    try:
        bad.bind(COMM)
        refused = False
    except mp.VerificationError as err:
        refused = "does not compute the reduction" in str(err)
    record("an invalid program is refused at bind on every rank", refused)
    for what, arg in (("a list", [1.0, 2.0]), ("an empty array", np.empty(0)), ("a strided view", np.ones(10)[::2])):
        with prog.bind(COMM) as red:
            try:
                red.allreduce(arg)
                refused = False
            except mp.ModelError:
                refused = True
        record(f"allreduce refuses {what}", refused)


def reduction_with_the_same_arrays_again() -> None:
    """A training loop: the same gradient and output arrays every call, their contents changing; in place and
    into out= alternating; an array freed and a new one (possibly at the same address) of another length."""
    prog = mp.solve_placement("node=2,gpu=2", "4", "0", max_size=3).program(0, 0)
    ok = True
    with prog.bind(COMM) as red:
        x, out = data(RANK, 1001, np.float64), np.empty(1001)
        for step in range(6):
            x[:] = data(RANK + 10 * step, 1001, np.float64)
            want = sum(data(r + 10 * step, 1001, np.float64) for r in range(4))
            got = red.allreduce(x, out=out) if step % 3 else red.allreduce(x.copy())
            ok = ok and np.array_equal(got, want) and (got is out) == bool(step % 3)
            ok = ok and np.array_equal(red.allreduce(x, out=out), want) and np.array_equal(red.allreduce(x, out=out),
                                                                                            want)
        del x, out
        for n in (999, 1001, 7):
            y = data(RANK, n, np.float32)
            ok = ok and np.array_equal(red.allreduce(y), sum(data(r, n, np.float32) for r in range(4)))
    record("the same arrays call after call, in place and into out=, then others", ok)


def reduction_on_a_sub_communicator() -> None:
    half = COMM.Split(RANK // 2, RANK)
    try:
        plan = mp.solve_placement("node=1,gpu=2", "2", "0", max_size=2)
        ok = True
        for j in range(len(plan.study.placements[0].programs)):
            with plan.program(0, j).bind(half) as red:
                x = data(RANK, 777, np.int64)
                want = sum(data(2 * (RANK // 2) + r, 777, np.int64) for r in range(2))
                ok = ok and np.array_equal(red.allreduce(x), want)
        record("programs bound on each half of a split communicator", ok)
    finally:
        half.Free()


def redistribution_cases() -> None:
    problems = [("x=4", "[4{x}16,16]", "[16,4{x}16]"), ("x=2,y=2", "[4{y,x}16]", "[8{y}16]"),
                ("x=2,y=2", "[8{x}16,8{y}16]", "[8{y}16,8{x}16]"), ("x=4", "[2{x}8]", "[2{x}8]"),
                ("x=2,y=2", "[3{x}6,5{y}10,4]", "[6,10,1{x,y}4]")]
    rng = random.Random(3)
    from meshplan.models.redistribution.sample import random_problem
    from meshplan.models.redistribution.mesh import Mesh

    for k in range(12):
        pr = random_problem(rng, Mesh((("x", 2), ("y", 2))) if k % 2 else Mesh((("x", 4),)), max_rank=3,
                            factors=(1, 2, 3))
        problems.append((pr.mesh.cli(), str(pr.src), str(pr.dst)))
    for mesh, src, dst in problems:
        for which in ("search", "baseline"):
            plan = mp.plan_redistribution(src, dst, mesh, dtype="f64")
            with plan.bind(COMM, program=which) as ex:
                g = np.arange(np.prod(ex.global_shape), dtype=np.float64).reshape(ex.global_shape)
                x = ex.source_tile(g)
                keep = x.copy()
                ok = True
                for _ in range(3):  # reused
                    y = ex(x)
                    ok = ok and np.array_equal(y, ex.target_tile(g)) and np.array_equal(x, keep)
                out = np.empty(ex.target_shape)
                ok = ok and ex(x, out=out) is out and np.array_equal(out, ex.target_tile(g))
            record(f"redistribute {which} {src} -> {dst} on {mesh}", ok)


def main() -> None:
    with abort_on_error(COMM):
        reduction_cases()
        reduction_bytes_and_errors()
        reduction_with_the_same_arrays_again()
        reduction_on_a_sub_communicator()
        redistribution_cases()
    if RANK == 0:
        sys.stdout.write(json.dumps({"cases": CASES}) + "\n")


if __name__ == "__main__":
    main()
