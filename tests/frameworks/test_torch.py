"""meshplan.torch.redistribute against DTensor's own redistribute on the generated family (4 and 8 gloo
processes, one launch each, with the multi-pair problems of test_multi_pair.py), integer data, compared bit for bit on every rank; the bytes sent are read by
intercepting torch's functional collectives (CollectiveCounter)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from meshplan.api.framework_family import KINDS, framework_family, multi_pair_problems  # noqa: E402

FAMILY = framework_family()
MULTI_PAIR = multi_pair_problems()


def test_the_family_covers_the_issue():
    assert len(FAMILY) >= 40
    assert {len(p.shape) for p in FAMILY} == {2, 3}
    assert {p.devices for p in FAMILY} == {4, 8}
    assert {len(p.mesh) for p in FAMILY} == {2, 3}
    assert {p.kind for p in FAMILY} == set(KINDS)
    assert any(n % 8 for p in FAMILY for n in p.shape)                      # non-dividing sizes
    assert any(len(d) > 1 for p in FAMILY for d in p.src + p.dst)            # several axes on one dim


#: three schedules (one with two reduction axes): every program of each runs by meshplan.torch.all_reduce
SCHEDULES = {4: (("node=2,gpu=2", "2,2", "0,1"), ("node=2,gpu=2", "4", "0")), 8: (("node=2,gpu=4", "2,4", "1"),)}
PROGRAMS = {4: 366, 8: 125}


@pytest.fixture(scope="module", params=[4, 8])
def launch(request):
    """One launch of ``nprocs`` gloo processes per process count: the family's problems and the multi-pair
    problems against DTensor, then every program of the schedules against dist.all_reduce over the reduction
    group."""
    from meshplan.torch.compare import compare

    nprocs = request.param
    problems = [p for p in FAMILY if p.devices == nprocs]
    pairs = [p for p in MULTI_PAIR if p.devices == nprocs]
    records, reductions = compare(problems + pairs, nprocs, ways=("meshplan", "dtensor"),
                                  reductions=SCHEDULES[nprocs], with_reductions=True)
    assert len(records) == len(problems) + len(pairs)
    return nprocs, problems, records[:len(problems)], pairs, records[len(problems):], reductions


@pytest.mark.mpi
@pytest.mark.slow
def test_redistribute_and_all_reduce_equal_the_framework(launch):
    nprocs, problems, records, _, _, reductions = launch
    assert len(reductions) == PROGRAMS[nprocs]
    assert [r for r in reductions if not r["equal"]] == []
    assert len(records) == len(problems)
    for p, r in zip(problems, records):
        where = str(p)
        assert r["equal"], where   # every rank: meshplan == DTensor == the tile cut from the global array
        assert r["grad_equal"], where   # the gradient flows back like DTensor's (the reverse plan)
        m, d = r["meshplan"], r["dtensor"]
        if all(n % 8 == 0 for n in p.shape):   # no padding: the plan's byte figures are what torch sent
            assert m["sent_bytes"] == r["plan_sent_bytes"], where
            assert m["peak_bytes"] <= r["plan_peak_bytes"], where
        assert m["sent_bytes"] <= d["sent_bytes"], where
        assert m["peak_bytes"] <= d["peak_bytes"], where
    if nprocs == 8:   # a permutation split among the replicas of each tile: half a tile from each of 2 holders
        (r,) = [r for p, r in zip(problems, records) if str(p) == "[8,{b}48] -> [8,{a}48] on a=2,b=4"]
        assert r["meshplan"]["sent_bytes"] == 1152 < 1536   # 48 of a tile's 96 int64 (384 B), then its 768 B all-gather


@pytest.mark.mpi
@pytest.mark.slow
def test_multi_pair_redistribute_equals_dtensor(launch):
    """Multi-pair all-to-alls (several pairs of dimensions in one collective, planned under the wire cost):
    bit for bit and gradients on every rank; on 8 processes the bytes torch sent are the plan's and never
    more than DTensor's, its peak never higher; on 4 the sizes the mesh does not divide are padded."""
    nprocs, _, _, pairs, records, _ = launch
    assert len(records) == len(pairs) == {8: 5, 4: 3}[nprocs]
    for p, r in zip(pairs, records):
        assert r["equal"] and r["grad_equal"], str(p)
        if nprocs == 8:
            assert r["meshplan"]["sent_bytes"] == r["plan_sent_bytes"] <= r["dtensor"]["sent_bytes"], str(p)
            assert r["meshplan"]["peak_bytes"] <= r["dtensor"]["peak_bytes"], str(p)
