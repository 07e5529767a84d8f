"""What ``plan.bind(comm)`` returns: an object that runs a plan inside the caller's MPI program.

:class:`Executor` is the base of every capability's executor (DESIGN.md, "The capability spine"):

* it works on the communicator the caller gives (``MPI.COMM_WORLD``, a sub-communicator, or a
  :class:`~meshplan.exec.runtime.comms.CountingComm` whose counter then also counts the executor's bytes),
  on this rank's local data, with no job file and no subprocess;
* it is built once, collectively, and reused for any number of calls: what a call needs (sub-communicators,
  committed datatypes, index maps, buffers) is made at construction or on the first call of a given shape
  and kept, so a call creates no MPI handle;
* :meth:`Executor.close` (or leaving a ``with`` block) frees what it made: sub-communicators, datatypes,
  shared windows.  It is collective: call it on every rank of the communicator, as ``bind`` was.  A closed
  executor refuses to run.

``executor.counter`` (a :class:`~meshplan.exec.runtime.comms.ByteCounter`) holds the bytes this rank handed
to MPI and received in the plan's own communication; moving data in and out (``distribute``/``collect``) is
not counted.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.comms import ByteCounter, CountingComm, SubComms
from meshplan.models.core.errors import ModelError

__all__ = ["Executor", "as_comm", "check_root", "scatter_pieces", "gather_pieces"]


def as_comm(comm: Any) -> tuple[Any, ByteCounter]:
    """The plain mpi4py communicator and the counter an executor counts into: the counter of a
    :class:`CountingComm`, else a new one.  :class:`ModelError` for what is not a communicator."""
    if isinstance(comm, CountingComm):
        return comm.comm, comm.counter
    if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
        raise ModelError(f"comm must be an mpi4py communicator such as MPI.COMM_WORLD, got {type(comm).__name__}",
                         param="comm")
    return comm, ByteCounter()


class Executor:
    """Base of the executors: communicator, counter, owned sub-communicators, ``close`` / ``with``."""

    def __init__(self, comm: Any) -> None:
        self.comm, self.counter = as_comm(comm)
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        #: the counting wrapper of :attr:`comm` the plan's own communication goes through
        self.counted = CountingComm(self.comm, self.counter)
        #: sub-communicators this executor owns (freed by :meth:`close`)
        self.comms = SubComms(self.comm, self.counter)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _require_open(self) -> None:
        if self._closed:
            raise ModelError(f"this {type(self).__name__} was closed; bind the plan again")

    def _release(self) -> None:
        """Free what a subclass made besides the sub-communicators (datatypes, windows); collective."""

    def close(self) -> None:
        """Free the sub-communicators, datatypes and windows this executor made (collective; idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._release()
        self.comms.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_root(comm, root: Any) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= int(root) < comm.Get_size():
        raise ModelError(f"root must be a rank of the communicator (0..{comm.Get_size() - 1}), got {root!r}",
                         param="root")
    return int(root)


def scatter_pieces(comm, root: int, global_array: Any, shapes: Sequence[tuple[int, ...]],
                   piece: Callable[[np.ndarray, int], np.ndarray], dtype: Any, *, what: str,
                   global_shape: tuple[int, ...]) -> np.ndarray:
    """Give every rank its piece of an array only ``root`` holds: ``piece(global, r)`` is rank ``r``'s piece
    (of shape ``shapes[r]``), cut on the root and sent with one ``Scatterv``; returns this rank's piece
    (C-contiguous, ``dtype``).  Other ranks pass ``None``.  The root checks the global array's shape and
    everyone learns the verdict before any data moves (no rank waits for a piece that never comes)."""
    root = check_root(comm, root)
    me = comm.Get_rank()
    problem = ""
    if me == root:
        if global_array is None:
            problem = f"{what} is None on the root (rank {root}); pass the global array there"
        else:
            arr = np.asarray(global_array)
            if arr.shape != tuple(global_shape):
                problem = f"{what} has shape {arr.shape}, expected {tuple(global_shape)}"
    problem = comm.bcast(problem, root=root)
    if problem:
        raise ModelError(problem, param=what)
    dt = np.dtype(dtype)
    counts = [int(np.prod(s)) for s in shapes]
    out = np.empty(shapes[me], dtype=dt)
    send = None
    if me == root:
        arr = np.asarray(global_array)
        flat = np.empty(sum(counts), dtype=dt)
        at = 0
        for r, n in enumerate(counts):
            flat[at:at + n] = piece(arr, r).reshape(-1)
            at += n
        send = [flat, counts]
    comm.Scatterv(send, out, root=root)
    return out


def gather_pieces(comm, root: int, local: Any, shapes: Sequence[tuple[int, ...]],
                  place: Callable[[np.ndarray, int, np.ndarray], None], global_shape: tuple[int, ...],
                  dtype: Any, *, what: str) -> np.ndarray | None:
    """The global array on ``root`` from every rank's piece (``place(global, r, piece)`` writes rank ``r``'s
    piece, of shape ``shapes[r]``), gathered with one ``Gatherv``; ``None`` on the other ranks."""
    root = check_root(comm, root)
    me = comm.Get_rank()
    dt = np.dtype(dtype)
    arr = np.asarray(local)
    ok = arr.shape == tuple(shapes[me])
    bad = comm.allgather(None if ok else arr.shape)
    wrong = next(((r, s) for r, s in enumerate(bad) if s is not None), None)
    if wrong is not None:
        raise ModelError(f"{what} on rank {wrong[0]} has shape {wrong[1]}, expected {tuple(shapes[wrong[0]])}",
                         param=what)
    counts = [int(np.prod(s)) for s in shapes]
    send = np.ascontiguousarray(arr, dtype=dt).reshape(-1)
    recv = None
    if me == root:
        flat = np.empty(sum(counts), dtype=dt)
        recv = [flat, counts]
    comm.Gatherv(send, recv, root=root)
    if me != root:
        return None
    out = np.zeros(global_shape, dtype=dt)
    at = 0
    for r, n in enumerate(counts):
        place(out, r, flat[at:at + n].reshape(shapes[r]))
        at += n
    return out
