"""The quotient by the reduction groups (models/reduction/symmetry.py) against the full device-level
check and simulation, which stay the oracle: on an exhaustive family of small systems, every placement and
every set of reduction axes, valid synthesized programs and invalid mutations of them get the same verdict
(failing step, rule, group, shortfalls) and the same simulated times."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from meshplan.models.core.system import System
from meshplan.models.reduction.checker import replay
from meshplan.models.reduction.hierarchy import synthesis_hierarchy
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep
from meshplan.models.reduction.semantics import COLLECTIVES
from meshplan.models.reduction.simulator import simulate
from meshplan.models.reduction.symmetry import (LocalMemo, Quotient, recheck_symmetric, replay_symmetric,
                                                 simulate_symmetric)
from meshplan.solvers.placement.enumerate import brute_force_placements
from meshplan.solvers.reduction.synthesis import synthesize

SYSTEMS = ["node=2,gpu=4", "node=4,gpu=2", "node=2,socket=2,gpu=2", "node=3,gpu=2"]


def _system(text: str) -> System:
    from meshplan.api.inputs import as_system

    return as_system(text)


def _axes_of(n: int):
    """Axis tuples of 1–3 axes (each ≥ 2) multiplying to n."""
    out = []
    for m in (1, 2, 3):
        for combo in itertools.product([d for d in range(2, n + 1) if n % d == 0], repeat=m):
            prod = 1
            for c in combo:
                prod *= c
            if prod == n:
                out.append(combo)
    return out


def _verdict_key(v):
    f = v.failure
    return (v.valid, None if f is None else (f.step, f.collective, f.group, f.rule, f.premise, f.states_before),
            v.shortfalls)


def _mutations(lp: LoweredProgram):
    """Invalid (or differently valid) neighbours: a step dropped, a step repeated, a collective swapped."""
    steps = lp.steps
    for i in range(len(steps)):
        yield LoweredProgram(steps[:i] + steps[i + 1:], lp.num_devices)
        yield LoweredProgram(steps[:i + 1] + steps[i:], lp.num_devices)
        for c in COLLECTIVES:
            if c != steps[i].collective:
                yield LoweredProgram(steps[:i] + (LoweredStep(c, steps[i].groups),) + steps[i + 1:], lp.num_devices)


@pytest.mark.parametrize("text", SYSTEMS)
def test_quotient_agrees_with_the_full_check_and_simulation(text):
    system = _system(text)
    n = system.num_devices
    memo = LocalMemo()
    checked = 0
    for axes in _axes_of(n):
        for m in brute_force_placements(system, axes):
            for r in range(1, len(axes) + 1):
                for red in itertools.combinations(range(len(axes)), r):
                    h = synthesis_hierarchy(m, red)
                    syn = synthesize(h, max_size=3, recheck="full")
                    groups = tuple(m.reduction_groups(red))
                    q = Quotient(groups, n, memo)
                    for lp in syn.lowered[:6]:
                        for prog in (lp, *list(_mutations(lp))[:8]):
                            full = replay(prog, groups)
                            assert _verdict_key(replay_symmetric(prog, q, memo.replay)) == _verdict_key(full)
                            assert recheck_symmetric(prog, q, memo) == full.valid
                            if full.valid:
                                for algo in ("ring", "tree"):
                                    a = simulate(system, prog, bytes_per_device=2**20, chunks=q.k, algo=algo)
                                    b = simulate_symmetric(system, prog, q, bytes_per_device=2**20, algo=algo,
                                                           memo=memo)
                                    assert b.time_s == pytest.approx(a.time_s, rel=1e-12)
                                    assert [s.bottleneck for s in b.steps] == [s.bottleneck for s in a.steps]
                                    assert b.bytes_sent == pytest.approx(a.bytes_sent)
                            checked += 1
    assert checked > 50


@st.composite
def _hand_programs(draw):
    """Programs whose groups need not be the same in every reduction group (or may cross them)."""
    system = _system(draw(st.sampled_from(SYSTEMS)))
    n = system.num_devices
    groups = draw(st.sampled_from([tuple((d, d + 1) for d in range(0, n, 2)),
                                   tuple(tuple(range(i, i + n // 2)) for i in (0, n // 2))]))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        perm = draw(st.permutations(range(n)))
        size = draw(st.sampled_from([2, 2, 4]))
        parts = [tuple(perm[i:i + size]) for i in range(0, n - size + 1, size)]
        keep = tuple(p for p in parts if draw(st.booleans())) or tuple(parts[:1])
        steps.append(LoweredStep(draw(st.sampled_from(COLLECTIVES)), keep))
    return system, groups, LoweredProgram(tuple(steps), n)


@settings(max_examples=150, deadline=None)
@given(_hand_programs())
def test_quotient_agrees_on_hand_written_programs(case):
    system, groups, prog = case
    q = Quotient(groups, system.num_devices)
    full = replay(prog, groups)
    assert _verdict_key(replay_symmetric(prog, q)) == _verdict_key(full)
    assert recheck_symmetric(prog, q, LocalMemo()) == full.valid
