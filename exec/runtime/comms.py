"""Sub-communicators and byte counting at the communicator layer (inside MPI ranks).

* :class:`ByteCounter` — the bytes one rank handed to MPI (``sent``) and the
  bytes of the receive buffers MPI filled for it (``received``), in total and
  per phase (``with counter.phase("panel"): …``), and the bytes it stored into
  other ranks' node-local staging (``shared``, :mod:`.shm`).
* :class:`CountingComm` — wraps an mpi4py communicator; every buffer method a
  plan uses counts into a :class:`ByteCounter` and then calls the real method
  with the same arguments.  Counted methods: Allreduce, Reduce,
  Reduce_scatter_block, Reduce_scatter, Allgather, Allgatherv, Gather, Gatherv,
  Scatter, Scatterv, Bcast, Ibcast, Alltoall, Alltoallv, Alltoallw, Send, Recv, Sendrecv,
  Isend, Irecv.  Everything else (Barrier, the lower-case pickling methods, Get_rank…)
  passes through uncounted: it is control traffic, not the plan's data.  ``bytes_of(method, *args)`` gives
  what a call would count without making it (an executor that calls the plain communicator in its hot
  path and counts once per call).
* :func:`collective_call` — one of the collectives of
  :class:`~meshplan.models.core.collectives.Collective` as a callable on a
  communicator, built from the enum's metadata (method, reduces, rooted, gathers).
* :class:`SubComms` — a cache of sub-communicators made by ``Comm.Split``,
  either from a partition of the ranks into device groups (:meth:`SubComms.group`)
  or from per-rank colours and keys (:meth:`SubComms.split`); each returned
  communicator is a :class:`CountingComm` on the shared counter.  Every rank
  must ask for the same sub-communicators in the same order (``Split`` is
  collective); :meth:`SubComms.free` releases them all.  :meth:`SubComms.staging` is the
  communicator's node-local shared staging memory (:mod:`.shm`), made on first use.

What counts as a buffer's bytes: a numpy array (or any buffer) counts its
``nbytes``; an mpi4py buffer spec ``[array, counts, displs, datatype]`` counts
``sum(counts)`` elements of the datatype (``[array, count, datatype]``:
``count``; an Alltoallw spec ``[array, (counts, displs), datatypes]``:
``Σ counts[i] × datatypes[i].Get_size()``, the data of each derived type);
``None`` and ``MPI.IN_PLACE`` count nothing, except that an in-place
Allreduce / Reduce / Reduce_scatter hands its receive buffer.  A rank's own block
of an Alltoall or Allgather counts like every other (it is part of the buffer it
hands to MPI).  Root-only buffers count on the root only (Reduce and Gather
receive, Scatter and Bcast send); a Bcast's non-roots receive the buffer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Iterator

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.shm import NodeStaging
from meshplan.models.core.collectives import Collective

__all__ = ["ByteCounter", "CountingComm", "SubComms", "buffer_bytes", "alltoallw_bytes", "collective_call"]


def buffer_bytes(buf: Any) -> int:
    """The bytes an mpi4py buffer argument describes (see the module docstring)."""
    if type(buf) is np.ndarray:  # the common case first: this runs on every counted message
        return buf.nbytes
    if buf is None or buf is MPI.IN_PLACE or buf is MPI.BOTTOM:
        return 0
    if isinstance(buf, (list, tuple)):
        if len(buf) == 3 and type(buf[1]) is int and isinstance(buf[2], MPI.Datatype):  # [data, count, type]
            return buf[1] * buf[2].Get_size()
        data = buf[0]
        rest = list(buf[1:])
        dtype = rest.pop() if rest and isinstance(rest[-1], MPI.Datatype) else None
        item = dtype.Get_size() if dtype is not None else np.asarray(data).itemsize
        if rest:
            counts = rest[0]
            if isinstance(counts, (int, np.integer)):
                return int(counts) * item
            if isinstance(counts, Sequence) or isinstance(counts, np.ndarray):
                return int(sum(int(c) for c in counts)) * item
        return buffer_bytes(data)
    nbytes = getattr(buf, "nbytes", None)
    return int(nbytes) if nbytes is not None else memoryview(buf).nbytes


def _nbytes(buf: Any) -> int:
    """:func:`buffer_bytes` with the two common cases (an array, nothing) first."""
    if type(buf) is np.ndarray:
        return buf.nbytes
    return 0 if buf is None else buffer_bytes(buf)


def alltoallw_bytes(spec: Any) -> int:
    """The bytes an Alltoallw buffer spec describes: ``[data, (counts, displs), types]`` or
    ``[data, counts, displs, types]``; ``count × type size`` summed over the peers."""
    if spec is None or spec is MPI.IN_PLACE:
        return 0
    counts, types = (spec[1][0], spec[2]) if len(spec) == 3 else (spec[1], spec[3])
    return int(sum(int(c) * t.Get_size() for c, t in zip(counts, types)))


class ByteCounter:
    """Bytes one rank sent and received through every :class:`CountingComm` sharing this counter."""

    __slots__ = ("sent", "received", "shared", "phases", "_phase")

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0
        #: bytes this rank stored into other ranks' node-local staging slots (:mod:`.shm`): data that
        #: moved between ranks without being handed to MPI
        self.shared = 0
        #: phase name -> [sent, received]; bytes outside any phase go under ``""``
        self.phases: dict[str, list[int]] = {}
        self._phase = ""

    def add(self, sent: int = 0, received: int = 0) -> None:
        self.sent += sent
        self.received += received
        per = self.phases.get(self._phase)
        if per is None:
            per = self.phases[self._phase] = [0, 0]
        per[0] += sent
        per[1] += received

    def add_shared(self, nbytes: int) -> None:
        self.shared += nbytes

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Attribute the bytes counted inside the block to phase ``name`` (phases may nest; innermost wins)."""
        outer, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = outer

    def snapshot(self) -> tuple[int, int]:
        """``(sent, received)`` now; subtract two snapshots for the bytes of a step."""
        return self.sent, self.received

    def to_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "received": self.received, "shared": self.shared,
                "phases": {k: {"sent": s, "received": r} for k, (s, r) in self.phases.items()}}


