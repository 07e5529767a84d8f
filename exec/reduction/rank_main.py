"""The MPI program: ``mpiexec -n N python -m meshplan.exec.reduction.rank_main JOB.json``.

JOB.json (written by :func:`meshplan.exec.reduction.driver.run_programs`) holds
``{"dtype", "bytes", "repeats", "seed", "programs": [{"name", "impl",
"num_devices", "reduction_groups", "steps": [{"collective", "groups"}]}]}``.
It runs on the runtime (:func:`~meshplan.exec.runtime.rank.rank_main`, docs/runtime.md).
Rank ``r`` is device ``r``.  For every program, every rank

1. binds the program with the executor a user's program binds
   (:class:`~meshplan.exec.reduction.executor.ReductionExecutor`, without its validity check: ``meshplan
   run`` also runs invalid programs, to show that they fail); a step MPI cannot run makes the program
   "not executable" on every rank at once, so nothing is launched that could hang;
2. takes the executor's step calls (one mpi4py collective per step on a counting sub-communicator of the
   step's device groups, buffers preallocated in the layout's shape ``(chunks held, elements per chunk)``);
3. runs the program once to count the bytes handed to MPI per step and verify,
   then ``repeats`` timed runs (:func:`~meshplan.exec.runtime.timing.time_steps`),
   each verified: every rank's final buffer must hold the ``k`` chunks in order,
   each equal to the sum over the rank's reduction group of the integer-valued
   random data (:func:`~meshplan.models.core.collectives.apply_collective` of
   an AllReduce with numpy sums, so the check is exact for every dtype).

Times are the slowest rank's cumulative ``MPI.Wtime`` stamps after every step.
Rank 0 prints one JSON line.
"""

from __future__ import annotations

import numpy as np

from meshplan.exec.reduction.driver import NotExecutable, chunk_elements
from meshplan.exec.reduction.executor import ReductionExecutor
from meshplan.exec.runtime.comms import collective_call
from meshplan.exec.runtime.data import integer_array
from meshplan.exec.runtime.rank import RankContext, rank_main
from meshplan.exec.runtime.timing import time_steps
from meshplan.exec.runtime.verify import Verification, mismatched_rows
from meshplan.models.core.collectives import Collective, apply_collective
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep

__all__ = ["handle", "main"]


class _Data:
    """This rank's integer-valued input and the expected group sums (cached per shape)."""

    def __init__(self, seed: int, dtype: str, corrupt: bool) -> None:
        self.seed, self.dtype, self.corrupt = seed, np.dtype(dtype), corrupt
        self.cache: dict = {}

    def device(self, d: int, k: int, E: int) -> np.ndarray:
        return integer_array(self.seed, d, (k, E), self.dtype)

    def own(self, d: int, k: int, E: int) -> np.ndarray:
        key = ("x", d, k, E)
        if key not in self.cache:
            x = self.device(d, k, E)
            if self.corrupt:  # the fault hook: this rank's input is not what the others expect
                x.flat[0] += 1
            self.cache[key] = x
        return self.cache[key]

    def expected(self, group: tuple[int, ...], k: int, E: int) -> np.ndarray:
        """What every member of ``group`` must end with: the AllReduce of the members' data."""
        key = ("sum", group, k, E)
        if key not in self.cache:
            labels = tuple(range(k))
            buffers = [(labels, self.device(m, k, E).astype(np.int64)) for m in group]
            [(_, total), *_] = apply_collective(Collective.ALL_REDUCE, buffers, lambda b: np.sum(b, axis=0))
            self.cache[key] = total.astype(self.dtype)
        return self.cache[key]


def _check(out: np.ndarray, labels, want: np.ndarray, rank: int, k: int) -> str:
    """'' when this rank's final buffer is right, else why not."""
    if tuple(labels) != tuple(range(k)):
        return f"device {rank} ends holding chunks {list(labels)}, not all {k} chunks once"
    bad = mismatched_rows(out, want)
    if bad:
        return (f"device {rank}, chunk {bad[0]}: value differs from the numpy sum over its reduction group"
                + (f" (and {len(bad) - 1} more chunks)" if len(bad) > 1 else ""))
    return ""


