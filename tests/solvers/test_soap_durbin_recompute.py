"""durbin with recomputation allowed (the red–blue pebble game of Kwasniewski's thesis, ch. 4): what the
window argument of solvers/soap/window.py can and cannot charge, checked on durbin's CDAG.

Window ``k`` is the time ``(T_{k−1}, T_k]`` between the first computations of ``alpha`` of steps ``k − 1``
and ``k``; its chain ``ρ_q`` (``sum += r[k − q − 1]·y[q]``, ``q = 0 … k − 1``) reads ``r[0..k − 1]`` and the
``y`` values after step ``k − 1``.

* A dominator count inside one window (Hong and Kung) charges nothing for the ``y`` values: the inputs
  ``r[0..k − 1]`` and the three initial values dominate all of them, and those ``r`` are already charged
  by the window's reads.  So "a lost value costs a load of its dominator" does not add to the ``r`` count.
* What does: vertex-disjoint paths into the chain, one per ``y[q]``.  Either a path holds a vertex red at
  ``T_{k−1}`` or loaded in the window (a non-input load), or all of it is recomputed before ``ρ_q``, and the
  inputs it reads that ``ρ_q, ρ_{q+1}, …`` read after it (``μ`` of them) are loaded twice.  The schedule
  picks which paths to recompute.  On the *lineage* paths (``y[q]`` back through its own versions to
  ``alpha`` of step ``q`` and its ``sum`` chain: ``r[0..q]`` against ``r[0..k − 1 − q]``) the cheapest paths
  to recompute are those at both ends of the vector and the least the schedule pays is ``⌈k/2⌉`` more than
  the ``k + 1`` reads.  On the *mirrored* paths (for ``q < k − 2 − q``, ``y[q]`` turns to the mirrored
  ``y[k − 2 − q]`` of the step before and runs back through its versions to ``alpha`` of step ``k − 2 − q``;
  its partner turns the other way) ``μ`` takes every value ``0 … k − 1`` once, and the least is ``k − 1``
  more: ``2k`` per window, ``N² − O(NS)`` in all.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.soap.replay import build_trace, legal, loop_order, producers, replay_order, stream
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.pebbling import cdag
from meshplan.solvers.soap.window import window_bound
from meshplan.models.loops.program import sym

N = 16


def _flow(tr):
    """Per (instance, read column): the producing instance, or ``("in", element)`` for an input."""
    el, wr, inst = stream(tr, loop_order(tr))
    prod, _ = producers(el, wr, inst)
    cols = np.broadcast_to(np.arange(tr.elems.shape[1]), tr.elems.shape)[tr.elems >= 0]
    out = {}
    for e, w, i, c, p in zip(el.tolist(), wr.tolist(), inst.tolist(), cols.tolist(), prod.tolist()):
        if not w:
            out[i, c] = p if p >= 0 else ("in", e)
    return out


def test_the_inputs_dominate_the_lost_values(durbin):
    """The tempting argument (each lost ``y`` costs one I/O, by domination) fails inside one window: every
    path from an input to the ``y`` values after step ``k − 1`` starts at ``r[0..k − 1]`` or at one of the three
    initial values, and those ``r`` are read by the window's chain anyway."""
    p = durbin.program
    tr = build_trace(p, {"N": N})
    g = cdag(p, {"N": N})
    idx, flow = durbin.index(tr, p), _flow(tr)
    anc = [0] * g.n
    for v in range(tr.instances):                       # instances in program order: producers first
        m = g.preds[v]
        a = m
        for u in range(tr.instances):
            if m >> u & 1:
                a |= anc[u]
        anc[v] = a
    r_el = {m: flow[idx["S4", m, None], 0][1] for m in range(1, N)}        # alpha reads r[k] first
    r_el[0] = flow[idx["S3", 1, 0], 1][1]                                   # sum of step 1 reads r[0]
    for k in range(3, N):
        lost = [idx["S6", k - 1, i] for i in range(k - 1)] + [idx["S7", k - 1, None]]
        reach = 0
        for v in lost:
            reach |= anc[v]
        inputs = [v for v in range(tr.instances, g.n) if reach >> v & 1]
        chain_r = {flow[idx["S3", k, q], 1] for q in range(k)}             # what window k reads anyway
        assert len(inputs) == k + 3                                         # r[0..k − 1], y[0], alpha, beta
        assert {("in", r_el[m]) for m in range(k)} == chain_r               # the same r the chain reads


