"""The one collective vocabulary of meshplan (P2 §3.2 and Figure 8; the buffer model of docs/check.md).

:class:`Collective` names the five collectives of the reduction language and
says how each behaves (does it reduce, is it rooted, does it split or gather
its output, which Figure-8 rule governs it, which mpi4py method runs it).  It
is a ``str`` enum whose values are the names used in every text and JSON
format (``"AllReduce"`` …), so ``Collective.ALL_REDUCE == "AllReduce"`` and
formats stay byte-identical.

:func:`apply_collective` is the one executable definition of what a
collective does to the *buffers* of one device group (root first), as an
MPI/NCCL executor does on counts:

* a buffer is ``(labels, values)``: the chunk labels a device holds, sorted,
  and their values laid out contiguously (a list, or a numpy array whose
  first axis runs over the positions);
* ``AllReduce`` — equal lengths; every member gets the position-wise
  combination, labelled as the root's buffer;
* ``Reduce`` — the same, but only the root gets it; the others become empty;
* ``ReduceScatter`` — equal lengths ``L`` divisible by the group size ``n``;
  member ``i`` gets positions ``[iL/n, (i+1)L/n)`` of the combination;
* ``AllGather`` — equal lengths; every member gets the concatenation of all
  members' buffers (group order), re-sorted by label (stably);
* ``Broadcast`` — every member gets the root's buffer.

The *combine* operation is the caller's: numpy addition mod ``p`` for the
numeric referee, symbolic sums for the z3 proof, numpy sums for the MPI
expectations.  The state rules of Figure 8 (which programs are well formed)
stay in :mod:`meshplan.models.reduction.semantics`.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Literal, Sequence, TypeVar

from meshplan.models.core.errors import ModelError, VerificationError

__all__ = ["Collective", "COLLECTIVES", "Buffer", "CannotRun", "apply_collective"]

V = TypeVar("V")

#: one device's buffer: the chunk labels it holds and their values (list or array, positions first)
Buffer = tuple[tuple[int, ...], Any]


class Collective(str, enum.Enum):
    """One of the five collectives (P2 §3.2); the value is its name in every file format."""

    ALL_REDUCE = "AllReduce"
    REDUCE_SCATTER = "ReduceScatter"
    ALL_GATHER = "AllGather"
    REDUCE = "Reduce"
    BROADCAST = "Broadcast"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def reduces(self) -> bool:
        """Whether the members' contributions are combined (AllReduce, ReduceScatter, Reduce)."""
        return self in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.REDUCE)

    @property
    def rooted(self) -> bool:
        """Whether the group's first member plays a special role (Reduce, Broadcast)."""
        return self in (Collective.REDUCE, Collective.BROADCAST)

    @property
    def splits_output(self) -> bool:
        """Whether each member keeps only its block of the result (ReduceScatter)."""
        return self is Collective.REDUCE_SCATTER

    @property
    def gathers(self) -> bool:
        """Whether the members' disjoint buffers are concatenated (AllGather)."""
        return self is Collective.ALL_GATHER

    @property
    def needs_equal_counts(self) -> bool:
        """Whether every member must hand over equally many chunks (all but Broadcast)."""
        return self is not Collective.BROADCAST

    @property
    def short(self) -> str:
        """The abbreviation of compact program listings: AR, RS, AG, R, B."""
        return _SHORT[self]

    @property
    def rule(self) -> str:
        """The name of the rule of P2 Figure 8 that governs it (``R-ALLREDUCE`` …)."""
        return "R-" + self.value.upper()

    @property
    def mpi_method(self) -> str:
        """The mpi4py communicator method that runs it (``Allreduce``, ``Reduce_scatter_block`` …)."""
        return _MPI[self]

    def bus_factor(self, n: int) -> float:
        """nccl-tests' bus-bandwidth factor for a group of ``n`` ranks (busbw = algbw × factor, with
        algbw = S / t and S the operation's total size; nccl-tests doc/PERFORMANCE.md): AllReduce
        2(n−1)/n, ReduceScatter and AllGather (n−1)/n, Reduce and Broadcast 1."""
        if n < 1:
            raise ModelError(f"a group has at least one rank, got {n}")
        if self is Collective.ALL_REDUCE:
            return 2 * (n - 1) / n
        if self in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER):
            return (n - 1) / n
        return 1.0

    @classmethod
    def parse(cls, text: "str | Collective") -> "Collective":
        """The collective named ``text`` (its name, e.g. ``AllReduce``, or abbreviation, e.g. ``AR``;
        case-insensitive); raises :class:`ModelError` naming the valid choices."""
        if isinstance(text, Collective):
            return text
        if isinstance(text, str):
            key = text.strip().lower().replace("_", "").replace("-", "")
            for c in cls:
                if key in (c.value.lower(), c.short.lower()):
                    return c
        raise ModelError(f"unknown collective {text!r}; use one of {', '.join(c.value for c in cls)} "
                         f"(or {', '.join(c.short for c in cls)})")


