"""The skeleton of every rank program: ``mpiexec -n N python -m <module> JOB.json``.

A capability's rank module is a handler and two lines::

    from meshplan.exec.runtime.rank import RankContext, rank_main

    def handle(ctx: RankContext, job: dict) -> dict:
        ...                      # run the plan on this rank, verify, time
        return {"results": ...}  # what rank 0 returns is printed

    if __name__ == "__main__":
        rank_main(handle)

:func:`rank_main` reads the job file that :func:`meshplan.exec.runtime.launch.run_job`
wrote, guards the whole run with :func:`~meshplan.exec.runtime.guard.abort_on_error`
(any failing rank aborts the job, so no rank waits forever in a collective and
the launcher raises one error), applies the test fault hook, builds a
:class:`RankContext`, calls the handler on every rank, frees the cached
sub-communicators and prints rank 0's result as one JSON line.

Fault hook (tests): ``job["fault"] = {"rank": r, "kind": "raise" | "mute" | "hang" | "corrupt"}``
makes rank ``r`` raise (the job aborts; ``mute`` first sends its stderr to /dev/null, as when
the abort outruns hydra's forwarding of it) or sleep (the launcher's timeout kills
the job) before the handler runs, while the other ranks enter MPI; ``corrupt``
is left to the capability: ``ctx.corrupt`` is true on rank ``r``, which should
then change one element of its input so that verification must fail (a test
that the checker checks).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from mpi4py import MPI

from meshplan.exec.runtime.comms import ByteCounter, CountingComm, SubComms
from meshplan.exec.runtime.guard import abort_on_error
from meshplan.exec.runtime.launch import PROGRESS_ENV, read_job
from meshplan.models.core.outputs import write_output

__all__ = ["RankContext", "rank_main", "inject_fault", "FAULT_KINDS"]

#: kinds of the test fault hook
FAULT_KINDS = ("raise", "mute", "hang", "corrupt")


@dataclass(frozen=True, slots=True)
class RankContext:
    """What a rank handler runs on.

    ``comm`` is ``COMM_WORLD`` wrapped in a :class:`CountingComm` (buffer methods
    count into ``counter``; Barrier and the lower-case methods pass through
    uncounted); ``world`` is the plain ``COMM_WORLD``; ``comms`` makes cached,
    counting sub-communicators (freed by :func:`rank_main` after the handler);
    ``corrupt`` is the fault hook's request to this rank to corrupt its input."""

    comm: CountingComm
    world: Any
    rank: int
    size: int
    comms: SubComms
    counter: ByteCounter
    corrupt: bool = False

    def progress(self, done: int, total: int, what: str = "") -> None:
        """On rank 0, report ``done`` of ``total`` items (``what``: the item under way) to the launcher's
        ``progress`` callback (:func:`~meshplan.exec.runtime.launch.run_job`); a no-op elsewhere or when
        nobody listens."""
        path = os.environ.get(PROGRESS_ENV)
        if self.rank != 0 or not path:
            return
        # whole or not at all: the launcher never reads half a line (no fsync: nobody reads it after a crash)
        write_output(path, f"{int(done)} {int(total)} {' '.join(str(what).split())}\n", what="progress file",
                     fsync=False)


def inject_fault(rank: int, fault: Mapping[str, Any] | None) -> bool:
    """The test hook: on rank ``fault["rank"]`` raise (``kind="raise"``; ``"mute"``: with stderr sent to
    /dev/null) or hang (``kind="hang"``);
    returns whether this rank should corrupt its input (``kind="corrupt"``)."""
    if not fault or rank != int(fault["rank"]):
        return False
    kind = fault.get("kind", "raise")
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; use one of {', '.join(FAULT_KINDS)}")
    if kind == "corrupt":
        return True
    if kind == "hang":
        time.sleep(3600)
    if kind == "mute":
        sys.stderr.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    raise RuntimeError("injected failure (test hook)")


def rank_main(handler: Callable[[RankContext, dict], Any], argv: list[str] | None = None) -> None:
    """Run ``handler(ctx, job)`` on this rank; rank 0 prints its (JSON-serialisable) result."""
    world = MPI.COMM_WORLD
    with abort_on_error(world):
        job = read_job(argv)
        counter = ByteCounter()
        corrupt = inject_fault(world.Get_rank(), job.get("fault"))
        ctx = RankContext(comm=CountingComm(world, counter), world=world, rank=world.Get_rank(),
                          size=world.Get_size(), comms=SubComms(world, counter), counter=counter,
                          corrupt=corrupt)
        result = handler(ctx, job)
        ctx.comms.free()
        if ctx.rank == 0:
            sys.stdout.write(json.dumps(result) + "\n")
            sys.stdout.flush()
