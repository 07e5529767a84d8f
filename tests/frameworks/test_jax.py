"""meshplan.jax.reshard against jax.device_put on the generated family (8 fake CPU devices, one process),
integer data compared block by block and under jit; bytes read from the compiled HLO's collectives, peak
from the compiled memory analysis, against XLA's own resharding."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from meshplan.api.framework_family import framework_family  # noqa: E402


@pytest.mark.slow
def test_reshard_equals_device_put_on_the_family():
    from meshplan.jax.compare import compare

    problems = [p for p in framework_family() if all(
        n % max(1, _k(p, d)) == 0 for side in (p.src, p.dst) for n, d in zip(p.shape, side))]
    assert len(problems) >= 40
    records = compare(problems)
    assert len(records) == len(problems)
    for p, r in zip(problems, records):
        where = str(p)
        assert r["equal"], where
        assert r["grad_equal"], where   # jax.grad through reshard gives the weights, in the source sharding
        m, x = r["meshplan"], r["xla"]
        assert m["sent_bytes"] == r["plan_sent_bytes"], where   # the compiled HLO sends what the plan says
        assert m["sent_bytes"] <= x["sent_bytes"], where
        assert m["peak_bytes"] <= x["peak_bytes"], where
        # no program sends fewer in all than the elements devices lack (JAX's index maps): a floor under the
        # HLO reading of both sides
        assert min(m["total_sent_bytes"], x["total_sent_bytes"]) >= r["need_total_bytes"], where
        assert min(m["sent_bytes"], x["sent_bytes"]) >= r["need_busiest_bytes"], where


@pytest.mark.slow
def test_reshard_on_meshes_of_three():
    """Axes of size 3: the lowering's renamed axes (paper §6) can pair devices along no set of mesh axes, so
    the step runs as ppermute rounds (as many bytes per device as the collective); and a block replicated over
    12 devices gets its gradient back bit for bit (the reverse redistribution, not 12 copies of 1/12)."""
    from meshplan.api.framework_family import FamilyProblem
    from meshplan.jax.compare import compare

    m332, m234 = (("x", 3), ("y", 3), ("z", 2)), (("x", 2), ("y", 3), ("z", 4))
    problems = [FamilyProblem("mixed", m332, (2, 2, 8, 1, 12, 72), ((), (), (), (), ("x",), ("z",)),
                              ((), (), ("z",), (), (), ("y", "x"))),
                FamilyProblem("mixed", m332, (4, 24, 2, 4, 24), ((), ("y",), (), (), ("x", "z")),
                              ((), (), (), ("z",), ())),
                FamilyProblem("gather", m234, (48,), (("x", "y", "z"),), (("x",),))]
    records = compare(problems, devices=24)
    for p, r in zip(problems, records):
        assert r["equal"] and r["grad_equal"], str(p)
        assert r["meshplan"]["sent_bytes"] == r["plan_sent_bytes"], str(p)
        assert r["meshplan"]["total_sent_bytes"] >= r["need_total_bytes"], str(p)
        assert r["meshplan"]["sent_bytes"] >= r["need_busiest_bytes"], str(p)
    # by hand: device (i_x, i_y, i_z) holds elements 2·(i_x + 2·i_y + 6·i_z) + {0, 1} and needs the half i_x;
    # 12 devices hold 2 of their 24 (i_z < 2 if i_x = 0, i_z >= 2 if i_x = 1), 12 none: 12·22 + 12·24 = 552
    # elements lacking, 23 per device on average (int32: 4 B each)
    assert (records[2]["need_busiest_bytes"], records[2]["need_total_bytes"]) == (4 * 23, 4 * 552)
    rounds = [c for c in records[0]["meshplan"]["collectives"] if c.startswith("collective-permute")]
    assert len(rounds) >= 2, records[0]["meshplan"]["collectives"]     # the all-to-all over z as 1 round + the permute


def _k(p, axes) -> int:
    size = dict(p.mesh)
    out = 1
    for a in axes:
        out *= size[a]
    return out


def test_reshard_refuses_what_jax_cannot_express(tmp_path):
    """A size no sharding divides is JAX's error too; the adapter says so and names the parameter."""
    import subprocess
    import sys

    code = ("import os; os.environ['XLA_FLAGS']='--xla_force_host_platform_device_count=4'\n"
            "import jax, numpy as np, jax.numpy as jnp\n"
            "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "import meshplan.jax as mj\n"
            "from meshplan.models.core.errors import ModelError\n"
            "m = Mesh(np.array(jax.devices()).reshape(2, 2), ('a', 'b'))\n"
            "x = jax.device_put(jnp.zeros((8, 6), jnp.int32), NamedSharding(m, P('a', 'b')))\n"
            "try:\n    mj.plan(x, NamedSharding(m, P(None, ('a', 'b'))))\n"
            "except ModelError as e:\n    print(e.param, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)  # outside the checkout, whose meshplan/ folder would shadow the install
    assert out.stdout.startswith("sharding dimension 1 of size 6 is not divisible by 4"), out.stderr[-500:]


#: three schedules, one with two reduction axes (every program of each: bench/frameworks.py --reductions)
SCHEDULES = (("node=2,gpu=2", "2,2", "0,1"), ("node=2,gpu=2", "4", "0"), ("node=2,gpu=4", "2,4", "1"))


@pytest.mark.slow
def test_psum_equals_lax_psum_on_three_schedules():
    """The first 4 programs of every placement of each schedule (every program takes minutes of XLA
    compilation; the bench runs them all) inside shard_map over the level mesh, against lax.psum."""
    from meshplan.jax.compare import compare_psum

    records = compare_psum(SCHEDULES, limit=4)
    assert len(records) == 4 * 2 + 4 + 3 + 4
    assert [r for r in records if not r["equal"]] == []
