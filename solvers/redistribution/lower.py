"""Lowering a weak path to low-level collectives with at most one final ``allpermute``.

Theorem 6.4 / Lemma 6.3: every weak step ``▶^p`` is realised by a low-level step
``⇒^p`` of Fig. 10 on concrete axes, changing the device map instead of moving
data when the axes are not minor-most.  After the last step the device map may
differ from the initial one; one ``allpermute`` then delivers every tile to its
device (equation (8)).  Two optimisations of §7.3:

1. *axis bias* — concrete axes are chosen to agree with the target type (the
   axes it has in the receiving dimension, in its order), which often makes the
   final permutation the identity so it is dropped;
2. *early permute* — if a permutation is still needed and the path ends with
   ``allgather`` steps, the permutation is done before them, on smaller tiles.

Choices are explored depth-first (best-scored first, a few per step, a bounded
number of complete lowerings); the lowering whose final permutation is cheapest
(then moves fewest tiles) wins.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice, Step, axes_size
from meshplan.models.redistribution.decompose import prime_factors
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.split import split_permute
from meshplan.models.redistribution.offsets import base_offsets
from meshplan.models.redistribution.types import Dim, DistType
from meshplan.models.redistribution.weak import WeakStep, mesh_primes, weak_of

__all__ = ["lower", "lower_best", "lower_wire", "merge_alltoalls", "wire_cost", "final_permutation",
           "LoweringOptions"]


@dataclass(frozen=True, slots=True)
class LoweringOptions:
    """Knobs of the lowering to collectives (§7.3): its two optimisations and the search breadth."""

    bias: bool = True            # §7.3 second optimisation
    early_permute: bool = True   # §7.3 first optimisation
    branch: int = 3              # candidates tried per step
    max_leaves: int = 48         # complete lowerings tried
    split: bool = True           # wire cost: split a permutation among the replicas of each tile (split.py)


def final_permutation(have: np.ndarray, want: np.ndarray) -> tuple[int, ...] | None:
    """``source[d]`` with ``have[source[d]] == want[d]`` keeping fixed points; None if impossible."""
    n = have.shape[0]
    source = [-1] * n
    free: dict[tuple, list[int]] = {}
    hk = [tuple(r) for r in have.tolist()]
    wk = [tuple(r) for r in want.tolist()]
    used = [False] * n
    for d in range(n):
        if hk[d] == wk[d]:
            source[d] = d
            used[d] = True
    for s in range(n - 1, -1, -1):
        if not used[s]:
            free.setdefault(hk[s], []).append(s)
    for d in range(n):
        if source[d] < 0:
            pool = free.get(wk[d])
            if not pool:
                return None
            source[d] = pool.pop()
    return tuple(source)


def _is_suffix(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    return len(part) <= len(whole) and whole[len(whole) - len(part):] == part


def _choices(mesh: Mesh, pool: tuple[str, ...], f: int) -> list[tuple[str, ...]]:
    need = Counter(prime_factors(f))
    k = sum(need.values())
    out = []
    for combo in itertools.combinations(pool, k):
        if Counter(mesh.size(a) for a in combo) != need:
            continue
        for perm in itertools.islice(itertools.permutations(combo), 24):
            out.append(perm)
    return out


def _candidates(mesh: Mesh, t: DistType, ws: WeakStep, target: DistType, opts: LoweringOptions) -> list[Step]:
    i = ws.src
    a_i = t.dims[i].axes
    if ws.op == "dynslice":
        pool = tuple(a for a in mesh.names if a not in t.axes)
    else:
        pool = a_i
    scored = []
    for x in _choices(mesh, pool, ws.factor):
        prefix = a_i[:len(x)] == x
        rest_i = tuple(a for a in a_i if a not in x)
        tgt_i = target.dims[i].axes
        if ws.op == "allgather":
            step: Step = AllGather(i, x)
            score = (_is_suffix(rest_i, tgt_i), sum(a not in tgt_i for a in x), prefix)
        elif ws.op == "alltoall":
            j = ws.dst
            tgt_j = target.dims[j].axes
            step = AllToAll(i, j, x)
            score = (_is_suffix(x + t.dims[j].axes, tgt_j), sum(a in tgt_j for a in x),
                     _is_suffix(rest_i, tgt_i), prefix)
        else:
            step = DynSlice(i, x)
            score = (_is_suffix(x + a_i, tgt_i), sum(a in tgt_i for a in x), sum(a in target.axes for a in x))
        if not opts.bias:
            score = (prefix,)
        scored.append((score, len(scored), step))
    scored.sort(key=lambda s: (tuple(-int(v) for v in s[0]), s[1]))
    return [s for _, _, s in scored[:opts.branch]]


def _best_lowering(mesh: Mesh, coords0: np.ndarray, start: Assignment, wsteps: tuple[WeakStep, ...],
                   target: DistType, opts: LoweringOptions):
    """Depth-first over axis choices; returns (steps, end state, permutation, moved)."""
    want = base_offsets(mesh, target, coords0)
    best = None
    leaves = 0

    def rec(state: Assignment, k: int, acc: list[Step]):
        nonlocal best, leaves
        if best is not None and (best[3] == 0 or leaves >= opts.max_leaves):
            return
        if k == len(wsteps):
            leaves += 1
            perm = final_permutation(state.offsets(mesh), want)
            if perm is None:
                return
            moved = sum(1 for d, s in enumerate(perm) if d != s)
            if best is None or moved < best[3]:
                best = (tuple(acc), state, perm, moved)
            return
        cands = _candidates(mesh, state.type, wsteps[k], target, opts)
        if not cands:
            raise ModelError(f"cannot lower weak step {wsteps[k]} at {state.type}")
        for step in cands:
            rec(apply_lowlevel(mesh, state, step, coords0), k + 1, acc + [step])

    rec(start, 0, [])
    if best is None:
        raise ModelError(f"no lowering of the weak path reaches the tiles of {target}")
    return best


def _pre_gather_types(mesh: Mesh, dst: DistType, gathers: tuple[WeakStep, ...], limit: int = 4) -> list[DistType]:
    """Types ``τ_pre`` with ``allgather``s (minor-most axes) leading from ``τ_pre`` to ``dst``."""
    outs = [dst]
    for ws in reversed(gathers):
        nxt = []
        for t in outs:
            pool = tuple(a for a in mesh.names if a not in t.axes)
            for x in _choices(mesh, pool, ws.factor)[:limit]:
                d = t.dims[ws.src]
                if d.local % ws.factor:
                    continue
                nxt.append(t.replace(ws.src, Dim(d.local // ws.factor, x + d.axes, d.size)))
        outs = nxt[:limit]
    return outs


def lower(mesh: Mesh, coords0: np.ndarray, src: DistType, dst: DistType, wsteps: tuple[WeakStep, ...],
          opts: LoweringOptions = LoweringOptions()) -> tuple[Step, ...]:
    """Lower weak steps from ``⟨φ, T⟦src⟧⟩`` to low-level steps ending at ``⟨φ, T⟦dst⟧⟩`` (Thm 6.4, (8))."""
    start = Assignment(src, coords0)
    steps, _, perm, moved = _best_lowering(mesh, coords0, start, wsteps, dst, opts)
    best_cost = dst.localsize if moved else 0
    best = steps + ((AllPermute(dst, perm),) if moved else ())
    n_g = 0
    while n_g < len(wsteps) and wsteps[len(wsteps) - 1 - n_g].op == "allgather":
        n_g += 1
    if moved and opts.early_permute and n_g:
        head, tail = wsteps[:len(wsteps) - n_g], wsteps[len(wsteps) - n_g:]
        for pre in _pre_gather_types(mesh, dst, tail):
            steps2, _, perm2, moved2 = _best_lowering(mesh, coords0, start, head, pre, opts)
            cost2 = pre.localsize if moved2 else 0
            if cost2 < best_cost:
                gathers = []
                t = pre
                for ws in tail:
                    d = t.dims[ws.src]
                    x = d.axes[:len(prime_factors(ws.factor))]
                    gathers.append(AllGather(ws.src, x))
                    t = t.replace(ws.src, Dim(d.local * ws.factor, d.axes[len(x):], d.size))
                best_cost = cost2
                best = steps2 + ((AllPermute(pre, perm2),) if moved2 else ()) + tuple(gathers)
                if cost2 == 0:
                    break
    return best


def lower_best(mesh: Mesh, coords0: np.ndarray, src: DistType, dst: DistType,
               paths: tuple[tuple[WeakStep, ...], ...], opts: LoweringOptions = LoweringOptions()
               ) -> tuple[Step, ...]:
    """Lower each of several equally cheap weak paths; keep the result with the cheapest permutation
    (then fewest steps, then fewest devices moved)."""
    best = None
    for wsteps in paths:
        ops = lower(mesh, coords0, src, dst, wsteps, opts)
        perm = [o for o in ops if isinstance(o, AllPermute)]
        key = (sum(o.target.localsize for o in perm), len(ops), sum(o.moved for o in perm))
        if best is None or key < best[0]:
            best = (key, ops)
        if key[0] == 0:
            break
    if best is None:
        raise ModelError("no weak path to lower")
    return best[1]


def merge_alltoalls(ops: tuple[Step, ...], wsteps: tuple[WeakStep, ...]) -> tuple[Step, ...]:
    """The lowered ``ops`` of the weak path ``wsteps`` with every all-to-all whose weak step joins the one
    before it (``merged``) made one multi-pair all-to-all with it; a lowered ``allpermute`` has no weak step."""
    out: list[Step] = []
    pair = iter(wsteps)
    for op in ops:
        ws = None if isinstance(op, AllPermute) else next(pair)
        if ws is not None and ws.merged and out and isinstance(out[-1], AllToAll) and isinstance(op, AllToAll):
            out[-1] = AllToAll.of(out[-1].moves + op.moves)
        else:
            out.append(op)
    return tuple(out)


def wire_cost(mesh: Mesh, localsize: int, ops: tuple[Step, ...]) -> int:
    """Elements each device sends in ``ops`` from a tile of ``localsize`` (the wire cost)."""
    return _walk(mesh, localsize, ops)[0]


def _walk(mesh: Mesh, localsize: int, ops: tuple[Step, ...]) -> tuple[int, int]:
    """``(wire cost, sum of the tiles between the steps)`` of ``ops`` from a tile of ``localsize``."""
    total, held = 0, 0
    for k, op in enumerate(ops):
        if k:
            held += localsize
        if isinstance(op, AllGather):
            total += localsize * (axes_size(mesh, op.axes) - 1)
            localsize *= axes_size(mesh, op.axes)
        elif isinstance(op, DynSlice):
            localsize //= axes_size(mesh, op.axes)
        elif isinstance(op, AllToAll):
            total += localsize - localsize // axes_size(mesh, op.group_axes)
        else:   # an allpermute: its busiest device (a whole tile, or its chunks when split among replicas)
            total += op.wire_elements(localsize)
    return total, held


def split_permutes(mesh: Mesh, coords0: np.ndarray, src: DistType, ops: tuple[Step, ...]) -> tuple[Step, ...]:
    """``ops`` with every ``allpermute`` split among the replicas of each tile where that lowers the busiest
    device's bytes (:mod:`meshplan.models.redistribution.split`; the wire cost's programs)."""
    state, out = Assignment(src, coords0), []
    for op in ops:
        if isinstance(op, AllPermute):
            op = split_permute(mesh, state, op, coords0)
        out.append(op)
        state = apply_lowlevel(mesh, state, op, coords0)
    return tuple(out)


def lower_wire(mesh: Mesh, coords0: np.ndarray, src: DistType, dst: DistType,
               opts: LoweringOptions = LoweringOptions(), max_paths: int = 48) -> tuple[tuple[Step, ...], int]:
    """The cheapest lowered program under the wire cost, and the cheapest weak path's cost: the weak paths with
    multi-pair all-to-alls (:func:`~meshplan.solvers.redistribution.merged.cheapest_paths`), cheapest first,
    each lowered with its final permutation; stops at ``max_paths`` or once a weak path costs more than the
    best program found (then no later path can beat it), after a few equally cheap ones.  Among programs of
    equal cost it keeps the one of fewest collectives, then smallest tiles between them (what a framework's
    compiler must hold as temporaries), then fewest devices moved."""
    from meshplan.solvers.redistribution.merged import cheapest_paths

    best, seen, slack, cheapest, ties = None, set(), 0, None, 0
    for again in (False, True):   # the cheapest weak paths first; dearer ones only if a permutation was needed
        for weak_cost, wsteps in cheapest_paths(mesh_primes(mesh), weak_of(src), weak_of(dst),
                                                slack=slack, max_paths=max_paths):
            cheapest = weak_cost if cheapest is None else cheapest
            if best is not None and (weak_cost > best[0][0] or (weak_cost == best[0][0] and ties >= 8)):
                break
            ties = ties + 1 if best is not None and weak_cost == best[0][0] else 0
            if wsteps in seen:
                continue
            seen.add(wsteps)
            try:
                ops = merge_alltoalls(lower(mesh, coords0, src, dst, wsteps, opts), wsteps)
                if opts.split:
                    ops = split_permutes(mesh, coords0, src, ops)
            except ModelError:
                continue
            moved = sum(o.moved for o in ops if isinstance(o, AllPermute))
            key = (*_walk(mesh, src.localsize, ops), len(ops), moved)
            key = (key[0], key[2], key[1], key[3])   # cost, collectives, tiles held between them, moved
            if best is None or key < best[0]:
                best = (key, ops, weak_cost)
        if again or best is None or best[0][0] == best[2]:
            break
        slack = best[0][0] - cheapest - 1   # a permutation was needed: look for a dearer path without one
    if best is None:
        raise ModelError("no weak path to lower")
    return best[1], cheapest
