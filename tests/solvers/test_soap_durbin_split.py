"""The split count of the window bound (solvers/soap/window_parts.py) against plays of the red–blue pebble
game WITH recomputation (Kwasniewski's thesis, section 4.2): durbin at the published entry ``3N²/2``.

The lemma: in window ``k`` split into four parts of consecutive ``sum`` positions, the vertices red at the
start of a part or loaded in it (``D``) cut every path from an input to the part's first computations, and a
vertex descending from ``alpha`` of step ``k − 1`` that is loaded there was stored in the window; so
``w(D) ≥ maxflow`` (weight 2 on those vertices of the part).  It is checked here on every part of every
window of plays that recompute (values dropped and computed again from their predecessors, values loaded
or computed again at random), whose legality an independent replay of the moves checks; on the optimal
play of a chain small enough for the exhaustive search; and the tool's bound against the plays' I/O.
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque

import numpy as np
import pytest

from meshplan.models.core.bits import bits
from meshplan.models.loops.frontend import parse_source
from meshplan.models.loops.program import sym
from meshplan.models.soap.replay import build_trace, legal, loop_order, replay_order
from meshplan.solvers.soap import window as W
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.pebbling import cdag, optimal_io
from meshplan.solvers.soap.window_parts import Network, as_mask, split_count


def _play(g, order, memory: int, seed: int, drop: float, again: float):
    """A play with recomputation: the instances of ``order`` computed in that order (their first
    computations); an evicted (least recently used) value is stored, or dropped when its predecessors are
    all blue; a value needed again is loaded, or computed again — always when it was dropped, with
    probability ``again`` when it is blue and its predecessors are too.  Returns the moves
    ``[(kind, vertex)]`` (``L``oad, ``S``tore, ``C``ompute, ``D``elete), the move of each first computation
    and the red set after it."""
    rng = random.Random(seed)
    preds = [bits(m) for m in g.preds]
    red: OrderedDict = OrderedDict()
    blue = set(bits(g.inputs))
    moves, first, snap = [], {}, {}

    def room(pinned):
        while len(red) >= memory:
            v = next(u for u in red if u not in pinned)
            del red[v]
            if v not in blue and not (all(u in blue for u in preds[v]) and rng.random() < drop):
                blue.add(v)
                moves.append(("S", v))
            moves.append(("D", v))

    def need(v, pinned):
        if v in red:
            red.move_to_end(v)
            return
        easy = not g.inputs >> v & 1 and all(u in blue for u in preds[v]) and len(pinned) <= memory - 8
        if v in blue and not (easy and rng.random() < again):
            room(pinned)
            red[v] = True
            moves.append(("L", v))
            return
        inner = pinned | set(preds[v]) | {v}
        for u in preds[v]:
            need(u, inner)
        room(inner)
        red[v] = True
        moves.append(("C", v))

    for x in order.tolist():
        need(x, frozenset())
        first[x] = len(moves) - 1
        snap[len(moves) - 1] = frozenset(red)
    for v in bits(g.outputs):
        if v not in blue:
            need(v, frozenset())
            blue.add(v)
            moves.append(("S", v))
    return moves, first, snap


def _io(g, moves, memory: int) -> int:
    """Replays the moves as the red–blue game (asserting every rule) and returns loads + stores."""
    red, blue, io = set(), set(bits(g.inputs)), 0
    for kind, v in moves:
        if kind == "C":
            assert not g.inputs >> v & 1 and all(u in red for u in bits(g.preds[v]))
            red.add(v)
        elif kind == "L":
            assert v in blue
            red.add(v)
            io += 1
        elif kind == "S":
            assert v in red
            blue.add(v)
            io += 1
        else:
            red.remove(v)
        assert len(red) <= memory
    assert all(v in blue for v in bits(g.outputs))
    return io


def _windows(p, tr, parts: int = 4):
    """Per window of the tool's pivot: ``(P(k − 1), P(k), descendants of P(k − 1), chain)``."""
    graph = W._graph(tr)
    desc, anc = graph[0], graph[1]
    si = [st.name for st in p.statements].index(W.window_bound(p).pivot)
    kv = tr.vars["k"]
    piv = {int(kv[i]): int(i) for i in np.flatnonzero(tr.stmt == si)}
    steps = sorted(piv)
    for a, b in zip(steps, steps[1:]):
        pa, pb = piv[a], piv[b]
        window = (anc[pb] | 1 << pb) & desc[pa]
        yield pa, pb, desc[pa], W._chain(tr, graph, window)


