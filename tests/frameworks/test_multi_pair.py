"""Multi-pair all-to-alls (several pairs of dimensions in one collective, planned under the wire cost) inside
the frameworks: meshplan.torch.redistribute against DTensor runs in test_torch.py's launches, beside the
family; here meshplan.jax.reshard against jax.device_put (8 fake CPU devices, one process), bit for bit,
gradients too; the bytes the compiled HLO sends are the plan's."""

from __future__ import annotations

import pytest

from meshplan.api.framework_family import multi_pair_problems
from meshplan.api.framework_plan import padded_types
from meshplan.models.redistribution.mesh import Mesh
from meshplan.solvers.redistribution.plan import plan_redistribution

PROBLEMS = multi_pair_problems()


def _multi_pair(p) -> bool:
    mesh = Mesh(tuple(p.mesh))
    src, dst = padded_types(mesh, p.shape, list(p.src), list(p.dst))
    return any(getattr(s.step, "more", ()) for s in plan_redistribution(mesh, src, dst, cost="wire").steps)


def test_every_problem_plans_a_multi_pair_alltoall():
    assert len(PROBLEMS) == 8 and all(_multi_pair(p) for p in PROBLEMS)
    assert {p.devices for p in PROBLEMS} == {4, 8} and any(n % 2 for p in PROBLEMS for n in p.shape)


def test_jax_reshard_equals_device_put():
    pytest.importorskip("jax")
    from meshplan.jax.compare import compare

    problems = [p for p in PROBLEMS if all(n % 4 == 0 for n in p.shape)]
    records = compare(problems)
    assert len(records) == 7
    for p, r in zip(problems, records):
        assert r["equal"] and r["grad_equal"], str(p)
        assert r["meshplan"]["sent_bytes"] == r["plan_sent_bytes"], str(p)   # the HLO's all-to-alls
        assert len(r["meshplan"]["collectives"]) == len(r["program"]), str(p)   # one collective per step
