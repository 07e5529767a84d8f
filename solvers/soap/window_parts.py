"""The split count of a window (recomputation allowed): Hong and Kung's dominator argument on the parts of
a window, with a weight for the values the window itself must store.

Kwasniewski's thesis ("Performance Modeling and Optimal Schedules for Data Oblivious Programs",
sections 3.2.2 and 3.4: the red–blue pebble game on a CDAG, the dominator set of a subcomputation and
Hong and Kung's lemma, section 3.4.1) bounds the I/O of a subcomputation by the size of a dominator set:
at most ``S`` of it is red when the subcomputation starts.  In a window
``(T_{k−1}, T_k]`` of :mod:`meshplan.solvers.soap.window` with its chain ``ρ_0 → ρ_1 → …`` (first computed at
``t_0 < t_1 < …``), split the chain into ``M`` parts of consecutive positions and the window into the time
intervals ``H_j = (t_{a_j − 1}, t_{a_{j+1} − 1}]`` (``t_{−1} = T_{k−1}``): part ``j``'s chain positions are
first computed in ``H_j``.  Let ``D_j`` be the vertices red at the start of ``H_j`` or loaded in it.  Walking
back from the first computation of a position of part ``j`` along any path from an input (each vertex red
when its successor is computed: red since before ``H_j``, loaded in ``H_j`` or computed earlier in ``H_j``,
and an input is never computed), the path meets ``D_j`` before its end: ``D_j`` is a vertex cut between
the inputs and the part's positions (recomputation allowed).

A vertex ``v`` that descends from ``P(k − 1)`` is first computed after ``T_{k−1}``, so a load of it in ``H_j``
follows a store of it inside the window.  Give such a vertex weight 2 in the part that holds the first
chain position it reaches (one part per vertex, one window per vertex: it is an ancestor of ``P(k)``),
every other vertex weight 1.  Then ``w(D_j) ≤ loads(H_j) + stores of those vertices + 2S`` (at most ``S``
red at the start of ``H_j``), so by max-flow/min-cut with vertex capacities ``w``

    I/O of the window ≥ Σ_j (maxflow_j − 2S)⁺,  maxflow_j from the inputs to part j’s chain positions.

A part whose positions' ancestors reach back to the same few inputs gets a small flow, so the split
matters.  durbin: the ``sum`` chain of step ``k`` reads ``y[q]`` after step ``k − 1``, each computed from the
pair ``y[q]``, ``y[k − 2 − q]`` of the step before.  With four parts no part holds both positions of a pair:
per position the flow carries ``r[k − q − 1]``, and either ``y[q]`` itself (weight 2: computed in this
window, so stored and loaded) or both values of its pair, on disjoint paths back to distinct inputs —
``3`` per position, ``e(k) = 3k + 1`` or ``3k + 2``, and ``Q ≥ Σ_k (e(k) − 8S)⁺``, leading term ``3N²/2``
(Table 5.2's entry).  Two parts give ``2k + 4`` (the ``k + 3`` inputs the window's values depend on bound
each half's cut), three parts less than ``3k`` (the middle part holds both positions of its pairs).

:func:`split_count` evaluates the flows on the exact CDAG of a trace (:mod:`scipy`'s maximum flow on the
graph with split vertices); it is exact for the trace, any choice of parts is sound."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

__all__ = ["Network", "split_count", "as_mask", "PARTS"]

#: the numbers of parts the window rule evaluates (the best leading term is kept)
PARTS = (4,)
_BIG = 1 << 24


class Network:
    """The CDAG of a trace as a flow network: instance ``v`` is the edge ``2v → 2v + 1`` (its capacity set per
    part), an input element ``e`` the node ``2n + e`` fed by the source ``src`` with capacity 1, and every
    data-flow edge has an unbounded capacity."""

    def __init__(self, n: int, pm: list[list[int]], ins: list[int]):
        rows, cols = [], []
        for x, row in enumerate(pm):
            for u in row:
                if u >= 0:
                    rows.append(2 * u + 1)
                    cols.append(2 * x)
        elems: dict[int, int] = {}
        for x, mask in enumerate(ins):
            while mask:
                low = mask & -mask
                e = elems.setdefault(low.bit_length() - 1, len(elems))
                rows.append(2 * n + e)
                cols.append(2 * x)
                mask ^= low
        self.n = n
        self.src, self.snk = 2 * n + len(elems), 2 * n + len(elems) + 1
        self.size = self.snk + 1
        flow_r, flow_c = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
        split = np.arange(n, dtype=np.int64)
        feed = 2 * n + np.arange(len(elems), dtype=np.int64)
        self._rows = np.concatenate([flow_r, 2 * split, np.full(len(elems), self.src)])
        self._cols = np.concatenate([flow_c, 2 * split + 1, feed])
        self._caps = np.concatenate([np.full(len(rows), _BIG), np.ones(n), np.ones(len(elems))]).astype(np.int32)
        self._split = slice(len(rows), len(rows) + n)

    def flow(self, double: np.ndarray, targets: list[int]) -> int:
        """The maximum flow from the inputs to ``targets`` (their in-nodes) with capacity 2 on the instances
        of the boolean mask ``double`` and 1 on every other instance and input."""
        caps = self._caps.copy()
        caps[self._split] += double.astype(np.int32)
        t = np.array(targets, dtype=np.int64)
        rows = np.concatenate([self._rows, 2 * t])
        cols = np.concatenate([self._cols, np.full(len(t), self.snk)])
        caps = np.concatenate([caps, np.full(len(t), _BIG, dtype=np.int32)])
        m = csr_matrix((caps, (rows, cols)), shape=(self.size, self.size))
        m.sum_duplicates()
        return int(maximum_flow(m, self.src, self.snk).flow_value)


def as_mask(bitset: int, n: int) -> np.ndarray:
    """The bit set ``bitset`` of vertices ``0 … n − 1`` as a boolean array."""
    raw = np.frombuffer(bitset.to_bytes((n + 7) // 8 + 1, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


def split_count(net: Network, anc: list[int], after: int, chain: list[int], parts: int) -> int:
    """``Σ_j maxflow_j`` over ``parts`` parts of consecutive positions of ``chain`` (instances, in chain
    order); ``after`` is the bit set of the descendants of ``P(k − 1)`` (weight 2 in the part of the first
    chain position they reach)."""
    n, total = net.n, 0
    cuts = [round(j * len(chain) / parts) for j in range(parts + 1)]
    below = 0                                          # ancestors of the positions before the part (and them)
    for j in range(parts):
        targets = chain[cuts[j]:cuts[j + 1]]
        if not targets:
            continue
        reach = anc[targets[-1]] | 1 << targets[-1]
        total += net.flow(as_mask(reach & after & ~below, n), targets)
        below = reach
    return total
