"""A tensor primitive called again with the same arrays runs its messages as persistent requests
(exec/tensor/exchange.py, ``Exchange.run``): every primitive of the adjoint suite, forward and adjoint, packed
and node-staged, gives bit for bit what a call on fresh arrays gives — over several calls whose input changes
in place, after a switch to other arrays and back — and counts the same bytes per call; ``close()`` frees the
requests.  One ``mpiexec`` per rank count: this file is also the MPI program (run as a script, rank 0 prints
the verdicts as JSON)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi
RANKS = (2, 4)


def _calls(ctx, prim, direction: str, shape_in, shape_out, rng) -> tuple[bool, bool]:
    """``(equal, same_bytes)`` of 3 calls on one pair of arrays, 2 on another, 1 on the first again (the input
    rewritten in place each time) against calls on fresh arrays."""
    import numpy as np

    run = getattr(prim, direction)
    inputs = [None if shape_in is None else rng.standard_normal(shape_in) for _ in range(6)]
    want, fresh_bytes = [], []
    for v in inputs:
        before = ctx.counter.sent
        got = run(None if v is None else v.copy())
        fresh_bytes.append(ctx.counter.sent - before)
        want.append(None if got is None else got.copy())
    pairs = [(None if shape_in is None else np.empty(shape_in), None if shape_out is None else np.empty(shape_out))
             for _ in range(2)]
    equal, same_bytes = True, True
    for k, which in enumerate((0, 0, 0, 1, 1, 0)):
        x, out = pairs[which]
        if x is not None:
            x[...] = inputs[k]
        if out is not None:
            out.fill(np.nan)
        before = ctx.counter.sent
        got = run(x, out=out)
        same_bytes &= ctx.counter.sent - before == fresh_bytes[k]
        equal &= (got is None and want[k] is None) or (got is out and np.array_equal(got, want[k]))
    return equal, same_bytes


def main(comm) -> dict:
    import numpy as np

    from meshplan.exec.runtime.comms import ByteCounter, CountingComm, SubComms
    from meshplan.exec.runtime.rank import RankContext
    from meshplan.exec.tensor import exchange
    from meshplan.exec.tensor.primitives import AllSumReduce
    from meshplan.exec.tensor.suite import _build
    from meshplan.models.tensor.cases import adjoint_cases

    counter = ByteCounter()
    counted = CountingComm(comm, counter)
    ctx = RankContext(counted, comm, comm.Get_rank(), comm.Get_size(), SubComms(counted, counter), counter)
    out = {}
    for staged in (False, True):
        with exchange.stage_min(0 if staged else None):
            for n, case in enumerate(adjoint_cases(comm.Get_size())):
                prim = _build(ctx, case)
                if isinstance(prim, AllSumReduce):
                    continue                         # one collective, no exchange
                rng = np.random.default_rng([n, comm.Get_rank()])
                verdict = {}
                for direction, shapes in (("forward", (prim.in_shape, prim.out_shape)),
                                          ("adjoint", (prim.out_shape, prim.in_shape))):
                    equal, same_bytes = _calls(ctx, prim, direction, *shapes, rng)
                    verdict[direction] = [bool(comm.allreduce(int(equal), op=_min())),
                                          bool(comm.allreduce(int(same_bytes), op=_min()))]
                bound = sum(len(ex._requests) for ex in (prim._fwd, prim._adj) if isinstance(ex, exchange.Exchange))
                prim.close()
                freed = sum(len(ex._requests) for ex in (prim._fwd, prim._adj) if isinstance(ex, exchange.Exchange))
                verdict["requests"] = [comm.allreduce(bound), comm.allreduce(freed)]
                out[f"{'staged:' if staged else ''}{case['name']}"] = verdict
    ctx.comms.free()
    return out


def _min():
    from mpi4py import MPI

    return MPI.MIN


@pytest.fixture(scope="module")
def verdicts():
    from meshplan.exec.runtime.launch import run_mpi_json

    cache: dict[int, dict] = {}

    def get(np_: int) -> dict:
        if np_ not in cache:
            cache[np_] = run_mpi_json(np_, [str(Path(__file__).resolve())], timeout_s=300)
        return cache[np_]

    return get


@pytest.mark.parametrize("np_", RANKS)
def test_repeated_calls_equal_fresh_ones(verdicts, np_):
    got = verdicts(np_)
    assert len(got) >= 10 and any(k.startswith("staged:") for k in got), sorted(got)
    bad = {k: v for k, v in got.items() if not all(v["forward"] + v["adjoint"])}
    assert not bad, bad
    assert sum(v["requests"][0] for v in got.values()) > 0      # the repeated calls did bind requests
    assert all(v["requests"][1] == 0 for v in got.values())     # close() freed them


if __name__ == "__main__":
    from mpi4py import MPI

    from meshplan.exec.runtime.guard import abort_on_error

    with abort_on_error(MPI.COMM_WORLD):
        result = main(MPI.COMM_WORLD)
        if MPI.COMM_WORLD.Get_rank() == 0:
            sys.stdout.write(json.dumps(result) + "\n")
