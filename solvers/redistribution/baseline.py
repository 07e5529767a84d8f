"""The XLA-style baseline: GSPMD's resharding decision tree, checked against real XLA's HLO.

The XLA SPMD partitioner (the paper's §8 yardstick; ``PartitionedHlo::ReshardNoCache``
in XLA's ``spmd_partitioner.cc``) reshards by *tile counts*: it compares how many
tiles each dimension has in the source and in the target, whichever mesh axes
make them, and fixes the device order with a collective-permute.  The baseline
follows its cases in order, over the prime mesh with the low-level collectives
of Fig. 10 (axes need not be minor-most: the device map changes instead):

1. equal tile counts: one collective-permute (``ReshardWithCollectivePermute``);
2. all-to-alls that pair dimensions one to one, the same replication in source
   and target (``ReshardWithAllToAll``), then a collective-permute if needed;
3. source partially replicated: dynamic-slice only (every target count a
   multiple of the source's), else slice the dimensions no all-to-all feeds and
   all-to-all the rest (``ReshardFromPartialReplicateWithDynamicSlice``,
   ``ReshardPartialReplicateWithAllToAll``);
4. target partially replicated: all-gathers only, the collective-permute first
   on the smaller tiles (``ReshardToPartialReplicateWithAllGather``), else
   all-gathers of the dimensions that send no all-to-all, then the all-to-alls;
5. otherwise ("involuntary full rematerialization"): all-gather every dimension
   whose tile count differs, the last dimension first, then dynamic-slice the
   target's tiles and permute (dimensions with equal counts stay, as XLA groups them).

Tile counts are compared prime by prime: the primes a dimension has and the
target lacks (excess), the primes it lacks (deficit); all-to-all pairs whose
excess and deficit match exactly, then those whose axes the target keeps, come
first.  Real XLA also merges the all-to-alls of several dimension pairs into
one collective, which no step here expresses, and has further patterns
(``TryComplexReshardHandling``); docs/redistribute.md gives how often the
baseline's bytes match real XLA's on the benchmark's problems.
"""

from __future__ import annotations

import math
from collections import Counter

from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice, Step
from meshplan.models.redistribution.decompose import Decomposition, prime_factors
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, check_program
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.offsets import base_offsets
from meshplan.models.redistribution.types import Dim, DistType
from meshplan.solvers.redistribution.lower import final_permutation
from meshplan.solvers.redistribution.plan import Plan, check_problem, make_plan

__all__ = ["baseline_plan", "baseline_ops"]


def _primes(n: int) -> Counter:
    return Counter(prime_factors(n)) if n > 1 else Counter()


def _pick(mesh: Mesh, pool: list[str], need: Counter, rank) -> tuple[str, ...]:
    """Axes of ``pool`` whose prime sizes make up ``need``, best ``rank`` first (stable)."""
    need = Counter(need)
    out = []
    for a in sorted(pool, key=rank):
        p = mesh.size(a)
        if need[p] > 0:
            out.append(a)
            need[p] -= 1
    if +need:
        raise ModelError(f"internal: no axes for primes {dict(+need)} in {pool}")
    return tuple(out)


def _in_order(axes: tuple[str, ...], ref: tuple[str, ...]) -> tuple[str, ...]:
    """``axes`` listed as in ``ref`` (the target's dimension), others after in their own order."""
    return tuple(sorted(axes, key=lambda a: (ref.index(a) if a in ref else len(ref), axes.index(a))))


class _Program:
    def __init__(self, mesh: Mesh, coords0, src: DistType) -> None:
        self.mesh, self.coords0 = mesh, coords0
        self.state = Assignment(src, coords0)
        self.ops: list[Step] = []

    def do(self, step: Step) -> None:
        self.state = apply_lowlevel(self.mesh, self.state, step, self.coords0)
        self.ops.append(step)

    def permute_to(self, target: DistType) -> bool:
        """Collective-permute to ``target`` (same tile counts); False if none is needed."""
        have = self.state.offsets(self.mesh)
        want = base_offsets(self.mesh, target, self.coords0)
        perm = final_permutation(have, want)
        if perm is None:
            raise ModelError(f"internal: {self.state.type} and {target} are not related by a permutation")
        if perm == tuple(range(len(perm))):
            return False
        self.do(AllPermute(target, perm))
        return True


