"""Solve A x = b for a symmetric positive definite A with a distributed Cholesky factorization inside your
own MPI program (COnfCHOX).

    mpiexec -n 4 python examples/mpi/cholesky.py

meshplan chooses the 2.5-D grid and block size of COnfCHOX (Kwasniewski, "I/O-optimal schedules…", thesis
section 4.7.5), ``plan.bind(comm)`` factors A = L·Lᵀ on this rank's block-cyclic tile in this process, and
``F.solve`` solves with the distributed factor for several right-hand sides at once (nothing is gathered).
N = 90 is not a multiple of the block size.  The solve is checked with the scaled residual
‖Ax − b‖ / (‖A‖·‖x‖·N·ε) ≤ 10 for every right-hand side.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp


def main(comm):
    N, nrhs = 90, 3
    plan = mp.plan_factorization("cholesky", N, comm.Get_size())
    A = b = None
    if comm.Get_rank() == 0:                                 # only the root needs the global arrays
        rng = np.random.default_rng(11)
        M = rng.standard_normal((N, N))
        A = M @ M.T + N * np.eye(N)                          # symmetric positive definite
        b = rng.standard_normal((N, nrhs))
    with plan.bind(comm) as ex:
        F = ex.factor(ex.distribute(A))                      # this rank's tile A[ex.rows, ex.cols]
        x = ex.collect(F.solve(ex.distribute_rhs(b)))        # the global N × nrhs x on the root
    residual = None
    if comm.Get_rank() == 0:
        eps = np.finfo(float).eps
        residual = max(np.linalg.norm(A @ x[:, k] - b[:, k]) / (np.linalg.norm(A) * np.linalg.norm(x[:, k]) * N * eps)
                       for k in range(nrhs))
        ok = residual <= 10
        print(f"Cholesky solve of N = {N} with {nrhs} right-hand sides on grid {list(plan.grid)} v={plan.block} "
              f"({comm.Get_size()} ranks): scaled residual {residual:.2g}: {'verified' if ok else 'WRONG'}")
    residual = comm.bcast(residual, root=0)
    if not residual <= 10:
        raise SystemExit(f"Cholesky solve failed: scaled residual {residual:.3g} > 10")
    return residual


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
