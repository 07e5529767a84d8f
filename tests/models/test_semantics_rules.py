"""Property tests of the Figure 8 rules (P2 §3.2) on random device states.

Each rule is checked against an independent statement of its premises and
post-condition, and every step the rules allow is checked against the
numpy buffer model (:mod:`meshplan.models.reduction.referee`): on data whose
chunk ``r`` on device ``d`` is the sum of the inputs its state row names, the
numbers after the step are the sums the post-state names.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from meshplan.models.reduction.referee import PRIME, NotExecutable, apply_numeric
from meshplan.models.reduction.semantics import COLLECTIVES, RULES, RuleViolation, apply_rule, apply_step
from meshplan.models.core.bits import bits
from meshplan.models.reduction.state import goal_context, initial_context, rows


@st.composite
def group_states(draw, max_devices: int = 6, max_chunks: int = 4, sparse: bool = False):
    """``(n, k, group, states)``: a group (root first) of the n devices and their k-chunk states."""
    n = draw(st.integers(1, max_devices))
    k = draw(st.integers(1, max_chunks))
    group = draw(st.permutations(range(n)).map(lambda p: p[: draw(st.integers(1, n))]))
    full = (1 << n) - 1
    row = st.integers(0, full) if not sparse else st.sampled_from([0] + [1 << d for d in range(n)])
    states = [tuple(draw(row) for _ in range(k)) for _ in group]
    return n, k, tuple(group), states


@st.composite
def reducible(draw):
    """States satisfying the AllReduce premises: same non-empty rows, disjoint columns per chunk."""
    n = draw(st.integers(1, 7))
    k = draw(st.integers(1, 4))
    size = draw(st.integers(1, n))
    group = tuple(draw(st.permutations(range(n)))[:size])
    held = draw(st.sets(st.integers(0, k - 1), min_size=0, max_size=k))
    states = [[0] * k for _ in group]
    for r in held:
        owners = [draw(st.integers(0, size - 1)) for _ in range(n)]  # device e's bit goes to member owners[e]
        for e in range(n):
            if draw(st.booleans()):
                states[owners[e]][r] |= 1 << e
        for i in range(size):  # every member must hold the chunk (non-empty row)
            if not states[i][r]:
                free = [e for e in range(n) if not any(states[j][r] >> e & 1 for j in range(size))]
                assume(free)
                states[i][r] = 1 << free[0]
    return n, k, group, [tuple(s) for s in states]


def _premises_reducible(states) -> bool:
    r0 = rows(states[0])
    if any(rows(s) != r0 for s in states):
        return False
    return all(sum(bin(s[r]).count("1") for s in states) == bin(_or(states)[r]).count("1") for r in r0)


def _or(states):
    k = len(states[0])
    return tuple(_fold(s[r] for s in states) for r in range(k))


def _fold(masks):
    out = 0
    for m in masks:
        out |= m
    return out


def _subset(a, b) -> bool:
    return all(x & ~y == 0 for x, y in zip(a, b))


# -- the rules against their statements -------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(group_states())
def test_allreduce_applies_exactly_when_its_premises_hold(case):
    n, k, group, states = case
    ok = _premises_reducible(states)
    if not ok:
        with pytest.raises(RuleViolation) as err:
            apply_rule("AllReduce", group, states)
        assert err.value.rule == "R-ALLREDUCE" and err.value.group == group
        assert err.value.premise in ("all devices hold the same chunks", "each chunk's contributions are disjoint")
    else:
        post = apply_rule("AllReduce", group, states)
        assert post == [_or(states)] * len(group)


@settings(max_examples=300, deadline=None)
@given(reducible())
def test_allreduce_post_state_is_the_union_and_counts_every_contribution_once(case):
    n, k, group, states = case
    post = apply_rule("AllReduce", group, states)
    for r in range(k):
        assert bin(post[0][r]).count("1") == sum(bin(s[r]).count("1") for s in states)
    assert all(p == post[0] for p in post)


@settings(max_examples=300, deadline=None)
@given(reducible())
def test_reduce_puts_the_union_on_the_root_and_empties_the_others(case):
    n, k, group, states = case
    post = apply_rule("Reduce", group, states)
    assert post[0] == _or(states)
    assert all(p == (0,) * k for p in post[1:])


@settings(max_examples=400, deadline=None)
@given(reducible())
def test_reducescatter_partitions_the_union_in_order(case):
    n, k, group, states = case
    total = _or(states)
    held = sorted(rows(total))
    if len(held) % len(group):
        with pytest.raises(RuleViolation) as err:
            apply_rule("ReduceScatter", group, states)
        assert err.value.premise == "the chunks divide evenly among the devices"
        return
    post = apply_rule("ReduceScatter", group, states)
    b = len(held) // len(group)
    for i, p in enumerate(post):
        assert sorted(rows(p)) == held[i * b:(i + 1) * b]  # member i keeps block i, in chunk order
        for r in rows(p):
            assert p[r] == total[r]
    assert _or(post) == total  # nothing lost, nothing duplicated
    assert sum(len(rows(p)) for p in post) == len(held)


@settings(max_examples=400, deadline=None)
@given(group_states())
def test_allgather_applies_exactly_when_rows_are_disjoint_and_equally_many(case):
    n, k, group, states = case
    held = [rows(s) for s in states]
    disjoint = sum(len(h) for h in held) == len(frozenset().union(*held))
    equal = len({len(h) for h in held}) == 1
    if disjoint and equal:
        assert apply_rule("AllGather", group, states) == [_or(states)] * len(group)
    else:
        with pytest.raises(RuleViolation) as err:
            apply_rule("AllGather", group, states)
        assert err.value.rule == "R-ALLGATHER"


@settings(max_examples=400, deadline=None)
@given(group_states())
def test_broadcast_needs_information_increase(case):
    n, k, group, states = case
    root = states[0]
    below = all(_subset(s, root) for s in states[1:])
    strictly = any(s != root for s in states[1:])
    if below and strictly:
        assert apply_rule("Broadcast", group, states) == [root] * len(group)
    else:
        with pytest.raises(RuleViolation) as err:
            apply_rule("Broadcast", group, states)
        assert err.value.rule == "R-BROADCAST"
        assert err.value.premise == ("every device's data is contained in the root's" if not below
                                     else "the root holds more than some device")


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.sampled_from(COLLECTIVES), st.data())
def test_apply_step_leaves_devices_outside_the_groups_alone(n, k, coll, data):
    ctx = initial_context(n, k)
    perm = data.draw(st.permutations(range(n)))
    cut = data.draw(st.integers(0, n))
    groups = [tuple(perm[i:i + 2]) for i in range(0, cut - cut % 2, 2)]
    try:
        new = apply_step(ctx, coll, groups)
    except RuleViolation:
        return
    inside = {d for g in groups for d in g}
    assert all(new[d] == ctx[d] for d in range(n) if d not in inside)


def test_rule_names_and_messages():
    assert set(RULES) == set(COLLECTIVES)
    with pytest.raises(RuleViolation) as err:
        apply_rule("AllReduce", (0, 1), [(0b11,), (0b10,)])
    assert "chunk 0 on device 1 already contains device 1's contribution" in str(err.value)
    assert err.value.premise == "each chunk's contributions are disjoint"


def test_initial_and_goal_contexts():
    assert initial_context(3, 2) == ((1, 1), (2, 2), (4, 4))
    goal = goal_context([(0, 2), (1,)], 3, 2)
    assert goal == ((0b101, 0b101), (0b010, 0b010), (0b101, 0b101))


# -- the rules against numbers ------------------------------------------------------------------

def _buffers(states, n, k, x):
    """Buffers of the numpy model whose values are what the states say: chunk r = Σ_{e in row} x[e, r]."""
    out = []
    for s in states:
        labels = tuple(r for r in range(k) if s[r])
        vals = np.array([[sum(int(x[e, r, t]) for e in bits(s[r])) % PRIME for t in range(x.shape[2])]
                         for r in labels], dtype=np.int64).reshape(len(labels), x.shape[2])
        out.append((labels, vals))
    return out


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.one_of(reducible(), group_states(sparse=True), group_states()),
       st.sampled_from(COLLECTIVES), st.integers(0, 2**32 - 1))
def test_every_allowed_step_computes_the_sums_its_post_state_names(case, coll, seed):
    n, k, group, states = case
    try:
        post = apply_rule(coll, group, states)
    except RuleViolation:
        return
    x = np.random.default_rng(seed).integers(0, PRIME, size=(n, k, 2), dtype=np.int64)
    before = _buffers(states, n, k, x)
    try:
        after = apply_numeric(before, coll, [tuple(range(len(group)))])
    except NotExecutable as err:  # pragma: no cover - a failure of the property
        pytest.fail(f"{coll} allowed by the rules cannot run: {err.detail}")
    want = _buffers(post, n, k, x)
    for (la, va), (lw, vw) in zip(after, want):
        assert la == lw
        assert np.array_equal(va, vw)


def _onehot_buffers(states, n, k):
    """Buffers whose values are their own coefficient vectors over the inputs (device e, chunk r)."""
    out = []
    for s in states:
        labels = tuple(r for r in range(k) if s[r])
        vals = np.zeros((len(labels), n * k), dtype=np.int64)
        for i, r in enumerate(labels):
            for e in bits(s[r]):
                vals[i, e * k + r] = 1
        out.append((labels, vals))
    return out


def _damaged(bufs, k) -> bool:
    for labels, vals in bufs:
        if len(set(labels)) != len(labels):
            return True
        for i, r in enumerate(labels):
            coef = vals[i].reshape(-1, k)
            if coef.max(initial=0) > 1 or np.delete(coef, r, axis=1).any():
                return True
    return False


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.one_of(reducible(), group_states(sparse=True), group_states()),
       st.sampled_from([c for c in COLLECTIVES if c != "Broadcast"]))
def test_a_premise_fails_exactly_when_the_step_damages_data(case, coll):
    """AllReduce, ReduceScatter, AllGather, Reduce: on states that are correct partial sums, the rule
    refuses the step iff the buffer model's result counts a contribution twice, mixes chunks, holds a
    chunk twice, or cannot run. Broadcast only copies: its premises are an optimization (docs/check.md)."""
    n, k, group, states = case
    try:
        apply_rule(coll, group, states)
        refused = False
    except RuleViolation:
        refused = True
    try:
        after = apply_numeric(_onehot_buffers(states, n, k), coll, [tuple(range(len(group)))])
        damaged = _damaged(after, k)
    except NotExecutable:
        damaged = True
    assert refused == damaged