_SHORT = {Collective.ALL_REDUCE: "AR", Collective.REDUCE_SCATTER: "RS", Collective.ALL_GATHER: "AG",
          Collective.REDUCE: "R", Collective.BROADCAST: "B"}
_MPI = {Collective.ALL_REDUCE: "Allreduce", Collective.REDUCE_SCATTER: "Reduce_scatter_block",
        Collective.ALL_GATHER: "Allgather", Collective.REDUCE: "Reduce", Collective.BROADCAST: "Bcast"}

#: every collective, in the fixed order of enumeration (synthesis, tables)
COLLECTIVES: tuple[Collective, ...] = tuple(Collective)


class CannotRun(VerificationError):
    """A collective cannot run on the given buffers: unequal chunk counts, or a ReduceScatter whose
    count does not split evenly.  ``position`` is the index (in the group) of the first member whose
    count differs from the root's; callers turn this into their own message with device numbers."""

    def __init__(self, collective: Collective, kind: Literal["unequal counts", "indivisible"],
                 lengths: Sequence[int], position: int | None = None) -> None:
        self.collective = collective
        self.kind = kind
        self.lengths = tuple(lengths)
        self.position = position
        if kind == "unequal counts":
            detail = (f"member 0 passes {self.lengths[0]} chunks but member {position} passes "
                      f"{self.lengths[position or 0]}")
        else:
            detail = f"{self.lengths[0]} chunks do not split evenly over {len(self.lengths)} devices"
        super().__init__(f"{collective} cannot run: {detail}")


def _concat(blocks: Sequence[Any]) -> Any:
    if blocks and hasattr(blocks[0], "shape"):
        import numpy as np

        return np.concatenate(blocks, axis=0)
    return [v for b in blocks for v in b]


def _take(values: Any, order: Sequence[int]) -> Any:
    if hasattr(values, "shape"):
        return values[list(order)]
    return [values[i] for i in order]


def apply_collective(collective: "Collective | str", buffers: Sequence[Buffer],
                     combine: Callable[[list[Any]], Any]) -> list[Buffer]:
    """The members' buffers after ``collective`` on one group (``buffers`` root first), by the buffer
    model above.  ``combine`` maps the members' value blocks (equal lengths) to their position-wise
    combination.  Raises :class:`CannotRun` when the counts do not allow the collective."""
    c = Collective.parse(collective)
    n = len(buffers)
    if n == 0:
        raise ModelError("a collective needs a group of at least one device")
    if c is Collective.BROADCAST:
        return [buffers[0]] * n
    lengths = [len(labels) for labels, _ in buffers]
    if any(x != lengths[0] for x in lengths):
        i = next(i for i, x in enumerate(lengths) if x != lengths[0])
        raise CannotRun(c, "unequal counts", lengths, i)
    if c is Collective.ALL_GATHER:
        labels = tuple(x for lab, _ in buffers for x in lab)
        values = _concat([v for _, v in buffers])
        order = sorted(range(len(labels)), key=lambda i: labels[i])
        out = (tuple(labels[i] for i in order), _take(values, order))
        return [out] * n
    labels = buffers[0][0]
    total = combine([v for _, v in buffers])
    if c is Collective.ALL_REDUCE:
        return [(labels, total)] * n
    if c is Collective.REDUCE:
        empty = buffers[0][1][:0]
        return [(labels, total)] + [((), empty)] * (n - 1)
    size = lengths[0]
    if size % n:
        raise CannotRun(c, "indivisible", lengths)
    b = size // n
    return [(labels[i * b:(i + 1) * b], total[i * b:(i + 1) * b]) for i in range(n)]
