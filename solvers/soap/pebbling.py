"""The optimal I/O of a tiny CDAG by exhaustive red–blue pebbling (Hong and Kung; thesis section 5.2).

The SOAP bound claims that no schedule of a program moves fewer words between a fast memory of ``S``
words and slow memory.  For CDAGs of a few dozen vertices the claim can be checked against the
optimum itself: :func:`cdag` builds the CDAG of a program at concrete sizes from its trace (a vertex
per input element and per statement instance, an edge from the producer of every value an instance
reads), and :func:`optimal_io` searches every play of the red–blue pebble game on it:

* load (a red pebble on a vertex with a blue one, cost 1), store (a blue pebble on a red one, cost 1),
  compute (a red pebble on a vertex whose predecessors all hold red ones, cost 0 — recomputation
  allowed), delete a red pebble (cost 0);
* at most ``S`` red pebbles; the inputs start blue; the play ends when every output (the last value
  of every written element) is blue.

The search is a 0–1 breadth-first search over the states (red set, blue set), so the first goal state
it reaches has the least I/O.  Two restrictions keep it small without losing an optimum: a red pebble
is deleted only when all ``S`` are in use (deleting one earlier never helps a later move), and a store
is never of an input (inputs are blue from the start).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Program
from meshplan.models.soap.replay import build_trace, loop_order, producers, stream

__all__ = ["Cdag", "cdag", "optimal_io", "MAX_STATES"]

#: the search gives up (ModelError) past this many states
MAX_STATES = 2_000_000


@dataclass(frozen=True)
class Cdag:
    """Vertices ``0 … n-1``; ``preds[v]`` a bit mask of ``v``'s predecessors; ``inputs`` and ``outputs``
    bit masks."""

    n: int
    preds: tuple[int, ...]
    inputs: int
    outputs: int


def cdag(program: Program, values: dict[str, int]) -> Cdag:
    """The CDAG of ``program`` at the sizes of ``values``: one vertex per element read before it is
    written (an input) and one per statement instance; edges from the producers of each instance's reads."""
    trace = build_trace(program, values)
    order = loop_order(trace)
    el, wr, inst = stream(trace, order)
    if el.size == 0:
        return Cdag(0, (), 0, 0)
    producer, final = producers(el, wr, inst)
    inputs: dict[int, int] = {}
    n_inst = trace.instances
    preds = [0] * n_inst
    for e, w, i, p in zip(el.tolist(), wr.tolist(), inst.tolist(), producer.tolist()):
        if w:
            continue
        if p < 0:
            if e not in inputs:
                inputs[e] = n_inst + len(inputs)
            preds[i] |= 1 << inputs[e]
        else:
            preds[i] |= 1 << p
    n = n_inst + len(inputs)
    outputs = 0
    for f in final.tolist():
        if f >= 0:
            outputs |= 1 << f
    in_mask = sum(1 << v for v in inputs.values())
    return Cdag(n, tuple(preds) + (0,) * len(inputs), in_mask, outputs)


def optimal_io(g: Cdag, memory: int, *, max_states: int = MAX_STATES) -> int:
    """The least number of loads and stores of any complete red–blue pebbling of ``g`` with ``memory`` red
    pebbles (exhaustive; a :class:`ModelError` when no play exists or the search passes ``max_states``)."""
    need = max((bin(p).count("1") + 1 for p in g.preds), default=0)
    if memory < need:
        raise ModelError(f"fast memory S = {memory} cannot hold a vertex and its {need - 1} predecessors",
                         param="memory")
    bits = [1 << v for v in range(g.n)]
    computable = [v for v in range(g.n) if not g.inputs & bits[v]]
    start = (0, g.inputs)
    dist = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        red, blue = state
        d = dist[state]
        if g.outputs & ~blue == 0:
            return d
        if len(dist) > max_states:
            raise ModelError(f"the pebbling search passed {max_states} states: give smaller sizes",
                             param="values")
        full = bin(red).count("1") >= memory
        moves = []
        if full:        # the only free move that makes room: delete a red pebble
            moves += [((red & ~bits[v], blue), 0) for v in range(g.n) if red & bits[v]]
        else:
            moves += [((red | bits[v], blue), 0) for v in computable
                      if not red & bits[v] and g.preds[v] & ~red == 0]
            moves += [((red | bits[v], blue), 1) for v in range(g.n) if blue & bits[v] and not red & bits[v]]
        moves += [((red, blue | bits[v]), 1) for v in computable if red & bits[v] and not blue & bits[v]]
        for nxt, cost in moves:
            nd = d + cost
            if nd < dist.get(nxt, 1 << 60):
                dist[nxt] = nd
                if cost:
                    queue.append(nxt)
                else:
                    queue.appendleft(nxt)
    raise ModelError("no complete pebbling exists", param="memory")
