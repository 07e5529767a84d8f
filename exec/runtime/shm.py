"""Node-local shared staging memory for one communicator (MPI-3 shared-memory windows).

Ranks of a communicator that share a node (``Comm.Split_type(COMM_TYPE_SHARED)``) can move a strided
box with two user-space copies — the sender stores it into a slot of the receiver's segment of an
``MPI.Win.Allocate_shared`` window, the receiver copies it out — instead of a numpy pack plus MPICH's
kernel-assisted (CMA) read.  docs/tensor.md ("Benchmark") has the measurements behind this path.

:class:`NodeStaging` is made collectively over its communicator (the node split and an ``allgather`` of
the node map); :meth:`NodeStaging.reserve` grows the window and must be called with the same size by
every rank of a node at the same point of their programs (callers derive the size from plans every rank
holds whole).

Every segment has two halves; the synchronised exchanges of the node alternate between them
(:attr:`NodeStaging.half`).  One barrier per exchange then suffices (:meth:`NodeStaging.publish`, between
the stores and the copies out): a rank stores into half ``h`` in exchange ``k + 2`` only after passing
the barrier of exchange ``k + 1``, which the receiver entered after copying exchange ``k`` out of half
``h``.  The barrier is wrapped in ``MPI_Win_sync`` calls (the MPI-3 unified-memory idiom for load/store
access to a shared window).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

__all__ = ["NodeStaging", "ALIGN"]

#: slot alignment in bytes (a cache line)
ALIGN = 64


class NodeStaging:
    """The node split of ``comm`` and a shared window that holds, per rank, the slots others store into."""

    def __init__(self, comm) -> None:
        """``comm``: a plain mpi4py communicator (:meth:`SubComms.staging` passes its own)."""
        rank = comm.Get_rank()
        self.node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        #: per rank of ``comm``: its node (the lowest rank of ``comm`` on that node) and its rank there
        self.node_of = tuple(comm.allgather(self.node.allreduce(rank, op=MPI.MIN)))
        self.node_rank = tuple(comm.allgather(self.node.Get_rank()))
        #: bytes of each half of a segment
        self.capacity = 0
        #: bumped whenever the window is reallocated (views of the old one are dead)
        self.generation = 0
        #: the half of every segment the next synchronised exchange uses (0 or 1)
        self.half = 0
        self._win: MPI.Win | None = None
        self._segments: dict[int, np.ndarray] = {}

    def same_node(self, a: int, b: int) -> bool:
        return self.node_of[a] == self.node_of[b]

    def reserve(self, nbytes: int) -> None:
        """Make each half of every segment at least ``nbytes`` long (collective over the node when it
        grows; the contents are lost then)."""
        if nbytes <= self.capacity:
            return
        size = -(-max(nbytes, 2 * self.capacity) // ALIGN) * ALIGN
        self._release()
        self._win = MPI.Win.Allocate_shared(2 * size, 1, comm=self.node)
        self._win.Lock_all(MPI.MODE_NOCHECK)
        self.capacity = size
        self.generation += 1
        self._segments = {}

    def segment(self, rank: int) -> np.ndarray:
        """The bytes of ``rank``'s segment (``rank`` of the communicator, on this node)."""
        seg = self._segments.get(rank)
        if seg is None:
            mem, _ = self._win.Shared_query(self.node_rank[rank])
            seg = self._segments[rank] = np.frombuffer(mem, dtype=np.uint8, count=2 * self.capacity)
        return seg

    def slot(self, rank: int, offset: int, shape, dtype, half: int) -> np.ndarray:
        """An array of ``shape`` and ``dtype`` at byte ``offset`` of half ``half`` of ``rank``'s segment
        (valid until the window grows: see :attr:`generation`)."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = half * self.capacity + offset
        return self.segment(rank)[start:start + n].view(dtype).reshape(shape)

    def publish(self) -> None:
        """After this rank's stores into :attr:`half`: every rank of the node has stored before any
        returns (then each copies its slots out); the next synchronised exchange uses the other half."""
        self._win.Sync()
        self.node.Barrier()
        self._win.Sync()
        self.half ^= 1

    def _release(self) -> None:
        self._segments = {}
        if self._win is not None:
            self._win.Unlock_all()
            self._win.Free()
            self._win = None
            self.capacity = 0

    def free(self) -> None:
        """Free the window and the node communicator (collective over the node)."""
        if MPI.Is_finalized():
            return
        self._release()
        if self.node != MPI.COMM_NULL:
            self.node.Free()
