"""Reshard a distributed array inside your own MPI program, never holding more than the larger tile.

    mpiexec -n 4 python examples/mpi/redistribute.py

The array is R x C, first split by rows over mesh axis x and by columns over y; afterwards by rows over y
and by columns over x.  meshplan plans the collectives (memory-bounded redistribution, Rink et al., §7),
``plan.bind(comm)`` runs them in this process on this rank's tile, and the result is checked against numpy.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp


def main(comm):
    p = comm.Get_size()
    px, py = (2, p // 2) if p % 2 == 0 else (p, 1)        # 2 x 2 on four ranks, 2 x 4 on eight
    mesh = f"x={px},y={py}"
    R, C = 6 * p, 10 * p
    src = f"[{R // px}{{x}}{R},{C // py}{{y}}{C}]"         # rows over x, columns over y
    dst = f"[{R // py}{{y}}{R},{C // px}{{x}}{C}]"         # rows over y, columns over x
    plan = mp.plan_redistribution(src, dst, mesh, dtype="f64")

    x_global = np.arange(R * C, dtype=np.float64).reshape(R, C)  # every rank can build it here
    with plan.bind(comm) as ex:
        x = ex.source_tile(x_global)                         # this rank's tile: a local slice, no communication
        y = ex(x)                                            # the planned collectives, in this process
        ok = np.array_equal(y, ex.target_tile(x_global))
    ok = comm.allreduce(ok, op=MPI.LAND)
    if comm.Get_rank() == 0:
        steps = " ; ".join(s.op for s in plan.program) or "nothing to move"
        print(f"redistribute {src} -> {dst} on {mesh}: {steps}; at most {plan.height_bytes} bytes per rank "
              f"(bound {plan.bound_bytes}): {'verified' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("redistribution result differs from numpy")


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