def _free(p: _Program) -> list[str]:
    return [a for a in p.mesh.names if a not in p.state.type.axes]


def _coverable(p: _Program, need: Counter) -> bool:
    return not +(need - Counter(p.mesh.size(a) for a in _free(p)))


def _slice(p: _Program, dst: DistType, dims) -> None:
    """Dynamic-slice every dimension in ``dims`` to its target tile count with free axes (target's first)."""
    for j in dims:
        dj, cur = dst.dims[j], p.state.type
        need = _primes(dj.parts) - _primes(cur.dims[j].parts)
        if +need:
            axes = _pick(p.mesh, _free(p), need, lambda a: (a not in dj.axes, a in dst.axes,
                                                             -dj.axes.index(a) if a in dj.axes else 0))
            p.do(DynSlice(j, _in_order(axes, dj.axes)))


def _tile_moves(cur: DistType, dst: DistType):
    """All-to-alls by tile-count primes, pairs whose excess and deficit match exactly first.

    Returns ``[(i, j, primes)]`` and the excess and deficit left per dimension."""
    excess, deficit = [], []
    for d, t in zip(cur.dims, dst.dims):
        have, want = _primes(d.parts), _primes(t.parts)
        excess.append(have - want)
        deficit.append(want - have)
    pairs = sorted(((i, j) for i in range(cur.rank) for j in range(cur.rank) if i != j),
                   key=lambda ij: (excess[ij[0]] != deficit[ij[1]],
                                   not set(cur.dims[ij[0]].axes) & set(dst.dims[ij[1]].axes)))
    moves = []
    for i, j in pairs:
        common = excess[i] & deficit[j]
        if +common:
            excess[i] -= common
            deficit[j] -= common
            moves.append((i, j, common))
    return moves, excess, deficit


def _emit_moves(p: _Program, dst: DistType, moves, excess, gather_first: bool = True) -> list[AllGather]:
    mesh, cur = p.mesh, p.state.type
    pool = [list(d.axes) for d in cur.dims]
    steps: list[Step] = []
    for i, j, common in moves:
        tj, ti = dst.dims[j].axes, dst.dims[i].axes
        axes = _pick(mesh, pool[i], common, lambda a: (a not in tj, a in ti))
        for a in axes:
            pool[i].remove(a)
        steps.append(AllToAll(i, j, _in_order(axes, tj)))
    gathers = []
    for i in reversed(range(cur.rank)):                    # XLA gathers the last dimension first
        if +excess[i]:
            ti = dst.dims[i].axes
            gathers.append(AllGather(i, _pick(mesh, pool[i], excess[i], lambda a: (a in dst.axes, a in ti))))
    for s in (gathers + steps if gather_first else steps + gathers):
        p.do(s)
    return gathers


