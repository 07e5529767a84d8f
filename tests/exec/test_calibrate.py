"""``meshplan calibrate``: microbenchmarks per level on 4 MPI ranks."""

from __future__ import annotations

import json

import pytest

from meshplan.cli import main
from meshplan.exec.reduction.calibrate import (block_groups, fit_level, group_sizes, level_groups, level_pairs,
                                               sweep_bytes)
from meshplan.models.core.collectives import COLLECTIVES
from meshplan.models.core.system import System


def test_pairs_and_groups_differ_exactly_in_one_level():
    s = System.parse("node=2,cpu=3,gpu=2")
    for j in range(3):
        for a, b in level_pairs(s.sizes, j):
            assert s.first_difference(a, b) == j
            assert [x != y for x, y in zip(s.coords(a), s.coords(b))].count(True) == 1
        groups = level_groups(s.sizes, j)
        assert sorted(d for g in groups for d in g) == list(range(12))
        assert {len(g) for g in groups} == {s.sizes[j]}
    assert len(level_pairs(s.sizes, 1)) == 4  # cpu=3: only coordinates 0 and 1 pair up


@pytest.mark.mpi
def test_calibrate_writes_a_system_file_the_simulator_reads(capsys, tmp_path):
    out = tmp_path / "here.json"
    code = main(["calibrate", "--np", "4", "--system", "node=2,gpu=2", "--bytes", "64KiB", "--iters", "2",
                 "-o", str(out), "--json"])
    printed, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out.read_text())
    assert json.loads(printed) == doc
    system = System.load(out)
    assert system.short() == "node=2,gpu=2"
    for lv in system.levels:
        (link,) = lv.links
        assert link.kind in ("switch", "nic") and link.bandwidth > 0 and link.latency >= 0
        assert {c.collective for c in lv.collectives} <= {c.value for c in COLLECTIVES}
    assert system.levels[1].links[0].kind == "switch"  # one device per gpu: nothing to share a port
    # the compute rates of the time models: the 512³ rate and the inner dimension of half of it
    assert doc["flop_rate"] > 0 and doc["gemm_half_k"] >= 0
    assert system.flop_rate == doc["flop_rate"] and system.gemm_half_k == doc["gemm_half_k"]
    cal = doc["calibration"]
    assert [lv["level"] for lv in cal["levels"]] == ["node", "gpu"]
    # per level: group size 2, all groups and one group, every collective, the three sizes of the sweep
    assert cal["sweep_bytes"] == [4096, 16384, 65536]
    assert len(cal["collectives"]) == 2 * 2 * len(COLLECTIVES) * 3
    assert {(c["active"], c["group_size"]) for c in cal["collectives"]} == {("all", 2), ("one", 2)}
    assert all(c["measured_s"] > 0 and c["simulated_s"] > 0 for c in cal["collectives"])
    # the calibrated file drives the simulator of solve placement
    assert main(["solve", "placement", "--system", str(out), "--axes", "2,2", "--reduce", "0", "--bytes", "64KiB",
                 "--max-size", "2", "--json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("argv,msg", [(["--np", "4", "--system", "node=2,gpu=4"], "has 8 devices"),
                                      (["--np", "1"], "at least 2"),
                                      (["--np", "4", "--bytes", "8"], "at least 64")])
def test_calibrate_bad_input(capsys, argv, msg):
    code = main(["calibrate", *argv])
    _, err = capsys.readouterr()
    assert code == 2 and msg in err


def test_sweep_groups_and_sizes():
    assert group_sizes(4) == [2, 4] and group_sizes(6) == [2, 3, 6] and group_sizes(1) == []
    assert block_groups((4, 2), 0, 2) == ((0, 2), (4, 6), (1, 3), (5, 7))
    assert block_groups((4, 2), 0, 4) == level_groups((4, 2), 0)
    assert sweep_bytes(16 << 20) == [1 << 20, 4 << 20, 16 << 20] and sweep_bytes(1000) == [512]


def _synthetic_sweep(shape, j, kind, per_collective):
    """Times the simulator itself predicts on a link of ``kind`` at level ``j`` with each collective's own
    bandwidth and latency: a fit must find them back exactly."""
    from meshplan.exec.reduction.calibrate import _groups, _simulated, _unit

    out = []
    for c, (bw, lat) in per_collective.items():
        sys_ = _unit(shape, j, kind, bw, lat)
        for g in group_sizes(shape.sizes[j]):
            for active in ("all", "one"):
                for nb in (1 << 16, 1 << 18, 1 << 20):
                    out.append({"collective": c, "group_size": g, "active": active, "bytes": nb,
                                "time_s": _simulated(sys_, c, _groups(shape.sizes, j, g, active), nb)})
    return out


@pytest.mark.parametrize("kind", ["nic", "switch"])
def test_fit_finds_the_kind_and_each_collectives_link(kind):
    shape = System.parse("node=4,gpu=2")
    truth = {"AllReduce": (100e6, 2e-4), "Reduce": (40e6, 1e-3), "Broadcast": (120e6, 5e-5)}
    fit = fit_level(shape, 0, _synthetic_sweep(shape, 0, kind, truth))
    assert fit["ok"] and fit["kind"] == kind
    for c, (bw, lat) in truth.items():
        got = fit["collectives"][c]
        assert got["bandwidth"] == pytest.approx(bw, rel=1e-6) and got["latency"] == pytest.approx(lat, rel=1e-6)


def test_simulator_uses_the_measured_link_of_each_collective():
    from meshplan.models.core.system import CollectiveLink, Interconnect, Level
    from meshplan.models.reduction.lowering import LoweredStep
    from meshplan.models.reduction.simulator import simulate_step
    from meshplan.models.reduction.state import initial_context

    base = System((Level("node", 2, (Interconnect("switch", 1e9, 1e-5),)), Level("gpu", 2,
                                                                                   (Interconnect("switch", 1e10, 1e-6),))))
    slow = System((Level("node", 2, (Interconnect("switch", 1e9, 1e-5),), (CollectiveLink("Reduce", 1e8, 1e-3),)),
                   base.levels[1]))
    assert System.from_dict(slow.to_dict()) == slow  # the file keeps the measured collectives
    groups = ((0, 2), (1, 3))
    ctx = initial_context(4, 2)

    def t(system, c):
        return simulate_step(system, LoweredStep(c, groups), ctx, 1 << 19).time_s

    assert t(slow, "AllReduce") == t(base, "AllReduce")  # no measured curve: the level's link
    # Reduce: a chain of 1 hop of S = 1 MiB at 1e8 B/s plus 1 round of 1 ms
    assert t(slow, "Reduce") == pytest.approx((1 << 20) / 1e8 + 1e-3)
    assert t(base, "Reduce") == pytest.approx((1 << 20) / 1e9 + 1e-5)
