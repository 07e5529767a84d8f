"""The LRU replay of loop programs (models/soap/replay.py) against brute force on tiny cases.

* the vectorized trace equals a plain interpreter's access stream (distinct reads in order, then the
  write) up to renaming the elements;
* ``lru_io`` equals a list-based LRU with write-back on random streams;
* ``legal`` is sound: an order it accepts computes the same final memory as program order when every
  statement is executed as a hash of the values it reads (and a reversed stencil is rejected).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.core.errors import ModelError
from meshplan.models.loops.frontend import parse_file, parse_source
from meshplan.models.loops.program import sym
from meshplan.models.soap.replay import build_trace, legal, loop_order, lru_io, replay_order, stream, tiled_order
from meshplan.models.soap.schedules import best_schedule

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def naive_instances(program, params):
    """(statement index, env) of every instance, by walking the loop tree in Python."""
    out = []
    psubs = {sym(k): v for k, v in params.items()}
    tree: list = []
    for si, st_ in enumerate(program.statements):
        level = tree
        for lp in st_.loops:
            if level and level[-1][0] == "loop" and level[-1][1] == lp:
                level = level[-1][2]
            else:
                node = ("loop", lp, [])
                level.append(node)
                level = node[2]
        level.append(("stmt", si))

    def walk(nodes, env):
        for node in nodes:
            if node[0] == "stmt":
                out.append((node[1], dict(env)))
            else:
                _, lp, body = node
                sub = {**psubs, **{sym(k): v for k, v in env.items()}}
                lo, hi = int(lp.lower.subs(sub)), int(lp.upper.subs(sub))
                for v in (range(hi - 1, lo - 1, -1) if lp.descending else range(lo, hi, lp.step)):
                    walk(body, {**env, lp.var: v})

    walk(tree, {})
    return out


_FNS: dict = {}


def naive_accesses(program, params, si, env):
    """The element keys one instance reads (distinct, in order) and writes, by plain evaluation."""
    st_ = program.statements[si]
    if (program.name, si) not in _FNS:
        reads = []
        for a in st_.inputs:
            if a not in reads:
                reads.append(a)
        names = sorted(set(params) | set(st_.vars))
        _FNS[program.name, si] = names, [(a.array, sp.lambdify([sym(x) for x in names], list(a.index)))
                                         for a in [*reads, st_.output]]
    names, fns = _FNS[program.name, si]
    vals = [{**params, **env}[x] for x in names]
    keys = [(arr, tuple(int(x) for x in fn(*vals))) for arr, fn in fns]
    return keys[:-1], keys[-1]


def naive_lru(stream_, memory):
    """List-based LRU with write-back; an evicted dirty value is stored unless the element's next access
    in the rest of the stream is a write (the value is dead)."""
    mem, dirty, loads, stores = [], set(), 0, 0
    for pos, (key, w) in enumerate(stream_):
        if key in mem:
            mem.remove(key)
            mem.append(key)
        else:
            loads += 0 if w else 1
            mem.append(key)
            if len(mem) > memory:
                ev = mem.pop(0)
                if ev in dirty:
                    dirty.discard(ev)
                    nxt = next((w2 for k2, w2 in stream_[pos + 1:] if k2 == ev), None)
                    stores += 0 if nxt is True else 1
        if w:
            dirty.add(key)
    return loads, stores + len(dirty)


def relabel(seq):
    seen = {}
    return [seen.setdefault(x, len(seen)) for x in seq]


TINY = {"N": 5, "M": 4, "K": 3, "TSTEPS": 3, "T": 3, "NI": 3, "NJ": 4, "NK": 3, "NL": 3, "NM": 2,
        "NR": 2, "NQ": 2, "NP": 3, "NB": 1, "NC": 2, "NH": 2, "NW": 2, "NS": 2, "NO": 3}


def _params(p):
    return {k: TINY.get(k, 4) for k in p.params}


@pytest.mark.parametrize("name", ["mmm", "lu", "jacobi_1d", "cholesky", "trisolv", "conv2d_strided",
                                  "patch_embed", "correlation", "doitgen", "nussinov", "ludcmp"])
def test_trace_equals_interpreter(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    params = _params(p)
    tr = build_trace(p, params)
    naive = []
    for si, env in naive_instances(p, params):
        reads, w = naive_accesses(p, params, si, env)
        naive += [(r, False) for r in reads] + [(w, True)]
    el, wr, _ = stream(tr, loop_order(tr))
    assert tr.instances == len(naive_instances(p, params))
    assert relabel(el.tolist()) == relabel([k for k, _ in naive])
    assert wr.tolist() == [w for _, w in naive]
    for memory in (4, 9):
        io = replay_order(tr, loop_order(tr), memory)
        assert (io.loads, io.stores) == naive_lru(naive, memory)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=0, max_size=120), st.integers(1, 8))
def test_lru_equals_list_lru(seq, memory):
    el = np.array([e for e, _ in seq], dtype=np.int64)
    wr = np.array([w for _, w in seq], dtype=bool)
    io = lru_io(el, wr, memory)
    assert (io.loads, io.stores) == naive_lru(seq, memory)
    assert io.accesses == len(seq)


@pytest.mark.parametrize("name,tiles", [
    ("mmm", [(("i",), 2), (("j",), 2), (("k",), 2)]),
    ("mmm", [(("k",), 1), (("j",), 3), (("i",), 2)]),
    ("gemm", [(("i",), 2), (("j", "j_2"), 2), (("k",), 1)]),
    ("lu", [(("k",), 2), (("i", "i_2"), 2), (("j",), 2)]),
    ("jacobi_1d", [(("t",), 2), (("i", "i_2"), 2)]),
    ("cholesky", [(("i", "i_2"), 2), (("j",), 2)]),
    ("mlp", [(("b",), 2), (("o",), 2), (("i",), 2)]),
])
def test_legal_orders_compute_the_same(name, tiles, final_memory):
    (p,) = parse_file(str(EX / f"{name}.py"))
    tr = build_trace(p, _params(p))
    ref = final_memory(tr, loop_order(tr))
    order = tiled_order(tr, tiles)
    assert sorted(order.tolist()) == list(range(tr.instances))
    if legal(tr, order):
        assert final_memory(tr, order) == ref
    else:
        assert final_memory(tr, order) != ref, "an order judged illegal computes the same (check is too strict)"


def test_illegal_orders_are_rejected():
    (p,) = parse_file(str(EX / "jacobi_1d.py"))
    tr = build_trace(p, _params(p))
    assert legal(tr, loop_order(tr))
    assert not legal(tr, loop_order(tr)[::-1])
    assert not legal(tr, tiled_order(tr, [(("i", "i_2"), 1), (("t",), 1)]))   # interchange t and i
    (p,) = parse_file(str(EX / "mmm.py"))
    tr = build_trace(p, {"M": 3, "N": 3, "K": 3})
    assert legal(tr, tiled_order(tr, [(("k",), 1), (("j",), 1), (("i",), 1)]))   # reduction reordered


def test_best_schedule_mmm_is_the_outer_product_schedule():
    (p,) = parse_file(str(EX / "mmm.py"))
    res = best_schedule(p, {"M": 16, "N": 16, "K": 16}, 64, {"i": ("i",), "j": ("j",), "k": ("k",)},
                        {"i": 8, "j": 8, "k": 8})
    assert res.best.legal and res.best.tiles
    assert res.best.io.total < res.loop_order.total
    # b×b outer-product tiles: A and B read once per tile row/column (2N²⌈N/b⌉), C loaded and stored once
    b = dict(res.best.tiles)["i"]
    assert res.best.io.total <= 2 * 16 ** 2 * -(-16 // b) + 2 * 16 ** 2


def test_errors_name_the_remedy():
    (p,) = parse_source("def f(N):\n    for i in range(N):\n        for j in range(N):\n"
                        "            C[i, j] += A[i, j] * B[j, i]\n")
    with pytest.raises(ModelError, match="smaller sizes"):
        build_trace(p, {"N": 3000}, limit=10_000)
    with pytest.raises(ModelError, match="give a value for N"):
        build_trace(p, {})
    with pytest.raises(ModelError, match="larger S"):
        best_schedule(p, {"N": 4}, 2)
