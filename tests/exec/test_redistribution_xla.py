"""Real XLA as the redistribution yardstick: the HLO reader and the comparison on small problems.

The text tests need nothing; the others compile reshardings with jax on 8 fake CPU devices (one
subprocess for all of them) and read the collectives of the compiled HLO.
"""

from __future__ import annotations

import pytest

from meshplan.exec.redistribution.xla import jax_available, partition_spec, read_hlo, xla_reports
from meshplan.models.redistribution.steps import AllGather
from meshplan.models.redistribution.decompose import decompose
from meshplan.models.redistribution.lowlevel import Assignment, groups
from meshplan.models.redistribution.mesh import parse_mesh
from meshplan.models.redistribution.types import parse_type
from meshplan.solvers.redistribution.baseline import baseline_plan
from meshplan.solvers.redistribution.plan import plan_redistribution

_HLO = """HloModule m, num_partitions=8

%fused (p: f32[16,32], t: s32[8], i: u32[]) -> f32[2,32] {
  %p = f32[16,32]{1,0} parameter(0)
  %t = s32[8]{0} parameter(1)
  %i = u32[] parameter(2)
  %ds.1 = s32[1]{0} dynamic-slice(%t, %i), dynamic_slice_sizes={1}
  %c = s32[] constant(0)
  ROOT %ds.2 = f32[2,32]{1,0} dynamic-slice(%p, %c, %c), dynamic_slice_sizes={2,32}
}

ENTRY %main (param: f32[4,16]) -> f32[8,8] {
  %param = f32[4,16]{1,0} parameter(0)
  %ag = f32[8,16]{1,0} all-gather(%param), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
  %ag.2 = f32[32,16]{1,0} all-gather(%ag), channel_id=2, replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}
  %a2a = (f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}) all-to-all(%param, %param), channel_id=3, replica_groups=mesh['axis_0'=2,'axis_1'=4], device_ids=([2,2,2]T(0,2,1)) {'axis_1':(2)2}
  %gte = f32[4,1,8]{2,1,0} get-tuple-element(%a2a), index=0
  %ar = f32[8,8]{1,0} all-reduce(%gte), replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0'}, to_apply=%sum
  ROOT %cp = f32[8,8]{1,0} collective-permute(%ar), channel_id=4, source_target_pairs={{0,0},{1,4},{4,1}}
}
"""


def test_reader_on_every_replica_group_spelling():
    rep = read_hlo(_HLO)
    ops = [c.op for c in rep.collectives]
    assert ops == ["dynamic-slice", "all-gather", "all-gather", "all-to-all", "all-reduce", "collective-permute"]
    ds, ag, ag2, a2a, ar, cp = rep.collectives
    assert (ds.operand, ds.result, ds.cost) == (512, 64, 0)      # the s32 index lookup is not data
    assert ag.groups == ((0, 1), (2, 3), (4, 5), (6, 7)) and ag.dims == (0,)
    assert ag2.groups == ((0, 2, 4, 6), (1, 3, 5, 7))                        # iota [2,4]<=[4,2]T(1,0)
    # mesh axes: devices [[0,2,1,3],[4,6,5,7]], groups along the sub-axis (2)2 of axis_1
    assert a2a.groups == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert ar.groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert cp.groups == ((0, 0), (1, 4), (4, 1)) and cp.moved == 2
    # Fig. 11: all-gather = result, all-to-all = operand (both tuple halves), permute = operand;
    # all-reduce = reduce-scatter + all-gather
    assert (ag.cost, ag2.cost, a2a.cost, ar.cost, cp.cost) == (128, 512, 128, 2 * 32, 64)
    assert rep.cost == 128 + 512 + 128 + 64 + 64
    assert (rep.input, rep.output, rep.height) == (64, 64, 512)


def test_bytes_on_the_wire_are_counted_per_device():
    rep = read_hlo(_HLO)
    # every device: all-gather 64·1, all-gather 128·3, all-to-all 128 − 128/2, all-reduce 2·(32 − 32/2);
    # the collective-permute moves 64 elements from device 1 and from device 4 only
    base = 64 + 384 + 64 + 32
    assert rep.partitions == 8
    assert rep.sent.tolist() == [base, base + 64, base, base, base + 64, base, base, base]
    assert (rep.wire, rep.total) == (base + 64, 8 * base + 128)