def _lineage(idx, top: int, q: int) -> list[int]:
    """The path of ``y[q]`` after step ``top`` back through its versions to ``alpha`` of step ``q`` and its
    ``sum`` chain, last vertex first (for ``q = 0``: back to the first step's update of ``y[0]``)."""
    out = []
    for t in range(top, q, -1):                         # y[q] = z[q] = y[q] + alpha·y[t − q − 1], steps t > q
        out += [idx["S6", t, q], idx["S5", t, q]]
    if q == 0:
        return out
    out += [idx["S7", q, None], idx["S4", q, None]]     # y[q] = alpha of step q
    out += [idx["S3", q, i] for i in range(q - 1, -1, -1)]
    return out


def _mirrored(idx, k: int, q: int) -> list[int]:
    """The path of ``y[q]`` after step ``k − 1`` that turns, in ``z[q] = y[q] + alpha·y[k − 2 − q]`` of step
    ``k − 1``, to the mirrored value and runs back through its versions (``q ≤ k − 2``; the middle one and
    ``q = k − 1`` keep their lineage)."""
    if q == k - 1 or 2 * q == k - 2:
        return _lineage(idx, k - 1, q)
    return [idx["S6", k - 1, q], idx["S5", k - 1, q]] + _lineage(idx, k - 2, k - 2 - q)


def _least(mus: list[int]) -> int:
    """What the schedule pays beyond the reads when it picks the paths to recompute: ``min(P, min_m (P −
    #{μ ≤ m} + m))``."""
    return min([len(mus)] + [len(mus) - sum(m <= t for m in mus) + t for t in mus])


def test_the_paths_and_what_a_recomputation_reads_twice(durbin):
    p = durbin.program
    tr = build_trace(p, {"N": N})
    idx, flow = durbin.index(tr, p), _flow(tr)
    preds: dict[int, set] = {}                          # instance → producing instances
    reads: dict[int, set] = {}                          # instance → input elements
    for (i, _), v in flow.items():
        if isinstance(v, tuple):
            reads.setdefault(i, set()).add(v[1])
        else:
            preds.setdefault(i, set()).add(v)
    w = window_bound(p)
    for k in range(2, N):
        chain = [idx["S3", k, q] for q in range(k)]
        assert all(a in preds[b] for a, b in zip(chain, chain[1:]))         # ρ_q precedes ρ_{q+1}
        c = len(set().union(*(reads.get(v, set()) for v in chain + [idx["S4", k, None]])))
        assert c == k + 1                                                   # r[0..k]
        found = []
        for family in (lambda q: _lineage(idx, k - 1, q), lambda q: _mirrored(idx, k, q)):
            paths = [family(q) for q in range(k)]
            seen = [v for path in paths for v in path]
            assert len(seen) == len(set(seen)) and not set(seen) & set(chain)   # vertex-disjoint
            mus = []
            for q, path in enumerate(paths):
                assert path[0] in preds[chain[q]]                            # ends at a predecessor of ρ_q
                assert all(b in preds[a] for a, b in zip(path, path[1:]))  # a path of predecessors
                a = set().union(*(reads.get(v, set()) for v in path))
                after = set().union(*(reads.get(v, set()) for v in chain[q:]))
                mus.append(len(a & after))
            found.append(mus)
        lineage, mirrored = found
        assert lineage == [0] + [min(q, k - 1 - q) + 1 for q in range(1, k)]   # r[0..q] against r[0..k − 1 − q]
        assert _least(lineage) == (k + 1) // 2                              # ⌈k/2⌉: the ends are cheap
        assert sorted(mirrored) == list(range(k))                           # one path per value of μ
        assert _least(mirrored) == k - 1
        # the tool's fitted count is at most the count on the mirrored paths at every step it sums
        assert float(w.paths.subs(sym("k"), k)) <= c + k - 1


def test_a_fused_sweep_is_legal_and_above_every_piece(durbin):
    """The counter-schedule the bound is measured against (docs/bound.md, durbin): legal, below the loop
    order, and above the bound (with recomputation, against its loads) and the piece without it."""
    p = durbin.program
    w = window_bound(p)
    n, m = 128, 32
    tr = build_trace(p, {"N": n})
    order = durbin.fused(tr, durbin.index(tr, p), n)
    assert sorted(order.tolist()) == list(range(tr.instances)) and legal(tr, order)
    io, lo = replay_order(tr, order, m), replay_order(tr, loop_order(tr), m)
    at = {sym("N"): n, S: m}
    assert io.total < lo.total
    assert float(w.bound.subs(at)) <= io.loads and float(w.no_recomputation.subs(at)) <= io.total
