"""The MPI collectives that run a primitive's groups on cached sub-communicators (the ``"bcast"``,
``"reduce"``, ``"allgather"`` and ``"reducescatter"`` lowerings of :mod:`meshplan.models.tensor.lowering`;
DistDL paper, sections 3.2.1–3.2.3).

Each runner is built collectively (every rank of the communicator, in the same order: the
sub-communicators come from ``Comm.Split`` through the runtime's :class:`SubComms` cache) and its
``run(x, y)`` reads this rank's input block ``x`` and writes its output block ``y`` (C-contiguous,
None where the rank has none) straight through MPI: no packing, no intermediate copies.  A group of
one rank is a local copy.  A broadcast is a ``Bcast`` from the root's input, after which the root copies its
block into its own output — or not, when the output is the input (``forward(x, out=x)``: in place, as a
plain ``Bcast``).  An ``Ibcast`` overlapping the root's copy was faster than a copy then a ``Bcast`` (0.80–0.91 at
4–16 MiB on 4 ranks) but MPICH's ``Ibcast`` alone was up to 1.6× its ``Bcast`` (1–4 MiB), and every member
must call the same one (docs/tensor.md, *Benchmark*).  ``dual()`` is the adjoint's runner
on the same groups (broadcast ↔ reduce, all-gather ↔ reduce-scatter).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.comms import SubComms
from meshplan.models.tensor.lowering import Lowering

__all__ = ["GroupCollective"]

_DUAL = {"bcast": "reduce", "reduce": "bcast", "allgather": "reducescatter", "reducescatter": "allgather"}


class GroupCollective:
    """One collective per group of a :class:`Lowering` (this rank's group only)."""

    def __init__(self, comms: SubComms, lowering: Lowering, me: int, dtype, *, _sub=None) -> None:
        self.kind = lowering.kind
        self.lowering = lowering
        self.me = me
        self.dtype = np.dtype(dtype)
        self.group = next((g for g in lowering.groups if me in g.ranks), None)
        if _sub is not None:
            self.sub = _sub[0]
        else:
            multi = tuple(g.ranks for g in lowering.groups if len(g.ranks) > 1)
            self.sub = comms.group(multi) if multi else None     # collective: every rank asks alike
        if self.group is None or len(self.group.ranks) < 2:
            self.sub = None
        self.pos = None if self.group is None else self.group.ranks.index(me)

    def dual(self) -> "GroupCollective":
        """The adjoint's runner on the same groups and sub-communicator."""
        return GroupCollective(None, Lowering(_DUAL[self.kind], self.lowering.groups), self.me, self.dtype,
                               _sub=(self.sub,))

    @property
    def needs_fill(self) -> bool:
        """Whether the output must be zero-filled before :meth:`run` (never: every element is written)."""
        return False

    def run(self, x: np.ndarray | None, y: np.ndarray | None) -> None:
        if self.group is None:
            return
        sub = self.sub
        if self.kind == "bcast":                   # root = position 0 hands x; receivers get y
            if self.pos == 0:                      # then its own copy (none when in place: out=x)
                if sub is not None:
                    sub.Bcast(x, 0)
                if y is not None and y is not x:
                    np.copyto(y, x)
            else:
                sub.Bcast(y, 0)
        elif self.kind == "reduce":                # root = position 0 gets the sum in y
            if sub is None:
                np.copyto(y, x)
            elif self.pos != 0:
                sub.Reduce(x, None, MPI.SUM, 0)
            elif x is not None:
                sub.Reduce(x, y, MPI.SUM, 0)
            else:                                  # a destination that is not a source adds zeros
                y.fill(0)
                sub.Reduce(MPI.IN_PLACE, y, MPI.SUM, 0)
        elif self.kind == "allgather":
            if sub is None:
                np.copyto(y, x)
            else:                                  # equal blocks (the lowering's rule)
                sub.Allgather(x, y)
        else:                                      # reducescatter
            if sub is None:
                np.copyto(y, x)
            else:
                sub.Reduce_scatter_block(x, y, MPI.SUM)
