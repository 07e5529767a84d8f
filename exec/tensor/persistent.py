"""Persistent requests for a tensor exchange whose call repeats with the same arrays (DistDL paper, section
2.2.1: a primitive's send-receive pairs are fixed by its plan, so a training loop's calls repeat them).

:class:`Persistent` is the part of :class:`~meshplan.exec.tensor.exchange.Exchange` that binds one call's
messages as ``Recv_init``/``Send_init`` requests and its views of the two arrays, and runs later calls with
them (``Startall``/``Start``, the packing, the local boxes, one ``Waitall``): no request, buffer description or
view is made per call.  The requests hold the two arrays until other arrays come or the exchange is freed.
"""

from __future__ import annotations

import weakref

import numpy as np
from mpi4py import MPI

__all__ = ["Persistent", "release", "is_view", "weak", "none"]


def release(requests: list) -> None:
    """Free persistent requests (inactive between calls) and empty the list; nothing once MPI is finalized."""
    if not MPI.Is_finalized():
        for r in requests:
            if r != MPI.REQUEST_NULL:
                r.Free()
    requests.clear()


def is_view(index) -> bool:
    """Whether ``a[index]`` is a view of ``a`` (basic slicing), so that it can be made once."""
    return type(index) is tuple and all(type(i) is slice for i in index)


def weak(a):
    """A weak reference to ``a``, or to nothing for None (the previous call's arrays, remembered)."""
    return none if a is None else weakref.ref(a)


def none():
    return None


class Persistent:
    """The persistent calls of an exchange (a mixin: the exchange holds the messages, ``TAG`` and
    ``_requests``)."""

    def _bind(self, src: np.ndarray | None, dst: np.ndarray | None) -> None:
        """The persistent requests and views of a call with ``src`` and ``dst`` (those of other arrays freed)."""
        self._unbind()
        comm, reqs = self._raw, self._requests
        recvs = []
        for k, (peer, (how, *where), _) in enumerate(self.recvs):
            if how == "buf":
                recvs.append(comm.Recv_init(self._rviews[k], peer, self.TAG))
            elif how == "flat":
                off, cnt = where
                recvs.append(comm.Recv_init(dst.reshape(-1)[off:off + cnt], peer, self.TAG))
            elif how == "type":
                recvs.append(comm.Recv_init([dst, 1, where[0]], peer, self.TAG))
        reqs += recvs
        flat_src = None if src is None else src.reshape(-1)
        sends = []          # in the exchange's order: (request or None, pack buffer or staging key, source box)
        for k, (peer, (how, *what)) in enumerate(self.sends):
            if how == "stage":
                sends.append((None, ("send", k), src[what[0]] if is_view(what[0]) else what[0]))
            elif how == "flat":
                off, cnt = what
                sends.append((comm.Send_init(flat_src[off:off + cnt], peer, self.TAG), None, None))
            elif how == "pack":
                index, buf = what
                sends.append((comm.Send_init(buf, peer, self.TAG), buf, src[index] if is_view(index) else index))
            else:
                sends.append((comm.Send_init([src, 1, what[0]], peer, self.TAG), None, None))
        reqs += [r for r, _, _ in sends if r is not None]
        local = [(dst[di], src[si]) if is_view(di) and is_view(si) else (di, si) for si, di in self.local]
        # the received boxes copied or added after the wait, as (view of dst, received buffer) pairs; None where
        # a box is staged (its slot alternates between calls) or not a view: then the exchange's _finish
        after = [(dst[di], self._rviews[k]) for k in self._after
                 for _, (how, *_), di in (self.recvs[k],) if how == "buf" and is_view(di)]
        after = after if len(after) == len(self._after) else None
        self._bound = (src, dst, (src, dst, recvs, sends, local, list(reqs), after))

    def _unbind(self) -> None:
        """Free the persistent requests of the last arrays (inactive: every call waits for its requests)."""
        self._bound = None
        release(self._requests)

    def _run_bound(self, parts, pad=None) -> None:
        """:meth:`_run_once` with the persistent requests and views of :meth:`_bind`."""
        src, dst, recvs, sends, local, reqs, after = parts
        if recvs:
            MPI.Prequest.Startall(recvs)
        views = self._views() if self.sync else None     # the staging slots of this call, if any
        for req, buf, box in sends:
            if req is None:                          # staged: stored into the peer's slot
                slot = views[buf]
                np.copyto(slot, box if type(box) is np.ndarray else src[box])
                if self._counter is not None:
                    self._counter.add_shared(slot.nbytes)
                continue
            if buf is not None:
                np.copyto(buf, box if type(box) is np.ndarray else src[box])
            req.Start()
        if self._counter is not None:   # counted while the messages travel: no Python after the wait but the
            self._counter.add(*self._bytes)    # received boxes' copies or adds (none when all land in place)
        self._local(src, dst, local, pad)
        if self.sync:
            self.staging.publish()
        if reqs:
            MPI.Request.Waitall(reqs)
        if after is None:
            self._finish(dst, views)
        elif self.add:
            for d, got in after:                     # plan order: sums are deterministic
                np.add(d, got, out=d)
        else:
            for d, got in after:
                np.copyto(d, got)
