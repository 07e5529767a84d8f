"""The bound never exceeds the exact I/O of the tool's own schedule (``meshplan bound --schedule``).

The schedule is the one ``--schedule`` proposes — the dominant subgraph's integer tiles, scaled to S,
in a legal tile order (or the plain loop order) — replayed through an LRU fast memory of S words
(models/soap/replay.py, itself checked against brute force in tests/models/test_soap_replay.py).
A valid red–blue pebbling's I/O is at least the optimum, so ``bound ≤ attained`` must hold for every
example and for random SOAP programs at every size checked.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshplan.api.soap import report_json, schedule_json
from meshplan.models.core.errors import ModelError
from meshplan.models.loops.frontend import parse_file, parse_source
from meshplan.solvers.soap.bound import analyze

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
EXAMPLES = sorted(p.stem for p in EX.glob("*.py"))
SMALL = {"NR": 3, "NS": 3, "NB": 1, "NC": 3, "NK": 3, "NH": 3, "NW": 3, "NQ": 3, "NP": 4, "NO": 5}
FAST = ["mmm", "jacobi_1d", "two_mm"]


@functools.lru_cache(maxsize=None)
def result(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    return p, analyze(p)


def certificate(prog, res, values):
    doc = report_json(res, values, tiles=True, time_limit_s=0.3)
    sc = schedule_json(prog, doc, values)
    return doc["values"], sc


def _check(name, memory):
    p, res = result(name)
    values = {k: SMALL.get(k, 4 if k.startswith("T") else 8) for k in p.params}
    values["S"] = memory
    v, sc = certificate(p, res, values)
    assert sc["total"] == sc["loads"] + sc["stores"] and sc["total"] <= sc["loop_order"]["total"]
    assert v["bound"] <= sc["total"] * (1 + 1e-9), (name, memory, v["bound"], sc)
    assert v["bound_numeric"] <= sc["total"] * (1 + 1e-9), (name, memory, v["bound_numeric"], sc)
    assert sc["lower_bound"] <= sc["total"] * (1 + 1e-9)


@pytest.mark.parametrize("name", FAST)
def test_bound_below_the_tools_schedule_fast(name):
    _check(name, 16)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in EXAMPLES if n not in FAST])
def test_bound_below_the_tools_schedule_every_example(name):
    _check(name, 24)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(data=st.data(), memory=st.integers(8, 24))
def test_random_programs_bound_below_the_tools_schedule(soap_programs, data, memory):
    src = data.draw(soap_programs)
    (p,) = parse_source(src)
    try:
        res = analyze(p)
    except ModelError:
        return
    v, sc = certificate(p, res, {"N": 6, "M": 5, "S": memory})
    assert v["bound"] <= sc["total"] * (1 + 1e-9), src
    assert v["bound_numeric"] <= sc["total"] * (1 + 1e-9), src


def test_tiled_schedule_is_tight_on_mmm():
    """The certificate of the thesis's chapter 3 kernel: at N=32, S=64 the tool's own schedule is within
    2× of the bound (the gap is C's one load and one store, 2N², which the bound does not count)."""
    p, res = result("mmm")
    v, sc = certificate(p, res, {"M": 32, "N": 32, "K": 32, "S": 64})
    assert sc["tiled"] and sc["tiles"]["k"] == 1
    assert v["bound"] <= sc["total"] <= 2 * v["bound"]
    assert sc["total"] - 2 * 32 * 32 <= 1.5 * v["bound"]
