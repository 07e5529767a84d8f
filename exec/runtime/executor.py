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

Binding checks that every rank of the communicator holds the same plan (:func:`agree_on_plan`), before the
executor makes anything: ranks that each planned for themselves and got different plans would otherwise
exchange messages of matching sizes and compute a wrong answer without an error.  The check is one
``Allreduce`` of two 64-bit words at bind, none per call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.comms import ByteCounter, CountingComm, SubComms
from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.core.values import jsonify

__all__ = ["Executor", "agree_on_plan", "as_comm", "check_root", "scatter_pieces", "gather_pieces"]

_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def as_comm(comm: Any) -> tuple[Any, ByteCounter]:
    """The plain mpi4py communicator and the counter an executor counts into: the counter of a
    :class:`CountingComm`, else a new one.  :class:`ModelError` for what is not a communicator."""
    if isinstance(comm, CountingComm):
        return comm.comm, comm.counter
    if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
        raise ModelError(f"comm must be an mpi4py communicator such as MPI.COMM_WORLD, got {type(comm).__name__}",
                         param="comm")
    return comm, ByteCounter()


def _canonical(v: Any) -> Any:
    try:
        return jsonify(v)
    except TypeError:  # what has no JSON form is compared by its repr
        return repr(v)


def _ranks(ranks: Sequence[int]) -> str:
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return ("rank " if len(ranks) == 1 else "ranks ") + text


def _differences(every: Sequence[Any], name: str = "") -> str:
    """Which field of the ranks' plans differs, and how: ``grid is [1, 2, 1] on rank 0 but [2, 1, 1] on
    rank 1``; inside a long object or list, the item that differs: ``problem.p is …``, ``steps[0][0] is …``."""
    short = all(len(json.dumps(v)) <= 40 for v in every)  # shown whole: ``grid is [1, 2, 1] …``
    if not short and all(isinstance(v, Mapping) for v in every):
        for key in dict.fromkeys(k for fields in every for k in fields):
            values = [fields.get(key, "(absent)") for fields in every]
            if any(v != values[0] for v in values):
                return _differences(values, f"{name}.{key}" if name else key)
    if not short and all(isinstance(v, list) and len(v) == len(every[0]) for v in every):
        for i in range(len(every[0])):
            if any(v[i] != every[0][i] for v in every):
                return _differences([v[i] for v in every], f"{name}[{i}]")
    seen: dict[str, list[int]] = {}
    for r, v in enumerate(every):
        text = json.dumps(v, sort_keys=True)
        seen.setdefault(text if len(text) <= 80 else text[:77] + "...", []).append(r)
    groups = sorted(seen.items(), key=lambda kv: kv[1][0])
    shown = " but ".join(f"{v} on {_ranks(rs)}" for v, rs in groups[:4])
    return f"{name or 'the plan'} is {shown}" + (f" (and {len(groups) - 4} more values)" if len(groups) > 4 else "")


def agree_on_plan(comm: Any, plan: Mapping[str, Any], *, what: str) -> None:
    """Check, collectively, that every rank of ``comm`` holds the same ``plan`` (the fields of what the
    executor ``what`` will run, e.g. ``{"grid": …, "rounds": …}``): one ``Allreduce`` (max) of this rank's
    64-bit digest of the fields' canonical JSON and of its complement, so every rank learns whether all
    digests are equal.  If not, the ranks gather their fields (this path only) and every rank raises the same
    :class:`VerificationError` naming the first field that differs and which ranks hold which value."""
    if comm.Get_size() == 1:
        return
    fields = {str(k): _canonical(v) for k, v in plan.items()}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=repr)
    digest = np.frombuffer(hashlib.blake2b(text.encode(), digest_size=8).digest(), dtype=np.uint64)[0]
    mine = np.array([digest, digest ^ _ONES], dtype=np.uint64)
    most = np.empty_like(mine)
    comm.Allreduce(mine, most, op=MPI.MAX)
    if most[0] == mine[0] and most[1] == mine[1]:  # max(d) = d and min(d) = ~max(~d) = d: all ranks agree
        return
    every = comm.allgather(fields)
    raise VerificationError(f"{what}: the ranks of comm hold different plans ({_differences(every)}); bind a plan "
                            "made with the same arguments on every rank")


class Executor:
    """Base of the executors: communicator, counter, owned sub-communicators, ``close`` / ``with``.

    ``plan`` holds the fields of what the executor runs (its grid, program, layout …); ``__init__`` first
    checks that every rank of ``comm`` holds the same (:func:`agree_on_plan`), so a subclass calls it before
    any other collective or any check a rank could fail alone."""

    def __init__(self, comm: Any, plan: Mapping[str, Any]) -> None:
        self.comm, self.counter = as_comm(comm)
        agree_on_plan(self.comm, plan, what=type(self).__name__)
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
