"""A topology-aware simulator of lowered reduction programs (P2 §5).

Each step of a lowered program is turned into point-to-point *flows* by the
algorithm NCCL would use (``ring`` or ``tree``, see below), each flow is routed
over the interconnects of the level where its two ends first differ, and the
step takes

    time = max over link resources (bytes on it / its bandwidth)
           + rounds × (largest latency among the links the step crosses)

so groups that share a link (one NIC per node, a ring segment) contend.  A
program's time is the sum of its steps (§5).  Buffer sizes follow the state
semantics: a device holding ``r`` of ``k`` chunks of a ``B``-byte buffer
passes ``r·B/k`` bytes.

Algorithms (n group members, S bytes per member):

==============  ===========================================  ===================
collective      ring: bytes each member sends to its successor rounds
==============  ===========================================  ===================
AllReduce       2(n−1)/n · S                                  2(n−1)
ReduceScatter   (n−1)/n · S                                   n−1
AllGather       (n−1) · S                                     n−1
Reduce          S (a pipelined chain ending at the root)      n−1
Broadcast       S (a pipelined chain starting at the root)    n−1
==============  ===========================================  ===================

``tree`` (binary tree over the members, root first) changes AllReduce (S up
to the parent, S back down), Reduce (up) and Broadcast (down), with
``2⌈log2 n⌉`` resp. ``⌈log2 n⌉`` rounds; ReduceScatter and AllGather stay
ring, as in NCCL.  Resource model per interconnect kind: docs/simulator.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep
from meshplan.models.reduction.checker import ReplayMemo
from meshplan.models.reduction.semantics import RuleViolation
from meshplan.models.reduction.state import Context, initial_context
from meshplan.models.core.system import System
from meshplan.models.reduction.routing import Router, port_share

__all__ = ["ALGORITHMS", "StepTime", "ProgramTime", "flows", "tree_allreduce", "btree_parent", "dtree_parents", "simulate_step", "simulate_local_step", "simulate", "port_share", "router"]

ALGORITHMS = ("ring", "tree")


@dataclass(frozen=True, slots=True)
class StepTime:
    """The simulated time of one step: bandwidth and latency parts, the bottleneck link and bytes per device."""

    time_s: float
    bandwidth_s: float
    latency_s: float
    bottleneck: str
    bytes_sent: tuple[float, ...]  # per device


@dataclass(frozen=True, slots=True)
class ProgramTime:
    """The simulated time of a program (§5): the sum of its steps' times."""

    time_s: float
    steps: tuple[StepTime, ...]

    @property
    def bytes_sent(self) -> tuple[float, ...]:
        """Bytes each device sends over the whole program."""
        if not self.steps:
            return ()
        return tuple(sum(s.bytes_sent[d] for s in self.steps) for d in range(len(self.steps[0].bytes_sent)))


Flow = tuple[int, int, float]  # (src, dst, bytes)


def btree_parent(n: int, r: int) -> int:
    """Parent of rank ``r`` in NCCL's in-order binary tree over ``n`` ranks (``-1`` for the root 0).

    The tree of NCCL's ``ncclGetBtree``: rank ``r`` with lowest set bit ``b`` hangs below
    ``(r ^ b) | 2b`` when that exists, else below ``r ^ b``."""
    if r == 0:
        return -1
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    return up if up < n else r ^ bit


