"""Run a set of :class:`~meshplan.models.tensor.plans.Transfer` s on MPI (DistDL paper, section 2.2.1:
every primitive is send-receive pairs, its adjoint the same pairs reversed with an add).

An :class:`Exchange` is built once per primitive and direction, with everything a call needs decided and
allocated: contiguous boxes move in place (views of the input and output), strided send boxes go through
the node's shared staging window (to a rank of the same node) or are packed into preallocated buffers,
strided receive boxes arrive through a committed MPI derived datatype (a subarray, or nested indexed types
when a halo selects runs of a dimension), adding receives (an adjoint) land in one preallocated buffer.  One
``Isend``/``Irecv`` per remote box that is not staged; a transfer to itself is a local copy, done while the
messages are in flight.  Received boxes are added in the plan's order, so sums are deterministic, and the
bytes handed to MPI plus the bytes stored into staging slots are exactly the transfers' volumes.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Callable, Iterator, Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import from_numpy_dtype

from meshplan.exec.runtime.shm import ALIGN, NodeStaging
from meshplan.exec.tensor.boxes import (box_index, flat_range, free_types, local_runs, local_slices, selected_shape,
                                        selection_type)
from meshplan.exec.tensor.persistent import Persistent, none, release, weak
from meshplan.models.core.errors import ModelError
from meshplan.models.tensor.partition import Box, box_shape, box_volume
from meshplan.models.tensor.plans import Transfer

__all__ = ["Exchange", "run_transfers", "reverse", "local_slices", "selection_type", "free_types", "PACK_LIMIT",
           "STAGE_MIN", "STAGE_MAX", "stage_min"]

_TAG = 0x7E5

#: strided send boxes up to this many bytes are packed by numpy (docs/tensor.md, "Benchmark")
PACK_LIMIT = 2 << 20

#: strided send boxes of :data:`STAGE_MIN` to :data:`STAGE_MAX` bytes to a rank of the same node go through
#: node-local staging (``STAGE_MIN = None``: never; docs/tensor.md, "Node staging")
STAGE_MIN: int | None = 64 << 10
STAGE_MAX = 4 << 20


@contextlib.contextmanager
def stage_min(value: int | None) -> Iterator[None]:
    """:data:`STAGE_MIN` set to ``value`` for the exchanges built inside the block (``None``: staging off)."""
    global STAGE_MIN
    saved, STAGE_MIN = STAGE_MIN, value
    try:
        yield
    finally:
        STAGE_MIN = saved


def reverse(transfers: Sequence[Transfer]) -> tuple[Transfer, ...]:
    return tuple(t.reversed() for t in transfers)



def _free_all(types: list, requests: list) -> None:
    """An :class:`Exchange`'s finalizer: its persistent requests, then its datatypes (idempotent)."""
    release(requests)
    free_types(types)


