"""Memory-bounded shortest-path search over weak types (paper §7.2).

Nodes are weak types (local types, global type fixed) whose local size is at
most ``max(localsize(src), localsize(dst))`` (the bound (4)); edges are the weak
multi-axis collectives of :func:`~meshplan.models.redistribution.weak.weak_successors`
weighted by a cost model (Fig. 11, or the bytes each device sends on the wire).  Dijkstra orders paths by
``(cost, number of steps)``, so among paths of equal cost the one with the fewest
(most merged) collectives wins.  Zero-cost ``dynslice`` edges allow
over-partitioning over replicated axes (§7.2, Fig. 12).  The forward pass, :func:`dijkstra`, is also the
wire-cost search's (:mod:`~meshplan.solvers.redistribution.merged`, over weak types paired with an open
all-to-all).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from meshplan.models.core.errors import Infeasible, ModelError
from meshplan.models.redistribution.cost import check_cost, op_cost
from meshplan.models.redistribution.weak import WeakStep, WeakType, weak_successors

__all__ = ["WeakPath", "shortest_weak_path", "dijkstra"]


def dijkstra(start, edges, is_target, *, slack: int = 0):
    """The forward pass of both weak searches (§7.2, and the wire-cost search of
    :mod:`~meshplan.solvers.redistribution.merged`): Dijkstra from ``start`` by ``(cost, collectives)``, where
    ``edges(node)`` yields ``(step, next node, cost, collectives added)``.  It stops once the nodes popped cost
    more than the first target's cost plus ``slack`` and returns ``(dist, into, done, best)``: the
    ``(cost, collectives)`` of every reached node, every edge relaxed into a node as ``(cost, collectives,
    from, step)`` in the order met, the expanded nodes in the order expanded (a dict, so that what is built
    from it does not depend on hashing), and the first target's cost (None if no target was reached)."""
    tie = itertools.count()
    dist: dict = {start: (0, 0)}
    into: dict = {}
    heap = [(0, 0, next(tie), start)]
    done: dict = {}
    best: int | None = None
    while heap:
        cost, nsteps, _, node = heapq.heappop(heap)
        if node in done:
            continue
        if best is not None and cost > best + slack:
            break   # every node that can precede a target within the slack has been expanded
        done[node] = None
        if best is None and is_target(node):
            best = cost
        for step, node2, c, k in edges(node):
            c2, n2 = cost + c, nsteps + k
            if best is not None and c2 > best + slack:
                continue
            into.setdefault(node2, []).append((c, k, node, step))
            if node2 not in done and (node2 not in dist or (c2, n2) < dist[node2]):
                dist[node2] = (c2, n2)
                heapq.heappush(heap, (c2, n2, next(tie), node2))
    return dist, into, done, best


@dataclass(frozen=True, slots=True)
class WeakPath:
    """A shortest path ``src ▶* dst``: its steps, the weak types visited and its cost (elements)."""

    steps: tuple[WeakStep, ...]
    types: tuple[WeakType, ...]
    cost: int
    bound: int
    explored: int
    #: other shortest paths (same cost and length), for the lowering to choose from (§7.3)
    alternatives: tuple[tuple[WeakStep, ...], ...] = ()


def shortest_weak_path(primes: Counter, src: WeakType, dst: WeakType, *, bound: int | None = None,
                       max_alternatives: int = 16, cost: str = "paper") -> WeakPath:
    """Dijkstra from ``src`` to ``dst`` over weak types with ``localsize <= bound`` (§7.2).

    Besides one shortest path (fewest steps among the cheapest) it lists up to
    ``max_alternatives`` cheapest paths in total, fewest steps first: they differ
    in which dimensions give or take a factor, in what order, and in zero-cost
    slices, which matters once the lowering picks concrete axes (§7.3).  ``cost`` names the edge weights
    (:data:`~meshplan.models.redistribution.cost.COSTS`: Fig. 11 or bytes sent on the wire).
    """
    if src.globaltype != dst.globaltype:
        raise ModelError(f"global types differ: {src.globaltype} vs {dst.globaltype}")
    bound = max(src.localsize, dst.localsize) if bound is None else bound
    return _search(tuple(sorted(primes.items())), src, dst, bound, max_alternatives, check_cost(cost))


@lru_cache(maxsize=4096)
def _search(primes_key: tuple, src: WeakType, dst: WeakType, bound: int, max_alt: int, cost_model: str) -> WeakPath:
    primes = Counter(dict(primes_key))

    def edges(w: WeakType):
        ls = w.localsize
        for step, w2 in weak_successors(primes, w):
            if w2.localsize <= bound:
                yield step, w2, op_cost(step.op, ls, w2.localsize, step.factor, cost_model), 1
    dist, into, done, _ = dijkstra(src, edges, lambda w: w == dst)
    if dst not in done:
        raise Infeasible(f"no sequence of collectives within {bound} elements per device reaches {dst}")
    # predecessors on cheapest paths (equal cost, any number of steps), fewest steps first
    prev: dict[WeakType, list[tuple[WeakType, WeakStep]]] = {}
    for w, edges in into.items():
        if w in done:
            best = [(dist[u][1], k, u, st) for k, (c, _, u, st) in enumerate(edges)
                    if u in done and dist[u][0] + c == dist[w][0]]
            prev[w] = [(u, st) for _, _, u, st in sorted(best, key=lambda e: (e[0], e[1]))]
    paths: list[tuple[tuple[WeakStep, ...], tuple[WeakType, ...]]] = []
    cap = 4 * max_alt

    def back(w: WeakType, steps: tuple, types: tuple) -> None:
        if len(paths) >= cap:
            return
        if w == src:
            paths.append((steps, types))
            return
        for w0, step in prev.get(w, ()):
            if w0 not in types:
                back(w0, (step,) + steps, (w0,) + types)

    back(dst, (), (dst,))
    paths.sort(key=lambda p: len(p[0]))  # stable: the first is a (cost, steps)-shortest path
    paths = paths[:max_alt]
    steps, types = paths[0]
    return WeakPath(steps, types, dist[dst][0], bound, len(done), tuple(p for p, _ in paths))