def _check_lemma(p, tr, g, moves, first, snap, memory: int, parts: int = 4) -> tuple[int, int]:
    """Asserts ``w(D) ≥ maxflow`` on every part of every window and that each weight-2 vertex loaded in a part
    was stored in the window before; returns ``Σ (maxflow − 2S)⁺`` over the parts and the number of parts
    where the cut counted with weight 1 throughout is below the flow (the stores matter there)."""
    graph = W._graph(tr)
    anc, pm, ins = graph[1], graph[5], graph[3]
    net = Network(tr.instances, pm, ins)
    stored: dict[int, list[int]] = {}
    for t, (kind, v) in enumerate(moves):
        if kind == "S":
            stored.setdefault(v, []).append(t)
    forced, short = 0, 0
    for pa, _, after, chain in _windows(p, tr):
        cuts = [round(j * len(chain) / parts) for j in range(parts + 1)]
        below = 0
        for j in range(parts):
            targets = chain[cuts[j]:cuts[j + 1]]
            if not targets:
                continue
            reach = anc[targets[-1]] | 1 << targets[-1]
            double = reach & after & ~below
            below = reach
            flow = net.flow(as_mask(double, tr.instances), targets)
            start = first[chain[cuts[j] - 1]] if cuts[j] else first[pa]
            end = first[targets[-1]]
            loaded = {v for kind, v in moves[start + 1:end + 1] if kind == "L"}
            cut = snap[start] | loaded
            assert sum(2 if v < tr.instances and double >> v & 1 else 1 for v in cut) >= flow
            for v in loaded:
                if v < tr.instances and double >> v & 1:
                    assert any(first[pa] < t < end for t in stored.get(v, ()))
            forced += max(0, flow - 2 * memory)
            short += len(cut) < flow
    return forced, short


@pytest.mark.parametrize("n, memory, seed", [(24, 13, 0), (40, 16, 1),
                                             pytest.param(64, 13, 2, marks=pytest.mark.slow)])
def test_the_cut_holds_on_plays_with_recomputation(n, memory, seed, durbin):
    p = durbin.program
    tr = build_trace(p, {"N": n})
    g = cdag(p, {"N": n})
    recomputed, short = 0, 0
    for order, drop, again in ((loop_order(tr), 0.5, 0.3), (durbin.fused(tr, durbin.index(tr, p), n), 0.8, 0.5)):
        assert legal(tr, order)
        moves, first, snap = _play(g, order, memory, seed, drop, again)
        io = _io(g, moves, memory)
        recomputed += sum(kind == "C" for kind, _ in moves) - tr.instances
        forced, below = _check_lemma(p, tr, g, moves, first, snap, memory)
        assert forced <= io
        short += below
    assert recomputed > n * n // 4                      # the plays do recompute
    assert short > 0 or n < 64                          # and without the weight the cut would fail there


@pytest.mark.parametrize("n", [24, 40])
def test_the_split_count_is_3k_plus_one_or_two(n, durbin):
    """Four parts: per position ``r[k − q − 1]`` and either ``y[q]`` (stored and loaded) or its pair; the
    tool fits it at N ≤ 24, and it holds as fitted at N = 40."""
    p = durbin.program
    tr = build_trace(p, {"N": n})
    graph = W._graph(tr)
    net = Network(tr.instances, graph[5], graph[3])
    for pa, _, after, chain in _windows(p, tr):
        k = len(chain)
        e = split_count(net, graph[1], after, chain, 4)
        assert e == (3 * k if k == 2 else 3 * k + (1 if k % 4 == 3 else 2)), k
        assert split_count(net, graph[1], after, chain, 2) <= 2 * k + 4        # two halves: k + 3 inputs


