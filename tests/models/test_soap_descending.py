"""Descending loops (``range(hi, lo, -1)``) keep their direction in the loop-program model.

The exact trace (models/soap/replay.py) must give every read the writing instance it sees when the
Python source itself runs: the source is executed directly, with every array (and every scalar, as a
0-dimensional array) replaced by a recorder of its reads and writes, and the reads-from relation is
compared with the trace's, instance by instance.  A small program whose data flow differs between the
two directions, and the PolyBench kernels with descending loops, are checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.models.loops.frontend import parse_file, parse_source
from meshplan.models.loops.program import sym
from meshplan.models.soap.replay import build_trace, legal, loop_order, producers, stream, tiled_order

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"

SHIFT = """
def shift(N):
    for i in range(N - 1, -1, -1):
        A[i] = A[i + 1] + 1
"""


class _Recorder:
    """An array whose element reads and writes are appended to ``log`` (every value read is 1.0)."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    @staticmethod
    def _key(idx) -> tuple:
        return tuple(int(x) for x in idx) if isinstance(idx, tuple) else (int(idx),)

    def __getitem__(self, idx):
        self.log.append(("r", (self.name, self._key(idx))))
        return 1.0

    def __setitem__(self, idx, value) -> None:
        self.log.append(("w", (self.name, self._key(idx))))


