"""The re-check's bit-array rules agree with the reference Figure 8 rules on random programs."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from meshplan.models.core.collectives import Collective
from meshplan.models.reduction.bitsets import BitContexts
from meshplan.models.reduction.semantics import COLLECTIVES, RuleViolation, apply_step
from meshplan.models.reduction.state import initial_context


@st.composite
def programs(draw):
    g = draw(st.sampled_from([2, 3, 4, 6, 8, 65]))  # 65: row masks of two words
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        perm = draw(st.permutations(range(g)))
        cuts = sorted(draw(st.sets(st.integers(1, g - 1), max_size=min(g - 1, 8))))
        parts = [perm[a:b] for a, b in zip([0, *cuts], [*cuts, g])]
        groups = tuple(tuple(p) for p in parts if draw(st.booleans()) or len(parts) == 1)
        steps.append((draw(st.sampled_from(COLLECTIVES)), groups))
    k = draw(st.sampled_from([g, 1, 2])) if g > 2 else g
    return g, k, steps


def _decode(bc: BitContexts, i: int) -> tuple:
    x = bc.states[i]
    return tuple(tuple(sum(int(x[d, r, w]) << (64 * w) for w in range(bc.words)) for r in range(bc.k))
                 for d in range(bc.g))


@settings(max_examples=300, deadline=None)
@given(programs())
def test_bits_match_reference(prog):
    g, k, steps = prog
    bc = BitContexts(g, k)
    ref = initial_context(g, k)
    cur = bc.initial()
    assert _decode(bc, cur) == ref
    for coll, groups in steps:
        try:
            ref_next = apply_step(ref, coll, groups)
        except RuleViolation:
            ref_next = None
        nxt = bc.advance(cur, Collective(coll), groups)
        assert (ref_next is None) == (nxt is None), (coll, groups)
        if ref_next is None:
            return
        assert _decode(bc, nxt) == ref_next
        ref, cur = ref_next, nxt


def test_goal_is_reached_by_one_allreduce():
    bc = BitContexts(4, 4)
    groups = ((0, 1, 2, 3),)
    assert bc.advance(bc.initial(), Collective.ALL_REDUCE, groups) == bc.goal(groups)
    assert bc.advance(bc.goal(groups), Collective.ALL_REDUCE, groups) is None  # contributions twice
