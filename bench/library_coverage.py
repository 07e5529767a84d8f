"""Would a solve's own messages carry every rank's verdict on its right-hand side to every rank?
(docs/library.md, "Overhead": why the solve checks ``b_loc`` with a collective.)

    mpiexec -n 8 python bench/library_coverage.py cholesky 1536

Factors a random matrix (``lu`` or ``cholesky``, ``N``) with the plan meshplan picks for the communicator's
size, then runs one solve while recording, on every rank, each exchange of the sweeps (thesis 4.7.2–4.7.5;
:mod:`meshplan.exec.factorization.solve`): the peers it sends non-empty messages to and receives them from,
by tag.  Rank 0 then propagates knowledge along those messages: a message carries what its sender knew when
it posted it, and after an exchange a rank knows what it knew before plus what its received messages
carried (the k-th message from ``s`` to ``d`` with a tag matches the k-th receive).  It prints, per rank,
the ranks whose verdict would reach it by the end of the solve, and whether every rank hears from every
rank.  Where one does not, a verdict carried in the messages would miss a wrong ``b_loc`` on that rank.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

import meshplan as mp
import meshplan.exec.factorization.solve as solve_module


def trace_solve(kind: str, N: int, comm) -> list[tuple[int, list[int], list[int]]]:
    """This rank's exchanges in one solve: ``(tag, destinations, sources)`` of the non-empty messages."""
    rng = np.random.default_rng(3)
    M, b = rng.standard_normal((N, N)), rng.standard_normal(N)
    A = M if kind == "lu" else M @ M.T + N * np.eye(N)
    trace: list[tuple[int, list[int], list[int]]] = []
    real = solve_module.exchange

    def recorded(c, sends, recvs, tag, dtype=np.float64, faults=None):
        trace.append((tag, [int(d) for d, a in sends if np.asarray(a).size],
                      [int(s) for s, shape in recvs if int(np.prod(shape))]))
        return real(c, sends, recvs, tag, dtype, faults)

    with mp.plan_factorization(kind, N, comm.Get_size()).bind(comm) as ex:
        factors = ex.factor(A[np.ix_(ex.rows, ex.cols)])
        solve_module.exchange = recorded
        try:
            factors.solve(b[ex.rows])
        finally:
            solve_module.exchange = real
    return trace


def reach(every: list[list[tuple[int, list[int], list[int]]]]) -> list[set[int]]:
    """Per rank, the ranks whose verdict reaches it by the end (a fixpoint over the recorded exchanges)."""
    p = len(every)
    sent: dict[tuple[int, int, int], list[int]] = {}
    for r, calls in enumerate(every):
        for i, (tag, dests, _srcs) in enumerate(calls):
            for d in dests:
                sent.setdefault((r, d, tag), []).append(i)
    know = [[{r} for _ in range(len(every[r]) + 1)] for r in range(p)]  # know[r][i]: before exchange i
    changed = True
    while changed:
        changed = False
        for d, calls in enumerate(every):
            seen: dict[tuple[int, int], int] = {}
            for j, (tag, _dests, srcs) in enumerate(calls):
                new = set(know[d][j])
                for s in srcs:
                    k = seen[(s, tag)] = seen.get((s, tag), -1) + 1
                    new |= know[s][sent[(s, d, tag)][k]]
                if not new <= know[d][j + 1]:
                    know[d][j + 1] |= new
                    changed = True
    return [k[-1] for k in know]


def main(argv: list[str]) -> None:
    kind, N = (argv[0] if argv else "cholesky"), (int(argv[1]) if len(argv) > 1 else 1536)
    comm = MPI.COMM_WORLD
    every = comm.gather(trace_solve(kind, N, comm), root=0)
    if comm.Get_rank() == 0:
        plan = mp.plan_factorization(kind, N, comm.Get_size())
        heard = reach(every)
        print(json.dumps({"kind": kind, "N": N, "p": comm.Get_size(), "grid": list(plan.grid), "block": plan.block,
                          "hears_from": {r: sorted(h) for r, h in enumerate(heard)},
                          "every_rank_hears_every_rank": all(len(h) == len(heard) for h in heard)}))


if __name__ == "__main__":
    main(sys.argv[1:])