class _ScalarsAsArrays(ast.NodeTransformer):
    """``w`` → ``w[()]`` for the program's scalars, so that the recorder sees them too."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name):  # noqa: N802 - ast API
        if node.id not in self.names:
            return node
        return ast.copy_location(ast.Subscript(ast.Name(node.id, ast.Load()), ast.Tuple([], ast.Load()), node.ctx),
                                 node)


def executed(text: str, program, sizes: dict[str, int]) -> list[tuple[tuple, dict]]:
    """Run the source: per statement instance (one per write, in execution order) the element it writes
    and ``{element read: instance that wrote it, or -1}``."""
    scalars = {a for a in program.arrays
               if any(not acc.index for st in program.statements for acc in (st.output, *st.inputs)
                      if acc.array == a)}
    tree = ast.fix_missing_locations(_ScalarsAsArrays(scalars).visit(ast.parse(text)))
    log: list = []
    env = {a: _Recorder(a, log) for a in program.arrays}
    env.update(match=lambda x, y: 1.0, max=max)
    exec(compile(tree, "<kernel>", "exec"), env)
    fn = env[program.name]
    (fdef,) = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == program.name]
    args = [sizes.get(a.arg, 1.0) for a in fdef.args.args]
    fn(*args)
    out, reads, last = [], {}, {}
    for kind, key in log:
        if kind == "r":
            reads.setdefault(key, last.get(key, -1))
        else:
            out.append((key, reads))
            last[key] = len(out) - 1
            reads = {}
    assert not reads, "a read after the last write"
    return out


def traced(program, sizes: dict[str, int]) -> list[tuple[tuple, dict]]:
    """The same relation from the exact trace in program order."""
    tr = build_trace(program, sizes)
    el, wr, inst = stream(tr, loop_order(tr))
    prod, _ = producers(el, wr, inst)
    keys = np.empty(tr.elems.shape, dtype=object)
    for si, st in enumerate(program.statements):
        rows = np.flatnonzero(tr.stmt == si)
        accs: list = []
        for a in st.inputs:
            if a not in accs:
                accs.append(a)
        names = [*sizes, *st.vars]
        for col, a in enumerate([*accs, st.output]):
            f = sp.lambdify([sym(x) for x in names], list(a.index) or [0], "math")
            for n in rows.tolist():
                vals = [*sizes.values(), *(int(tr.vars[v][n]) for v in st.vars)]
                keys[n, col] = (a.array, tuple(int(x) for x in f(*vals)) if a.index else ())
    out: list = [(None, {}) for _ in range(tr.instances)]
    width = tr.elems.shape[1]
    flat = [(n, c) for n in range(tr.instances) for c in range(width) if tr.elems[n, c] >= 0]
    for (n, c), w, p in zip(flat, wr.tolist(), prod.tolist()):
        key = keys[n, c]
        if w:
            out[n] = (key, out[n][1])
        else:
            out[n][1].setdefault(key, p)
    return out


def _check(text: str, sizes: dict[str, int]) -> list:
    (p,) = parse_source(text)
    direct = executed(text, p, sizes)
    model = traced(p, sizes)
    assert len(direct) == len(model)
    for n, (d, m) in enumerate(zip(direct, model)):
        assert d == m, f"instance {n}: executed {d}, traced {m}"
    return direct


def test_shift_reads_what_the_source_reads():
    got = _check(SHIFT, {"N": 5})
    # descending: A[i] reads the A[i + 1] written one instance earlier (all but the first)
    assert [r for _, r in got] == [{("A", (5,)): -1}] + [{("A", (5 - n,)): n - 1} for n in range(1, 5)]
    ascending = _check(SHIFT.replace("range(N - 1, -1, -1)", "range(N)"), {"N": 5})
    assert all(p == -1 for _, r in ascending for p in r.values())     # the direction decides the data flow


def test_descending_loop_round_trips_and_keeps_its_set():
    (p,) = parse_source(SHIFT)
    lp = p.statements[0].loops[0]
    assert lp.descending and (lp.lower, lp.upper, lp.step) == (0, sym("N"), 1)
    assert "range(N - 1, -1, -1)" in p.to_source()
    (q,) = parse_source(p.to_source())
    assert [(st.loops, st.output, st.inputs) for st in q.statements] == \
        [(st.loops, st.output, st.inputs) for st in p.statements]


def test_tiles_of_a_descending_loop_run_downwards():
    (p,) = parse_source(SHIFT)
    tr = build_trace(p, {"N": 9})
    order = tiled_order(tr, [(("i",), 3)])
    assert legal(tr, order)
    assert tr.vars["i"][order].tolist() == list(range(8, -1, -1))


@pytest.mark.parametrize("name,sizes", [("nussinov", {"N": 6}), ("ludcmp", {"N": 5}),
                                        ("adi", {"TSTEPS": 2, "N": 5}), ("deriche", {"W": 3, "H": 4})])
def test_kernel_replay_is_the_source(name, sizes):
    text = (EX / f"{name}.py").read_text()
    (p,) = parse_file(str(EX / f"{name}.py"))
    assert any(lp.descending for st in p.statements for lp in st.loops)
    _check(text, sizes)


@st.composite
def _programs(draw):
    """Random nests of one or two loops per statement, each ascending or descending, with offset reads."""
    lines = ["def gen(N):"]
    rank = {a: draw(st.integers(1, 2)) for a in "ABX"}
    for _ in range(draw(st.integers(1, 3))):
        depth = draw(st.integers(1, 2))
        for d, v in enumerate("ij"[:depth]):
            lo, hi = draw(st.sampled_from(["0", "1"])), draw(st.sampled_from(["N", "N - 1"] + (["i"] if d else [])))
            rng = f"range({hi} - 1, {lo} - 1, -1)" if draw(st.booleans()) else f"range({lo}, {hi})"
            lines.append("    " * (d + 1) + f"for {v} in {rng}:")
        out = draw(st.sampled_from("AB"))
        idx = draw(st.lists(st.sampled_from("ij"[:depth]), min_size=rank[out], max_size=rank[out]))
        reads = [f"{a}[{', '.join(f'{v} + {o}' for v, o in zip(dims, offs))}]"
                 for a in draw(st.lists(st.sampled_from("ABX"), min_size=1, max_size=3))
                 for dims in [draw(st.lists(st.sampled_from("ij"[:depth]), min_size=rank[a], max_size=rank[a]))]
                 for offs in [draw(st.lists(st.integers(-1, 1), min_size=rank[a], max_size=rank[a]))]]
        lines.append("    " * (depth + 1) + f"{out}[{', '.join(idx)}] {draw(st.sampled_from(['=', '+=']))} "
                     + " * ".join(reads))
    return "\n".join(lines) + "\n"


@settings(max_examples=30, deadline=None)
@given(src=_programs(), n=st.integers(1, 4))
def test_random_descending_programs_replay_their_source(src, n):
    _check(src, {"N": n})
