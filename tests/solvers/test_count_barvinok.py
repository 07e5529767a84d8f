"""Property test: on generated affine loop nests, meshplan's counts, Barvinok's piecewise quasi-polynomial
evaluated by isl itself, and brute-force execution of the Python source agree at every tested point,
``n = 0`` and ``1`` included.

Nests have depth 1-4: ``range`` loops with affine, ``min``/``max`` and ``//`` bounds, positive and negative
constant steps, ``while`` loops stepping by constants, ``if`` on affine and ``%`` conditions, statements at
every level, and the parameters in either order in the signature.  The oracle is Python: the generated
source runs with counters.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
import sympy

islpy = pytest.importorskip("islpy")

from meshplan.models.counting.problem import CountProblem  # noqa: E402
from meshplan.solvers.counting.count import count_problem  # noqa: E402

N_NESTS = 220
POINTS = ((0, 0), (0, 1), (1, 0), (1, 1), (0, 3), (2, 0), (1, 4), (3, 1), (2, 5), (5, 2), (4, 4), (6, 3))


def _bound(rng, outer: list[str]) -> str:
    opts = ["n", "m", "n + m", "2 * m", "n - 1", "min(n, 2 * m)", "max(n, m)", "(n + 1) // 2", "n // 3 + 1"]
    if outer:
        v, w = rng.choice(outer), rng.choice(outer)
        opts += [v, f"{v} + 1", f"n - {v}", f"min({v}, m)", f"max(0, {v} - m)", f"{v} // 2", f"({v} + n) // 3",
                 f"max({v}, m)", f"{v} + {w}", f"m + 2 - {v}"]
    return rng.choice(opts)


def _start(rng, outer: list[str]) -> str:
    opts = ["0", "1", "m // 2", "max(0, m - n)"]
    if outer:
        v = outer[-1]
        opts += [v, f"{v} + 1", f"max({v}, m)", f"{v} // 2"]
    return rng.choice(opts)


def _cond(rng, vars_: list[str]) -> str:
    v, w = rng.choice(vars_), rng.choice(vars_)
    return rng.choice([f"({v} + {w}) % 3 == 0", f"{v} % 2 == 1", f"{v} < m", f"2 * {v} >= n", f"{v} != {w} + 1",
                       f"{v} + {w} <= n and {v} % 2 == 0", f"not {v} < 2"])


def _nest(rng, depth: int, outer: list[str], ind: str, out: list[str], k: list[int]) -> None:
    v = f"v{len(outer)}_{len(out)}"
    lo, hi = _start(rng, outer), _bound(rng, outer)
    kind = rng.choice(["for", "for", "for", "step", "down", "while", "whiledown"])
    body = ind + "    "
    if kind == "for":
        out.append(f"{ind}for {v} in range({lo}, {hi}):")
    elif kind == "step":
        out.append(f"{ind}for {v} in range({lo}, {hi}, {rng.choice([2, 3])}):")
    elif kind == "down":
        out.append(f"{ind}for {v} in range({hi}, {lo}, -{rng.choice([1, 2, 3])}):")
    elif kind == "while":
        out += [f"{ind}{v} = {lo}", f"{ind}while {v} < {hi}:"]
    else:
        out += [f"{ind}{v} = {hi}", f"{ind}while {v} > {lo}:"]
    inner = outer + [v]
    k[0] += 1
    out.append(f"{body}S[{k[0]}] += 1")
    if rng.random() < 0.35:
        out.append(f"{body}if {_cond(rng, inner)}:")
        k[0] += 1
        out.append(f"{body}    S[{k[0]}] += 1")
        if rng.random() < 0.4:
            out.append(f"{body}else:")
            k[0] += 1
            out.append(f"{body}    S[{k[0]}] += 1")
    if depth > 1:
        _nest(rng, depth - 1, inner, body, out, k)
        if rng.random() < 0.2:
            _nest(rng, 1, inner, body, out, k)
    if kind == "while":
        out.append(f"{body}{v} += {rng.choice([1, 2, 3])}")
    elif kind == "whiledown":
        out.append(f"{body}{v} -= {rng.choice([1, 2])}")


def _lattice(src: str) -> int:
    """How many strided or floor-divided terms a nest has (each adds a lattice Barvinok's algorithm must
    decompose; several nested ones take it seconds to minutes, e.g. 24 s for a stride-2 loop around
    ``v // 2`` strided by 3 around ``v // 2``)."""
    return sum(src.count(t) for t in ("//", ", 2)", ", 3)", "-2)", "-3)", "+= 2", "+= 3", "-= 2", "%"))


def nest(seed: int) -> tuple[str, int]:
    """A random affine nest (Python source) and its number of statements; at most three strided or
    floor-divided terms, so that the test stays within seconds."""
    rng = random.Random(seed)
    sig = "n, m" if seed % 2 else "m, n"  # parameters in both orders
    while True:
        out, k = [f"def prog({sig}):"], [0]
        _nest(rng, rng.choice([1, 2, 2, 3, 3, 4]), [], "    ", out, k)
        src = "\n".join(out) + "\n"
        if _lattice(src) <= 3:
            return src, k[0]


def brute(src: str, k: int, n: int, m: int) -> list[int]:
    env: dict = {}
    exec(src, env)  # noqa: S102 - the generated test program
    S = [0] * (k + 1)
    env["prog"].__globals__["S"] = S
    env["prog"](n=n, m=m)
    return S[1:]


def _isl_eval(text: str, n: int, m: int) -> int:
    pw = islpy.PwQPolynomial(text)
    pt = islpy.Point.zero(pw.get_domain_space())
    for i, name in enumerate(pw.get_space().get_var_names(islpy.dim_type.param)):
        pt = pt.set_coordinate_val(islpy.dim_type.param, i, {"n": n, "m": m}.get(name, 0))
    v = pw.eval(pt)
    return v.to_python()


_LOC = {x: sympy.Symbol(x, integer=True, nonnegative=True) for x in ("n", "m")}
_NS = {"floor": math.floor, "Eq": lambda a, b: a == b, "Piecewise": lambda *ps: next((e for e, c in ps if c), 0)}


def _text_fn(text: str):
    """A JSON count or condition (sympy's syntax) as a function of the parameter values, evaluated by Python
    with exact fractions (sympy's parser is too slow to read every text of the family; a sample is read by
    sympy as well)."""
    code = compile(text, "<json>", "eval")
    return lambda vals: eval(code, _NS, {k: Fraction(v) for k, v in vals.items()})  # noqa: S307 - our JSON


def _case_value(cases: list, vals: dict):
    """The value of a count's JSON ``cases`` (``(count, condition)`` functions, None for ``otherwise``) at
    ``vals``: the count of the one row whose condition holds (the conditions are disjoint)."""
    hit = [e for e, c in cases if c is not None and c(vals)]
    assert len(hit) <= 1, (cases, vals)
    if not hit:
        hit = [e for e, c in cases if c is None] or [lambda _: 0]
    return hit[0](vals)


@pytest.mark.parametrize("chunk", range(11))
def test_affine_nests_match_brute_force_and_barvinok(chunk):
    """The counts as sympy, the JSON's text (each statement, the total and the cases with their conditions, read
    back by sympy) and isl's own evaluation all equal brute force."""
    per = N_NESTS // 11
    for seed in range(chunk * per, (chunk + 1) * per):
        src, k = nest(seed)
        (res,) = count_problem(CountProblem.of(src))
        doc = res.to_json()
        assert res.exact and doc["exact"], src
        assert not doc["unknowns"] and not doc["bounds"], src
        assert set(doc["methods"].values()) == {"barvinok"}, (src, doc["methods"])
        texts = {k: _text_fn(t) for k, t in doc["iterations"].items()}
        cases = {k: [(_text_fn(r["count"]), None if r["when"] == "otherwise" else _text_fn(r["when"])) for r in rows]
                 for k, rows in doc["cases"].items()}
        read = {k: sympy.sympify(t, locals=_LOC) for k, t in doc["iterations"].items()} if seed % 10 == 0 else {}
        for n, m in POINTS:
            want = brute(src, k, n, m)
            vals = {"n": n, "m": m}
            got = [res.evaluate(st.count.value, vals) for st in res.statements]
            assert got == want, (src, n, m, got, want)
            assert res.evaluate(res.total.value, vals) == sum(want), (src, n, m)
            assert [texts[st.name](vals) for st in res.statements] == want, (src, n, m, doc)
            assert texts["total"](vals) == sum(want), (src, n, m, doc["iterations"]["total"])
            assert [_case_value(cases[st.name], vals) for st in res.statements] == want, (src, n, m)
            by_name = dict(zip([st.name for st in res.statements], want), total=sum(want))
            assert all(res.evaluate(e, vals) == by_name[k] for k, e in read.items()), (src, n, m)
            isl_got = [_isl_eval(res.cases[st.name].text, n, m) for st in res.statements]
            assert isl_got == want, (src, n, m, isl_got, want)


def test_the_issue_nests_are_exact():
    """The affine forms the closed-form engine left unknown or loose: min/max trapezoids, an inner step,
    ``range(i + j)``, steps 3 and -2, ``i // 2``."""
    src = """
def f(n, m):
    for i in range(max(0, m - n), min(n, 2 * m)):
        for j in range(max(i, m), n + m):
            A[i] += 1
    for i in range(n):
        for j in range(i, n):
            for k in range(j, m, 2):
                B[k] += 1
    for i in range(n):
        for j in range(m):
            for k in range(i + j):
                C[k] += 1
    for i in range(0, n, 3):
        for j in range(n, i, -2):
            D[j] += 1
    for i in range(n):
        for j in range(i // 2):
            E[j] += 1
    for k in range(1, n):
        for a in range(k):
            F[a] += 1
"""
    (res,) = count_problem(CountProblem.of(src))
    assert res.exact and set(res.methods.values()) == {"barvinok"}
    for n in range(0, 7):
        for m in range(0, 7):
            want = [0] * 6
            for i in range(max(0, m - n), min(n, 2 * m)):
                want[0] += len(range(max(i, m), n + m))
            for i in range(n):
                for j in range(i, n):
                    want[1] += len(range(j, m, 2))
            want[2] = sum(i + j for i in range(n) for j in range(m))
            want[3] = sum(len(range(n, i, -2)) for i in range(0, n, 3))
            want[4] = sum(i // 2 for i in range(n))
            want[5] = sum(k for k in range(1, n))
            got = [res.evaluate(st.count.value, {"n": n, "m": m}) for st in res.statements]
            assert got == want, (n, m)


def test_count_source_of_domain_is_the_model():
    """The isl set is built from the loop model: a renamed loop variable (``i`` reused) counts the same."""
    src = "def f(n):\n    for i in range(n):\n        A[i] = 0\n    for i in range(0, n, 2):\n        B[i] = 0\n"
    (res,) = count_problem(CountProblem.of(src))
    assert [res.evaluate(st.count.value, {"n": 7}) for st in res.statements] == [7, 4]
    assert [res.evaluate(st.count.value, {"n": 0}) for st in res.statements] == [0, 0]


def test_json_text_is_read_from_isl_and_matches_sympy():
    """The JSON's counts are printed from isl's pieces (terms by falling degree over one denominator; a piece
    that is 0 where no piece holds extended there); the sympy counts, built on demand, are the same
    functions."""
    src = ("def lu(n):\n    for k in range(n):\n        for i in range(k + 1, n):\n            A[i, k] /= A[k, k]\n"
           "            for j in range(k + 1, n):\n                A[i, j] -= A[i, k] * A[k, j]\n")
    (res,) = count_problem(CountProblem.of(src))
    doc = res.to_json()
    assert doc["iterations"] == {"S1": "(n**2 - n)/2", "S2": "(2*n**3 - 3*n**2 + n)/6", "total": "(n**3 - n)/3"}
    assert doc["cases"]["S1"] == [{"count": "(n**2 - n)/2", "when": "True"}]
    assert doc["work"] == doc["depth"] == "(n**3 - n)/3" and doc["efficiency"] == "1/p"
    for name, text in doc["iterations"].items():
        e = res.total.value if name == "total" else next(st.count.value for st in res.statements if st.name == name)
        assert sympy.expand(sympy.sympify(text, locals=_LOC) - e) == 0, name
    assert res.to_json({"n": 6})["values"]["total"] == 70


def test_counts_print_the_same_whatever_the_process_drew_before():
    """Barvinok's algorithm draws from the C library's random(); each count starts from one seed, so a nest
    whose pieces depend on the draws (generated nest 19) prints the same text after any other work, and the
    caller's random() sequence goes on where it was."""
    import ctypes

    libc = ctypes.CDLL(None)
    src = nest(19)[0]
    texts = []
    for seed in (1, 7, 12345):
        libc.srandom(seed)
        libc.random()
        texts.append(count_problem(CountProblem.of(src))[0].to_json()["iterations"])
        libc.srandom(seed)
        expect = [libc.random() for _ in range(4)]
        libc.srandom(seed)
        libc.random()
        count_problem(CountProblem.of(src))
        assert [libc.random() for _ in range(3)] == expect[1:]
    assert texts[0] == texts[1] == texts[2]


def test_constants_beyond_a_c_long_count_exactly():
    """Bounds past 2**63 (islpy takes a Python int only within a C long): the statement's set is built with
    isl values, and the extension test's points beyond a sample point too."""
    src = ("def f(N):\n    for i in range(10**400):\n        A[i] = 1\n"
           "    for j in range(N, 3 * 10**30):\n        B[j] = 0\n"
           "    for i in range(N):\n        for j in range(i * (10**30 + 1)):\n            C[j] = 0\n")
    (res,) = count_problem(CountProblem.of(src))
    assert res.exact
    for n in (0, 1, 5, 3 * 10**30 + 7):
        got = [res.evaluate(st.count.value, {"N": n}) for st in res.statements]
        assert got == [10**400, max(0, 3 * 10**30 - n), (10**30 + 1) * n * (n - 1) // 2], n
