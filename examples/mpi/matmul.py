"""Multiply distributed matrices with the communication-optimal COSMA schedule inside your own MPI program.

    mpiexec -n 4 python examples/mpi/matmul.py

C = A·B with A of 100 x 90 and B of 90 x 70 (sizes no rank count divides).  meshplan picks the processor grid
that moves the fewest words per rank for the communicator's size (Kwasniewski, "I/O-optimal schedules…",
chapter 3); ``plan.bind(comm)`` runs it in this process: ``distribute`` hands every rank its piece of A and
B from rank 0, ``ex(A_loc, B_loc)`` multiplies the pieces, ``collect`` gathers C on rank 0, where it is
checked against numpy.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp

M, N, K = 100, 70, 90


def main(comm):
    rank = comm.Get_rank()
    A = B = None
    if rank == 0:                                            # only the root holds the global matrices
        rng = np.random.default_rng(0)
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    plan = mp.plan_matmul(M, N, K, comm.Get_size())
    with plan.bind(comm) as ex:
        A_loc = ex.distribute("A", A)                        # this rank's piece of A (others pass None)
        B_loc = ex.distribute("B", B)
        C_loc = ex(A_loc, B_loc)                             # the planned schedule on this rank's pieces
        ex(A_loc, B_loc, out=C_loc)                          # reusable; out= is written in place
        C = ex.collect(C_loc)                                # the global C on rank 0, None elsewhere
    err = None
    if rank == 0:
        want = A @ B
        err = float(np.abs(C - want).max() / np.abs(want).max())
        print(f"matmul {M}x{N}x{K} on {comm.Get_size()} ranks: grid {plan.grid}, "
              f"{plan.model_words_per_rank.max} words per rank (SUMMA "
              f"{plan.baselines['summa'].model_words_per_rank.max}), max relative error {err:.1e}: "
              f"{'verified' if err <= 1e-12 else 'WRONG'}")
    err = comm.bcast(err, root=0)
    if err > 1e-12:
        raise SystemExit("matmul result differs from numpy")
    return err


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