class Exchange(Persistent):
    """The transfers of one direction of a primitive, bound to this rank's arrays' boxes (construction is
    collective over the communicator when ``staging`` is given and some box may be staged, local
    otherwise; :meth:`run` is collective over the communicator).

    A box that is one contiguous stretch of its array is sent or received in place (a view: MPICH moves
    large contiguous messages between processes in a single copy, CMA).  A strided send box of
    :data:`STAGE_MIN` to :data:`STAGE_MAX` bytes to a rank of the same node goes through the
    communicator's node-local staging (:mod:`meshplan.exec.runtime.shm`, when ``staging`` is given): the
    sender stores it into a slot of the receiver's shared segment, the receiver copies it out after a
    node barrier (one per call: consecutive calls alternate between two halves of the segments) — two
    user-space copies, measured faster on this machine than a numpy pack plus
    MPICH's kernel-assisted read or a strided datatype (docs/tensor.md, "Benchmark").  Otherwise a
    strided send box up to :data:`PACK_LIMIT` bytes is packed by numpy into a preallocated buffer just
    before its ``Isend`` (peers in rotated order); a larger one goes as its MPI datatype (MPICH then
    pipelines pack and unpack through cache-sized cells).  A strided box is received through its MPI
    datatype.  An adding exchange receives into one preallocated buffer (or its staging slot) and adds
    in plan order.

    The committed datatypes are freed by :meth:`free`, or when the exchange is garbage-collected
    (``weakref.finalize``), whichever comes first."""

    TAG = _TAG

    def __init__(self, comm, transfers: Sequence[Transfer], src_box: Box | None, dst_box: Box | None, dtype,
                 *, add: bool, staging: Callable[[], NodeStaging] | None = None) -> None:
        self.comm, self.add = comm, add
        self.dtype = np.dtype(dtype)
        me, size = comm.Get_rank(), comm.Get_size()
        base = from_numpy_dtype(self.dtype)
        so = None if src_box is None else [lo for lo, _ in src_box]
        do = None if dst_box is None else [lo for lo, _ in dst_box]
        sshape = None if src_box is None else box_shape(src_box)
        dshape = None if dst_box is None else box_shape(dst_box)
        self.local, sends, self.recvs = [], [], []
        #: the committed datatypes this exchange owns (freed once, by :meth:`free` or the finalizer)
        self.types: list[MPI.Datatype] = []
        #: the persistent requests of the arrays of the last calls (see :meth:`run`), freed with the types
        self._requests: list[MPI.Prequest] = []
        self._finalizer = weakref.finalize(self, _free_all, self.types, self._requests)
        self._closed = False
        self._last = (none, none)     # the previous call's arrays (weakly)
        self._bound = None              # (src, dst, the persistent call's parts) when they repeat
        self._counter = getattr(comm, "counter", None)
        staged, self.staging = self._staged(comm, transfers, so, sshape, staging)
        slots = self._slots(transfers, staged) if staged else {}
        #: whether :meth:`run` synchronises this node (some staged box has both ends on it)
        self.sync = bool(staged) and any(self.staging.same_node(transfers[i].src, me) for i in staged)
        typ = lambda shape, t, origin: self._own(selection_type(base, shape, local_runs(t, origin)))
        into_me, rvol = 0, 0
        for i, t in enumerate(transfers):
            if t.volume == 0:
                continue
            if t.dst == me:
                into_me += t.volume
            if t.src == me and t.dst == me:
                self.local.append((box_index(t, so), box_index(t, do)))
            elif t.src == me and i in staged:
                sends.append((t.dst, ("stage", box_index(t, so), slots[i], selected_shape(t))))
            elif t.src == me:
                flat = flat_range(t, so, sshape)
                if flat is not None:
                    sends.append((t.dst, ("flat",) + flat))
                elif t.volume * self.dtype.itemsize <= PACK_LIMIT:
                    sends.append((t.dst, ("pack", box_index(t, so), np.empty(selected_shape(t), self.dtype))))
                else:
                    sends.append((t.dst, ("type", typ(sshape, t, so))))
            elif t.dst == me and i in staged:
                self.recvs.append((t.src, ("stage", slots[i], selected_shape(t)), box_index(t, do)))
            elif t.dst == me and add:
                self.recvs.append((t.src, ("buf", rvol, selected_shape(t)), box_index(t, do)))
                rvol += t.volume
            elif t.dst == me:
                flat = flat_range(t, do, dshape)
                self.recvs.append((t.src, ("flat",) + flat if flat else
                                   ("type", typ(dshape, t, do)), None))
        #: sends in rotated peer order (stable: boxes to one peer keep the plan's order, as their receives)
        self.sends = sorted(sends, key=lambda s: (s[0] - me) % size)
        # the messages go through the plain communicator; a counting one's counter gets the bytes of a call
        # at once (what it would have counted message by message: the same every call)
        self._raw = getattr(comm, "comm", comm)
        self._bytes = (sum(self._message_bytes(how, what) for _, (how, *what) in self.sends),
                       sum(self._message_bytes(how, where) for _, (how, *where), _ in self.recvs))
        #: the receive buffer of an adding exchange (one, reused by every call), and each box's view of it
        self._rbuf = np.empty(rvol, dtype=self.dtype) if add else None
        self._rviews = {k: self._rbuf[where[0]:where[0] + int(np.prod(where[1]))].reshape(where[1])
                        for k, (_, (how, *where), _) in enumerate(self.recvs) if how == "buf"}
        #: whether a copying exchange writes every element of the output (then it needs no initial fill)
        self.covers = (not add) and dst_box is not None and into_me == box_volume(dst_box)
        #: whether an adding exchange's one local box is its whole output: then the local box is copied in
        #: (instead of a fill with zeros and an add) and the received boxes are added to it
        local_volume = sum(t.volume for t in transfers if t.src == me and t.dst == me)
        self.local_covers = (add and dst_box is not None and len(self.local) == 1
                             and local_volume == box_volume(dst_box))
        #: the receives copied or added after the wait (those into a buffer or a staging slot), in plan order:
        #: none for a copying exchange without staging, which then runs no Python after its wait
        self._after = tuple(k for k, (_, (how, *_), _) in enumerate(self.recvs) if how in ("stage", "buf"))
        #: whether the output must be filled before :meth:`run`: an adding exchange adds into it (unless its
        #: local box covers it), a copying one that does not write every element leaves the rest
        self.needs_fill = (not self.local_covers) if add else (not self.covers)
        self._local_add = add and not self.local_covers    # the local boxes are added (else copied)
        self._slot_views = None

    def _message_bytes(self, how: str, what) -> int:
        """The bytes one send or receive hands to MPI (staged boxes go through shared memory: none)."""
        if how == "stage":
            return 0
        if how == "flat":
            return int(what[1]) * self.dtype.itemsize
        if how == "buf":
            return int(np.prod(what[1])) * self.dtype.itemsize
        if how == "pack":
            return int(what[1].nbytes)
        return int(what[0].Get_size())  # one element of the box's committed datatype

    def _staged(self, comm, transfers, so, sshape, staging):
        """The indices of the transfers that go through node-local staging — the sends a rank would
        otherwise pack — the same set on every rank (each rank says which of its own send boxes are
        strided; one ``allgather``), and the staging."""
        if staging is None or STAGE_MIN is None:
            return frozenset(), None
        item = self.dtype.itemsize
        cand = [i for i, t in enumerate(transfers)
                if t.volume and t.src != t.dst and STAGE_MIN <= t.volume * item <= STAGE_MAX]
        if not cand:
            return frozenset(), None
        st = staging()
        cand = [i for i in cand if st.same_node(transfers[i].src, transfers[i].dst)]
        if not cand:
            return frozenset(), st
        me = comm.Get_rank()
        mine = [i for i in cand if transfers[i].src == me and flat_range(transfers[i], so, sshape) is None]
        return frozenset(i for got in comm.allgather(mine) for i in got), st

    def _slots(self, transfers, staged) -> dict[int, int]:
        """Byte offset of each staged transfer in its receiver's segment (plan order, aligned); reserves
        the largest segment any rank of this node needs (the same size on every rank of the node)."""
        st, item = self.staging, self.dtype.itemsize
        ends: dict[int, int] = {}
        slots = {}
        for i in sorted(staged):
            t = transfers[i]
            off = ends.get(t.dst, 0)
            slots[i] = off
            ends[t.dst] = off + -(-t.volume * item // ALIGN) * ALIGN
        me = self.comm.Get_rank()
        st.reserve(max((n for r, n in ends.items() if st.same_node(r, me)), default=0))
        return slots

    def _views(self) -> dict:
        """The staging slots this rank stores into and copies out of in this call (the staging's current
        half), as arrays (rebuilt when the staging window has grown since)."""
        st = self.staging
        if st is None or not self.sync:
            return {}
        if self._slot_views is None or self._slot_views[0] != st.generation:
            me = self.comm.Get_rank()
            halves = []
            for h in (0, 1):
                views = {("send", k): st.slot(peer, what[1], what[2], self.dtype, h)
                         for k, (peer, (how, *what)) in enumerate(self.sends) if how == "stage"}
                views.update({("recv", k): st.slot(me, where[0], where[1], self.dtype, h)
                              for k, (_, (how, *where), _) in enumerate(self.recvs) if how == "stage"})
                halves.append(views)
            self._slot_views = (st.generation, halves)
        return self._slot_views[1][st.half]

    def _own(self, t: MPI.Datatype) -> MPI.Datatype:
        self.types.append(t)
        return t

    @property
    def closed(self) -> bool:
        """Whether :meth:`free` ran (the exchange cannot run any more)."""
        return self._closed

    def run(self, src: np.ndarray | None, dst: np.ndarray | None, pad: tuple | None = None) -> None:
        """Move every box from ``src`` (C-contiguous, this rank's input block or None) into ``dst``
        (C-contiguous output block or None): copied, or added to what ``dst`` holds.  ``pad`` is
        ``(value, regions)``: ``dst[region] = value`` for each region (outside every box this rank receives or
        copies), done while the messages travel.

        When a call gets the same two arrays as the call before, its messages become persistent requests
        (``Send_init``/``Recv_init``, started by each later call with those arrays: no request, buffer
        description or view is made per call) and its views of the arrays are made once; they are freed
        when other arrays come, or by :meth:`free`.  The requests hold the two arrays until then."""
        bound = self._bound
        if bound is not None and bound[0] is src and bound[1] is dst:
            self._run_bound(bound[2], pad)
            return
        if self._closed:
            raise ModelError("this exchange was freed (close() or free()); build a new one")
        last = self._last
        if last[0]() is src and last[1]() is dst and (src is not None or dst is not None):
            self._bind(src, dst)
            self._run_bound(self._bound[2], pad)
            return
        self._last = (weak(src), weak(dst))
        self._run_once(src, dst, pad)

    def _local(self, src, dst, local, pad) -> None:
        """The transfers to itself (while the messages are in flight): copied, or added; ``local`` holds
        ``(dst view, src view)`` pairs, or ``(dst index, src index)`` where a box is not a view.  Then the
        ``pad`` regions (see :meth:`run`) are filled."""
        add = self._local_add
        for d, s in local:
            if type(d) is np.ndarray:
                if add:
                    np.add(d, s, out=d)
                else:
                    np.copyto(d, s)
            elif add:
                dst[d] += src[s]
            else:
                dst[d] = src[s]
        if pad is not None:
            for r in pad[1]:
                dst[r] = pad[0]

    def _finish(self, dst, views) -> None:
        """After the wait: copy or add the received boxes that arrived in a buffer or a staging slot, in plan
        order (sums are deterministic)."""
        for k in self._after:
            _, (how, *_), di = self.recvs[k]
            got = views[("recv", k)] if how == "stage" else self._rviews[k]
            if self.add:
                dst[di] += got
            else:
                dst[di] = got

    def _run_once(self, src: np.ndarray | None, dst: np.ndarray | None, pad: tuple | None) -> None:
        reqs, comm = [], self._raw
        for k, (peer, (how, *where), _) in enumerate(self.recvs):
            if how == "stage":
                continue
            if how == "buf":
                reqs.append(comm.Irecv(self._rviews[k], peer, _TAG))
            elif how == "flat":
                off, cnt = where
                reqs.append(comm.Irecv(dst.reshape(-1)[off:off + cnt], peer, _TAG))
            else:
                reqs.append(comm.Irecv([dst, 1, where[0]], peer, _TAG))
        views = self._views()
        flat_src = None if src is None else src.reshape(-1)
        for k, (peer, (how, *what)) in enumerate(self.sends):
            if how == "stage":
                slot = views[("send", k)]
                np.copyto(slot, src[what[0]])
                if self._counter is not None:
                    self._counter.add_shared(slot.nbytes)
            elif how == "flat":
                off, cnt = what
                reqs.append(comm.Isend(flat_src[off:off + cnt], peer, _TAG))
            elif how == "pack":
                index, buf = what
                np.copyto(buf, src[index])
                reqs.append(comm.Isend(buf, peer, _TAG))
            else:
                reqs.append(comm.Isend([src, 1, what[0]], peer, _TAG))
        if self._counter is not None:   # the call's bytes (the same every call), counted while they travel
            self._counter.add(*self._bytes)
        self._local(src, dst, [(di, si) for si, di in self.local], pad)  # overlaps the messages
        if self.sync:
            self.staging.publish()     # every staged box of the node is stored
        if reqs:
            MPI.Request.Waitall(reqs)
        if self._after:
            self._finish(dst, views)

    def free(self) -> None:
        """Release the persistent requests and the committed datatypes (idempotent; the exchange cannot run
        afterwards)."""
        self._closed = True
        self._bound = None
        self._last = (none, none)
        self._finalizer()


def run_transfers(comm, me: int, transfers: Sequence[Transfer], src: np.ndarray | None, src_origin,
                  dst: np.ndarray | None, dst_origin, *, add: bool) -> None:
    """One-shot: move every box of ``transfers`` from ``src`` (on rank ``t.src``, element 0 at global
    ``src_origin``) into ``dst`` (on rank ``t.dst``), copying (``add=False``) or adding (``add=True``)."""
    box = lambda arr, origin: None if arr is None else tuple((o, o + n) for o, n in zip(origin, arr.shape))
    ex = Exchange(comm, transfers, box(src, src_origin), box(dst, dst_origin),
                  (dst if dst is not None else src if src is not None else np.empty(0)).dtype, add=add)
    try:
        ex.run(None if src is None else np.ascontiguousarray(src), dst)
    finally:
        ex.free()
