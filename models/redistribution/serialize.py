"""JSON form of collective steps (the ``--json`` program format and the MPI job input).

``{"op": "alltoall", "dims": [0, 1], "axes": ["x_0"]}``; a lowered ``allpermute``
carries ``"target"`` (a type string) and ``"source"`` (``source[d]`` = the device
whose tile device ``d`` receives) and, when the transfer is split among the replicas of each tile,
``"holders"`` (``holders[d]``: the devices sending ``d``'s chunks, in order).  A multi-pair ``alltoall`` carries ``"moves"``
(``[[src, dst, [axes…]], …]`` in order); its ``"dims"`` and ``"axes"`` are then every move's.
"""

from __future__ import annotations

from typing import Any

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice, Step
from meshplan.models.redistribution.types import parse_type

__all__ = ["step_to_dict", "step_from_dict"]


def step_to_dict(step: Step) -> dict[str, Any]:
    """The JSON form of one redistribution step (docs/redistribute.md, "Output"); :func:`step_from_dict` reads it back."""
    out: dict[str, Any] = {"op": step.op, "dims": list(step.dims), "axes": list(step.axes)}
    if isinstance(step, AllToAll) and step.more:
        out["axes"] = list(step.group_axes)
        out["moves"] = [[i, j, list(ax)] for i, j, ax in step.moves]
    if isinstance(step, AllPermute):
        out["target"] = str(step.target)
        out["source"] = None if step.source is None else list(step.source)
        if step.holders is not None:
            out["holders"] = [list(h) for h in step.holders]
    return out


def step_from_dict(d: dict[str, Any]) -> Step:
    """A redistribution step from its JSON form; raises :class:`ModelError` on a malformed one."""
    try:
        op = d["op"]
        axes = tuple(d.get("axes", ()))
        dims = list(d.get("dims", ()))
        if op == "allgather":
            return AllGather(int(dims[0]), axes)
        if op == "dynslice":
            return DynSlice(int(dims[0]), axes)
        if op == "alltoall" and "moves" in d:
            return AllToAll.of((int(i), int(j), tuple(ax)) for i, j, ax in d["moves"])
        if op == "alltoall":
            return AllToAll(int(dims[0]), int(dims[1]), axes)
        if op == "allpermute":
            src, held = d.get("source"), d.get("holders")
            return AllPermute(parse_type(d["target"]), None if src is None else tuple(int(s) for s in src),
                              None if held is None else tuple(tuple(int(s) for s in h) for h in held))
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise ModelError(f"bad step {d!r}: {err}") from err
    raise ModelError(f"unknown collective {d.get('op')!r} in step {d!r}")
