"""Memory-bounded shortest-path search over weak types (paper §7.2).

Nodes are weak types (local types, global type fixed) whose local size is at
most ``max(localsize(src), localsize(dst))`` (the bound (4)); edges are the weak
multi-axis collectives of :func:`~meshplan.models.redistribution.weak.weak_successors`
weighted by the cost model of Fig. 11.  Dijkstra orders paths by
``(cost, number of steps)``, so among paths of equal cost the one with the fewest
(most merged) collectives wins.  Zero-cost ``dynslice`` edges allow
over-partitioning over replicated axes (§7.2, Fig. 12).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from meshplan.models.errors import Infeasible, ModelError
from meshplan.models.redistribution.cost import op_cost
from meshplan.models.redistribution.weak import WeakStep, WeakType, weak_successors

__all__ = ["WeakPath", "shortest_weak_path"]


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
                       max_alternatives: int = 16) -> WeakPath:
    """Dijkstra from ``src`` to ``dst`` over weak types with ``localsize <= bound`` (§7.2).

    Besides one shortest path it lists up to ``max_alternatives`` shortest paths
    in total (all of equal cost and length): they differ only in which
    dimensions give or take a factor first, which matters once the lowering picks
    concrete axes.
    """
    if src.globaltype != dst.globaltype:
        raise ModelError(f"global types differ: {src.globaltype} vs {dst.globaltype}")
    bound = max(src.localsize, dst.localsize) if bound is None else bound
    return _search(tuple(sorted(primes.items())), src, dst, bound, max_alternatives)


@lru_cache(maxsize=4096)
def _search(primes_key: tuple, src: WeakType, dst: WeakType, bound: int, max_alt: int) -> WeakPath:
    primes = Counter(dict(primes_key))
    tie = itertools.count()
    dist: dict[WeakType, tuple[int, int]] = {src: (0, 0)}
    prev: dict[WeakType, list[tuple[WeakType, WeakStep]]] = {}
    heap = [(0, 0, next(tie), src)]
    done: set[WeakType] = set()
    while heap:
        cost, nsteps, _, w = heapq.heappop(heap)
        if w in done:
            continue
        done.add(w)
        if w == dst:
            break
        ls = w.localsize
        for step, w2 in weak_successors(primes, w):
            if w2.localsize > bound or w2 in done:
                continue
            key = (cost + op_cost(step.op, ls, w2.localsize), nsteps + 1)
            if w2 not in dist or key < dist[w2]:
                dist[w2] = key
                prev[w2] = [(w, step)]
                heapq.heappush(heap, (key[0], key[1], next(tie), w2))
            elif key == dist[w2]:
                prev[w2].append((w, step))
    if dst not in done:
        raise Infeasible(f"no sequence of collectives within {bound} elements per device reaches {dst}")
    paths: list[tuple[tuple[WeakStep, ...], tuple[WeakType, ...]]] = []

    def back(w: WeakType, steps: tuple, types: tuple) -> None:
        if len(paths) >= max_alt:
            return
        if w == src:
            paths.append((steps, types))
            return
        for w0, step in prev[w]:
            back(w0, (step,) + steps, (w0,) + types)

    back(dst, (), (dst,))
    steps, types = paths[0]
    return WeakPath(steps, types, dist[dst][0], bound, len(done), tuple(p for p, _ in paths))
