"""Owner-aligned orders: tiles of the written elements, not of the loop nest (beyond thesis ch. 5).

A rectangular tiling of the loop variables (:func:`meshplan.models.soap.replay.tiled_order`) cannot
express a left-looking factorization, whose tiles are aligned with the element they write: every
update of one block of ``A``, then its division.  :func:`owner_orders` builds such orders from the
exact trace alone, so they apply to any program:

* every statement instance is *owned* by the block of the array element it writes (``r × c`` blocks
  of a matrix, :func:`owner_sizes`).  An instance whose value has exactly one reader hands its
  ownership down to that reader (``w = A[i, j]; w -= …; A[i, j] = w / …``: the scalar ``w``'s updates
  belong to the block of ``A[i, j]``), so temporaries do not glue every block together;
* the block graph has an edge ``B → C`` when an instance of ``C`` reads a value written in ``B``
  (flow), overwrites a value read in ``B`` (anti) or an earlier value written in ``B`` (output).
  An element whose every read sees a write of the reader's own block (a temporary) keeps only the
  edges to the block of its last writer: blocks run whole, so no other block comes between a write
  of it and its reads;
* if that graph is acyclic, the blocks run in a topological order (ties: the block whose first
  instance comes first in program order; :func:`block_ranks` also offers the last instance, which
  won on no example and is not tried), each block in program order.  A cycle means no candidate for
  that block shape;
* where chains pass through a temporary (ludcmp's ``w``), a second variant stores each chain's
  temporary in the element the chain ends by writing (:func:`_coalesced`: a storage mapping of the
  same CDAG) and runs each block level by level (longest dependence path within the block), so the
  block's chains advance together and the reduction index is outermost, as in LU's own nest.

Within a block the output stays in the LRU memory while the operands of one reduction step stream
through (``r·c`` words held, ``r + c`` streamed per step, as in the outer-product schedule of
matrix multiplication).  The caller checks every order exactly
(:func:`meshplan.models.soap.replay.legal`: every read sees the writer it sees in program order, every
element ends with its last writer); the reordered writes of a temporary are allowed by that check.
"""

from __future__ import annotations

import heapq

import numpy as np

from meshplan.models.soap.replay import Trace, at_points, legal, loop_order, producers, stream

__all__ = ["owner_blocks", "block_order", "owner_orders", "owner_sizes"]


