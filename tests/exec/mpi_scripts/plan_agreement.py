"""Ranks that bind different plans (``mpiexec -n 4 python plan_agreement.py``): each case builds a plan that
differs on some ranks, as ranks that each call a planner could, and binds it on ``COMM_WORLD``.  Rank 0 prints
``{"cases": [{"name", "raised", "messages", "ok"}]}``: ``raised`` says per rank whether bind raised
:class:`VerificationError`, ``messages`` holds each rank's message.  A good bind after the failures still
computes the right product (the failed binds left nothing behind).  A failing rank aborts the job.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
from mpi4py import MPI

import meshplan as mp
from meshplan.exec.runtime.guard import abort_on_error
from meshplan.models.core.errors import VerificationError
from meshplan.models.matmul.problem import Grid

COMM = MPI.COMM_WORLD
RANK = COMM.Get_rank()
CASES: list[dict] = []


def bind_case(name: str, bind) -> None:
    """Call ``bind()`` on every rank; record which ranks raised VerificationError and with what message."""
    message = None
    try:
        ex = bind()
    except VerificationError as err:
        message = str(err)
    else:
        ex.close()
    got = COMM.allgather(message)
    CASES.append({"name": name, "raised": [m is not None for m in got], "messages": got})


def matmul_with_grid(grid: tuple[int, int, int]):
    plan = mp.plan_matmul(64, 64, 64, 4)
    return dataclasses.replace(plan, schedule=dataclasses.replace(plan.schedule, grid=Grid(*grid)))


def cases() -> None:
    # the fault the check exists for: the same problem, grids of equal words that differ by rank
    plan = matmul_with_grid((1, 4, 1) if RANK == 0 else (4, 1, 1))
    bind_case("matmul grid", lambda: plan.bind(COMM))
    mm = mp.plan_matmul(64, 64, 64, 4)
    bind_case("matmul layout", lambda: mm.bind(COMM, layout="scalapack" if RANK == 0 else "blocked"))
    # a plan for another p on one rank: that rank alone would refuse comm; all must raise instead
    other = mp.plan_matmul(64, 64, 64, 2 if RANK == 1 else 4)
    bind_case("matmul p", lambda: other.bind(COMM))
    lu = mp.plan_factorization("lu", 90, 4, grid=(1, 4, 1) if RANK == 0 else (4, 1, 1))
    bind_case("factorization grid", lambda: lu.bind(COMM))
    kind = mp.plan_factorization("cholesky" if RANK == 3 else "lu", 90, 4)
    bind_case("factorization kind", lambda: kind.bind(COMM))
    red = mp.plan_redistribution("[4{x}16,16]", "[4{x}16,16]" if RANK == 2 else "[16,4{x}16]", "x=4")
    bind_case("redistribution program", lambda: red.bind(COMM))
    placement = mp.solve_placement("node=2,gpu=2", "2,2", "0,1", max_size=3, programs=None)
    prog = placement.program(placement=0, program=1 if RANK == 3 else 0)
    bind_case("reduction program", lambda: prog.bind(COMM))
    halo = mp.plan_halo("1,1,4", (2, 3, 40), 5 if RANK == 1 else 3)
    bind_case("halo window", lambda: halo.bind(COMM))
    # the same plan everywhere binds; different plans on the two halves of a split communicator are fine too
    bind_case("matmul same plan", lambda: mp.plan_matmul(64, 64, 64, 4).bind(COMM))
    half = COMM.Split(RANK // 2, RANK)
    size = 33 if RANK < 2 else 34
    bind_case("matmul per half", lambda: mp.plan_matmul(size, size, size, 2).bind(half))
    half.Free()


def still_works() -> bool:
    """A good bind after the refused ones multiplies correctly."""
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((64, 48)), rng.standard_normal((48, 40))
    with mp.plan_matmul(64, 40, 48, 4).bind(COMM) as ex:
        C = ex.collect(ex(ex.distribute("A", A if RANK == 0 else None), ex.distribute("B", B if RANK == 0 else None)))
    ok = RANK != 0 or bool(np.allclose(C, A @ B))
    return COMM.allreduce(ok, op=MPI.LAND)


def main() -> None:
    with abort_on_error(COMM):
        cases()
        works = still_works()
    if RANK == 0:
        sys.stdout.write(json.dumps({"cases": CASES, "still_works": works}) + "\n")


if __name__ == "__main__":
    main()
