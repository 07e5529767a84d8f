"""Integer tiles from CP-SAT: never worse than rounding, optimal against brute force."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pytest

from meshplan.encodings.soap.tiles import encode_tiles
from meshplan.models.soap.tile_check import access_size, work_value
from meshplan.models.soap import parse_file, parse_source
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.tiles import integer_tiles, lower_bounds

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
EXAMPLES = sorted(p.stem for p in EX.glob("*.py"))
SIZES = {"NR": 3, "NS": 3, "NB": 4, "NC": 32, "NK": 32, "NH": 28, "NW": 28}


@functools.lru_cache(maxsize=None)
def result(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return p, analyze(p)


@pytest.mark.parametrize("name", EXAMPLES)
def test_integer_tiles_never_worse_than_rounding(name):
    p, res = result(name)
    values = {k: SIZES.get(k, 16 if k.startswith("T") else 200) for k in p.params}
    values["S"] = 1024
    it = res.intensity_of(res.dominant.best)
    tr = integer_tiles(p, it, values, time_limit_s=0.3)
    assert tr.status in ("optimal", "feasible", "fits", "rounded")
    if tr.status == "fits":
        return
    assert tr.integer_work >= tr.rounded_work
    assert access_size(it.problem, tr.integer) <= tr.budget
    assert work_value(it.problem, tr.integer) == tr.integer_work
    assert all(lo <= tr.integer[c] <= tr.caps[c] for c, lo in lower_bounds(it.problem).items())


def test_cpsat_tiles_match_brute_force_on_small_mmm():
    (p,) = parse_source("""
def mmm(N):
    for i in range(N):
        for j in range(N):
            for k in range(N):
                C[i, j] += A[i, k] * B[k, j]
""")
    res = analyze(p)
    it = res.subgraphs[0]
    for memory in (5, 12, 30):
        tr = integer_tiles(p, it, {"N": 9, "S": memory}, time_limit_s=5.0)
        best = max(work_value(it.problem, dict(zip(it.problem.classes, D)))
                   for D in itertools.product(range(1, 10), repeat=3)
                   if access_size(it.problem, dict(zip(it.problem.classes, D))) <= tr.budget)
        assert tr.status == "optimal" and tr.integer_work == best
        assert tr.gap >= 1 - 1e-9


def test_encoding_returns_an_encoded_cpsat_model():
    _, res = result("stencil_5_1")
    prob = res.subgraphs[0].problem
    enc = encode_tiles(prob, budget=50, lower=lower_bounds(prob), caps={c: 30 for c in prob.classes})
    assert enc.library == "cpsat" and set(enc.variables) == {f"D_{c}" for c in prob.classes}
    assert enc.meta.budget == 50
