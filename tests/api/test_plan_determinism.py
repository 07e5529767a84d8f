"""Every planner a user calls on every rank returns the same plan for the same arguments, in every call and
in every process: ranks that each plan for themselves must bind equal plans (``bind`` refuses different ones,
tests/exec/test_plan_agreement.py).  Fresh processes get different string-hash seeds (``PYTHONHASHSEED``), so
an answer that depended on the iteration order of a set, or on which CP-SAT worker finished first, would
differ between them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from meshplan.models.matmul.problem import MatmulProblem
from meshplan.solvers.matmul.plan import choose_grid, exhaustive_grid, grid_cost, tie_break_grid

#: one fresh process: the JSON of every planner's plan on a few problems, without the solver's seconds
PROBE = r"""
import json, sys
import meshplan as mp

def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if "seconds" not in k}
    return [strip(v) for v in o] if isinstance(o, list) else o

out = {}
for sysv, axes, red in (("node=2,gpu=2", "2,2", "0,1"), ("node=2,gpu=4", "2,4", "1"),
                        ("node=2,socket=2,gpu=2", "2,4", "1")):
    plan = mp.solve_placement(sysv, axes, red, max_size=3)
    out[f"placement {sysv} {axes} {red}"] = strip(plan.to_json())
for src, dst, mesh in (("[3{x}12,2{y}12]", "[2{y}12,3{x}12]", "x=4,y=6"),
                       ("[32{x}128,512,32{y}128]", "[128,32{x,y}512,128]", "x=4,y=4"),
                       ("[16{y}32,16,16{x}64]", "[32,2{x,y}16,64]", "x=4,y=2")):
    out[f"redistribution {src} {dst} {mesh}"] = mp.plan_redistribution(src, dst, mesh).to_json()
for kind in ("lu", "cholesky"):
    for N, p in ((90, 4), (1536, 8), (4096, 12)):
        out[f"{kind} {N} {p}"] = mp.plan_factorization(kind, N, p).to_json()
for m, n, k, p in ((192, 192, 192, 2), (64, 64, 64, 4), (4096, 4096, 4096, 10000)):
    out[f"matmul {m} {n} {k} {p}"] = mp.plan_matmul(m, n, k, p).to_json()
out["halo"] = mp.plan_halo("1,1,2,2", (2, 3, 20, 21), 5).to_json()
print(json.dumps(out, sort_keys=True))
"""


def test_every_planner_gives_the_same_plan_in_fresh_processes():
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}, cwd="/")
             for seed in (0, 1, 2)]
    outs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        outs.append(json.loads(out))
    assert len(outs[0]) == 16
    for key in outs[0]:
        assert outs[1][key] == outs[0][key] == outs[2][key], key


@pytest.mark.parametrize("m, n, k, p", [(4096, 4096, 4096, 10000), (16384, 16384, 16384, 8192),
                                        (6000, 6000, 3000, 4608)])
def test_matmul_beyond_the_enumeration_takes_its_tie_break(m, n, k, p):
    """Beyond p = 4096 CP-SAT's grid is no longer replaced by the enumeration's (too slow at p = 2**20), so
    CP-SAT picks the tie-break itself: every call gives the grid the enumeration would (4096³ on 10000 ranks
    ties [20,25,20] with [25,20,20]; CP-SAT returned either)."""
    prob = MatmulProblem(m, n, k, p)
    want = exhaustive_grid(prob)
    assert {choose_grid(prob, method="cpsat") for _ in range(2)} == {want}


def test_tie_break_one_solve_per_term_picks_the_same(monkeypatch):
    """Where the weighted tie-break would pass 2**62 (p beyond 2**20) it takes one solve per term: the same
    grid as the enumeration's order, on tying problems."""
    import meshplan.encodings.matmul.grid as grid_encoding

    monkeypatch.setattr(grid_encoding, "tie_break_fits", lambda p, bound: False)
    for m, n, k, p in ((64, 64, 64, 16), (192, 192, 192, 2), (96, 96, 48, 8), (4096, 4096, 4096, 10000)):
        prob = MatmulProblem(m, n, k, p)
        grid, words, rounds = exhaustive_grid(prob)
        got = tie_break_grid(prob, 0.03, (words, rounds))
        assert got == grid and grid_cost(prob, got) == (words, rounds), (prob, got, grid)
