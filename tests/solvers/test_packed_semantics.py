"""The synthesizer's packed rules agree with the reference Figure 8 rules on random programs."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from meshplan.models.reduction.semantics import COLLECTIVES, RuleViolation, apply_step
from meshplan.models.reduction.state import initial_context
from meshplan.solvers.reduction.packed_semantics import PackedSemantics


@st.composite
def programs(draw):
    g = draw(st.sampled_from([2, 3, 4, 6, 8]))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        perm = draw(st.permutations(range(g)))
        cuts = sorted(draw(st.sets(st.integers(1, g - 1), max_size=g - 1)))
        parts = [perm[a:b] for a, b in zip([0, *cuts], [*cuts, g])]
        groups = tuple(tuple(p) for p in parts if draw(st.booleans()) or len(parts) == 1)
        steps.append((draw(st.sampled_from(COLLECTIVES)), groups))
    return g, steps


@settings(max_examples=400, deadline=None)
@given(programs())
def test_packed_matches_reference(prog):
    g, steps = prog
    sem = PackedSemantics(g, g)
    ref = initial_context(g, g)
    packed = sem.pack(ref)
    for coll, groups in steps:
        try:
            ref_next = apply_step(ref, coll, groups)
        except RuleViolation:
            ref_next = None
        packed_next = sem.apply(packed, coll, groups)
        assert (ref_next is None) == (packed_next is None), (coll, groups)
        if ref_next is None:
            return
        assert sem.unpack(packed_next) == ref_next
        ref, packed = ref_next, packed_next


@st.composite
def wide_states(draw):
    """States on both sides of the size where packing switches to bit arrays (g·k = 2¹⁴)."""
    g = draw(st.integers(1, 200))
    k = draw(st.integers(1, 200))
    rows = draw(st.lists(st.one_of(st.just(0), st.integers(0, (1 << g) - 1)), min_size=k, max_size=k))
    return g, k, tuple(rows)


@settings(max_examples=60, deadline=None)
@given(wide_states())
def test_pack_unpack_and_occupancy_agree_with_the_bit_layout(case):
    """Chunk ``r`` of a packed state occupies bits ``r·g … r·g+g−1``, whichever conversion runs."""
    g, k, rows = case
    sem = PackedSemantics(g, k)
    x = sem.pack((rows,))[0]
    assert x == sum(m << (r * g) for r, m in enumerate(rows))
    assert sem.unpack((x,)) == (rows,)
    assert sem.occupancy(x) == sum(1 << r for r, m in enumerate(rows) if m)
