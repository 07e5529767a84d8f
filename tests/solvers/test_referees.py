"""The three referees of ``meshplan check`` agree (docs/check.md, "three referees").

* the replay of P2 Figure 8's rules (:func:`meshplan.models.reduction.checker.replay`),
* the z3 proof by symbolic execution (:func:`meshplan.solvers.reduction.proof.prove`),
* numpy on random integers (:func:`meshplan.models.reduction.referee.run_numeric`),

on random hierarchies and random programs (valid and invalid: synthesized programs, their mutants,
random DSL instructions, random explicit groups), ≥ 10,000 distinct programs in all, and on every
program ``solve placement`` synthesizes for the paper's configurations.  "Agree" is
:func:`meshplan.solvers.reduction.proof.referees_agree`.
"""

from __future__ import annotations

import random
from collections import Counter
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshplan.models.placement.matrix import ParallelismMatrix
from meshplan.models.reduction.checker import chunks_for, replay
from meshplan.models.reduction.dsl import instructions
from meshplan.models.reduction.hierarchy import synthesis_hierarchy
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep, lower, lower_instruction
from meshplan.models.reduction.referee import first_damage, run_numeric
from meshplan.models.reduction.semantics import COLLECTIVES
from meshplan.models.core.system import System
from meshplan.solvers.placement.enumerate import brute_force_placements, enumerate_placements
from meshplan.solvers.reduction.proof import prove, referees_agree
from meshplan.solvers.reduction.synthesis import synthesize