def test_the_flow_agrees_with_networkx(durbin):
    """An independent maximum flow on one part (the first quarter of window 20) gives the same value."""
    nx = pytest.importorskip("networkx")
    p = durbin.program
    tr = build_trace(p, {"N": 24})
    desc, anc, _, ins, _, pm = W._graph(tr)
    pa, _, after, chain = list(_windows(p, tr))[18]
    targets = chain[:len(chain) // 4]
    reach = anc[targets[-1]] | 1 << targets[-1]
    gr = nx.DiGraph()
    for v in range(tr.instances):
        gr.add_edge(("in", v), ("out", v), capacity=2 if reach & after >> v & 1 else 1)
        for u in pm[v]:
            if u >= 0:
                gr.add_edge(("out", u), ("in", v))
        for e in bits(ins[v]):
            gr.add_edge("src", ("el", e), capacity=1)
            gr.add_edge(("el", e), ("in", v))
    for t in targets:
        gr.add_edge(("in", t), "snk")
    value = nx.maximum_flow_value(gr, "src", "snk")
    net = Network(tr.instances, pm, ins)
    assert value == net.flow(np.array([reach & after >> v & 1 for v in range(tr.instances)], dtype=bool),
                             targets) == 3 * len(targets)


CHAIN = """
def chain(N):
    for k in range(1, N):
        for i in range(k):
            s += r[i] * y[i]
        p = s * s
        for j in range(k + 1):
            y[j] = y[j] + p * y[k - j]
"""


def _optimal_play(g, memory: int):
    """An optimal play of the exhaustive search (pebbling.py's moves, with parents): ``[(kind, vertex)]``."""
    start = (0, g.inputs)
    parent = {start: None}
    queue = deque([(start, 0)])
    dist = {start: 0}
    while queue:
        state, d = queue.popleft()
        if d > dist[state]:
            continue
        red, blue = state
        if g.outputs & ~blue == 0:
            out = []
            while parent[state] is not None:
                state, move = parent[state]
                out.append(move)
            return out[::-1], d
        moves = []
        if bin(red).count("1") >= memory:
            moves += [((red & ~(1 << v), blue), 0, ("D", v)) for v in bits(red)]
        else:
            moves += [((red | 1 << v, blue), 0, ("C", v)) for v in range(g.n)
                      if not g.inputs >> v & 1 and not red >> v & 1 and g.preds[v] & ~red == 0]
            moves += [((red | 1 << v, blue), 1, ("L", v)) for v in bits(blue & ~red)]
        moves += [((red, blue | 1 << v), 1, ("S", v)) for v in bits(red & ~blue & ~g.inputs)]
        for nxt, cost, move in moves:
            if nxt not in dist or dist[nxt] > d + cost:
                dist[nxt] = d + cost
                parent[nxt] = (state, move)
                (queue.appendleft if cost == 0 else queue.append)((nxt, d + cost))
    raise AssertionError("no play")


def test_the_cut_holds_on_an_optimal_play():
    """The exhaustive optimum of a small durbin-like chain (mirrored update) is a play with recomputation
    allowed; the lemma holds on its every part."""
    (p,) = parse_source(CHAIN)
    n, memory = 3, 4
    tr = build_trace(p, {"N": n})
    g = cdag(p, {"N": n})
    moves, best = _optimal_play(g, memory)
    assert best == optimal_io(g, memory) == _io(g, moves, memory)
    first, snap, red = {}, {}, set()
    for t, (kind, v) in enumerate(moves):
        red = red | {v} if kind in "CL" else red - {v} if kind == "D" else red
        if kind == "C" and v not in first:
            first[v] = t
            snap[t] = frozenset(red)
    assert _check_lemma(p, tr, g, moves, first, snap, memory)[0] >= 0


def test_the_bound_is_below_plays_and_the_fused_sweep(durbin):
    """Where the split piece is the largest (N ≫ 8S) the tool's bound is below the I/O of the plays with
    recomputation and of the fused sweep."""
    p = durbin.program
    w = W.window_bound(p)
    n, memory = 160, 13
    at = {sym("N"): n, S: memory}
    split = float(w.bound.subs(at))
    assert split == pytest.approx((3 * n - 8 * memory - 2) ** 2 / 6)        # Σ (3k + 1 − 8S)⁺, k ≤ N − 1
    tr = build_trace(p, {"N": n})
    order = durbin.fused(tr, durbin.index(tr, p), n)
    assert split <= replay_order(tr, order, memory).total
    g = cdag(p, {"N": n})
    moves, _, _ = _play(g, order, memory, 3, 0.8, 0.5)
    assert split <= _io(g, moves, memory)


GEN = """
def gen(N):
    for k in range(1, N):
        s = 0.0
        for i in range(0, k + 1):
            s += r[k - i] * y[i]
        p = s * p
        for j in range(0, k + 1):
            y[j] = y[j] + p * y[k - j]
"""


def test_a_durbin_like_chain_in_place():
    """The rule is not durbin's alone: an in-place mirrored update (the random windows' strategy program)
    gets ``3k + 4`` in four parts, ``3N²/2``, below its loop order where that piece leads."""
    (p,) = parse_source(GEN)
    w = W.window_bound(p)
    k, n, memory = sym("k"), 256, 8
    assert w.split - (3 * k + 4) == 0 and w.parts == 4 and w.leading == 3 * sym("N") ** 2 / 2
    at = {sym("N"): n, S: memory}
    assert float(w.bound.subs(at)) == pytest.approx((3 * n - 8 * memory + 1) ** 2 / 6)
    tr = build_trace(p, {"N": n})
    assert float(w.bound.subs(at)) <= replay_order(tr, loop_order(tr), memory).total


OTHERS = [
    GEN,
    GEN.replace("y[j] = y[j] + p * y[k - j]", "y[j] = r[j] * p"),
    GEN.replace("        s = 0.0\n", "").replace("s += r[k - i] * y[i]", "s += y[k - i]").replace("p = s * p", "p = s * r[k]"),
]


@pytest.mark.parametrize("src", OTHERS, ids=["mirrored", "overwrite", "reversed-read"])
def test_the_cut_holds_on_other_chains(src):
    """The lemma is the rule's, not durbin's: the same checks on plays with recomputation of other chains
    (the loop order, values dropped and computed again)."""
    (p,) = parse_source(src)
    assert W.window_bound(p) is not None
    n, memory = 24, 13
    tr = build_trace(p, {"N": n})
    g = cdag(p, {"N": n})
    moves, first, snap = _play(g, loop_order(tr), memory, 5, 0.6, 0.4)
    assert sum(kind == "C" for kind, _ in moves) > tr.instances            # it recomputes
    forced, _ = _check_lemma(p, tr, g, moves, first, snap, memory)
    assert forced <= _io(g, moves, memory)
