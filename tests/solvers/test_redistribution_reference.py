"""Cross-check of the search against the exhaustive reference (Theorem 6.7) and the baseline."""

from __future__ import annotations

import random

import pytest

from meshplan.models.redistribution.decompose import decompose
from meshplan.models.redistribution.mesh import parse_mesh
from meshplan.models.redistribution.sample import random_mesh, random_problem
from meshplan.models.redistribution.types import parse_type
from meshplan.solvers.redistribution.baseline import baseline_plan
from meshplan.solvers.redistribution.exhaustive import exhaustive_optimum
from meshplan.solvers.redistribution.plan import plan_redistribution

N_PROBLEMS = 2000


def test_search_agrees_with_exhaustive_reference_on_2000_problems():
    """On every problem (≤ 16 devices, ≤ 3 dims): height ≤ max(localsize(src), localsize(dst)),
    cost ≤ opt + localsize(dst) (Thm 6.7), and the weak path is no dearer than the optimum (Lemma 6.5)."""
    rng = random.Random(20240605)
    stats = {"permute": 0, "opt_attained": 0}
    for k in range(N_PROBLEMS):
        pr = random_problem(rng, random_mesh(rng, max_devices=16), max_rank=3)
        p = plan_redistribution(pr.mesh, pr.src, pr.dst)
        opt = exhaustive_optimum(p.mesh, p.src, p.dst)
        where = f"problem {k}: {pr.as_dict()}"
        assert p.height <= p.bound, where
        assert p.cost <= opt + p.dst.localsize, where
        assert p.weak_cost <= opt, where
        permutes = [i for i, s in enumerate(p.steps) if s.step.op == "allpermute"]
        assert len(permutes) <= 1, where
        # the single permutation is last, or only followed by allgathers (§7.3 first optimisation)
        if permutes:
            assert all(s.step.op == "allgather" for s in p.steps[permutes[0] + 1:]), where
        stats["permute"] += bool(permutes)
        stats["opt_attained"] += p.cost <= opt
    # in practice the lowering attains the strict optimum (0 misses on this seed when written)
    assert stats["opt_attained"] >= 0.99 * N_PROBLEMS


def test_exhaustive_reference_examples():
    dec = decompose(parse_mesh("a=8"))
    assert exhaustive_optimum(dec.prime, dec.type(parse_type("[1{a}8,8]")), dec.type(parse_type("[8,1{a}8]"))) == 8
    dec = decompose(parse_mesh("x=4,y=2"))
    src, dst = dec.type(parse_type("[16{y}32,16,16{x}64]")), dec.type(parse_type("[32,2{x,y}16,64]"))
    assert exhaustive_optimum(dec.prime, src, dst) == 2 * 4096


def test_baseline_patterns():
    m = parse_mesh("x=4,y=4")
    b = baseline_plan(m, parse_type("[32{x}128]"), parse_type("[32{y}128]"))
    assert [s.step.op for s in b.steps] == ["allpermute"]
    b = baseline_plan(m, parse_type("[32{x,y}512,128]"), parse_type("[512,8{x,y}128]"))
    assert [s.step.op for s in b.steps] == ["alltoall"]
    b = baseline_plan(m, parse_type("[128{x}512,128]"), parse_type("[512,32{x}128]"))
    assert [s.step.op for s in b.steps] == ["alltoall"] and b.height == b.bound
    # the pattern reported against XLA: full rematerialisation
    b = baseline_plan(parse_mesh("x=4,y=2"), parse_type("[16{y}32,16,16{x}64]"), parse_type("[32,2{x,y}16,64]"))
    assert [s.step.op for s in b.steps] == ["allgather", "allgather", "dynslice"]
    assert b.height == 32 * 16 * 64


def test_baseline_is_never_cheaper_in_height_and_always_checks():
    rng = random.Random(7)
    for _ in range(300):
        pr = random_problem(rng, random_mesh(rng, max_devices=32), max_rank=4)
        s = plan_redistribution(pr.mesh, pr.src, pr.dst)
        b = baseline_plan(pr.mesh, pr.src, pr.dst)  # replayed by the checker inside
        assert s.height <= b.height or b.height <= s.bound
        assert s.height <= s.bound


@pytest.mark.parametrize("mesh", ["x=2,y=2,z=2", "x=4,y=4,z=2", "x=2,y=3,z=4"])
def test_larger_meshes_stay_within_bound(mesh):
    rng = random.Random(mesh)
    m = parse_mesh(mesh)
    for _ in range(40):
        pr = random_problem(rng, m, max_rank=6)
        p = plan_redistribution(pr.mesh, pr.src, pr.dst)
        assert p.height <= p.bound


def test_six_dimensional_problems_on_a_2x2x2_mesh_against_the_reference():
    """The benchmark's shape (3 axes, up to 6-D) on 8 devices, where the reference stays small."""
    rng = random.Random(99)
    mesh = parse_mesh("x=2,y=2,z=2")
    at_opt = 0
    for _ in range(80):
        pr = random_problem(rng, mesh, max_rank=6, p_replicated=1 / 3)
        p = plan_redistribution(pr.mesh, pr.src, pr.dst)
        opt = exhaustive_optimum(p.mesh, p.src, p.dst, max_rank=6)
        assert p.height <= p.bound
        assert p.weak_cost <= opt
        assert p.cost <= opt + p.dst.localsize
        at_opt += p.cost <= opt
    assert at_opt >= 70