# -- random hierarchies -------------------------------------------------------------------------


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in _factorizations(n // d, parts - 1)]


@lru_cache(maxsize=None)
def _placements(sizes: tuple[int, ...], axes: tuple[int, ...]):
    system = System.from_short(",".join(f"l{j}={s}" for j, s in enumerate(sizes)))
    return system, tuple(brute_force_placements(system, axes))


@lru_cache(maxsize=None)
def _synthesized(h) -> tuple[LoweredProgram, ...]:
    return synthesize(h, max_size=4, recheck=False).lowered


@lru_cache(maxsize=None)
def _instructions(h):
    return tuple(instructions(h))


def random_placement(rng: random.Random, max_devices: int = 8):
    """``(matrix, reduce, hierarchy (d))`` on a random system of ≤ ``max_devices`` devices."""
    while True:
        sizes = tuple(rng.choice((1, 2, 2, 2, 3, 4)) for _ in range(rng.randint(1, 3)))
        n = 1
        for s in sizes:
            n *= s
        if 2 <= n <= max_devices:
            break
    axes = rng.choice(_factorizations(n, rng.randint(1, 3)))
    system, mats = _placements(sizes, axes)
    m = rng.choice(mats)
    reduce = tuple(sorted(rng.sample(range(len(axes)), rng.randint(1, len(axes)))))
    return m, reduce, synthesis_hierarchy(m, reduce)


# -- random programs ----------------------------------------------------------------------------


def _random_groups(rng: random.Random, devices, reduction_groups) -> tuple[tuple[int, ...], ...]:
    """Disjoint groups in random member order: inside reduction groups (mostly) or anywhere."""
    if rng.random() < 0.6:
        out = []
        for g in reduction_groups:
            members = list(g)
            rng.shuffle(members)
            while members:
                size = rng.randint(1, len(members))
                if rng.random() < 0.8:
                    out.append(tuple(members[:size]))
                members = members[size:]
        return tuple(out) or (tuple(reduction_groups[0]),)
    pool = list(devices)
    rng.shuffle(pool)
    pool = pool[:rng.randint(1, len(pool))]
    out = []
    while pool:
        size = rng.randint(1, min(4, len(pool)))
        out.append(tuple(pool[:size]))
        pool = pool[size:]
    return tuple(out)


def _random_step(rng: random.Random, h, devices, groups) -> LoweredStep:
    ins = _instructions(h)
    if ins and rng.random() < 0.5:
        return lower_instruction(h, rng.choice(ins))
    return LoweredStep(rng.choice(COLLECTIVES), _random_groups(rng, devices, groups))


def _mutate(rng: random.Random, steps: list[LoweredStep], h, devices, groups) -> list[LoweredStep]:
    steps = list(steps)
    op = rng.choice(("drop", "duplicate", "swap", "collective", "insert", "replace", "root", "truncate",
                     "drop_group", "waste"))
    i = rng.randrange(len(steps)) if steps else 0
    if op == "drop" and steps:
        del steps[i]
    elif op == "duplicate" and steps:
        steps.insert(i, steps[i])
    elif op == "swap" and len(steps) > 1:
        j = rng.randrange(len(steps))
        steps[i], steps[j] = steps[j], steps[i]
    elif op == "collective" and steps:
        steps[i] = LoweredStep(rng.choice(COLLECTIVES), steps[i].groups)
    elif op == "replace" and steps:
        steps[i] = _random_step(rng, h, devices, groups)
    elif op == "root" and steps:  # a different member order: another root, another scatter order
        gs = [list(g) for g in steps[i].groups]
        for g in gs:
            rng.shuffle(g)
        steps[i] = LoweredStep(steps[i].collective, tuple(tuple(g) for g in gs))
    elif op == "truncate" and steps:
        steps = steps[:i]
    elif op == "waste":  # a collective over part of a group, then a Broadcast from an untouched member
        g = list(rng.choice(groups))
        rng.shuffle(g)
        if len(g) >= 3:
            cut = rng.randint(2, len(g) - 1)
            i = len(steps) if rng.random() < 0.7 else i
            steps.insert(i, LoweredStep(rng.choice(COLLECTIVES), (tuple(g[:cut]),)))
            steps.insert(i + 1, LoweredStep("Broadcast", ((g[cut], *g[:cut]),)))
    elif op == "drop_group" and steps and len(steps[i].groups) > 1:
        gs = list(steps[i].groups)
        del gs[rng.randrange(len(gs))]
        steps[i] = LoweredStep(steps[i].collective, tuple(gs))
    else:
        steps.insert(i, _random_step(rng, h, devices, groups))
    return steps


def random_program(rng: random.Random, h) -> tuple[str, LoweredProgram]:
    m = h.matrix
    n = m.system.num_devices
    groups = m.reduction_groups(h.reduce)
    devices = range(n)
    synth = _synthesized(h)
    kind = rng.choices(("synthesized", "mutant", "dsl", "groups"), weights=(2, 5, 3, 2))[0]
    if kind == "synthesized" and synth:
        return kind, rng.choice(synth)
    if kind == "mutant" and synth:
        steps = list(rng.choice(synth).steps)
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            steps = _mutate(rng, steps, h, devices, groups)
        return kind, LoweredProgram(tuple(steps), n)
    if kind == "dsl" and _instructions(h):
        return "dsl", lower(h, [rng.choice(_instructions(h)) for _ in range(rng.randint(1, 5))])
    steps = tuple(_random_step(rng, h, devices, groups) for _ in range(rng.randint(1, 4)))
    return "groups", LoweredProgram(steps, n)


# -- the referees -------------------------------------------------------------------------------


def judge(lowered: LoweredProgram, groups) -> tuple[str, bool, str]:
    """``(category, agree, note)`` for one program."""
    k = chunks_for(groups)
    verdict = replay(lowered, groups, k)
    numeric = run_numeric(lowered, groups, k)
    proof = prove(lowered, groups, k, counterexample=False)
    assert proof.status != "unknown"
    agree, note = referees_agree(verdict, numeric.correct, proof.status, first_damage(lowered, k))
    if verdict.valid:
        cat = "valid"
    elif verdict.failure is not None:
        cat = verdict.failure.rule + (" (numbers right)" if numeric.correct else "")
    else:
        cat = "falls short"
    if not numeric.correct and numeric.step is not None:
        cat += ", not executable"
    return cat, agree, note


def _describe(m, reduce, lowered: LoweredProgram) -> str:
    steps = "; ".join(f"{s.collective} {[list(g) for g in s.groups]}" for s in lowered.steps)
    return f"{m.system.short()} matrix {m} reduce {list(reduce)}: {steps}"


@pytest.mark.slow
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example, HealthCheck.data_too_large])
@given(st.randoms(use_true_random=False))
def test_referees_agree_on_hypothesis_programs(rng):
    m, reduce, h = random_placement(rng, max_devices=16)
    groups = m.reduction_groups(reduce)
    for _ in range(4):
        _, lowered = random_program(rng, h)
        cat, agree, note = judge(lowered, groups)
        assert agree, f"{note}: {_describe(m, reduce, lowered)}"


