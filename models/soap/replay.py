"""Exact I/O of a concrete schedule: an LRU fast-memory replay of a loop program (beyond thesis ch. 5).

The SOAP bound (thesis section 5.2, eq. 5.9) says no schedule moves fewer words between a fast memory
of ``S`` words and slow memory.  This module counts what one schedule actually moves, so the two can be
put side by side (docs/bound.md, "tightness certificate"):

* :func:`build_trace` enumerates every statement instance of a :class:`Program` at concrete sizes
  (vectorized with numpy: each loop level repeats the rows of the enclosing levels) and numbers every
  array element it touches;
* an *order* is a permutation of the instances: :func:`loop_order` is the program's own order
  (lexicographic in the "2d+1" key of the loop tree), :func:`tiled_order` hoists tile loops over
  ``⌊v/T⌋`` of the tiled loop variables above that order (a statement lacking a tiled variable runs in
  the tile before or after the loop that carries it, by its textual position — loop fusion);
* :func:`legal` checks an order against the program order exactly: every read sees the value of the
  same writing instance and every element's last writer is the same (so the schedule computes the same
  values — dependences, anti- and output dependences alike, except the order of two writes of one
  element that no read and no last value tells apart, e.g. two whole chains through a scalar ``w``);
* :func:`lru_io` replays the access stream (per instance: its reads, then its write) through an LRU
  memory of ``S`` words with write-back: a read of an absent element is a load, a written element is
  dirty and costs a store when evicted (unless its value is dead: the element's next access overwrites
  it) or, at the end, when still dirty.  A write of an absent element (``A[i] = …``) allocates it
  without a load.  This is a valid red–blue pebbling, so its I/O bounds the optimum from above.

Loop directions: a loop ``range(hi, lo, -1)`` is a descending :class:`~meshplan.models.loops.program.Loop`
(the set of ``range(lo + 1, hi + 1)``, visited downwards).  The program-order key of a descending loop is
``−v``, and the tile coordinate of :func:`tiled_order` is taken along the execution order (``−v`` too),
so the trace, :func:`legal` and every replayed order follow the program's own data flow — which
instance produces the value a read sees — rather than that of its ascending variant.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.program import Program

__all__ = ["Trace", "IoCount", "build_trace", "loop_order", "tiled_order", "legal", "stream", "lru_io", "replay_order",
           "producers", "descending_vars", "DEFAULT_LIMIT"]

#: the largest number of statement instances :func:`build_trace` enumerates by default
DEFAULT_LIMIT = 4_000_000
_BIG = 1 << 40


@dataclass(frozen=True, slots=True)
class IoCount:
    """Loads and stores of one order through an LRU memory of ``memory`` words."""

    loads: int
    stores: int
    accesses: int
    memory: int

    @property
    def total(self) -> int:
        """Loads plus stores: the I/O of the schedule in the red–blue pebble game's units (words)."""
        return self.loads + self.stores


@dataclass(frozen=True, eq=False)
class Trace:
    """Every statement instance of a program at concrete sizes.

    ``stmt[n]`` is the statement index of instance ``n`` (instances are numbered in program order);
    ``vars[name]`` the value of each loop variable (``-1`` where the statement has no such loop);
    ``elems[n, a]`` the element id of access ``a`` of instance ``n`` (``-1`` past the statement's
    accesses) and ``is_write[n, a]`` whether it is the statement's write (last of its accesses).
    ``elements`` is the number of element ids (every array's bounding box, linearized)."""

    program: Program
    stmt: np.ndarray
    vars: dict
    elems: np.ndarray
    is_write: np.ndarray
    elements: int
    key: np.ndarray          # the 2d+1 program-order key, one row per instance
    cache: dict = field(default_factory=dict)   # the program order's producers (for :func:`legal`)

    @property
    def instances(self) -> int:
        """The number of statement instances |V|."""
        return int(self.stmt.shape[0])


def at_points(expr: sp.Expr, env: dict[str, np.ndarray | int], n: int) -> np.ndarray:
    """``expr`` at ``n`` points: ``env`` maps each free symbol to an array of ``n`` values or one integer
    (integer result; floor division and min/max as Python's)."""
    expr = sp.sympify(expr)
    names = sorted(str(s) for s in expr.free_symbols)
    missing = [x for x in names if x not in env]
    if missing:
        raise ModelError(f"give a value for {missing[0]} in params to replay the schedule", param="params")
    if not names:
        return np.full(n, int(expr), dtype=np.int64)
    f = _compiled(expr, tuple(names))
    val = np.asarray(f(*[env[x] for x in names]), dtype=np.float64)
    out = np.floor(val + 1e-9).astype(np.int64)
    return np.broadcast_to(out, (n,)).copy() if out.ndim == 0 else out


