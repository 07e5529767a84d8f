"""meshplan as a drop-in for ScaLAPACK's pdgemm: the same block-cyclic pieces in, the same C out.

    mpiexec -n 4 python examples/mpi/matmul_scalapack.py

``plan.bind(comm, layout="scalapack")`` takes and returns the local arrays pdgemm reads: A (100 x 90),
B (90 x 70) and C in mb x nb blocks dealt over a row-major pr x pc process grid, Fortran-ordered.  Inside,
one all-to-all moves A and B into COSMA's pieces and one moves C back.  ScaLAPACK's own pdgemm then runs on
the same pieces (through meshplan's bridge, exec/runtime/scalapack.py) and both results must agree to 1e-12.
Without ScaLAPACK installed the script says so and exits 0.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp
from meshplan.exec.runtime import scalapack

M, N, K = 100, 70, 90


def main(comm):
    rank = comm.Get_rank()
    try:
        sl = scalapack.load_in(comm)                         # the same verdict on every rank
    except scalapack.ScalapackUnavailable as why:
        if rank == 0:
            print(f"matmul_scalapack: skipped, ScaLAPACK is not installed ({why})")
        return None
    rng = np.random.default_rng(0)                           # every rank can build A and B here (small);
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))  # an application has only its pieces
    plan = mp.plan_matmul(M, N, K, comm.Get_size())
    with plan.bind(comm, layout="scalapack") as ex:          # default block and grid: ScaLAPACK's usual
        (pr, pc), (mb, nb) = ex.grid, ex.block
        A_loc = np.asfortranarray(A[ex.indices("A")])        # this rank's block-cyclic pieces
        B_loc = np.asfortranarray(B[ex.indices("B")])
        C_loc = ex(A_loc, B_loc)                             # meshplan, in the block-cyclic layout

    g = scalapack.grid(sl, pr, pc, comm)                     # ScaLAPACK on the same pieces
    C_ref = np.zeros_like(C_loc, order="F")
    if g.inside:
        def desc(rows, cols, local):
            return scalapack.descriptor(sl, g, rows, cols, mb, nb, local.shape[0])
        sl.pdgemm("N", "N", M, N, K, 1.0, A_loc, 1, 1, desc(M, K, A_loc), B_loc, 1, 1, desc(K, N, B_loc),
                  0.0, C_ref, 1, 1, desc(M, N, C_ref))
        sl.close_blacs_context(g.ctx)

    diff = comm.allreduce(float(np.abs(C_loc - C_ref).max(initial=0.0)), op=MPI.MAX)
    scale = comm.allreduce(float(np.abs(C_ref).max(initial=0.0)), op=MPI.MAX)
    err = diff / scale
    if rank == 0:
        print(f"matmul {M}x{N}x{K} on {comm.Get_size()} ranks, {mb}x{nb} blocks on a {pr}x{pc} grid: "
              f"meshplan vs pdgemm max relative difference {err:.1e}: {'verified' if err <= 1e-12 else 'WRONG'}")
    if err > 1e-12:
        raise SystemExit("meshplan's C differs from pdgemm's")
    return err


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
