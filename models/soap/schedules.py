"""The tool's own tiled schedule: candidate orders built from the SOAP tiles, replayed exactly (beyond thesis ch. 5).

:func:`best_schedule` tries the program's loop order, tilings derived from the dominant subgraph's
tiles (each class in turn set to 1, tile loops reordered, shapes scaled until two tiles fit in ``S``
words, then tuned; parallelogram tiles when no rectangular tiling is legal), and owner-aligned orders
(:mod:`meshplan.models.soap.aligned`: blocks of the written elements in a topological order of their
dependences — the left-looking schedules of LU, Cholesky and ludcmp, which no tiling of the loop nest
expresses), keeps the legal ones (:func:`meshplan.models.soap.replay.legal`) and replays each through
the LRU memory of :mod:`meshplan.models.soap.replay`; :func:`schedule_report` is the ``schedule`` entry
of ``meshplan bound --schedule`` (docs/bound.md, "Table 5.2, kernel by kernel").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Program
from meshplan.models.soap.aligned import owner_orders
from meshplan.models.soap.replay import (DEFAULT_LIMIT, IoCount, Trace, build_trace, descending_vars, legal,
                                         loop_order, replay_order, tiled_order)

__all__ = ["Candidate", "ScheduleIo", "best_schedule", "schedule_report"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One schedule tried by :func:`best_schedule`: its tile loops ``(class, size)`` outermost first
    (empty: the program's loop order), the skew used, whether it is legal, and its I/O when it is."""

    label: str
    tiles: tuple
    skew: tuple
    legal: bool
    io: IoCount | None


@dataclass(frozen=True, slots=True)
class ScheduleIo:
    """The best legal schedule found and the program's own loop order, both replayed exactly."""

    memory: int
    best: Candidate
    loop_order: IoCount
    candidates: tuple
    instances: int
    notes: tuple


def _extent(trace: Trace, members) -> int:
    vals = [trace.vars[v][trace.vars[v] >= 0] for v in members if v in trace.vars]
    vals = [x for x in vals if x.size]
    return max((int(x.max() - x.min()) + 1 for x in vals), default=1)


def _footprint(trace: Trace, tiles, skew) -> int:
    """Distinct elements touched by the first two tiles along the innermost class (coordinate 0 of the
    others) of a tiling: the words the LRU must hold across consecutive tiles."""
    if not tiles:
        return trace.elements
    sel = np.ones(trace.instances, dtype=bool)
    down = descending_vars(trace.program)
    for n, (members, size) in enumerate(tiles):
        # two consecutive tiles of the innermost class must fit together (what the LRU keeps across them)
        span = max(1, int(size)) * (2 if n == len(tiles) - 1 else 1)
        for v in members:
            if v not in trace.vars:
                continue
            x = trace.vars[v]
            mine = x >= 0
            if not mine.any():
                continue
            val = -x if v in down else x.copy()     # the execution coordinate, as in tiled_order
            if skew and v in skew:
                tv, f = skew[v]
                t = np.maximum(trace.vars[tv], 0)
                val = val + f * (-t if tv in down else t) + trace.stmt
            lo = int(val[mine].min())
            sel &= ~mine | ((val - lo) < span)
    el = trace.elems[sel].ravel()
    return int(np.unique(el[el >= 0]).size)


def _fit(trace: Trace, base: dict, classes: dict, pinned: set, memory: int, skew) -> dict:
    """Tile sizes ``base`` (classes in ``pinned`` kept; ``classes`` in tile-loop order) scaled by one
    factor so that two consecutive tiles fit ``memory`` words (bisection on the factor)."""
    caps = {c: _extent(trace, m) for c, m in classes.items()}

    def at(alpha: float) -> dict:
        return {c: (max(1, min(caps[c], int(base[c]))) if c in pinned
                    else max(1, min(caps[c], int(round(alpha * base[c]))))) for c in classes}

    def fits(t: dict) -> bool:
        return _footprint(trace, [(classes[c], t[c]) for c in classes], skew) <= memory

    lo, hi = 0.0, float(max(caps.values())) / max(1, min(base.values()))
    if fits(at(hi)):
        return at(hi)
    for _ in range(16):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(at(mid)) else (lo, mid)
    return at(lo)


def _try(trace: Trace, classes: dict, sizes: dict, skew, memory: int, label: str) -> Candidate:
    order = tiled_order(trace, [(classes[c], sizes[c]) for c in classes], skew)
    ok = legal(trace, order)
    skl = tuple(sorted({(tv, f) for tv, f in skew.values()})) if skew else ()
    return Candidate(label + (f", skewed x{skl[0][1]} by {skl[0][0]}" if skl else ""),
                     tuple((c, sizes[c]) for c in classes), skl, ok,
                     replay_order(trace, order, memory) if ok else None)


def _owner_candidates(trace: Trace, values: dict, memory: int) -> list[Candidate]:
    """The owner-aligned orders of :mod:`meshplan.models.soap.aligned`, checked and replayed."""
    out = []
    for label, order, tr in owner_orders(trace, values, memory):
        ok = legal(tr, order)
        out.append(Candidate(label, (), (), ok, replay_order(tr, order, memory) if ok else None))
    return out


