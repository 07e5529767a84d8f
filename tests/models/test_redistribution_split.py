"""A permutation split among the replicas of each tile (models/redistribution/split.py): the holders deliver
every tile (the data moved by numpy, chunk by chunk), each chunk index is one permutation, the busiest device
sends ``m/ρ`` of a tile, and the wire-cost planner uses it where it sends less."""

from __future__ import annotations

import random

import numpy as np
import pytest

from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.redistribution.lowlevel import Assignment, check_program, replay
from meshplan.models.redistribution.mesh import Mesh
from meshplan.models.redistribution.offsets import base_offsets
from meshplan.models.redistribution.sample import random_problem
from meshplan.models.redistribution.serialize import step_from_dict, step_to_dict
from meshplan.models.redistribution.split import exchange, exchange_counts, split_holders
from meshplan.models.redistribution.steps import AllPermute
from meshplan.models.redistribution.types import parse_type
from meshplan.solvers.redistribution.plan import plan_redistribution


def _tile(g: np.ndarray, offsets, local) -> np.ndarray:
    return g[tuple(slice(o, o + n) for o, n in zip(offsets, local))]


def _move(mesh, state: Assignment, step: AllPermute, g: np.ndarray) -> list[np.ndarray]:
    """Every device's tile after ``step``, built by numpy from the chunks :func:`exchange` names."""
    local = state.type.localtype
    n = int(np.prod(local))
    before = [_tile(g, o, local).reshape(-1) for o in state.offsets(mesh)]
    out = []
    for d in range(len(before)):
        _, recvs = exchange(step, d, n)
        new = before[d].copy()
        for peer, lo, hi in recvs:
            assert (d, lo, hi) in exchange(step, peer, n)[0]   # the holder sends what the receiver takes
            new[lo:hi] = before[peer][lo:hi]
        out.append(new.reshape(local))
    return out


def _split_steps(plan):
    coords0 = plan.decomposition.coords()
    states = replay(plan.mesh, coords0, plan.src, plan.ops)
    return [(states[k], s) for k, s in enumerate(plan.ops) if isinstance(s, AllPermute) and s.holders]


def test_a_replicated_shard_moved_to_another_axis_sends_half_a_tile_from_each_replica():
    # [8,{b}48] -> [8,{a}48] on a=2, b=4: the tile a device lacks is held by both devices of its a-pair
    plan = plan_redistribution(Mesh((("a", 2), ("b", 4))), parse_type("[8,12{b}48]"), parse_type("[8,24{a}48]"),
                               cost="wire")
    (state, step), = _split_steps(plan)
    assert {len(h) for h in step.holders if h} == {2} and step.moved == 4
    assert step.sent(state.type.localsize) == (48,) * 8        # every device sends half of its 96 elements
    assert plan.cost == 48 + 96    # the chunks, then the all-gather of the 96-element tile: 576 B in int32
    for d in range(8):             # as Alltoallv's arguments: one chunk of 48 to or from each peer, in place
        sc, sd, rc, rd = exchange_counts(step, d, 96)
        sends, recvs = exchange(step, d, 96)
        assert sc.sum() == sum(hi - lo for _, lo, hi in sends) and rc.sum() == (96 if step.holders[d] else 0)
        assert [(p, int(sd[p]), int(sd[p] + sc[p])) for p in range(8) if sc[p]] == list(sends)
        assert [(p, int(rd[p]), int(rd[p] + rc[p])) for p in range(8) if rc[p]] == list(recvs)
    g = np.arange(8 * 48).reshape(8, 48)
    want = base_offsets(plan.mesh, step.target, plan.decomposition.coords())
    for d, t in enumerate(_move(plan.mesh, state, step, g)):
        assert np.array_equal(t, _tile(g, want[d], step.target.localtype))


@pytest.mark.parametrize("seed", range(4))
def test_split_permutations_deliver_every_tile_and_send_no_more(seed):
    rng = random.Random(seed)
    meshes = [Mesh((("x", 2), ("y", 4))), Mesh((("x", 2), ("y", 2), ("z", 2))), Mesh((("x", 3), ("y", 4)))]
    seen = 0
    for k in range(160):
        pr = random_problem(rng, meshes[k % 3], max_rank=3, factors=(1, 2), p_replicated=0.4)
        plan = plan_redistribution(pr.mesh, pr.src, pr.dst, cost="wire")
        for state, step in _split_steps(plan):
            seen += 1
            n = state.type.localsize
            unsplit = AllPermute(step.target, step.source)
            assert sum(step.sent(n)) == sum(unsplit.sent(n)) - n * sum(    # the same total, less the tiles a
                1 for d, s in enumerate(step.source) if s != d and not step.holders[d])  # replica had already
            assert step.wire_elements(n) < unsplit.wire_elements(n)
            for k in range(max(len(h) for h in step.holders)):   # each chunk index: a permutation
                pairs = [(h[k], d) for d, h in enumerate(step.holders) if h]
                assert len({s for s, _ in pairs}) == len(pairs) == len({d for _, d in pairs})
            g = np.arange(int(np.prod(plan.src.globaltype))).reshape(plan.src.globaltype)
            want = base_offsets(plan.mesh, step.target, plan.decomposition.coords())
            for d, t in enumerate(_move(plan.mesh, state, step, g)):
                assert np.array_equal(t, _tile(g, want[d], step.target.localtype))
    assert seen >= 1


def test_the_paper_cost_never_splits_and_a_tile_held_once_is_not_split():
    mesh = Mesh((("a", 2), ("b", 4)))
    plan = plan_redistribution(mesh, parse_type("[8,12{b}48]"), parse_type("[8,24{a}48]"), cost="paper")
    assert not any(isinstance(s, AllPermute) and s.holders for s in plan.ops)
    plan = plan_redistribution(mesh, parse_type("[1{b,a}8,40]"), parse_type("[1{a,b}8,40]"), cost="wire")
    assert [s.op for s in plan.ops] == ["allpermute"]
    coords0 = plan.decomposition.coords()
    states = replay(plan.mesh, coords0, plan.src, plan.ops)
    for k, s in enumerate(plan.ops):
        if isinstance(s, AllPermute):
            assert split_holders(plan.mesh, states[k], s, coords0) is None   # no replicas: one holder each


def test_bad_holders_are_rejected_and_split_steps_round_trip_through_json():
    mesh = Mesh((("a", 2), ("b", 4)))
    plan = plan_redistribution(mesh, parse_type("[8,12{b}48]"), parse_type("[8,24{a}48]"), cost="wire")
    ops = plan.ops
    (k, step), = [(k, s) for k, s in enumerate(ops) if isinstance(s, AllPermute)]
    assert step_from_dict(step_to_dict(step)) == step
    coords0 = plan.decomposition.coords()
    check_program(plan.mesh, coords0, plan.src, plan.dst, ops)
    d = next(i for i, h in enumerate(step.holders) if h)
    wrong = next(i for i in range(8) if i not in step.holders[d])
    for holders in (step.holders[:d] + ((wrong,) + step.holders[d][1:],) + step.holders[d + 1:],  # a non-holder
                    step.holders[:d] + ((),) + step.holders[d + 1:],                               # a lacking device
                    step.holders[:d] + (step.holders[d] * 2,) + step.holders[d + 1:]):            # repeated
        bad = ops[:k] + (AllPermute(step.target, step.source, holders),) + ops[k + 1:]
        with pytest.raises(VerificationError, match="PERMUTE"):
            check_program(plan.mesh, coords0, plan.src, plan.dst, bad)
    with pytest.raises(ModelError, match="only a split"):
        exchange(AllPermute(step.target, step.source), 0, 96)