def _send(sendbuf: Any, recvbuf: Any) -> Any:
    """What a reduction hands to MPI: its send buffer, or its receive buffer when in place."""
    return recvbuf if sendbuf is MPI.IN_PLACE else sendbuf


class CountingComm:
    """An mpi4py communicator whose buffer methods count bytes into a :class:`ByteCounter`."""

    __slots__ = ("comm", "counter", "rank", "size")

    def __init__(self, comm, counter: ByteCounter) -> None:
        self.comm = comm
        self.counter = counter
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def __getattr__(self, name: str) -> Any:  # uncounted methods (Barrier, allreduce, Get_rank, …)
        return getattr(self.comm, name)

    def _call(self, method: Callable[..., Any], sent: Any, received: Any, *args: Any) -> Any:
        """Count ``sent`` and ``received`` buffers, then call ``method(*args)`` (a method of the wrapped
        communicator, bound: no lookup by name on the per-message path)."""
        self.counter.add(_nbytes(sent), _nbytes(received))
        return method(*args)

    # reductions: an in-place send hands the receive buffer
    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        self._call(self.comm.Allreduce, _send(sendbuf, recvbuf), recvbuf, sendbuf, recvbuf, op)

    def Reduce(self, sendbuf, recvbuf, op=MPI.SUM, root: int = 0) -> None:
        self._call(self.comm.Reduce, _send(sendbuf, recvbuf), self._at(root, recvbuf), sendbuf, recvbuf, op, root)

    def Reduce_scatter_block(self, sendbuf, recvbuf, op=MPI.SUM) -> None:
        self._call(self.comm.Reduce_scatter_block, _send(sendbuf, recvbuf), recvbuf, sendbuf, recvbuf, op)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=MPI.SUM) -> None:
        self._call(self.comm.Reduce_scatter, _send(sendbuf, recvbuf), recvbuf, sendbuf, recvbuf, recvcounts, op)

    # data movement: root-only buffers count on the root
    def Allgather(self, sendbuf, recvbuf) -> None:
        self._call(self.comm.Allgather, sendbuf, recvbuf, sendbuf, recvbuf)

    def Allgatherv(self, sendbuf, recvbuf) -> None:
        self._call(self.comm.Allgatherv, sendbuf, recvbuf, sendbuf, recvbuf)

    def Alltoall(self, sendbuf, recvbuf) -> None:
        self._call(self.comm.Alltoall, sendbuf, recvbuf, sendbuf, recvbuf)

    def Alltoallv(self, sendbuf, recvbuf) -> None:
        self._call(self.comm.Alltoallv, sendbuf, recvbuf, sendbuf, recvbuf)

    def Alltoallw(self, sendbuf, recvbuf) -> None:
        self.counter.add(alltoallw_bytes(sendbuf), alltoallw_bytes(recvbuf))
        self.comm.Alltoallw(sendbuf, recvbuf)

    def Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._call(self.comm.Gather, sendbuf, self._at(root, recvbuf), sendbuf, recvbuf, root)

    def Gatherv(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._call(self.comm.Gatherv, sendbuf, self._at(root, recvbuf), sendbuf, recvbuf, root)

    def Scatter(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._call(self.comm.Scatter, self._at(root, sendbuf), recvbuf, sendbuf, recvbuf, root)

    def Scatterv(self, sendbuf, recvbuf, root: int = 0) -> None:
        self._call(self.comm.Scatterv, self._at(root, sendbuf), recvbuf, sendbuf, recvbuf, root)

    def Bcast(self, buf, root: int = 0) -> None:
        at_root = self.rank == root
        self._call(self.comm.Bcast, buf if at_root else None, None if at_root else buf, buf, root)

    def Ibcast(self, buf, root: int = 0):
        at_root = self.rank == root
        return self._call(self.comm.Ibcast, buf if at_root else None, None if at_root else buf, buf, root)

    # point to point (the messages a factorization sends by the hundred: counted in the fewest steps)
    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self.counter.add(buf.nbytes if type(buf) is np.ndarray else buffer_bytes(buf), 0)
        self.comm.Send(buf, dest, tag)

    def Recv(self, buf, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG, status=None) -> None:
        self.counter.add(0, buf.nbytes if type(buf) is np.ndarray else buffer_bytes(buf))
        self.comm.Recv(buf, source, tag, status)

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = MPI.ANY_SOURCE,
                 recvtag: int = MPI.ANY_TAG, status=None) -> None:
        self._call(self.comm.Sendrecv, sendbuf, recvbuf, sendbuf, dest, sendtag, recvbuf, source, recvtag, status)

    def Isend(self, buf, dest: int, tag: int = 0):
        self.counter.add(buf.nbytes if type(buf) is np.ndarray else buffer_bytes(buf), 0)
        return self.comm.Isend(buf, dest, tag)

    def Irecv(self, buf, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG):
        self.counter.add(0, buf.nbytes if type(buf) is np.ndarray else buffer_bytes(buf))
        return self.comm.Irecv(buf, source, tag)

    def _at(self, root: int, buf: Any) -> Any:
        """``buf`` on the root, nothing elsewhere (buffers that only the root hands or receives)."""
        return buf if self.rank == root else None

    def bytes_of(self, method: str, *args: Any) -> tuple[int, int]:
        """``(sent, received)``: the bytes ``self.<method>(*args)`` would count, by the same rules, without
        calling MPI — for a caller that runs the plain communicator's method and counts once per call."""
        probe = ByteCounter()
        getattr(CountingComm(_Silent(self.rank, self.size), probe), method)(*args)
        return probe.sent, probe.received

    def Free(self) -> None:
        self.comm.Free()


class _Silent:
    """A stand-in communicator of a given rank and size whose every method does nothing
    (:meth:`CountingComm.bytes_of`)."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kw: None


class SubComms:
    """Sub-communicators of ``comm`` by ``Comm.Split``, cached; each a :class:`CountingComm`.

    The cache lives until :meth:`free`; :meth:`trim` frees it at a point the
    caller knows no cached communicator is in use (every rank takes the same
    decision, since every rank asks for the same sub-communicators in the same order).
    """

    def __init__(self, comm, counter: ByteCounter | None = None) -> None:
        self.comm = comm.comm if isinstance(comm, CountingComm) else comm
        self.counter = ByteCounter() if counter is None else counter
        self.rank = self.comm.Get_rank()
        self._cache: dict[Any, CountingComm | None] = {}
        self._staging = None

    def staging(self):
        """The communicator's :class:`~meshplan.exec.runtime.shm.NodeStaging` (made on the first call,
        which is collective over the communicator; the same object afterwards)."""
        if self._staging is None:
            self._staging = NodeStaging(self.comm)
        return self._staging

    def __len__(self) -> int:
        return len(self._cache)

    def group(self, groups: Sequence[Sequence[int]]) -> CountingComm | None:
        """The communicator of this rank's group in ``groups`` (disjoint tuples of ranks; a rank's
        place in its group is its rank in the communicator); None if the rank is in no group."""
        key = ("groups", tuple(tuple(int(d) for d in g) for g in groups))
        if key not in self._cache:
            color, order = MPI.UNDEFINED, 0
            for gi, g in enumerate(key[1]):
                if self.rank in g:
                    color, order = gi, g.index(self.rank)
            self._make(key, color, order)
        return self._cache[key]

    def split(self, color: Sequence[int], key: Sequence[int]) -> CountingComm | None:
        """The communicator from per-rank colours and keys (``color[r]``, ``key[r]`` for every rank
        ``r``, the same arrays on every rank); a negative colour means no communicator."""
        c, k = np.asarray(color, dtype=np.int64), np.asarray(key, dtype=np.int64)
        ck = ("split", c.tobytes(), k.tobytes())
        if ck not in self._cache:
            mine = int(c[self.rank])
            self._make(ck, MPI.UNDEFINED if mine < 0 else mine, int(k[self.rank]))
        return self._cache[ck]

    def _make(self, cache_key: Any, color: int, order: int) -> None:
        sub = self.comm.Split(color, order)
        self._cache[cache_key] = None if sub == MPI.COMM_NULL else CountingComm(sub, self.counter)

    def trim(self, limit: int = 256) -> None:
        """Free the cache if it holds more than ``limit`` communicators (collective)."""
        if len(self._cache) > limit:
            self._free_cache()

    def free(self) -> None:
        """Free every cached communicator and the staging memory (collective: call it on every rank)."""
        self._free_cache()
        if self._staging is not None:
            self._staging.free()
            self._staging = None

    def _free_cache(self) -> None:
        for c in self._cache.values():
            if c is not None:
                c.Free()
        self._cache.clear()


def collective_call(comm, collective: Collective | str, send, recv, *, op=MPI.SUM) -> Callable[[], None]:
    """A callable that runs ``collective`` on ``comm`` (rooted collectives: rank 0 of ``comm`` is the root).

    ``send`` is this rank's input and ``recv`` its output buffer: for a reduction
    the combined values (block ``i`` for member ``i`` of a ReduceScatter; ``None``
    on a Reduce's non-roots), for an AllGather the concatenation in member order,
    for a Broadcast the buffer the root's data arrives in (unused on the root,
    which hands ``send``)."""
    c = Collective.parse(collective)
    method = getattr(comm, c.mpi_method)
    if c.reduces:
        if c.rooted:
            return lambda: method(send, recv, op, 0)
        return lambda: method(send, recv, op)
    if c.gathers:
        return lambda: method(send, recv)
    if not c.rooted:  # pragma: no cover - every collective reduces, gathers or broadcasts
        raise ValueError(f"no MPI lowering for {c}")
    buf = send if comm.Get_rank() == 0 else recv
    return lambda: method(buf, 0)
