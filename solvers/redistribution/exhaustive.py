"""Exhaustive reference for small problems: cheapest concrete sequence, allpermute included.

Dijkstra (breadth-first by cost) over *all* well-formed concrete types with the
problem's global type on the prime mesh — no memory bound — with the strict
multi-axis rules of Fig. 8 (allgather and alltoall of any minor-most run of axes,
dynslice of any unused axis) and ``allpermute`` between any two types with equal
local types, weighted by Fig. 11 or by the bytes sent on the wire (``cost``), optionally only through
types whose local size stays within ``bound``.  Its optimum ``opt`` is the yardstick of Theorem 6.7: the
planner's program must cost at most ``opt + localsize(dst)`` under either cost model.
Meant for ≤ 16 devices and ≤ 3 dimensions.
"""

from __future__ import annotations

import heapq
import math
from functools import lru_cache

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.cost import check_cost
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.types import DistType

__all__ = ["exhaustive_optimum", "MAX_DEVICES", "MAX_RANK"]

MAX_DEVICES = 16
MAX_RANK = 3

# a state: tuple over dimensions of (local size, axes as a tuple of axis indices, minor first)


def exhaustive_optimum(mesh: Mesh, src: DistType, dst: DistType, *, max_devices: int = MAX_DEVICES,
                       max_rank: int = MAX_RANK, cost: str = "paper", bound: int | None = None) -> int:
    """Minimal cost (elements per device; ``cost``: ``paper`` is Fig. 11, ``wire`` the elements sent) of any
    concrete sequence ``src →* dst`` (with ``bound``: whose every type holds at most ``bound`` per device).

    ``mesh`` must be the prime mesh and ``src``/``dst`` types over it.  The limits
    can be raised for few axes (e.g. 3 axes of size 2 and 6 dimensions stay small).
    """
    if mesh.num_devices > max_devices or src.rank > max_rank:
        raise ModelError(f"the exhaustive reference handles at most {max_devices} devices and "
                         f"{max_rank} dimensions")
    idx = {a: k for k, a in enumerate(mesh.names)}

    def enc(t: DistType):
        return tuple((d.local, tuple(idx[a] for a in d.axes)) for d in t.dims)

    return _dijkstra(mesh.sizes, enc(src), enc(dst), check_cost(cost) == "wire", bound)


@lru_cache(maxsize=20000)
def _dijkstra(sizes: tuple[int, ...], src, dst, wire: bool = False, bound: int | None = None) -> int:
    nax = len(sizes)
    dist = {src: 0}
    heap = [(0, src)]
    done = set()
    permuted: set[tuple[int, ...]] = set()
    by_local: dict[tuple[int, ...], list] | None = None
    while heap:
        cost, s = heapq.heappop(heap)
        if s in done:
            continue
        done.add(s)
        if s == dst:
            return cost
        loc = tuple(c for c, _ in s)
        ls = math.prod(loc)
        used = set(a for _, ax in s for a in ax)
        free = [a for a in range(nax) if a not in used]

        def relax(t, c):
            if bound is not None and math.prod(ci for ci, _ in t) > bound:
                return
            if t not in done and (t not in dist or c < dist[t]):
                dist[t] = c
                heapq.heappush(heap, (c, t))

        for i, (c, ax) in enumerate(s):
            n = 1
            for k in range(1, len(ax) + 1):
                n *= sizes[ax[k - 1]]
                pre, rest = ax[:k], ax[k:]
                gi = (c * n, rest)
                relax(s[:i] + (gi,) + s[i + 1:], cost + (ls * (n - 1) if wire else ls * n))
                for j, (cj, axj) in enumerate(s):
                    if j != i and cj % n == 0:
                        t = list(s)
                        t[i] = gi
                        t[j] = (cj // n, pre + axj)
                        relax(tuple(t), cost + (ls - ls // n if wire else ls))
            for a in free:
                if c % sizes[a] == 0:
                    relax(s[:i] + ((c // sizes[a], (a,) + ax),) + s[i + 1:], cost)
        if loc not in permuted:
            # allpermute: every type with this local type, at cost localsize (first visit is cheapest)
            permuted.add(loc)
            if by_local is None:
                by_local = _all_types(sizes, s)
            for t in by_local.get(loc, ()):
                relax(t, cost + ls)
    raise ModelError("internal: the exhaustive reference found no sequence")


def _all_types(sizes, s) -> dict:
    """Every well-formed concrete type with the global type of ``s``, grouped by local type."""
    nax = len(sizes)
    glob = tuple(c * math.prod(sizes[a] for a in ax) for c, ax in s)
    r = len(glob)
    out: dict[tuple[int, ...], list] = {}

    def place(a, dims):
        if a == nax:
            t = []
            for i, ax in enumerate(dims):
                p = math.prod(sizes[x] for x in ax)
                if glob[i] % p:
                    return
                t.append((glob[i] // p, tuple(ax)))
            t = tuple(t)
            out.setdefault(tuple(c for c, _ in t), []).append(t)
            return
        place(a + 1, dims)  # axis a replicated
        for i in range(r):
            for pos in range(len(dims[i]) + 1):
                nd = list(dims)
                nd[i] = dims[i][:pos] + (a,) + dims[i][pos:]
                place(a + 1, nd)

    place(0, [()] * r)
    return out
