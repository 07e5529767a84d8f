"""MPI program of ``bench/library.py``: every executor of ``plan.bind(comm)`` beside the hand-written mpi4py
version of its own communication, timed interleaved in one launch (docs/library.md, "Overhead").

    mpiexec -n 4 python bench/library_rank.py JOB.json

The job is ``{"quick": bool, "repeats": int | null, "only": [case, …] | null}``; rank 0 prints
``{"np", "pmpi", "blas_threads", "rows": [...]}``.  Each row is one executor call against a plain mpi4py
program a user would write by hand that makes the same MPI calls on the same data: the same collectives
and point-to-point messages, on sub-communicators made once with ``Comm.Split``, the same local compute
(the gemm, the packing of strided boxes), buffers preallocated where the executor keeps them, on plain
(uncounted) communicators.  The factorization's hand-written side calls the same COnfLUX / COnfCHOX kernels
directly on a raw mpi4py communicator (an LU's communication is inseparable from its algorithm).

Per row (:func:`measure`): both sides run once and are verified against numpy; with the PMPI counter
preloaded the bytes each side hands to MPI in one call are compared rank by rank; then ``meshplan`` (the
executor), ``mpi4py`` (the hand-written version) and ``mpi4py_again`` (the same hand-written call, an A/A
control of the noise) are timed interleaved in a fresh random order per round
(:func:`~meshplan.exec.runtime.timing.time_interleaved`: slowest rank, median); both run and are verified
once more after the timed rounds.  Where the result has one shape on both sides they write into the same
output array (two arrays of one size differ in speed by where they lie, by up to ~5%: docs/tensor.md), which
is overwritten with NaN before each verification run, so a side that leaves it unwritten fails.  The row's
keys are those of :func:`~meshplan.exec.tensor.bench_rank.combine_launches`, which merges the launches.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the case modules next to this file (-P drops it)

from meshplan.exec.runtime import pmpi  # noqa: E402
from meshplan.exec.runtime.rank import RankContext, rank_main  # noqa: E402
from meshplan.exec.runtime.timing import time_interleaved  # noqa: E402

__all__ = ["handle", "measure", "mismatch", "rounds", "spin", "Side"]

#: the variables that pin BLAS to one thread per rank (set by bench/library.py for every rank)
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class Side:
    """One side of a row: ``run()`` makes the call under test, ``check()`` says (on this rank) whether the
    last call's result is right; ``detail()`` (optional) describes that result in a few words (the error,
    the residual), reported when a check fails."""

    __slots__ = ("run", "check", "detail")

    def __init__(self, run: Callable[[], object], check: Callable[[], bool],
                 detail: Callable[[], str] | None = None) -> None:
        self.run, self.check, self.detail = run, check, detail


def mismatch(got, want) -> str:
    """How a result differs from the expected one, in a few words (a failed row's ``detail``)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    wrong = ~np.isclose(got, want, rtol=1e-12, atol=0, equal_nan=False)
    err = np.abs(got - want)
    return (f"{int(wrong.sum())} of {got.size} entries differ ({int(np.isnan(got).sum())} NaN), "
            f"max |error| {np.nanmax(err, initial=0.0):.3g}")


def rounds(repeats: int | None, default: int, quick: bool) -> int:
    """Timed rounds of a row: the job's ``repeats`` if given, else 3 with ``quick``, else the row's default."""
    return int(repeats) if repeats else (3 if quick else default)


def _all(comm, flag: bool) -> bool:
    return bool(comm.allreduce(bool(flag), op=MPI.LAND))


def _pmpi_bytes(comm, call: Callable[[], object]) -> tuple[int, int] | None:
    """``(sent, received)`` bytes this rank hands to MPI in one ``call`` (PMPI counter), None without it."""
    comm.Barrier()
    before = pmpi.read()
    call()
    return pmpi.diff(before)


def _verified(side: Side, poison: Callable[[], object] | None) -> bool:
    if poison is not None:
        poison()
    side.run()
    return bool(side.check())


def _failures(comm, checks: list[tuple[str, Side, bool]]) -> list[str]:
    """The verifications that failed on some rank (collective): ``"<side> <when>: rank r: <detail>; …"``
    for each, so that a failed run says which row, which side and how (bench/library.py prints them)."""
    out = []
    for what, side, ok in checks:
        bad = comm.allgather(None if ok else (side.detail() if side.detail is not None else "wrong result"))
        if any(b is not None for b in bad):
            out.append(f"{what}: " + "; ".join(f"rank {r}: {b}" for r, b in enumerate(bad) if b is not None))
    return out


def spin(seconds: float) -> None:
    """Busy-wait ``seconds`` in Python (the control rows: what a little Python before a call costs)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


def measure(ctx: RankContext, name: str, baseline: str, payload: int, executor: Any, ours: Side, hand: Side,
            repeats: int, poison: Callable[[], object] | None = None) -> dict:
    """Verify, count and time one executor call (``ours``) beside its hand-written version (``hand``).
    ``poison`` overwrites the output both sides write (NaN) before each verification run.  The row's
    ``failed`` lists the verifications that failed (side, before or after the timed rounds, rank, detail);
    an exception names the row (the rank's error ends the launch)."""
    try:
        return _measure(ctx, name, baseline, payload, executor, ours, hand, repeats, poison)
    except Exception as err:
        raise RuntimeError(f"row {name!r} against {baseline!r} on rank {ctx.rank}: "
                           f"{type(err).__name__}: {err}") from err


def _measure(ctx: RankContext, name: str, baseline: str, payload: int, executor: Any, ours: Side, hand: Side,
             repeats: int, poison: Callable[[], object] | None) -> dict:
    world = ctx.world
    counter = executor.counter if executor is not None else None   # None: a control row, no executor
    before = (counter.sent, counter.shared) if counter is not None else (0, 0)
    ok_ours = _verified(ours, poison)
    sent, shared = ((counter.sent - before[0], counter.shared - before[1]) if counter is not None else (0, 0))
    failed = _failures(world, [("executor before timing", ours, ok_ours)])  # before the other side overwrites
    ok_hand = _verified(hand, poison)
    failed += _failures(world, [("hand-written before timing", hand, ok_hand)])
    mine, theirs = _pmpi_bytes(world, ours.run), _pmpi_bytes(world, hand.run)
    same = None if mine is None else _all(world, mine == theirs)
    mpi_bytes = None if mine is None else [world.allreduce(mine[0]), world.allreduce(theirs[0])]
    fns = {"meshplan": ours.run, "mpi4py": hand.run, "mpi4py_again": hand.run}
    med = {k: v.median_s for k, v in time_interleaved(world, fns, repeats=repeats, warmup=1).items()}
    again_ours = _verified(ours, poison)  # once more after the timed calls
    failed += _failures(world, [("executor after timing", ours, again_ours)])
    again_hand = _verified(hand, poison)
    failed += _failures(world, [("hand-written after timing", hand, again_hand)])
    ok_ours = _all(world, ok_ours and again_ours)
    ok_hand = _all(world, ok_hand and again_hand)
    return {"primitive": name, "baseline": baseline, "bytes_per_rank": int(payload),
            "bytes_sent_total": int(world.allreduce(sent)), "bytes_shared_total": int(world.allreduce(shared)),
            "bytes_equal_model": same, "mpi_bytes_sent": mpi_bytes,
            "verified_meshplan": ok_ours, "verified_mpi4py": ok_hand, "repeats": repeats,
            "time_s": med["meshplan"], "baseline_s": med["mpi4py"], "ratio": med["meshplan"] / med["mpi4py"],
            "ratio_baseline_again": med["mpi4py_again"] / med["mpi4py"],
            "time_new_array_s": None, "ratio_new_array": None, "failed": failed}


def handle(ctx: RankContext, job: dict) -> dict:
    from library_cases import CASES  # noqa: PLC0415 - next to this file

    quick = bool(job.get("quick"))
    only = job.get("only") or list(CASES)
    rows = []
    for i, case in enumerate(only):
        ctx.progress(i, len(only), case)
        rows += CASES[case](ctx, quick, job.get("repeats"))
    ctx.progress(len(only), len(only), "done")
    return {"np": ctx.size, "pmpi": pmpi.active(), "blas_threads": {v: os.environ.get(v) for v in BLAS_ENV},
            "rows": rows}


if __name__ == "__main__":
    sys.modules.setdefault("library_rank", sys.modules["__main__"])  # the case modules import this one
    rank_main(handle)