def _tree_positions(program: Program) -> list[list[int]]:
    """For every statement, its position among its parent's children at each depth (the β of 2d+1)."""
    children: dict[tuple, list] = {}
    out = []
    for st in program.statements:
        pos = []
        for d in range(len(st.loops) + 1):
            parent = tuple(lp.var for lp in st.loops[:d])
            node = st.loops[d].var if d < len(st.loops) else ("stmt", st.name)
            kids = children.setdefault(parent, [])
            if node not in kids:
                kids.append(node)
            pos.append(kids.index(node))
        out.append(pos)
    return out


@functools.lru_cache(maxsize=4096)
def _compiled(expr: sp.Expr, names: tuple[str, ...]):
    """``expr`` as a numpy function of ``names`` (once per expression: traces of one program at several
    sizes, and of its renamings, share their bounds and subscripts)."""
    return sp.lambdify([sp.Symbol(x, integer=True) for x in names], expr, modules=np)


def build_trace(program: Program, values: dict[str, int], *, limit: int = DEFAULT_LIMIT) -> Trace:
    """Enumerate the instances and accesses of ``program`` at the sizes of ``values`` (see :class:`Trace`);
    more than ``limit`` instances is a :class:`ModelError` naming smaller sizes as the remedy."""
    params = {k: int(v) for k, v in values.items() if k not in ("S", "p")}
    betas = _tree_positions(program)
    depth = max(len(st.loops) for st in program.statements)
    per_stmt = []
    total = 0
    for si, st in enumerate(program.statements):
        env: dict = dict(params)
        n = 1
        cols: dict[str, np.ndarray] = {}
        for lp in st.loops:
            lo = at_points(lp.lower, {**env, **cols}, n)
            hi = at_points(lp.upper, {**env, **cols}, n)
            cnt = np.maximum(0, -(-(hi - lo) // lp.step))
            m = int(cnt.sum())
            total_here = total + m
            if total_here > limit * 4:
                raise ModelError(f"replaying {program.name} at these sizes needs more than {limit} statement "
                                 "instances; give smaller sizes in params (e.g. N=64, S=1024)", param="params")
            rep = np.repeat(np.arange(n), cnt)
            start = np.repeat(np.cumsum(cnt) - cnt, cnt)
            cols = {k: c[rep] for k, c in cols.items()}
            cols[lp.var] = lo[rep] + lp.step * (np.arange(m) - start)
            n = m
        total += n
        if total > limit:
            raise ModelError(f"replaying {program.name} at these sizes needs {total}+ statement instances "
                             f"(limit {limit}); give smaller sizes in params (e.g. N=64, S=1024)", param="params")
        key = np.zeros((n, 2 * depth + 1), dtype=np.int64)
        for d, lp in enumerate(st.loops):
            key[:, 2 * d] = betas[si][d]
            key[:, 2 * d + 1] = -cols[lp.var] if lp.descending else cols[lp.var]
        key[:, 2 * len(st.loops)] = betas[si][-1]
        per_stmt.append((st, n, cols, key))
    # accesses: distinct reads in order, then the write
    boxes: dict[str, list] = {}
    evaluated = []
    for st, n, cols, _ in per_stmt:
        env = {**params, **cols}
        accs = []
        for a in [*st.reads, st.output]:
            idx = [at_points(e, env, n) for e in a.index]
            accs.append((a.array, idx))
            if n:
                box = boxes.setdefault(a.array, [[int(i.min()), int(i.max())] for i in idx])
                for b, i in zip(box, idx):
                    b[0], b[1] = min(b[0], int(i.min())), max(b[1], int(i.max()))
        evaluated.append(accs)
    offset, base = {}, 0
    for arr, box in boxes.items():
        offset[arr] = base
        base += int(np.prod([hi - lo + 1 for lo, hi in box], dtype=np.int64)) if box else 1
    width = max(len(accs) for accs in evaluated)
    elems = np.full((total, width), -1, dtype=np.int64)
    is_write = np.zeros((total, width), dtype=bool)
    stmt = np.empty(total, dtype=np.int64)
    keys = np.empty((total, 2 * depth + 1), dtype=np.int64)
    allvars = sorted({lp.var for st in program.statements for lp in st.loops})
    varcols = {v: np.full(total, -1, dtype=np.int64) for v in allvars}
    row = 0
    for si, ((st, n, cols, key), accs) in enumerate(zip(per_stmt, evaluated)):
        sl = slice(row, row + n)
        stmt[sl] = si
        keys[sl] = key
        for v, c in cols.items():
            varcols[v][sl] = c
        for a, (arr, idx) in enumerate(accs):
            if n == 0:
                continue
            lin = np.zeros(n, dtype=np.int64)
            for (lo, hi), i in zip(boxes[arr], idx):
                lin = lin * (hi - lo + 1) + (i - lo)
            elems[sl, a] = offset[arr] + lin
        is_write[sl, len(accs) - 1] = True
        row += n
    order = np.lexsort(keys.T[::-1])   # number the instances in program order
    return Trace(program, stmt[order], {v: c[order] for v, c in varcols.items()}, elems[order],
                 is_write[order], base, keys[order])


def descending_vars(program: Program) -> frozenset[str]:
    """The loop variables of the program's descending loops (their execution coordinate is ``−v``)."""
    return frozenset(lp.var for st in program.statements for lp in st.loops if lp.descending)


def loop_order(trace: Trace) -> np.ndarray:
    """The program's own order (instances are numbered in it)."""
    return np.arange(trace.instances)


def _relative(program: Program, si: int, members: set[str]) -> int:
    """Where statement ``si`` (lacking every loop of a tile class) runs relative to that class's tiles:
    -1 before the first tile when it precedes the nearest statement that has one, else after the last."""
    sts = program.statements
    me = [lp.var for lp in sts[si].loops]
    best, arg = -1, None
    for j, st in enumerate(sts):
        if not members & {lp.var for lp in st.loops}:
            continue
        common = 0
        for a, b in zip(me, [lp.var for lp in st.loops]):
            if a != b:
                break
            common += 1
        if common > best or (common == best and abs(j - si) < abs(arg - si)):
            best, arg = common, j
    if arg is None:
        return -1
    return -1 if si < arg else _BIG


def tiled_order(trace: Trace, tiles: list[tuple[tuple[str, ...], int]],
                skew: dict[str, tuple[str, int]] | None = None) -> np.ndarray:
    """The order with tile loops ``⌊(v − min v)/T⌋`` hoisted above the program order, for ``tiles`` =
    ``[(loop variables of one tile class, T), …]`` outermost first.  ``skew`` maps a loop variable to
    ``(time variable, factor)``: that variable's tile coordinate uses ``v + factor·t + statement index``
    (parallelogram tiles for stencils).  ``v`` is the execution coordinate: ``−v`` for a descending
    loop, so the tiles of a loop run in its own direction."""
    prog = trace.program
    down = descending_vars(prog)
    cols = []
    for members, size in tiles:
        size = max(1, int(size))
        coord = np.empty(trace.instances, dtype=np.int64)
        inside = np.ones(trace.instances, dtype=bool)   # (an execution coordinate may be -1 itself)
        for si, st in enumerate(prog.statements):
            sel = trace.stmt == si
            mine = [lp.var for lp in st.loops if lp.var in members]
            if not mine:
                coord[sel] = _relative(prog, si, set(members))
                inside[sel] = False
                continue
            v = trace.vars[mine[0]][sel]
            v = -v if mine[0] in down else v
            if skew and mine[0] in skew:
                tv, f = skew[mine[0]]
                t = np.maximum(trace.vars[tv][sel], 0)
                v = v + f * (-t if tv in down else t) + si
            coord[sel] = v
        lo = int(coord[inside].min()) if inside.any() else 0
        coord[inside] = (coord[inside] - lo) // size
        cols.append(coord)
    if not cols:
        return loop_order(trace)
    keys = [np.arange(trace.instances)] + cols[::-1]
    return np.lexsort(keys)


def stream(trace: Trace, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The access stream of ``order``: element ids, write flags and the instance of each access."""
    el = trace.elems[order].ravel()
    wr = trace.is_write[order].ravel()
    inst = np.repeat(order, trace.elems.shape[1])
    keep = el >= 0
    return el[keep], wr[keep], inst[keep]


def producers(el: np.ndarray, wr: np.ndarray, inst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per access: the instance of the last earlier write to its element (-1: the initial value), and
    per element its last writer (-1: never written)."""
    n = el.shape[0]
    if n == 0:      # no access at all (every domain empty at these sizes)
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    srt = np.lexsort((np.arange(n), el))
    e_s, w_s = el[srt], wr[srt]
    start = np.r_[True, e_s[1:] != e_s[:-1]]
    gstart = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    pos = np.arange(n)
    # last write strictly before each access (a write's own position is excluded by shifting one)
    mark = np.where(w_s, pos, gstart - 1)
    prev = np.r_[-1, np.maximum.accumulate(mark)[:-1]]
    prev = np.maximum(prev, gstart - 1)
    prod_s = np.where(prev >= gstart, inst[srt][np.clip(prev, 0, None)], -1)
    producer = np.empty(n, dtype=np.int64)
    producer[srt] = prod_s
    last = np.r_[e_s[1:] != e_s[:-1], True]
    final_all = np.maximum.accumulate(mark)[last]
    gs_last = gstart[last]
    final = np.where(final_all >= gs_last, inst[srt][np.clip(final_all, 0, None)], -1)
    return producer, final


def legal(trace: Trace, order: np.ndarray) -> bool:
    """Whether ``order`` computes what the program computes: every read sees the same writing instance
    and every element ends with the same last writer as in program order."""
    if "program" not in trace.cache:
        trace.cache["program"] = _by_access(trace, loop_order(trace))
    a0, f0 = trace.cache["program"]
    a1, f1 = _by_access(trace, order)
    # reads only: a write's previous writer may change (two chains through one temporary ``w``,
    # reordered whole) as long as every read sees its writer and every element its last writer
    reads = ~trace.is_write[trace.elems >= 0]
    return bool(np.array_equal(f0, f1) and np.array_equal(a0[reads], a1[reads]))


def _by_access(trace: Trace, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Producers of every access, indexed by (instance, slot), and every element's last writer."""
    el, wr, inst = stream(trace, order)
    prod, final = producers(el, wr, inst)
    slot = inst * trace.elems.shape[1] + _slots(trace, order)
    return prod[np.argsort(slot)], final


def _slots(trace: Trace, order: np.ndarray) -> np.ndarray:
    w = trace.elems.shape[1]
    s = np.tile(np.arange(w), order.shape[0])
    return s[trace.elems[order].ravel() >= 0]


def lru_io(elements: np.ndarray, writes: np.ndarray, memory: int) -> IoCount:
    """Loads and stores of the access stream through an LRU memory of ``memory`` words with write-back:
    a dirty word is stored when evicted — unless its value is dead (the element's next access overwrites
    it), which the red–blue pebble game may discard — and at the end (every final value is stored)."""
    if memory < 1:
        raise ModelError(f"fast memory S must be at least 1 word, got {memory}")
    n = int(elements.shape[0])
    if n == 0:
        return IoCount(0, 0, 0, memory)
    # consecutive accesses of one element: one access (first decides the load, any write dirties)
    start = np.r_[True, elements[1:] != elements[:-1]]
    gid = np.cumsum(start) - 1
    dirty = np.zeros(int(gid[-1]) + 1, dtype=bool)
    np.logical_or.at(dirty, gid, writes)
    first_read = ~writes[start]
    ge = elements[start]
    # does the element's next group start with a write (the value held after this group is dead)?
    o = np.lexsort((np.arange(ge.shape[0]), ge))
    same = ge[o][1:] == ge[o][:-1]
    overwritten = np.zeros(ge.shape[0], dtype=bool)
    overwritten[o[:-1][same]] = ~first_read[o[1:][same]]
    cache: OrderedDict = OrderedDict()     # element -> 0 clean, 1 dirty and live, 2 dirty and dead
    move = cache.move_to_end
    pop = cache.popitem
    loads = stores = 0
    for e, rd, dt, dead in zip(ge.tolist(), first_read.tolist(), dirty.tolist(), overwritten.tolist()):
        if e in cache:
            move(e)
            if dt or cache[e]:
                cache[e] = 2 if dead else 1
            continue
        if rd:
            loads += 1
        cache[e] = (2 if dead else 1) if dt else 0
        if len(cache) > memory:
            if pop(last=False)[1] == 1:
                stores += 1
    stores += sum(1 for v in cache.values() if v == 1)
    return IoCount(loads, stores, n, memory)


def replay_order(trace: Trace, order: np.ndarray, memory: int) -> IoCount:
    """:func:`lru_io` of ``order``'s access stream."""
    el, wr, _ = stream(trace, order)
    return lru_io(el, wr, memory)