def dtree_parents(n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Parents in NCCL's *double* binary tree over ``n`` ranks (``ncclGetDtree``): the second tree is
    the first mirrored (``r -> n-1-r``) for even ``n`` and shifted by one for odd ``n``, so that a rank
    that is a leaf in one tree is (mostly) an inner node of the other."""
    first = tuple(btree_parent(n, r) for r in range(n))
    if n % 2 == 0:
        second = tuple(-1 if (u := btree_parent(n, n - 1 - r)) == -1 else n - 1 - u for r in range(n))
    else:
        second = tuple(-1 if (u := btree_parent(n, (r - 1) % n)) == -1 else (u + 1) % n for r in range(n))
    return first, second


def _host_chains(group: Sequence[int], hosts: Sequence[int] | None) -> list[list[int]]:
    """The group's members split by host (hosts in order of first appearance), each chain sorted."""
    by: dict[int, list[int]] = {}
    for i, d in enumerate(group):
        by.setdefault(d if hosts is None else hosts[i], []).append(d)
    return [sorted(m) for m in by.values()]


def tree_allreduce(group: Sequence[int], S: float, hosts: Sequence[int] | None = None
                   ) -> tuple[list[Flow], int, int]:
    """NCCL's tree AllReduce (``graph/connect.cc``, ``graph/trees.cc``): a chain through the members of
    each host, and a double binary tree over the hosts' chain heads, each tree carrying half the data up
    (reduce) and down (broadcast).  Returns the flows, the longest chain's hop count and the depth of the
    deeper inter-host tree; NCCL's latency model charges ``2·(chain hops·intra + depth·inter)``
    (``graph/tuning.cc``)."""
    chains = _host_chains(group, hosts)
    half = S / 2
    out: list[Flow] = []
    for chain in chains:  # both trees use the host's chain: S/2 each way per tree
        for a, b in zip(chain, chain[1:]):
            out += [(b, a, S), (a, b, S)]
    h = len(chains)
    depth = 0
    if h > 1:
        heads = [c[0] for c in chains]
        for parents in dtree_parents(h):
            for r, u in enumerate(parents):
                if u >= 0:
                    out += [(heads[r], heads[u], half), (heads[u], heads[r], half)]
            depth = max(depth, _depth(parents))
    return out, max(len(c) - 1 for c in chains), depth


def _depth(parents: Sequence[int]) -> int:
    best = 0
    for r in range(len(parents)):
        d, u = 0, parents[r]
        while u >= 0:
            d, u = d + 1, parents[u]
        best = max(best, d)
    return best


def flows(collective: Collective | str, group: Sequence[int], sizes: Sequence[float], algo: str = "ring",
          hosts: Sequence[int] | None = None) -> tuple[list[Flow], int]:
    """Flows and rounds of one collective on one group (members in group order, root first).

    ``algo="tree"`` changes only AllReduce, as in NCCL (Reduce and Broadcast have ring implementations
    only): see :func:`tree_allreduce`; ``hosts`` gives each member's host (default: every member its
    own host), and the rounds are ``2·(longest chain + tree depth)``."""
    if algo not in ALGORITHMS:
        raise ModelError(f"unknown algorithm {algo!r}; use ring or tree")
    c = Collective.parse(collective)
    n = len(group)
    if n < 2:
        return [], 0
    ring = sorted(group)  # NCCL orders the ring by rank, so a node's members are neighbours
    succ = {d: ring[(i + 1) % n] for i, d in enumerate(ring)}
    S = max(sizes)
    if algo == "tree" and c is Collective.ALL_REDUCE:
        out, chain, depth = tree_allreduce(group, S, hosts)
        return out, 2 * (chain + depth)
    if c is Collective.ALL_REDUCE:
        return [(d, succ[d], 2 * (n - 1) / n * S) for d in ring], 2 * (n - 1)
    if c is Collective.REDUCE_SCATTER:
        return [(d, succ[d], (n - 1) / n * S) for d in ring], n - 1
    if c is Collective.ALL_GATHER:
        return [(d, succ[d], (n - 1) * S) for d in ring], n - 1
    root = group[0]
    start = ring.index(root)
    chain = ring[start:] + ring[:start]  # root first, then ring order
    if c is Collective.BROADCAST:
        return [(chain[i], chain[i + 1], S) for i in range(n - 1)], n - 1
    rev = chain[1:][::-1] + [root]  # Reduce: a chain that ends at the root
    return [(rev[i], rev[i + 1], S) for i in range(n - 1)], n - 1


@lru_cache(maxsize=16)
def router(system: System) -> Router:
    """The (cached) :class:`~meshplan.models.reduction.routing.Router` of a system."""
    return Router(system)


def _hosts(system: System) -> np.ndarray:
    """Each device's host for the tree algorithm: its coordinate on the outermost level when the system
    has several levels (a node of GPUs); a one-level system is one host."""
    return router(system).host


def _time(system: System, collective: Collective, algo: str, src: list[int], dst: list[int], nb: list[float],
          gid: list[int], shapes: list[tuple[int, int, int]], reps: int = 1, table: np.ndarray | None = None,
          num_devices: int | None = None) -> StepTime:
    """The step time of flows ``src → dst`` (``gid``: their group; ``shapes[g]`` = rounds, chain hops,
    tree depth of group ``g``).  With ``table`` (shape ``(reps, k)``) the flows are over positions and are
    repeated in every row of ``table`` (one row per reduction group)."""
    r = router(system)
    s_, d_, w_ = np.asarray(src, dtype=np.intp), np.asarray(dst, dtype=np.intp), np.asarray(nb, dtype=float)
    g_ = np.asarray(gid, dtype=np.intp)
    if table is not None:
        s_, d_ = table[:, s_].ravel(), table[:, d_].ravel()
        w_, g_ = np.tile(w_, reps), np.tile(g_, reps)
    n = num_devices if num_devices is not None else system.num_devices
    if not len(s_):
        return StepTime(0.0, 0.0, 0.0, "none", (0.0,) * n)
    bw, bottleneck, lat = r.loads(s_, d_, w_)
    sent = tuple(np.bincount(s_, weights=w_, minlength=n).tolist())
    ng = len(shapes)
    if algo == "tree" and collective is Collective.ALL_REDUCE:
        inter = r.host[s_] != r.host[d_]
        lo, hi = np.zeros(ng), np.zeros(ng)
        np.maximum.at(lo, g_[~inter], lat[~inter])
        np.maximum.at(hi, g_[inter], lat[inter])
        chain = np.array([c for _, c, _ in shapes], dtype=float)
        depth = np.array([t for _, _, t in shapes], dtype=float)
        latency = float((2 * (chain * lo + depth * hi)).max())
    else:
        top = np.zeros(ng)
        np.maximum.at(top, g_, lat)
        latency = float((np.array([rd for rd, _, _ in shapes], dtype=float) * top).max())
    return StepTime(bw + latency, bw, latency, bottleneck, sent)


def _group_flows(collective: Collective, groups, sizes_of, host_of, algo: str):
    """Flows of every group that holds data, with each group's (rounds, chain hops, tree depth)."""
    src: list[int] = []
    dst: list[int] = []
    nb: list[float] = []
    gid: list[int] = []
    shapes: list[tuple[int, int, int]] = []
    tree = algo == "tree" and collective is Collective.ALL_REDUCE
    for g in groups:
        sizes = [sizes_of(d) for d in g]
        if max(sizes, default=0) <= 0:
            continue  # a group that holds no data sends nothing and waits for nothing
        hosts = [host_of(d) for d in g]
        fl, rounds = flows(collective, g, sizes, algo, hosts)
        chain = depth = 0
        if tree:
            _, chain, depth = tree_allreduce(g, 0.0, hosts)
        for a, b, w in fl:
            src.append(a)
            dst.append(b)
            nb.append(w)
            gid.append(len(shapes))
        shapes.append((rounds, chain, depth))
    return src, dst, nb, gid, shapes


def simulate_step(system: System, step: LoweredStep, context: Context, chunk_bytes: float,
                  algo: str = "ring") -> StepTime:
    """Time of one step from the states before it (which give the buffer sizes)."""
    c = Collective.parse(step.collective)
    system = system.for_collective(c.value)  # measured per-(level, collective) links, where the file has them
    host = _hosts(system)
    flows_ = _group_flows(c, step.groups, lambda d: sum(1 for m in context[d] if m) * chunk_bytes,
                          lambda d: int(host[d]), algo)
    return _time(system, c, algo, *flows_)


def simulate_local_step(system: System, quotient, local, held: Sequence[int], chunk_bytes: float,
                        algo: str = "ring") -> StepTime:
    """Time of a step that is the same in every reduction group (a uniform
    :class:`~meshplan.models.reduction.symmetry.LocalStep`), from the chunks ``held[p]`` that position
    ``p`` holds: the flows of one reduction group are computed once, on its devices, and repeated in every
    reduction group (by the quotient's member table), then routed together — contention between reduction
    groups is kept.  Requires :meth:`~meshplan.models.reduction.symmetry.Quotient.same_hosts` for the
    tree algorithm (hosts shape the tree)."""
    q = quotient
    first = q.members[0]
    pos = {d: p for p, d in enumerate(first)}
    c = Collective.parse(local.collective)
    system = system.for_collective(c.value)
    host = _hosts(system)
    groups = [tuple(first[p] for p in g) for g in local.patterns[0]]
    src, dst, nb, gid, shapes = _group_flows(c, groups, lambda d: held[pos[d]] * chunk_bytes,
                                             lambda d: int(host[d]), algo)
    return _time(system, c, algo, [pos[d] for d in src], [pos[d] for d in dst], nb, gid, shapes,
                 reps=len(q.members), table=q.table(), num_devices=system.num_devices)


def simulate(system: System, program: LoweredProgram, *, bytes_per_device: float, chunks: int,
             algo: str = "ring", memo: ReplayMemo | None = None) -> ProgramTime:
    """Simulated time of a (valid) lowered program; ``chunks`` as in the checker.

    Pass one :class:`~meshplan.models.reduction.checker.ReplayMemo` as ``memo``
    when simulating many programs on the same system (as ``solve placement``
    does): each distinct (state, step) is then simulated once."""
    if program.num_devices != system.num_devices:
        raise ModelError(f"the program has {program.num_devices} devices, the system {system.num_devices}")
    if bytes_per_device <= 0:
        raise ModelError("bytes per device must be positive")
    memo = memo if memo is not None else ReplayMemo()
    cur = memo.intern(initial_context(system.num_devices, chunks))
    out = []
    for st in program.steps:
        key = (cur, st.collective, st.groups, bytes_per_device, chunks, algo)
        t = memo.step_times.get(key)
        if t is None:
            t = memo.step_times[key] = simulate_step(system, st, memo.states[cur], bytes_per_device / chunks, algo)
        out.append(t)
        nxt = memo.advance(cur, st.collective, st.groups)
        if isinstance(nxt, RuleViolation):
            raise nxt  # an invalid program has no simulated time
        cur = nxt
    return ProgramTime(sum(s.time_s for s in out), tuple(out))
