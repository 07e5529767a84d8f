"""The lower bound never exceeds the I/O of a concrete schedule that we count.

Each example runs in program order (and MMM also tiled) through an LRU fast
memory of S words: a read that misses loads one word, a write makes the
element resident and dirty, evicting a dirty element stores it, and every
dirty element is stored at the end.  That is a valid red-blue pebbling, so its
I/O is at least the optimum, which the bound must not exceed.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.soap import parse_file, parse_source, sym
from meshplan.solvers.soap.bound import analyze

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
EXAMPLES = sorted(p.stem for p in EX.glob("*.py"))


class Lru:
    def __init__(self, capacity: int) -> None:
        self.cap, self.mem, self.io = capacity, OrderedDict(), 0

    def _make_room(self):
        while len(self.mem) > self.cap:
            _, dirty = self.mem.popitem(last=False)
            self.io += dirty

    def read(self, key):
        if key in self.mem:
            self.mem.move_to_end(key)
        else:
            self.io += 1
            self.mem[key] = False
            self._make_room()

    def write(self, key):
        self.mem[key] = True
        self.mem.move_to_end(key)
        self._make_room()

    def finish(self) -> int:
        return self.io + sum(self.mem.values())


def _tree(program):
    """Nest the statements back into their loop tree (shared loops are equal objects)."""
    root: list = []
    for st_ in program.statements:
        level = root
        for lp in st_.loops:
            if level and level[-1][0] == "loop" and level[-1][1] == lp:
                level = level[-1][2]
            else:
                node = ("loop", lp, [])
                level.append(node)
                level = node[2]
        level.append(("stmt", st_))
    return root


def run_program_order(program, params: dict[str, int], memory: int) -> int:
    cache = Lru(memory)
    psubs = {sym(k): v for k, v in params.items()}
    compiled = {}
    for st_ in program.statements:
        args = [sym(v) for v in st_.vars]
        # subscripts may hold size parameters (adi's N - 1, a kernel's NR): substitute them first
        def index_fn(access):
            return sp.lambdify(args, [sp.sympify(e).subs(psubs) for e in access.index])

        reads = [(a.array, index_fn(a)) for a in st_.inputs]
        out = (st_.output.array, index_fn(st_.output))
        compiled[st_.name] = (reads, out)

    def walk(nodes, env):
        for node in nodes:
            if node[0] == "stmt":
                st_ = node[1]
                vals = [env[v] for v in st_.vars]
                reads, (oname, ofn) = compiled[st_.name]
                for name, fn in reads:
                    cache.read((name, tuple(int(x) for x in fn(*vals))))
                cache.write((oname, tuple(int(x) for x in ofn(*vals))))
            else:
                _, lp, body = node
                sub = {**psubs, **{sym(k): v for k, v in env.items()}}
                lo, hi = int(lp.lower.subs(sub)), int(lp.upper.subs(sub))
                for v in range(lo, hi, lp.step):
                    walk(body, {**env, lp.var: v})

    walk(_tree(program), {})
    return cache.finish()


@functools.lru_cache(maxsize=None)
def result(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return p, analyze(p)


def _bound(res, params, memory):
    from meshplan.solvers.soap.chi import S

    return float(sp.N(res.bound.subs({sym(k): v for k, v in params.items()}).subs(S, memory)))


SMALL = {"NR": 3, "NS": 3, "NB": 2, "NC": 3, "NK": 3, "NH": 4, "NW": 4}


@pytest.mark.parametrize("name", EXAMPLES)
def test_bound_below_program_order_lru_io(name):
    p, res = result(name)
    params = {k: SMALL.get(k, 4 if k.startswith("T") else 7) for k in p.params}
    for memory in (16, 32):
        io = run_program_order(p, params, memory)
        symbolic = _bound(res, params, memory)
        numeric = res.evaluate_numeric({**params, "S": memory})   # X0 searched numerically
        assert symbolic <= io and numeric <= io, (name, memory)
        assert numeric >= symbolic * (1 - 1e-9)


def test_bound_below_a_tiled_mmm_schedule():
    """The √S×√S outer-product schedule of chapter 3 (Listing 3.1) at several sizes."""
    p, res = result("mmm")
    for n, memory in ((12, 20), (16, 40), (20, 64)):
        b = int(math.isqrt(memory + 4) - 2)            # C tile b*b plus two steps of A and B (LRU slack)
        cache = Lru(memory)
        for i0 in range(0, n, b):
            for j0 in range(0, n, b):
                for k in range(n):
                    for i in range(i0, min(n, i0 + b)):
                        for j in range(j0, min(n, j0 + b)):
                            cache.read(("C", (i, j)))
                            cache.read(("A", (i, k)))
                            cache.read(("B", (k, j)))
                            cache.write(("C", (i, j)))
        io = cache.finish()
        bound = _bound(res, {"M": n, "N": n, "K": n}, memory)
        assert bound <= io
        assert io <= 4 * bound + 3 * n * n      # the schedule is near the bound (tightness)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(4, 7), st.integers(8, 40))
def test_generated_matrix_products_respect_their_bound(kind, n, memory):
    srcs = {1: "C[i, j] += A[i, k] * B[k, j]", 2: "C[i, j] += A[k, i] * B[j, k]", 3: "y[i] += A[i, k] * x[k]"}
    (p,) = parse_source(f"""
def g(N):
    for i in range(N):
        for j in range(N):
            for k in range(N):
                {srcs[kind]}
""")
    res = analyze(p)
    assert _bound(res, {"N": n}, memory) <= run_program_order(p, {"N": n}, memory)


@st.composite
def einsums(draw):
    letters = draw(st.lists(st.sampled_from("ijkl"), min_size=1, max_size=4, unique=True))
    ops = [draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3)) for _ in range(draw(st.integers(1, 3)))]
    used = sorted({c for o in ops for c in o})
    out = draw(st.lists(st.sampled_from(used), max_size=len(used), unique=True))
    return ",".join("".join(o) for o in ops) + "->" + "".join(out)


@settings(max_examples=15, deadline=None)
@given(einsums(), st.integers(8, 24))
def test_generated_einsums_respect_their_bound(spec, memory):
    from meshplan.models.soap import parse_einsum

    p = parse_einsum(spec)
    res = analyze(p)
    params = {k: 4 for k in p.params}
    bound = _bound(res, params, memory)
    assert 0 <= bound <= run_program_order(p, params, memory), spec


@settings(max_examples=30, deadline=None)
@given(data=st.data(), memory=st.integers(8, 24))
def test_random_programs_respect_their_bound(soap_programs, data, memory):
    from meshplan.models.core.errors import ModelError

    src = data.draw(soap_programs)
    (p,) = parse_source(src)
    try:
        res = analyze(p)
    except ModelError:
        return
    params = {"N": 6, "M": 5}
    assert _bound(res, params, memory) <= run_program_order(p, params, memory), src
