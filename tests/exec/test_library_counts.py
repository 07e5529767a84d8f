"""The factorization executor counts the same bytes on every call: the first Cholesky factorization and the
first solve of each ``nrhs`` with given factors count their messages one by one, later calls run on the
plain communicator and add the bytes they recorded.  Checked on 2 and 4 ranks for LU and Cholesky, nrhs 1 and
3, over repeated calls and new factors: every call's counted words equal the exact models (the factorization's
and :func:`~meshplan.models.factorization.solve_cost.solve_cost`), every call counts what the first one did,
and — with the PMPI counter preloaded — every call hands MPI the same bytes as the first.  This file is also
the MPI program (run as a script, rank 0 prints the verdicts as JSON)."""

from __future__ import annotations

import json
import sys

import pytest

N = 90          # not a multiple of the block
BLOCK = 16


def _calls(comm, kind: str) -> dict:
    import numpy as np

    import meshplan as mp
    from meshplan.exec.runtime import pmpi
    from meshplan.models.factorization.solve_cost import solve_cost

    p, me = comm.Get_size(), comm.Get_rank()
    plan = mp.plan_factorization(kind, N, p, block=BLOCK)
    out: dict = {"factor": [], "solve": []}

    def counted(fn):
        comm.Barrier()
        s0, r0 = ex.counter.snapshot()
        before = pmpi.read()
        res = fn()
        got = pmpi.diff(before)
        s1, r1 = ex.counter.snapshot()
        return res, (s1 - s0, r1 - r0), got

    with plan.bind(comm) as ex:
        for seed in (1, 2):                      # new factors (new pivots for LU) count anew
            rng = np.random.default_rng(seed)
            A = rng.standard_normal((N, N))
            A = A @ A.T + N * np.eye(N) if kind == "cholesky" else A
            a_loc = A[np.ix_(ex.rows, ex.cols)]
            for _ in range(3):
                F, mine, mpi_bytes = counted(lambda: ex.factor(a_loc))
                words = comm.allreduce(mine[1]) / 8 / p
                out["factor"].append({"mine": mine, "pmpi": mpi_bytes, "words": words,
                                      "model": plan.model_words_per_rank})
            b = rng.standard_normal((N, 3))
            for rhs in (b[:, 0], b):
                nrhs = 1 if rhs.ndim == 1 else 3
                model = solve_cost(plan.problem, plan.schedule.grid, nrhs, F.pivots).per_rank
                for i in range(3):
                    x, mine, mpi_bytes = counted(lambda: F.solve(rhs[ex.rows]))
                    words = comm.allreduce(mine[1]) / 8 / p
                    xg = ex.collect(x)
                    res = None
                    if me == 0:
                        res = float(np.linalg.norm(A @ xg - rhs) / (np.linalg.norm(A) * np.linalg.norm(xg) * N
                                                                    * np.finfo(float).eps))
                    out["solve"].append({"key": [seed, nrhs], "mine": mine, "pmpi": mpi_bytes, "words": words,
                                         "model": model, "residual": res})
    return out


def main(comm) -> None:
    out = {kind: _calls(comm, kind) for kind in ("lu", "cholesky")}
    every = comm.gather(out, root=0)
    if comm.Get_rank() == 0:
        sys.stdout.write(json.dumps({"ranks": comm.Get_size(), "per_rank": every}) + "\n")


pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("np_", (2, 4))
def test_every_call_counts_the_bytes_of_the_first(np_):
    from meshplan.exec.runtime.launch import run_mpi_json

    try:
        from meshplan.exec.runtime import pmpi

        env = pmpi.preload_env()
    except Exception:  # noqa: BLE001 - without the PMPI counter the MPI-bytes comparison is skipped
        env = None
    out = run_mpi_json(np_, [__file__], timeout_s=600, env=env, cwd="/")
    assert out["ranks"] == np_ and len(out["per_rank"]) == np_
    for rank_out in out["per_rank"]:
        for kind, calls in rank_out.items():
            factors = calls["factor"]
            assert len(factors) == 6
            for f in factors:
                assert f["words"] == pytest.approx(f["model"], rel=1e-12), (kind, f)
            if kind == "cholesky":      # no pivoting: every factorization sends the same messages
                assert all(f["mine"] == factors[0]["mine"] for f in factors), (kind, factors)
                if factors[0]["pmpi"] is not None:
                    assert all(f["pmpi"] == factors[0]["pmpi"] for f in factors), (kind, factors)
            by_key: dict = {}
            for s in calls["solve"]:
                by_key.setdefault(tuple(s["key"]), []).append(s)
                assert s["words"] == pytest.approx(s["model"], rel=1e-12), (kind, s)
                assert s["residual"] is None or s["residual"] <= 10, (kind, s)
            assert len(by_key) == 4
            for key, same in by_key.items():
                assert len(same) == 3
                assert all(s["mine"] == same[0]["mine"] for s in same), (kind, key, same)
                if same[0]["pmpi"] is not None:
                    assert all(s["pmpi"] == same[0]["pmpi"] for s in same), (kind, key, same)
                    # what the counter adds is what MPI was handed, less the uncounted check (the same each call)
                    extra = [s["pmpi"][0] - s["mine"][0] for s in same]
                    assert len(set(extra)) == 1 and 0 <= extra[0] <= 24 * np_, (kind, key, extra)


if __name__ == "__main__":
    from mpi4py import MPI

    main(MPI.COMM_WORLD)