def _uniq(x: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``x`` (by sorting: faster than hashing for these sizes)."""
    x = np.sort(x, axis=None)
    return x[np.r_[True, x[1:] != x[:-1]]] if x.size else x


def _written_index(trace: Trace, values: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per instance: the written array's number and its subscripts (columns, ``0`` past its rank)."""
    prog = trace.program
    params = {k: int(v) for k, v in values.items() if k not in ("S", "p")}
    arrays = sorted({st.output.array for st in prog.statements})
    rank = max((len(st.output.index) for st in prog.statements), default=0)
    arr = np.zeros(trace.instances, dtype=np.int64)
    idx = np.zeros((trace.instances, max(1, rank)), dtype=np.int64)
    for si, st in enumerate(prog.statements):
        sel = np.flatnonzero(trace.stmt == si)
        if not sel.size:
            continue
        env = {**params, **{lp.var: trace.vars[lp.var][sel] for lp in st.loops}}
        arr[sel] = arrays.index(st.output.array)
        for d, e in enumerate(st.output.index):
            idx[sel, d] = at_points(e, env, sel.size)
    return arr, idx


def _dependences(trace: Trace) -> tuple[np.ndarray, ...]:
    """The program order's dependences between instances: ``(source, target, kind, element)`` with kind
    0 flow, 1 anti, 2 output (the initial values are no instance), then per access read its element,
    reader and writer (``-1``: the initial value), per element its last writer, and per instance its
    number of readers."""
    el, wr, inst = stream(trace, loop_order(trace))
    prod, final = producers(el, wr, inst)
    rd = ~wr
    readers = np.bincount(prod[rd & (prod >= 0)], minlength=trace.instances)
    # the write that ends each value's life: keyed by (element, the value's writer)
    big = trace.instances + 1
    wkey = el[wr] * big + (prod[wr] + 1)
    order = np.argsort(wkey)
    wkey, wins = wkey[order], inst[wr][order]
    rkey = el[rd] * big + (prod[rd] + 1)
    pos = np.searchsorted(wkey, rkey)
    hit = (pos < wkey.size) & (wkey[np.minimum(pos, wkey.size - 1)] == rkey)
    parts = [(prod[rd], inst[rd], 0, el[rd]), (inst[rd][hit], wins[pos[hit]], 1, el[rd][hit]),
             (prod[wr], inst[wr], 2, el[wr])]
    src = np.concatenate([p[0] for p in parts])
    dst = np.concatenate([p[1] for p in parts])
    kind = np.concatenate([np.full(p[0].size, p[2], dtype=np.int8) for p in parts])
    elem = np.concatenate([p[3] for p in parts])
    keep = (src >= 0) & (src != dst)
    lastw = np.full(trace.elements, -1, dtype=np.int64)
    mark = np.zeros(trace.elements, dtype=bool)
    mark[el] = True
    touched = np.flatnonzero(mark)          # the elements in ``producers``' order (sorted)
    lastw[touched] = final
    return (src[keep], dst[keep], kind[keep], elem[keep], el[rd], inst[rd], prod[rd], lastw, el[wr],
            inst[wr], readers)


def _chains(trace: Trace, deps: tuple, paths: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per instance the end of its single-reader chain and its depth in the chain (instances before it
    along it).  A chain steps from an instance to the one reader of its value; with ``paths`` only when
    that reader reads no other value with one reader (two chains meeting there: ``x[i] = w / A[i, i]``
    after ``w``'s and ``A[i, i]``'s), so chains are paths."""
    src, dst, kind, readers = deps[0], deps[1], deps[2], deps[-1]
    n = trace.instances
    single = (kind == 0) & (readers[src] == 1)     # the value's one reader
    if paths:
        single &= np.bincount(dst[single], minlength=n)[dst] == 1
    nxt = np.arange(n)
    nxt[src[single]] = dst[single]
    prev = np.arange(n)
    prev[dst[single]] = src[single]                # (one of) its chain predecessors
    depth = (prev != np.arange(n)).astype(np.int64)
    for _ in range(64):                            # pointer jumping, both ways
        if np.array_equal(nxt[nxt], nxt) and np.array_equal(prev[prev], prev):
            break
        depth = depth + depth[prev]                # (a chain's start has depth 0 and is its own prev)
        nxt, prev = nxt[nxt], prev[prev]
    return nxt, depth


def owner_blocks(trace: Trace, values: dict[str, int], size: tuple[int, int], *, chain: bool = True,
                 deps: tuple | None = None, written: tuple | None = None,
                 root: np.ndarray | None = None) -> np.ndarray:
    """Per instance its owner block (dense ids): the block of the element it writes — or, with
    ``chain``, of the element written at the end of its single-reader chain.  ``size = (r, c)``: blocks
    of ``r × c`` elements of a matrix (first subscript ``r``), about ``r·c`` elements of an array of
    another rank (``round((r·c)^(1/d))`` along each of its ``d`` dimensions)."""
    if deps is None:
        deps = _dependences(trace)
    arr, idx = written if written is not None else _written_index(trace, values)
    if root is None:
        root = _chains(trace, deps)[0] if chain else np.arange(trace.instances)
    r, c = max(1, int(size[0])), max(1, int(size[1]))
    rk = _ranks(trace)[root]
    edge = np.ones_like(idx)
    for d in range(idx.shape[1]):
        other = np.maximum(1, np.rint((r * c) ** (1.0 / np.maximum(rk, 1)))).astype(np.int64)
        edge[:, d] = np.where(rk == 2, r if d == 0 else c, other)
    coord = np.floor_divide(idx[root], edge)
    coord -= coord.min(axis=0, initial=0)  # (subscripts may be negative)
    key = arr[root].astype(np.int64)
    for d in range(coord.shape[1]):      # one integer per block (arrays' numbers, then coordinates)
        key = key * (int(coord[:, d].max(initial=0)) + 1) + coord[:, d]
    _, ids = np.unique(key, return_inverse=True)
    return ids.ravel()


def _ranks(trace: Trace) -> np.ndarray:
    """Per instance the rank of the array it writes."""
    per = np.array([len(st.output.index) for st in trace.program.statements], dtype=np.int64)
    return per[trace.stmt]


def block_ranks(trace: Trace, blocks: np.ndarray, deps: tuple, prefers=("first", "last")) -> list | None:
    """Per tie-break of ``prefers`` the position of every block in a topological order of the block graph
    (``"first"``/``"last"``: among ready blocks, the one whose first or last instance comes first in
    program order); ``None`` when the block graph has a cycle."""
    nb = int(blocks.max()) + 1 if blocks.size else 0
    bs, bd = _block_edges(trace, blocks, deps)
    cross = bs != bd
    pairs = bs[cross] * nb + bd[cross]
    if nb * nb <= 1 << 26:                # distinct edges: a bitmap, else by sorting
        mark = np.zeros(nb * nb, dtype=bool)
        mark[pairs] = True
        pairs = np.flatnonzero(mark)
    else:
        pairs = _uniq(pairs)
    succ_from, succ_to = pairs // nb, pairs % nb
    starts = np.searchsorted(succ_from, np.arange(nb + 1)).tolist()
    succ_to = succ_to.tolist()
    n = np.arange(trace.instances)
    out = []
    for prefer in prefers:
        if prefer == "first":
            prio = np.full(nb, trace.instances)
            np.minimum.at(prio, blocks, n)
        else:
            prio = np.zeros(nb, dtype=np.int64)
            np.maximum.at(prio, blocks, n)
        prio = prio.tolist()
        indeg = np.bincount(np.asarray(succ_to, dtype=np.int64), minlength=nb).tolist()
        ready = [(prio[b], b) for b in range(nb) if indeg[b] == 0]
        heapq.heapify(ready)
        seq = []
        while ready:
            _, b = heapq.heappop(ready)
            seq.append(b)
            for c in succ_to[starts[b]:starts[b + 1]]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(ready, (prio[c], c))
        if len(seq) < nb:
            return None
        rank = np.empty(nb, dtype=np.int64)
        rank[np.asarray(seq, dtype=np.int64)] = np.arange(nb)
        out.append(rank)
    return out


def _ordered(blocks: np.ndarray, rank: np.ndarray, inner: np.ndarray | None) -> np.ndarray:
    """Instances by block position, then ``inner`` (if given), then program order."""
    key = rank[blocks]
    if inner is not None:
        key = key * (int(inner.max(initial=0)) + 1) + inner
    return np.argsort(key, kind="stable")


def block_order(trace: Trace, blocks: np.ndarray, deps: tuple, prefer: str = "last",
                inner: np.ndarray | None = None) -> np.ndarray | None:
    """The instances ordered block by block (:func:`block_ranks` with one tie-break; each block in
    program order, or by ``inner`` first when given); ``None`` when the block graph has a cycle."""
    ranks = block_ranks(trace, blocks, deps, (prefer,))
    return None if ranks is None else _ordered(blocks, ranks[0], inner)


def _block_edges(trace: Trace, blocks: np.ndarray, deps: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The block graph's edges.  An element whose every read sees a value written in the reader's own
    block is private to the blocks (a temporary such as ``w``): as blocks run whole, no other block can
    overwrite it between a write and its reads, so its anti and output dependences are dropped, and only
    its last writer's block must come after every block that writes it (the same final value)."""
    src, dst, kind, elem, r_el, r_inst, r_prod, lastw, w_el, w_inst = deps[:10]
    shared = np.zeros(trace.elements, dtype=bool)
    foreign = (r_prod < 0) | (blocks[np.maximum(r_prod, 0)] != blocks[r_inst])
    shared[r_el[foreign]] = True
    keep = (kind == 0) | shared[elem]
    fin = ~shared[w_el]
    ws, wd = w_inst[fin], lastw[w_el[fin]]
    return (np.concatenate([blocks[src[keep]], blocks[ws]]), np.concatenate([blocks[dst[keep]], blocks[wd]]))


def owner_sizes(memory: int) -> tuple[tuple[int, int], ...]:
    """Block shapes ``(r, c)`` tried for a fast memory of ``memory`` words: an ``r × c`` block of the
    output and the two operand vectors streamed along the reduction (``r + c`` words) filling at most
    0.9 of ``S`` (the LRU's slack for the operands of the block's other statements), each maximal, with
    ``|r − c| ≤ 3``."""
    cap = 0.9 * memory
    out = []
    for r in range(1, int(np.sqrt(cap)) + 4):
        c = int((cap - r) // (r + 1))           # the widest block of r rows
        if c >= 1 and abs(r - c) <= 3 and (r + 1) * c + r + 1 + c > cap:
            out.append((r, c))
    return tuple(sorted(out, key=lambda rc: (abs(rc[0] - rc[1]), rc)))


def _coalesced(trace: Trace, deps: tuple, root: np.ndarray) -> Trace | None:
    """The trace with every chain's temporary stored in the element its chain ends by writing
    (``w = A[i, j]; w -= …; A[i, j] = w / …`` updates ``A[i, j]`` in place): a storage mapping of the
    same computation, so its replay is a pebbling of the same CDAG.  A chain's temporary qualifies when
    the chain's reads of it see the chain's own writes and no other chain reads them; the chain that
    leaves the temporary's final value keeps it.
    ``None`` when no element qualifies.  Whether an order on it computes what the program computes is
    checked against the program's own trace (``cache['program']``, :func:`legal`)."""
    r_el, r_inst, r_prod, lastw = deps[4], deps[5], deps[6], deps[7]
    foreign = (r_prod < 0) | (root[np.maximum(r_prod, 0)] != root[r_inst])
    m = np.int64(trace.elements)
    bad = _uniq(np.concatenate([root[r_inst[foreign]] * m + r_el[foreign],
                                    root[r_prod[foreign & (r_prod >= 0)]] * m + r_el[foreign & (r_prod >= 0)]]))
    el = trace.elems
    target = np.where(trace.is_write, el, -1).max(axis=1)[root]      # what each chain ends by writing
    key = root[:, None] * m + el
    pos = np.minimum(np.searchsorted(bad, key), max(0, bad.size - 1))
    own = (el >= 0) & ~((bad[pos] == key) if bad.size else False) & (target[:, None] != el) & (target[:, None] >= 0)
    fin = lastw[np.maximum(el, 0)]
    own &= root[np.maximum(fin, 0)] != root[:, None]        # not the chain of the final value
    read = np.zeros(trace.elements, dtype=bool)
    read[r_el] = True
    own &= read[np.maximum(el, 0)]                                   # a temporary is read
    if not own.any():
        return None
    if "program" not in trace.cache:
        legal(trace, loop_order(trace))
    elems = np.where(own, np.broadcast_to(target[:, None], el.shape), el)
    return Trace(trace.program, trace.stmt, trace.vars, elems, trace.is_write, trace.elements, trace.key,
                 cache={"program": trace.cache["program"]})


def _levels(deps: tuple, blocks: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per instance its level within its block: the longest path to it over the dependences ``deps``
    between instances of one block, at least ``start``."""
    src, dst = deps[0], deps[1]
    inside = blocks[src] == blocks[dst]
    o = np.argsort(dst[inside], kind="stable")
    lev = start.tolist()
    # the dependences run forward in program order (source < target): one pass in target order
    for s, d in zip(src[inside][o].tolist(), dst[inside][o].tolist()):
        if lev[s] >= lev[d]:
            lev[d] = lev[s] + 1
    return np.asarray(lev, dtype=np.int64)


def owner_orders(trace: Trace, values: dict[str, int], memory: int):
    """Yield ``(label, order, trace)`` for the owner-aligned candidates (every block shape of
    :func:`owner_sizes`; each block in program order, and, where chains have
    temporaries, in place on :func:`_coalesced`'s trace level by level within the block, so that the
    chains of one block advance together — the reduction index outermost) whose block graph is acyclic;
    the caller checks each order with :func:`~meshplan.models.soap.replay.legal` on the ``trace`` given."""
    if not trace.instances:
        return
    deps = _dependences(trace)
    written = _written_index(trace, values)
    root = _chains(trace, deps)[0]
    merged = mdeps = depth = None
    seen = set()
    for size in owner_sizes(memory):
        blocks = owner_blocks(trace, values, size, deps=deps, written=written, root=root)
        ranks = block_ranks(trace, blocks, deps, ("first",))
        if ranks is None:
            continue
        if depth is None:                   # (built once, when some block graph is acyclic)
            proot, depth = _chains(trace, deps, paths=True)
            merged = _coalesced(trace, deps, proot)
            mdeps = _dependences(merged) if merged is not None else None
        levels = _levels(mdeps, blocks, depth) if merged is not None else None
        for prefer, rank in zip(("first",), ranks):
            for inner, tr in ((None, trace), (levels, merged)):
                if tr is None:
                    continue
                order = _ordered(blocks, rank, inner)
                h = (hash(order.tobytes()), tr is merged)
                if h not in seen:
                    seen.add(h)
                    yield (f"owner blocks {size[0]}×{size[1]}, {prefer} instance first"
                           + (", temporaries in place, by level" if tr is merged else ""), order, tr)