def _strategy(p: _Program, dst: DistType, depth: int = 0) -> str:
    """GSPMD's decision tree (``ReshardNoCache``) on tile counts; emits the steps, returns the case."""
    cur = p.state.type
    n = p.mesh.num_devices
    s, t = [d.parts for d in cur.dims], [d.parts for d in dst.dims]
    if s == t:
        return "collective-permute"
    moves, excess, deficit = _tile_moves(cur, dst)
    rs, rt = n // math.prod(s), n // math.prod(t)
    no_excess, no_deficit = not any(+e for e in excess), not any(+d for d in deficit)
    senders = [i for i, _, _ in moves]
    receivers = [j for _, j, _ in moves]
    mixed = any(a % b and b % a for a, b in zip(s, t))
    if len(set(senders)) < len(senders) or len(set(receivers)) < len(receivers) or mixed:
        moves = None    # XLA pairs dimensions one to one, each count a multiple of the other (or rematerialises)
    if moves is not None and no_excess and no_deficit:
        _emit_moves(p, dst, moves, excess)
        return "all-to-all"
    short = {j for j, d in enumerate(deficit) if +d}          # dimensions still lacking tiles
    long_ = {i for i, e in enumerate(excess) if +e}           # dimensions with tiles to drop
    if rs > 1 and math.prod(t) > 1:                           # source partially replicated
        need = sum(deficit, Counter())
        if all(b % a == 0 for a, b in zip(s, t)) and _coverable(p, need):
            _slice(p, dst, range(cur.rank))
            return "dynamic-slice"
        if moves is not None and no_excess and not short & set(receivers) and _coverable(p, need):
            _slice(p, dst, sorted(short))
            _emit_moves(p, dst, moves, excess)
            return "dynamic-slice + all-to-all"
    if rt > 1 and math.prod(s) > 1:                           # target partially replicated
        if all(a % b == 0 for a, b in zip(s, t)):
            _emit_moves(p, dst, [], excess)
            return "all-gather"
        if moves is not None and no_deficit and not long_ & set(senders):
            _emit_moves(p, dst, moves, excess)
            return "all-gather + all-to-all"
        for i in range(cur.rank):            # replicate a dimension whose count is the target's replication
            if s[i] > 1 and s[i] * rs == rt and depth < 2:
                p.do(AllGather(i, cur.dims[i].axes))
                return "all-gather, then " + _strategy(p, dst, depth + 1)
    # full rematerialisation of the dimensions whose tile counts differ (equal ones are grouped)
    diff = [i for i in range(cur.rank) if s[i] != t[i]]
    rest = [Counter() for _ in range(cur.rank)]
    for i in diff:
        rest[i] = _primes(s[i])
    _emit_moves(p, dst, [], rest)
    _slice(p, dst, diff)
    return "full rematerialization"


def _build(dec: Decomposition, src: DistType, dst: DistType, early: bool) -> tuple[Step, ...]:
    mesh, coords0 = dec.prime, dec.coords()
    p = _Program(mesh, coords0, src)
    case = _strategy(p, dst)
    if not p.permute_to(dst) or not early or case != "all-gather":   # (the case of ops = gathers only)
        return tuple(p.ops)
    gathers = [g for g in p.ops if isinstance(g, AllGather)]
    # permute before the all-gathers: to dst with the gathered axes put back as minor-most axes
    if any(a in dst.axes for g in gathers for a in g.axes):
        return tuple(p.ops)
    dims = list(dst.dims)
    for g in gathers:
        d = dims[g.dim]
        dims[g.dim] = Dim(d.local // math.prod(mesh.size(a) for a in g.axes), g.axes + d.axes, d.size)
    q = _Program(mesh, coords0, src)
    q.permute_to(DistType(tuple(dims)))
    for g in gathers:
        q.do(g)
    return tuple(q.ops)


def baseline_ops(dec: Decomposition, src: DistType, dst: DistType) -> tuple[Step, ...]:
    """The baseline program over the prime mesh, for original-mesh types ``src`` and ``dst``."""
    if src == dst:
        return ()
    psrc, pdst = dec.type(src), dec.type(dst)
    late = _build(dec, psrc, pdst, early=False)
    try:
        ops = _build(dec, psrc, pdst, early=True)
        check_program(dec.prime, dec.coords(), psrc, pdst, ops)
        return ops
    except (ModelError, VerificationError):
        return late


def baseline_plan(mesh: Mesh, src: DistType, dst: DistType, cost: str = "paper") -> Plan:
    """The XLA-style program for ``src ⇝ dst``, replayed by the checker like every plan; its costs under the
    model ``cost`` (``paper`` or ``wire``)."""
    dec = check_problem(mesh, src, dst)
    return make_plan("baseline", dec, dec.type(src), dec.type(dst), baseline_ops(dec, src, dst), cost=cost)
