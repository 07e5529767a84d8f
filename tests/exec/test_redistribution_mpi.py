"""Redistribution programs on 8 MPI ranks with real tiles.

Problems are batched: each test is one ``mpiexec`` launch running many programs.
"""

from __future__ import annotations

import random

import pytest

from meshplan.exec.redistribution.driver import run_plans
from meshplan.models.redistribution.mesh import Mesh, parse_mesh
from meshplan.models.redistribution.sample import random_problem
from meshplan.models.redistribution.types import parse_type
from meshplan.solvers.redistribution.baseline import baseline_plan
from meshplan.solvers.redistribution.plan import plan_redistribution

pytestmark = pytest.mark.mpi

MESHES_8 = [Mesh((("x", 8),)), Mesh((("x", 2), ("y", 4))), Mesh((("x", 4), ("y", 2))),
            Mesh((("x", 2), ("y", 2), ("z", 2)))]


def _jobs(seed: int, n: int, max_rank: int):
    rng = random.Random(seed)
    jobs = []
    for k in range(n):
        pr = random_problem(rng, MESHES_8[k % len(MESHES_8)], max_rank=max_rank, factors=(1, 2, 3))
        jobs.append({"search": plan_redistribution(pr.mesh, pr.src, pr.dst),
                     "baseline": baseline_plan(pr.mesh, pr.src, pr.dst)})
    return jobs


@pytest.mark.slow
@pytest.mark.parametrize("seed,max_rank", [(11, 3), (12, 4)])
def test_random_programs_verify_on_8_ranks(seed, max_rank):
    jobs = _jobs(seed, 110, max_rank)  # 2 launches x 110 problems x 2 programs
    results = run_plans(jobs, np=8, repeats=1, timeout_s=400)
    assert len(results) == len(jobs)
    for job, res in zip(jobs, results):
        for name, plan in job.items():
            r = res[name]
            assert r.verified, (name, str(plan.src), str(plan.dst))
            # the largest tile a rank held is exactly the plan's height (f32 = 4 bytes)
            assert r.peak_tile_bytes == 4 * plan.height
        assert res["search"].peak_tile_bytes <= 4 * job["search"].bound


def test_paper_examples_run_and_the_checker_catches_faults():
    jobs = []
    for mesh, src, dst in [("x=8", "[1{x}8,8]", "[8,1{x}8]"),
                           ("x=4,y=2", "[16{y}32,16,16{x}64]", "[32,2{x,y}16,64]"),
                           ("x=2,y=4", "[2{y,x}16]", "[4{y}16]"),
                           ("x=2,y=2,z=2", "[4{x,y}16,8{z}16]", "[8{z}16,4{y,x}16]"),
                           ("x=8", "[2{x}16]", "[2{x}16]")]:  # the empty program
        m, s, d = parse_mesh(mesh), parse_type(src), parse_type(dst)
        jobs.append({"search": plan_redistribution(m, s, d), "baseline": baseline_plan(m, s, d)})
    ok = run_plans(jobs, np=8, repeats=1)
    assert all(r.verified for res in ok for r in res.values())
    bad = run_plans(jobs, np=8, repeats=0, inject_fault=True)
    assert not any(r.verified for res in bad for r in res.values())
