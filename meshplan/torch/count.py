"""Count what PyTorch's collectives send, by intercepting them (a ``TorchDispatchMode``).

DTensor and :mod:`meshplan.torch` both call the functional collectives (``torch.ops._c10d_functional``);
inside :class:`CollectiveCounter` every such call is recorded with the bytes this rank sends on the wire:

* ``all_gather_into_tensor``: its input to each of the ``g−1`` others, ``input·(g−1)``;
* ``all_to_all_single`` (and DTensor's ``shard_dim_alltoall``): every piece but the one it keeps;
* ``reduce_scatter_tensor``: ``input·(g−1)/g``;  ``all_reduce``: ``2·input·(g−1)/g`` (reduce-scatter then
  all-gather, the ring algorithm's bytes);  ``broadcast``: ``input·(g−1)`` on the root, 0 elsewhere.

``peak_bytes`` is the largest tensor any intercepted operation (collective or not) took or made: for a
redistribution, the largest tile this rank held.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["CollectiveCounter", "CollectiveCall"]


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    """One intercepted collective: its name, group size and the bytes this rank sent."""

    op: str
    group_size: int
    sent_bytes: int


def _group(name) -> tuple[int, int]:
    """``(size, this rank's position)`` of the process group called ``name``."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    pg = _resolve_process_group(name)
    return dist.get_world_size(pg), dist.get_rank(pg)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _a2a_sent(x: torch.Tensor, in_splits, name) -> tuple[int, int]:
    g, me = _group(name)
    if not in_splits:
        return g, _nbytes(x) - _nbytes(x) // g
    row = _nbytes(x) // max(x.shape[0], 1) if x.dim() else x.element_size()
    return g, (sum(in_splits) - in_splits[me]) * row


class CollectiveCounter(TorchDispatchMode):
    """``with CollectiveCounter() as c: …`` — ``c.calls``, ``c.sent_bytes`` and ``c.peak_bytes`` of this rank."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[CollectiveCall] = []
        self.peak_bytes = 0

    @property
    def sent_bytes(self) -> int:
        """Bytes this rank sent in every intercepted collective."""
        return sum(c.sent_bytes for c in self.calls)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        for t in list(args) + (list(out) if isinstance(out, (list, tuple)) else [out]):
            if isinstance(t, torch.Tensor):
                self.peak_bytes = max(self.peak_bytes, _nbytes(t))
        ns, name = func.namespace, func._opname
        if ns == "_c10d_functional":
            x = args[0]
            if name == "all_gather_into_tensor":
                g = int(args[1])
                self.calls.append(CollectiveCall(name, g, _nbytes(x) * (g - 1)))
            elif name == "all_to_all_single":
                g, sent = _a2a_sent(x, list(args[2]), args[3])
                self.calls.append(CollectiveCall(name, g, sent))
            elif name == "reduce_scatter_tensor":
                g = int(args[2])
                self.calls.append(CollectiveCall(name, g, _nbytes(x) - _nbytes(x) // g))
            elif name == "all_reduce":
                g, _ = _group(args[2])
                self.calls.append(CollectiveCall(name, g, 2 * (_nbytes(x) - _nbytes(x) // g)))
            elif name == "broadcast":
                g, me = _group(args[2])
                self.calls.append(CollectiveCall(name, g, _nbytes(x) * (g - 1) if me == int(args[1]) else 0))
        elif ns == "_dtensor" and name == "shard_dim_alltoall":
            g, sent = _a2a_sent(args[0], [], args[3])
            self.calls.append(CollectiveCall(name, g, sent))
        return out
