"""Exchange the halo of a partitioned convolution input inside your own MPI program, with its adjoint.

    mpiexec -n 4 python examples/mpi/halo.py

A (batch, channel, length) tensor is split along its length over all ranks.  A width-5 convolution with
padding 2 needs, on every rank, the inputs of its output block plus a halo from the neighbours
(DistDL, Hewett et al., section 3.2.5).  ``plan.bind(comm).forward`` builds that extended block; ``adjoint``
adds halo values back into their owners, which is what the backward pass of the convolution needs.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp


def main(comm):
    p, rank = comm.Get_size(), comm.Get_rank()
    shape = (2, 3, 10 * p + 3)                               # the length does not divide over the ranks
    plan = mp.plan_halo((1, 1, p), shape, kernel=5, padding=2)
    x_global = np.random.default_rng(0).standard_normal(shape)
    with plan.bind(comm) as halo:
        x = halo.distribute(x_global if rank == 0 else None)  # this rank's block of the length
        ext = halo.forward(x)                                  # block + halo + zero padding
        # the extended block is the zero-padded global input over this rank's window reads
        (e0, e1) = plan.geometry.ranks[rank].extended[2]
        padded = np.pad(x_global, ((0, 0), (0, 0), (2, 2)))
        ok = np.array_equal(ext, padded[:, :, e0 + 2:e1 + 2])
        # dot-product test of the adjoint: <forward(x), y> == <x, adjoint(y)> summed over the ranks
        y = np.random.default_rng(1 + rank).standard_normal(ext.shape)
        lhs = comm.allreduce(float(np.vdot(ext, y)))
        rhs = comm.allreduce(float(np.vdot(x, halo.adjoint(y))))
        ok = ok and abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))
    ok = comm.allreduce(ok, op=MPI.LAND)
    if rank == 0:
        r = plan.ranks[min(1, p - 1)]
        print(f"halo of kernel 5 on {shape} over {p} ranks: rank {r.rank} reads {r.needed[2]} "
              f"(halo {r.halo[2]}) from ranks {list(r.sources)}; forward and adjoint: "
              f"{'verified' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("halo exchange differs from numpy or fails the adjoint test")


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