_TWO_PERMUTES = """HloModule m, num_partitions=4

ENTRY %main (p: f32[10]) -> f32[10] {
  %p = f32[10]{0} parameter(0)
  %cp.1 = f32[10]{0} collective-permute(%p), channel_id=1, source_target_pairs={{0,1},{1,0},{2,2},{3,3}}
  %cp.2 = f32[10]{0} collective-permute(%cp.1), channel_id=2, source_target_pairs={{2,3},{3,2}}
  %ag = f32[20]{0} all-gather(%cp.2), channel_id=3, replica_groups={}, dimensions={0}
  ROOT %ds = f32[10]{0} slice(%ag), slice={[0:10]}
}
"""


def test_the_busiest_device_is_one_device_over_the_whole_program():
    rep = read_hlo(_TWO_PERMUTES)
    # the two permutes move disjoint devices: each device sends 10 once, not 10 + 10; replica_groups={}
    # is one group of all 4 partitions (each device sends its 10 elements to the 3 others)
    assert [c.wire for c in rep.collectives] == [10, 10, 30]
    assert rep.sent.tolist() == [40, 40, 40, 40]
    assert (rep.wire, rep.total) == (40, 160)


def test_partition_spec_lists_axes_major_first():
    assert partition_spec(parse_type("[2{x,y}16,32,4{z}8]")) == [["y", "x"], None, ["z"]]


needs_jax = pytest.mark.skipif(not jax_available(), reason="jax is not installed (it is in the test extra)")

MESH = "x=4,y=2"
#: (src, dst, expected XLA collectives)
PROBLEMS = [
    ("[4{x}16,32]", "[16,32]", ["all-gather"]),
    ("[2{x,y}16,32]", "[2{y,x}16,32]", ["collective-permute"]),
    ("[16,32]", "[2{y,x}16,32]", []),
    ("[4{x}16,32]", "[16,8{x}32]", ["all-to-all"]),
    ("[4{x}16,16{y}32]", "[8{y}16,8{x}32]", ["all-to-all", "collective-permute"]),
    ("[16{y}32,16,16{x}64]", "[32,2{x,y}16,64]", ["all-gather", "all-gather"]),
]


@pytest.fixture(scope="module")
def compiled():
    m = parse_mesh(MESH)
    probs = [(m, parse_type(s), parse_type(d)) for s, d, _ in PROBLEMS]
    return probs, xla_reports(probs)


@needs_jax
def test_reader_finds_the_expected_collectives(compiled):
    probs, reps = compiled
    for (src, dst, want), rep in zip(PROBLEMS, reps):
        assert list(rep.ops()) == want, (src, dst, [str(c) for c in rep.collectives])
        for c in rep.communication:                          # groups partition the 8 devices
            members = sorted(d for g in c.groups for d in (g[1:] if c.op == "collective-permute" else g))
            assert members == list(range(8)), (src, dst, str(c))
    # a resharding to replicated only slices: no data moves
    assert reps[2].cost == 0 and [c.op for c in reps[2].collectives] == ["dynamic-slice"]
    # the all-gather's device groups are meshplan's groups for gathering x (devices = jax.devices() row-major)
    m, src, _ = probs[0]
    dec = decompose(m)
    color, _, _ = groups(dec.prime, Assignment(dec.type(src), dec.coords()), AllGather(0, dec.sub("x")))
    ours = {tuple(d for d in range(8) if color[d] == c) for c in set(color.tolist())}
    assert set(reps[0].collectives[0].groups) == ours == {(0, 2, 4, 6), (1, 3, 5, 7)}
    # full rematerialisation: XLA holds the whole 32x16x64 array
    assert reps[5].height == 32 * 16 * 64 and reps[5].cost == 4 * 4096 + 8 * 4096


@needs_jax
def test_meshplan_is_never_costlier_than_xla_and_the_baseline_matches_it_here(compiled):
    probs, reps = compiled
    for (m, src, dst), rep in zip(probs, reps):
        s = plan_redistribution(m, src, dst)
        b = baseline_plan(m, src, dst)
        assert s.cost <= rep.cost, (str(src), str(dst), s.cost, rep.cost)
        assert s.height <= max(rep.height, s.bound)
        assert b.cost == rep.cost, (str(src), str(dst), b.cost, rep.cost, [str(x.step) for x in b.steps])
        assert b.height == rep.height, (str(src), str(dst), b.height, rep.height)