def best_schedule(program: Program, values: dict[str, int], memory: int, classes: dict | None = None,
                  tile: dict | None = None, *, limit: int = DEFAULT_LIMIT) -> ScheduleIo:
    """Replay the program's loop order, tilings derived from ``tile`` (``{class: size}`` of the tile
    classes ``{class: loop variables}``, outermost first) and the owner-aligned orders of
    :func:`meshplan.models.soap.aligned.owner_orders`.  Shapes: the tile, and the tile with each
    class in turn set to 1; tile-loop orders: the given one, each class moved innermost, and the
    reversed one; each shape is scaled so two consecutive tiles fit ``memory``, then the best is tuned
    by ×2/×½ per class.  Every order is checked with :func:`legal`; when no rectangular tiling is
    legal, parallelogram tiles (the first class as time, skew factors 1 and 2) are tried.  Returns
    the best legal schedule and all tried."""
    trace = build_trace(program, values, limit=limit)
    width = int((trace.elems >= 0).sum(axis=1).max()) if trace.instances else 0
    if memory < width:
        raise ModelError(f"fast memory S = {memory} words cannot hold the {width} words one statement "
                         "instance touches; give a larger S")
    plain = replay_order(trace, loop_order(trace), memory)
    cands = [Candidate("loop order", (), (), True, plain)]
    owned = _owner_candidates(trace, values, memory)
    notes = []
    classes = {c: tuple(m) for c, m in (classes or {}).items() if _extent(trace, m) > 1}
    if not classes or not tile:
        notes.append("no tiling from the SOAP tiles for this program: the loop order and the owner-aligned "
                     "orders are replayed")
        cands += owned
        best = min((c for c in cands if c.legal), key=lambda c: c.io.total)
        return ScheduleIo(memory, best, plain, tuple(cands), trace.instances, tuple(notes))
    names = list(classes)
    base = {c: max(1, int(tile.get(c, 1))) for c in names}
    shapes = [("tile", set())] + [(f"tile, {c}=1", {c}) for c in names if len(names) > 1]
    orders = [names] + [[x for x in names if x != c] + [c] for c in names[:-1]]
    if len(names) > 2:
        orders.append(names[::-1])       # the outer classes innermost (e.g. doitgen's r, q under C4's blocks)
    tvars = [v for v in classes[names[0]] if v in trace.vars]
    skews = [None] + ([{v: (tvars[0], f) for c in names[1:] for v in classes[c]} for f in (1, 2)]
                      if tvars and len(names) > 1 else [])
    for sk in skews:
        for label, pinned in shapes:
            for order in (orders if sk is None else [names]):
                cl = {c: classes[c] for c in order}
                start = {c: (1 if c in pinned else base[c]) for c in order}
                sizes = _fit(trace, start, cl, pinned, memory, sk)
                tag = label + ("" if order == names else f", order {'/'.join(order)}")
                cands.append(_try(trace, cl, sizes, sk, memory, tag))
        if sk is None and any(c.legal for c in cands[1:]):
            break
    tiled = [c for c in cands[1:] if c.legal]
    if not tiled:
        notes.append("no tiling derived from the SOAP tiles is legal here")
    else:
        top = min(tiled, key=lambda c: c.io.total)
        cl = {c: classes[c] for c, _ in top.tiles}
        sk = ({v: (tvars[0], top.skew[0][1]) for c in list(cl)[1:] for v in cl[c]} if top.skew else None)
        stem = top.label.split(", skewed")[0]
        for _ in range(3):   # coordinate descent: each tile size x2 and x1/2 while the I/O drops
            improved = False
            for c, _t in top.tiles:
                for m in (2.0, 0.5):
                    sizes = dict(top.tiles)
                    sizes[c] = max(1, min(_extent(trace, cl[c]), int(round(sizes[c] * m))))
                    if sizes[c] == dict(top.tiles)[c]:
                        continue
                    cand = _try(trace, cl, sizes, sk, memory, f"{stem}, tuned")
                    cands.append(cand)
                    if cand.legal and cand.io.total < top.io.total:
                        top, improved = cand, True
                        break
            if not improved:
                break
    cands += owned
    best = min((c for c in cands if c.legal), key=lambda c: c.io.total)
    if best is cands[0]:
        notes.append("no legal tiling or owner-aligned order moves fewer words than the plain loop order, "
                     "which is reported")
    return ScheduleIo(memory, best, plain, tuple(cands), trace.instances, tuple(notes))


def schedule_report(program: Program, values: dict[str, int], lower_bound: float, classes: dict | None,
                    tile: dict | None, *, limit: int = DEFAULT_LIMIT) -> dict:
    """The JSON-ready tightness certificate of ``meshplan bound --schedule`` (docs/bound.md): the best
    schedule of :func:`best_schedule` at the sizes and ``S`` of ``values``, its exact loads and stores,
    ``lower_bound`` and ``ratio`` = attained / lower bound, and the program's loop order beside it."""
    if "S" not in values:
        raise ModelError("schedule needs the fast memory S in params (e.g. N=64,S=1024)", param=("schedule", "params"))
    res = best_schedule(program, values, int(values["S"]), classes, tile, limit=limit)
    b = res.best

    def io(c: IoCount) -> dict:
        return {"loads": c.loads, "stores": c.stores, "total": c.total}

    return {"S": res.memory, "sizes": {k: int(v) for k, v in values.items() if k not in ("S", "p")},
            "instances": res.instances, "lower_bound": lower_bound, "schedule": b.label,
            "tiled": bool(b.tiles), "tiles": {c: int(t) for c, t in b.tiles},
            "tile_variables": {c: list((classes or {})[c]) for c, _ in b.tiles},
            "skew": [list(x) for x in b.skew], **io(b.io),
            "ratio": (b.io.total / lower_bound) if lower_bound > 0 else None,
            "loop_order": io(res.loop_order),
            "candidates": [{"schedule": c.label, "tiles": {k: int(t) for k, t in c.tiles}, "legal": c.legal,
                            "total": c.io.total if c.io else None} for c in res.candidates],
            "notes": list(res.notes)}
