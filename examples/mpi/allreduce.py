"""Sum gradients with a synthesized hierarchical reduction inside your own MPI program.

    mpiexec -n 4 python examples/mpi/allreduce.py

The ranks form a machine of 2 nodes and run data parallel: one axis of size p, reduced.  meshplan
synthesizes and proves the reduction programs (P2 §3–5), simulates them on the machine's links and ranks
them; ``plan.program(...).bind(comm)`` runs the fastest in this process (here reduce-scatter inside each
node, all-reduce across the nodes, all-gather inside each node).  ``allreduce`` sums any array over this
rank's reduction group, of any length and dtype, in place or into ``out=``.
"""

import numpy as np
from mpi4py import MPI

import meshplan as mp


def main(comm):
    p, rank = comm.Get_size(), comm.Get_rank()
    system = f"node=2,gpu={p // 2}"                          # ranks 0..p/2-1 on node 0, the rest on node 1
    plan = mp.solve_placement(system, axes=str(p), reduce="0", max_size=3)   # one data-parallel axis
    prog = plan.program(placement=0, program=0)              # the fastest placement's fastest program
    with prog.bind(comm) as red:
        n = 100_003                                          # any length: it need not divide the group size
        grads = np.random.default_rng(rank).integers(-1000, 1000, n).astype(np.float32)  # exact sums
        summed = red.allreduce(grads.copy())                 # in place: returns the array it summed into
        out = np.empty_like(grads)
        red.allreduce(grads, out=out)                        # or into out=, leaving grads as they were
        want = sum(np.random.default_rng(r).integers(-1000, 1000, n) for r in red.group).astype(np.float32)
        ok = np.array_equal(summed, want) and np.array_equal(out, want)
    ok = comm.allreduce(ok, op=MPI.LAND)
    if rank == 0:
        print(f"{system}: groups {[list(g) for g in red.groups]}, program "
              f"{' ; '.join(str(s.collective) for s in prog.steps)}: {'verified' if ok else 'WRONG'}")
    if not ok:
        raise SystemExit("allreduce result differs from numpy")


if __name__ == "__main__":
    main(MPI.COMM_WORLD)
