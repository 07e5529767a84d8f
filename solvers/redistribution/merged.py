"""The wire-cost search: weak paths with multi-pair all-to-alls, cheapest first (extends paper §7.2).

Under the wire cost an all-to-all over a group of ``g`` devices sends ``L·(g−1)/g`` per device (``L`` its
tile), so one all-to-all over the union of several moves' axes (XLA's merged all-to-all, which moves axes
between several pairs of dimensions at once) sends less than the moves one after the other:
``1 − 1/(g₁g₂) < (1 − 1/g₁) + (1 − 1/g₂)``.  The step model of "Memory-efficient array redistribution through
portable collective communication" (Rink, Kwasniewski et al., §4, Fig. 8, §7.1) moves axes between *one* pair
of dimensions per all-to-all; here a weak all-to-all step may instead *join* the open all-to-all before it,
for the increment ``L/F − L/(F·f)`` (``F`` the open group's size, ``f`` the step's factor), when no dimension
would both give and receive axes in the joined collective (every member then sends each other an equal
piece).  The search runs over pairs (weak type, open all-to-all), so each edge cost stays additive and
Dijkstra applies; a joined step counts no extra collective.

The weak graph ignores the final ``allpermute`` (§6, equation (8)): a weak path may need one after lowering,
at the cost ``localsize(dst)``.  :func:`cheapest_paths` therefore lists weak paths cheapest first (exact
distances from the source as the heuristic of a backward best-first search), so that the planner can lower
each and keep the cheapest *lowered* program, stopping once a path's weak cost reaches the best total.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from typing import Iterator

from meshplan.models.core.errors import Infeasible, ModelError
from meshplan.models.redistribution.cost import op_cost
from meshplan.models.redistribution.weak import WeakStep, WeakType, weak_successors
from meshplan.solvers.redistribution.search import dijkstra

__all__ = ["cheapest_paths"]

#: an open all-to-all: (group size, giving dimensions, receiving dimensions, its last move's (src, dst)), or None
_Open = tuple[int, frozenset, frozenset, tuple[int, int]] | None
_Node = tuple[WeakType, _Open]


def _edges(succ, node: _Node, bound: int) -> Iterator[tuple[WeakStep, _Node, int, int]]:
    """``(step, next node, wire cost, collectives added)`` of every edge out of ``node``.

    Two rules drop paths that only repeat others: a move that can join the open all-to-all does (joined, it
    reaches the same tiles as on its own, for less: it is the same sequence of moves, §7.1, in one
    collective), and moves join in the order of their receiving dimension (moves into different dimensions
    commute), a pair of dimensions not twice in a row."""
    w, open_ = node
    size = w.localsize
    for step, w2 in succ(w):
        if step.op != "alltoall":
            yield step, (w2, None), op_cost(step.op, size, w2.localsize, None, "wire"), 1
            continue
        f, i, j = step.factor, step.src, step.dst
        if open_ is not None and i not in open_[2] and j not in open_[1]:
            g, (li, lj) = open_[0], open_[3]
            if j > lj or (j == lj and i != li):
                joined = WeakStep("alltoall", i, j, f, merged=True)
                yield joined, (w2, (g * f, open_[1] | {i}, open_[2] | {j}, (i, j))), size // g - size // (g * f), 0
            continue
        yield step, (w2, (f, frozenset((i,)), frozenset((j,)), (i, j))), size - size // f, 1


def cheapest_paths(primes: Counter, src: WeakType, dst: WeakType, *, bound: int | None = None,
                   slack: int = 0, max_paths: int = 64, max_pops: int = 200_000
                   ) -> Iterator[tuple[int, tuple[WeakStep, ...]]]:
    """Weak paths ``src ▶* dst`` with multi-pair all-to-alls (module docstring), as ``(wire cost, steps)``,
    cheapest first (then fewest collectives), at most ``max_paths`` of them and none dearer than the cheapest
    plus ``slack``; every node holds at most ``bound`` elements (default: the larger of the two tiles, §7)."""
    if src.globaltype != dst.globaltype:
        raise ModelError(f"global types differ: {src.globaltype} vs {dst.globaltype}")
    bound = max(src.localsize, dst.localsize) if bound is None else bound
    cache: dict[WeakType, list] = {}

    def succ(w: WeakType) -> list:   # the weak graph's edges, once per weak type (many nodes share one)
        out = cache.get(w)
        if out is None:
            out = cache[w] = [(st, w2) for st, w2 in weak_successors(primes, w) if w2.localsize <= bound]
        return out

    start: _Node = (src, None)
    dist, into, done, best = dijkstra(start, lambda node: _edges(succ, node, bound), lambda node: node[0] == dst,
                                      slack=slack)
    if best is None:
        raise Infeasible(f"no sequence of collectives within {bound} elements per device reaches {dst}")
    # backward best-first from the target's nodes; dist (exact, from the source) is the heuristic, so
    # complete paths come out cheapest first
    tie = itertools.count()
    front = [(dist[n][0], dist[n][1], 0, 0, next(tie), n, ()) for n in done if n[0] == dst]
    heapq.heapify(front)
    found = pops = 0
    while front and found < max_paths and pops < max_pops:
        total, nk, suffix, ksuffix, _, node, steps = heapq.heappop(front)
        pops += 1
        if node == start:
            found += 1
            yield total, steps
            continue
        for c, k, prev, step in into.get(node, ()):
            if prev not in done or total - dist[node][0] + dist[prev][0] + c > best + slack:
                continue
            if step.merged and not (prev[1] is not None):
                continue
            s2 = suffix + c
            heapq.heappush(front, (dist[prev][0] + s2, dist[prev][1] + ksuffix + k, s2, ksuffix + k,
                                   next(tie), prev, (step,) + steps))