@pytest.mark.slow
def test_referees_agree_on_10000_distinct_random_programs():
    rng = random.Random(20261121)
    seen: set = set()
    stats: Counter = Counter()
    kinds: Counter = Counter()
    disagreements = []
    while len(seen) < 10_000:
        m, reduce, h = random_placement(rng)
        groups = m.reduction_groups(reduce)
        for _ in range(12):
            kind, lowered = random_program(rng, h)
            key = (m.system.sizes, m.rows, reduce, lowered.key)
            if key in seen:
                continue
            seen.add(key)
            kinds[kind] += 1
            cat, agree, note = judge(lowered, groups)
            stats[cat] += 1
            if not agree:
                disagreements.append(f"{note}: {_describe(m, reduce, lowered)}")
    print(f"\n{len(seen)} distinct programs; by origin {dict(kinds)}; verdicts {dict(sorted(stats.items()))}")
    assert any(c.endswith("(numbers right)") and not c.startswith("R-BROADCAST") for c in stats), \
        "no program whose damaged data is discarded later was generated"
    assert not disagreements, f"{len(disagreements)} disagreements, e.g. " + "; ".join(disagreements[:3])
    assert len(seen) >= 10_000
    # both kinds of verdict and every rule are exercised
    assert stats["valid"] >= 1000 and sum(stats.values()) - stats["valid"] >= 3000
    for rule in ("R-ALLREDUCE", "R-REDUCESCATTER", "R-ALLGATHER", "R-REDUCE", "R-BROADCAST", "falls short"):
        assert any(c.startswith(rule) for c in stats), rule


# -- every program solve placement synthesizes for the paper's configurations --------------------

PAPER = [("a100-2x16", (2, 16), (0,)), ("a100-2x16", (2, 16), (1,)), ("a100-4x16", (4, 16), (0,)),
         ("a100-4x16", (4, 16), (1,)), ("v100-2x8", (2, 8), (0,)), ("v100-2x8", (2, 8), (1,)),
         ("v100-4x8", (4, 8), (0,)), ("v100-4x8", (4, 8), (1,)), ("v100-2x8", (2, 2, 4), (0, 2)),
         ("rack=1,server=2,cpu=2,gpu=4", (4, 4), (1,)), ("rack=1,server=2,cpu=2,gpu=4", (4, 4), (0,))]


@pytest.mark.parametrize("system,axes,reduce",
                         [pytest.param(*p, marks=pytest.mark.slow) if p[0] == "a100-4x16" and p[2] == (1,) else p
                          for p in PAPER],  # the 64-device case with the most programs: ~30 s on 2 cores
                         ids=[f"{s}-{a}-{r}" for s, a, r in PAPER])
def test_every_synthesized_program_of_the_paper_configurations_is_proved(system, axes, reduce):
    """`solve placement`'s defaults: every placement, DSL `full`, programs up to size 5."""
    s = System.parse(system)
    count = 0
    for m in enumerate_placements(s, axes):
        h = synthesis_hierarchy(m, reduce)
        groups = m.reduction_groups(reduce)
        k = chunks_for(groups)
        for lowered in synthesize(h, max_size=5).lowered:
            assert replay(lowered, groups, k).valid
            assert run_numeric(lowered, groups, k).correct, _describe(m, reduce, lowered)
            assert first_damage(lowered, k) is None
            assert prove(lowered, groups, k, counterexample=False).proved, _describe(m, reduce, lowered)
            count += 1
    assert count >= 6


def test_figure_2d_placement_is_among_the_random_ones():
    """The generator reaches the paper's running example shape (4 levels are reached via size-1 levels)."""
    m = ParallelismMatrix.of(System.parse("rack=1,server=2,cpu=2,gpu=4"), [[1, 1, 2, 2], [1, 2, 1, 2]], (4, 4))
    h = synthesis_hierarchy(m, [1])
    kinds = Counter(random_program(random.Random(i), h)[0] for i in range(200))
    assert set(kinds) == {"synthesized", "mutant", "dsl", "groups"}