def run_one(ctx: RankContext, data: _Data, spec: dict, nbytes: int, repeats: int) -> dict:
    rank, size = ctx.rank, ctx.size
    groups = tuple(tuple(int(d) for d in g) for g in spec["reduction_groups"])
    program = LoweredProgram(tuple(LoweredStep(s["collective"], tuple(tuple(int(d) for d in g) for g in s["groups"]))
                                   for s in spec["steps"]), int(spec["num_devices"]))
    if program.num_devices != size:
        raise ValueError(f"program {spec['name']} has {program.num_devices} devices but the job has {size} ranks")
    ctx.comms.trim(256)  # bound the live sub-communicators (same decision on every rank)
    k = len(groups[0])
    E = chunk_elements(nbytes, k, data.dtype.name)
    mine = next(g for g in groups if rank in g)
    x0, want = data.own(rank, k, E), data.expected(mine, k, E)
    nsteps = len(program.steps)
    res = {"name": spec["name"], "verified": False, "executable": True, "reason": "",
           "chunk_bytes": E * data.dtype.itemsize, "buffer_bytes": k * E * data.dtype.itemsize,
           "time_s": {"min": None, "median": None}, "step_time_s": [], "times_s": [],
           "bytes_per_rank": [0] * size, "bytes_per_step": []}
    executor = None
    if spec.get("impl") == "handwritten":  # the baseline: one plain (uncounted) mpi4py Allreduce
        out = np.empty_like(x0)
        ops = [collective_call(ctx.comms.group(groups).comm, Collective.ALL_REDUCE, x0, out)]
        final_labels = tuple(range(k))
        nsteps = 1
    else:
        try:  # the library path: the executor a user binds, without the validity check (invalid programs run)
            executor = ReductionExecutor(program, groups, ctx.comm, check=False)
        except NotExecutable as err:  # decided identically on every rank: nobody enters MPI
            res.update(executable=False, reason=str(err), step_time_s=[{"min": None, "median": None}] * nsteps)
            return res
        ops, out = executor.step_calls(x0, np.empty_like(x0))
        final_labels = executor.final_labels
    counter = ctx.counter
    per_step = [0] * nsteps
    ctx.world.Barrier()
    for i, op in enumerate(ops):  # run 0: count the bytes handed to MPI per step, and verify
        before = counter.sent
        if op is not None:
            op()
        per_step[i] = counter.sent - before
    reason = [_check(out, final_labels, want, rank, k)]

    def verify_again() -> None:
        if not reason[0]:
            reason[0] = _check(out, final_labels, want, rank, k)

    timing = time_steps(ctx.world, ops, repeats=repeats, after=verify_again)
    verdict = Verification(not reason[0], reason[0]).combine(ctx.world)
    steps_bytes = ctx.world.gather(per_step, root=0)
    if executor is not None:
        executor.close()
    if rank == 0:
        res.update(verified=verdict.ok, reason=verdict.reason, time_s=timing.total.to_json(),
                   step_time_s=[t.to_json() for t in timing.steps], times_s=list(timing.total.times_s),
                   bytes_per_rank=[int(sum(b)) for b in steps_bytes],
                   bytes_per_step=[[int(steps_bytes[r][i]) for r in range(size)] for i in range(nsteps)])
    return res


def handle(ctx: RankContext, job: dict) -> dict:
    """Run every program of the job on this rank; rank 0's result is ``{"ranks", "programs"}``."""
    nbytes, repeats = int(job["bytes"]), int(job.get("repeats", 5))
    data = _Data(int(job.get("seed", 0)), job.get("dtype", "int64"), ctx.corrupt)
    results = []
    for i, spec in enumerate(job["programs"]):
        ctx.progress(i, len(job["programs"]), spec["name"])
        results.append(run_one(ctx, data, spec, nbytes, repeats))
    ctx.progress(len(results), len(results))
    return {"ranks": ctx.size, "programs": results}


def main(argv: list[str] | None = None) -> None:
    rank_main(handle, argv)


if __name__ == "__main__":
    main()
