"""The data-transfer cost models of a redistribution and the height of a sequence (Def. 4.4).

Two costs, both in array elements per device (multiply by the element size for bytes):

``paper`` — Fig. 11 of "Memory-efficient array redistribution through portable collective communication"
(Rink, Kwasniewski et al., §4.2, Appendix B): total elements moved divided by the number of devices.

* ``allpermute``: ``localsize(τ1)``   * ``dynslice``: 0
* ``allgather``: ``localsize(τ2)``    * ``alltoall``: ``localsize(τ1)``

``wire`` — the elements each device *sends* on the wire in a collective over a group of ``g`` devices (what a
byte counter on the framework's collectives reads):

* ``allgather``: ``localsize(τ1)·(g−1)`` = ``localsize(τ2)·(g−1)/g``  (its tile to each of the others)
* ``alltoall``: ``localsize(τ1)·(g−1)/g``  (every piece but its own)
* ``allpermute``: ``localsize(τ1)`` (a device that moves sends its whole tile); split among the ``ρ``
  replicas of each tile, ``localsize(τ1)·m/ρ`` for the most devices ``m`` lacking one tile
  (:mod:`meshplan.models.redistribution.split`)   * ``dynslice``: 0

Fig. 11 prices an all-gather at its full result whatever the group size, so it may prefer one big gather
after an extra all-to-all; the wire cost does not.  Both costs are additive over steps and depend only on
the local sizes and the group size of a step, which is what the search's optimality argument needs (see
docs/redistribute.md, "Cost models").
"""

from __future__ import annotations

import math
from typing import Sequence

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.steps import Step
from meshplan.models.redistribution.types import DistType

__all__ = ["COSTS", "check_cost", "op_cost", "sequence_cost", "height"]

#: the cost models: the paper's Fig. 11 (the default; it reproduces the paper) and bytes sent on the wire
COSTS = ("paper", "wire")


def check_cost(cost: str) -> str:
    """``cost`` if it names a cost model, else a :class:`ModelError` naming the parameter ``cost``."""
    if cost not in COSTS:
        raise ModelError(f"cost must be one of {', '.join(COSTS)}, got {cost!r}", param="cost")
    return cost


def op_cost(op: "str | Step", localsize_before: int, localsize_after: int, group: int | None = None,
            cost: str = "paper") -> int:
    """Cost of one collective in elements per device under the model ``cost``; ``group`` is the number of
    devices of an ``alltoall`` (the wire cost needs it; an all-gather's is ``after / before``).  ``op`` is
    the collective's name or the step itself (the wire cost of an ``allpermute`` split among replicas needs
    the step: :meth:`~meshplan.models.redistribution.steps.AllPermute.wire_elements`)."""
    step, op = (None, op) if isinstance(op, str) else (op, op.op)
    if cost == "paper":
        if op in ("allpermute", "alltoall"):
            return localsize_before
        if op == "allgather":
            return localsize_after
        if op == "dynslice":
            return 0
    elif cost == "wire":
        if op == "allgather":
            return localsize_after - localsize_before
        if op == "alltoall":
            if group is None or group < 1 or localsize_before % group:
                raise ModelError(f"the wire cost of an alltoall needs its group size dividing the tile, "
                                 f"got {group!r}")
            return localsize_before - localsize_before // group
        if op == "allpermute":
            return localsize_before if step is None else step.wire_elements(localsize_before)
        if op == "dynslice":
            return 0
    else:
        check_cost(cost)
    raise ModelError(f"no cost for unknown collective {op!r}")


def sequence_cost(types: Sequence[DistType], ops: Sequence[str], groups: Sequence[int | None] | None = None,
                  cost: str = "paper") -> int:
    """``cost(σ0 →p0 … → σn)`` = sum of the step costs (``groups``: each step's group size, for ``wire``)."""
    if len(types) != len(ops) + 1:
        raise ModelError("a sequence has one more type than it has steps")
    groups = [None] * len(ops) if groups is None else list(groups)
    return sum(op_cost(p, types[k].localsize, types[k + 1].localsize, groups[k], cost)
               for k, p in enumerate(ops))


def height(types: Sequence[DistType] | Sequence[tuple[int, ...]]) -> int:
    """``h(σ0 →* σn) = max_i localsize(σi)`` (Def. 4.4); accepts types or local types."""
    return max(t.localsize if isinstance(t, DistType) else math.prod(t) for t in types)
