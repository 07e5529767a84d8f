"""Solve A x = b with a distributed LU factorization inside your own MPI program (COnfLUX).

    mpiexec -n 4 python examples/mpi/lu.py

meshplan chooses the 2.5-D grid and block size of COnfLUX (Kwasniewski, "I/O-optimal schedules…", thesis
section 4.7: tournament pivoting, row masking), ``plan.bind(comm)`` factors this rank's block-cyclic tile in
this process, and ``F.solve`` solves with the distributed factors (nothing is gathered).  The matrix has a
zero diagonal, so it cannot be factored without pivoting; N = 90 is not a multiple of the block size.
The solve is checked with the scaled residual ‖Ax − b‖ / (‖A‖·‖x‖·N·ε) ≤ 10.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp


def main(comm):
    N = 90
    plan = mp.plan_factorization("lu", N, comm.Get_size())
    A = b = None
    if comm.Get_rank() == 0:                                 # only the root needs the global arrays
        rng = np.random.default_rng(7)
        A = rng.standard_normal((N, N))
        np.fill_diagonal(A, 0.0)                             # a zero diagonal: LU needs pivoting
        b = rng.standard_normal(N)
    with plan.bind(comm) as ex:
        F = ex.factor(ex.distribute(A))                      # this rank's tile A[ex.rows, ex.cols]
        x = ex.collect(F.solve(ex.distribute_rhs(b)))        # the global x on the root, None elsewhere
    residual = None
    if comm.Get_rank() == 0:
        residual = np.linalg.norm(A @ x - b) / (np.linalg.norm(A) * np.linalg.norm(x) * N * np.finfo(float).eps)
        ok = residual <= 10
        print(f"LU solve of N = {N} on grid {list(plan.grid)} v={plan.block} ({comm.Get_size()} ranks, "
              f"tournament pivoting): scaled residual {residual:.2g}: {'verified' if ok else 'WRONG'}")
    residual = comm.bcast(residual, root=0)
    if not residual <= 10:
        raise SystemExit(f"LU solve failed: scaled residual {residual:.3g} > 10")
    return residual


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
