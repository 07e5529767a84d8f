"""The counting frontend's quasi-affine forms (:mod:`meshplan.models.loops.flow_forms`) are the forms of the
sympy expressions it builds for the same source: every loop bound, step, guard, update and ``if`` condition it
holds as forms equals :func:`~meshplan.models.loops.forms.convert` of the node's sympy value (built on first
use), on the generated affine family of the Barvinok property test, the non-affine family, the bench's nests and
the examples.  The sympy value is built from the source, never from the forms, so a form that differs from it
fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import sympy as sp
from meshplan.models.loops.control import (
    Assign,
    Branch,
    Deferred,
    Loop,
    Opaque,
    forms_of,
    walk_nodes,
)
from meshplan.models.loops.flow_frontend import parse_flow_source
from meshplan.models.loops.forms import convert, convert_cond, negate_cond

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sources() -> list[str]:
    aff = _load(ROOT / "tests" / "solvers" / "test_count_barvinok.py", "_gen_affine")
    non = _load(ROOT / "tests" / "solvers" / "test_counting_property.py", "_gen_nonaffine")
    bench = _load(ROOT / "bench" / "count.py", "_bench_count")
    out = [aff.nest(k)[0] for k in range(aff.N_NESTS)] + [non.program(k)[0] for k in range(120)]
    out += list(bench.AFFINE.values())
    out += [p.read_text() for p in sorted((ROOT / "examples" / "loops" / "counting").glob("*.py"))]
    return out


def _canon(c):
    """A condition with the arguments of ``and``/``or`` as a set (sympy orders them its own way)."""
    if isinstance(c, tuple) and c[0] in ("and", "or"):
        return (c[0], frozenset(_canon(a) for a in c[1]))
    if isinstance(c, tuple) and c[0] == "not":
        return ("not", _canon(c[1]))
    if isinstance(c, tuple):
        return ("rel", c[1], frozenset(c[2].items()))
    return c


def _random_sources(count: int) -> list[str]:
    """Loops whose bounds and conditions are random sums, ``min``/``max``, ``//`` and comparisons of linear
    terms (the cases where the forms follow sympy's ordering and simplification rules)."""
    import random

    rng = random.Random(7)

    def lin():
        terms = [f"{rng.choice([-2, -1, 1, 1, 2, 3])} * {v}" for v in rng.sample(["n", "m", "i", "k"], rng.randint(1, 2))]
        if rng.random() < 0.6:
            terms.append(str(rng.randint(-3, 3)))
        e = " + ".join(terms)
        return rng.choice([e, f"({e}) // {rng.choice([2, 3, -2])}", f"{rng.choice(['n', 'm', 'k'])}"])

    out = []
    for _ in range(count):
        bound = f"{rng.choice(['min', 'max'])}({', '.join(lin() for _ in range(rng.randint(2, 3)))})"
        cond = rng.choice([f"{lin()} < {lin()}", f"{lin()} >= {lin()} and {lin()} <= n", f"not {lin()} > m",
                           f"{lin()} != {lin()}", f"{lin()} == {lin()} or {lin()} > 0",
                           f"({lin()}) % {rng.choice([2, 3])} == {rng.randint(-1, 3)}",
                           f"i % 2 != 1 and ({lin()}) % 3 == 0"])
        out.append(f"def f(n, m):\n    for i in range({bound}):\n        k = {lin()}\n        while k < {lin()}:\n"
                   f"            if {cond}:\n                A[i] += 1\n            k += 1\n")
    return out


def test_forms_equal_the_forms_of_the_sympy_expressions():
    checked = {"values": 0, "guard": 0, "cond": 0}
    for src in _sources() + _random_sources(300):
        for flow in parse_flow_source(src):
            for nd in walk_nodes(flow.body):
                for name, kind in (("values", Assign), ("guard", Loop), ("cond", (Branch, Opaque))):
                    if not isinstance(nd, kind):
                        continue
                    fs = forms_of(nd, name)
                    if fs is None:
                        continue
                    checked[name] += 1
                    value = getattr(nd, name)
                    if name == "cond":
                        assert _canon(fs) == _canon(convert_cond(value, {})), (src, value, fs)
                    else:
                        assert [convert(v, {}) for v in value] == list(fs), (src, value, fs)
    assert min(checked.values()) > 50, checked  # every kind of node is exercised


def test_negated_condition_is_sympys_not():
    (flow,) = parse_flow_source("def f(n):\n    for i in range(n):\n        if i < 3:\n            A[i] = 0\n"
                                "        else:\n            A[i] = 1\n")
    then, orelse = [nd for nd in walk_nodes(flow.body) if isinstance(nd, Opaque)]
    assert forms_of(orelse, "cond") == negate_cond(forms_of(then, "cond"))
    assert orelse.cond == sp.Not(then.cond)


@pytest.mark.parametrize("text", ["A[i] % n == 0", "i * i < n", "x < n"])
def test_conditions_outside_the_forms_stay_sympy(text):
    src = f"def f(n):\n    x = 0\n    for i in range(n):\n        x = A[i]\n        if {text}:\n            B[i] = 0\n"
    (flow,) = parse_flow_source(src)
    (op,) = [nd for nd in walk_nodes(flow.body) if isinstance(nd, Opaque)]
    assert forms_of(op, "cond") is None


def test_deferred_is_built_once_and_replace_drops_the_forms():
    from dataclasses import replace

    calls = []
    d = Deferred(lambda: calls.append(1) or (sp.Symbol("n", integer=True),), ({"n": 1},))
    lp = Loop(d, (), 1)
    assert lp.guard == lp.guard and len(calls) == 1
    assert forms_of(lp, "guard") == ({"n": 1},)
    assert forms_of(replace(lp, guard=(sp.Integer(1),)), "guard") is None


def test_walk_is_ast_walk():
    import ast

    from meshplan.models.loops.flow_parts import _walk

    for src in _sources()[::7]:
        tree = ast.parse(src)
        assert _walk(tree) == list(ast.walk(tree))


def test_remainders_with_coefficients_below_the_modulus_are_forms():
    """``(c1*i + c2*k + c0) % K`` with every coefficient between 1 and K - 1 and no factor common to all of them
    and K is read as a form (no sympy), and the form is sympy's ``Mod`` of the same text."""
    import math
    import random

    rng = random.Random(11)
    seen = 0
    while seen < 60:
        K = rng.choice([2, 3, 4, 5, 6, 8, 9])
        c1, c2, c0 = rng.randint(1, K - 1), rng.randint(0, K - 1), rng.randint(0, K - 1)
        if math.gcd(K, c1, c2, c0) != 1:
            continue
        seen += 1
        lhs = " + ".join([f"{c1} * i"] + ([f"{c2} * k"] if c2 else []) + ([str(c0)] if c0 else []))
        src = (f"def f(n):\n    for i in range(n):\n        for k in range(i):\n"
               f"            if ({lhs}) % {K} == {rng.randint(0, K - 1)}:\n                A[i] += 1\n")
        (flow,) = parse_flow_source(src)
        (op,) = [nd for nd in walk_nodes(flow.body) if isinstance(nd, Opaque)]
        fs = forms_of(op, "cond")
        assert fs is not None, src
        assert _canon(fs) == _canon(convert_cond(op.cond, {})), (src, op.cond, fs)


def test_early_exit_is_the_search_of_every_node():
    """``_early_exit`` searches statements only; it finds the exit a search of every node (expressions too, last
    first) finds, on loops with exits in ``if``/``try``/``with``/``match`` blocks and in nested loops."""
    import ast

    from meshplan.models.loops.flow_parts import _early_exit
    from meshplan.models.loops.frontend import _children

    def every_node(body):
        todo = list(body)
        while todo:
            nd = todo.pop()
            if isinstance(nd, (ast.Break, ast.Continue, ast.Return)):
                return type(nd).__name__.lower()
            if not isinstance(nd, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
                todo.extend(_children(nd))
        return None

    extra = ["def f(n):\n    for i in range(n):\n        if i > 2:\n            break\n        try:\n            x = g(i)\n"
             "        except E:\n            continue\n        with m:\n            return 1\n",
             "def f(n):\n    while n:\n        for j in range(n):\n            break\n        match n:\n"
             "            case 1:\n                return 0\n        n -= 1\n",
             "def f(n):\n    for i in range(n):\n        y = lambda: 1\n        if i:\n            pass\n        else:\n"
             "            continue\n        A[i] = [k for k in range(i)]\n"]
    loops = 0
    for src in _sources()[::5] + extra:
        for nd in ast.walk(ast.parse(src)):
            if isinstance(nd, (ast.For, ast.While)):
                loops += 1
                assert _early_exit(nd.body) == every_node(nd.body), (src, nd.lineno)
    assert loops > 100
