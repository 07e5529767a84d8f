"""Replay of a lowered program under the Figure 8 semantics: the solver-free checker.

Every program meshplan synthesizes is replayed here before it is returned,
and ``meshplan check`` gives the verdict of :func:`replay` to users.  A
program is *valid* when every step satisfies its rule and, at the end, every
device holds in every chunk the sum over exactly its reduction group (§3.5).
Chunks: every device's data is split into ``k`` chunks, ``k`` = the size of a
reduction group (docs/semantics.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.reduction.lowering import LoweredProgram
from meshplan.models.reduction.semantics import RuleViolation, apply_step
from meshplan.models.core.bits import bits
from meshplan.models.reduction.state import Context, State, goal_context, initial_context

__all__ = ["ReplayMemo", "Failure", "Shortfall", "Verdict", "Crossing", "replay", "require_valid", "chunks_for", "first_crossing"]


@dataclass(frozen=True, slots=True)
class Failure:
    """The first step whose rule fails, with the group's states before it."""

    step: int  # 1-based
    collective: Collective
    group: tuple[int, ...]
    rule: str
    premise: str
    detail: str
    states_before: tuple[State, ...]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A device whose final chunk differs from the sum over its reduction group."""

    device: int
    chunk: int
    missing: tuple[int, ...]
    extra: tuple[int, ...]

    def __str__(self) -> str:
        parts = []
        if self.missing:
            parts.append(f"misses the contributions of devices {list(self.missing)}")
        if self.extra:
            parts.append(f"wrongly holds those of devices {list(self.extra)}")
        return f"device {self.device}, chunk {self.chunk}: " + " and ".join(parts)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The checker's verdict on one program: valid or not, and the failing step or the shortfalls."""

    valid: bool
    steps: int
    failure: Failure | None = None
    shortfalls: tuple[Shortfall, ...] = ()
    final: Context = field(default=(), repr=False)

    def reason(self) -> str:
        """One sentence a user can act on: why the program is valid or not."""
        if self.valid:
            return f"valid: {self.steps} steps reach the requested reduction"
        if self.failure is not None:
            f = self.failure
            return f"step {f.step}, {f.collective} over devices {list(f.group)}: {f.detail} ({f.rule})"
        more = f" (and {len(self.shortfalls) - 3} more)" if len(self.shortfalls) > 3 else ""
        return ("the program ends before every device holds its group's sum: "
                + "; ".join(map(str, self.shortfalls[:3])) + more)


def chunks_for(reduction_groups: Sequence[Sequence[int]]) -> int:
    """The number of chunks ``k`` of every device's data: the size of a reduction group."""
    sizes = {len(g) for g in reduction_groups}
    if len(sizes) != 1:
        raise ModelError("reduction groups must all have the same size")
    return sizes.pop()


class ReplayMemo:
    """Shares replays among many programs: each distinct (state, step) transition is computed
    once; states are interned so a step looks up a small key instead of hashing a state.
    The simulator keeps its step times here too (:func:`meshplan.models.reduction.simulator.simulate`)."""

    def __init__(self) -> None:
        self._ids: dict[Context, int] = {}
        self.states: list[Context] = []
        self.transitions: dict[tuple, int | RuleViolation] = {}
        self.step_times: dict[tuple, object] = {}
        self._starts: dict[tuple[int, int], int] = {}
        self._goals: dict[tuple[int, int, int], tuple[object, int]] = {}

    def start(self, num_devices: int, chunks: int) -> int:
        """The number of the initial state of ``num_devices`` devices with ``chunks`` chunks."""
        key = (num_devices, chunks)
        i = self._starts.get(key)
        if i is None:
            i = self._starts[key] = self.intern(initial_context(num_devices, chunks))
        return i

    def goal(self, reduction_groups: Sequence[Sequence[int]], num_devices: int, chunks: int) -> int:
        """The number of the goal state of ``reduction_groups`` (cached per tuple object)."""
        if not isinstance(reduction_groups, tuple):  # a mutable sequence could change under the cache
            return self.intern(goal_context(tuple(tuple(g) for g in reduction_groups), num_devices, chunks))
        key = (id(reduction_groups), num_devices, chunks)
        hit = self._goals.get(key)
        if hit is None or hit[0] is not reduction_groups:
            goal = goal_context(tuple(tuple(g) for g in reduction_groups), num_devices, chunks)
            hit = self._goals[key] = (reduction_groups, self.intern(goal))  # the reference pins the id
        return hit[1]

    def intern(self, ctx: Context) -> int:
        """The number of state ``ctx`` (states are numbered in order of first sight)."""
        i = self._ids.get(ctx)
        if i is None:
            i = self._ids[ctx] = len(self.states)
            self.states.append(ctx)
        return i

    def advance(self, cur: int, collective: Collective, groups: tuple[tuple[int, ...], ...]) -> int | RuleViolation:
        """The state after one step from state ``cur``, or the rule violation it raises."""
        key = (cur, collective, groups)
        nxt = self.transitions.get(key)
        if nxt is None:
            try:
                nxt = self.intern(apply_step(self.states[cur], collective, groups))
            except RuleViolation as err:
                nxt = err
            self.transitions[key] = nxt
        return nxt


def replay(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]],
           chunks: int | None = None, memo: ReplayMemo | None = None) -> Verdict:
    """Replay ``program`` from the initial state and compare with the goal state.

    Pass one :class:`ReplayMemo` as ``memo`` to share work among many
    programs (the synthesizer's programs pass through few states)."""
    k = chunks if chunks is not None else chunks_for(reduction_groups)
    n = program.num_devices
    memo = memo if memo is not None else ReplayMemo()
    cur = memo.start(n, k)
    for i, step in enumerate(program.steps, 1):
        nxt = memo.advance(cur, step.collective, step.groups)
        if isinstance(nxt, RuleViolation):
            ctx = memo.states[cur]
            return Verdict(False, len(program.steps),
                           Failure(i, step.collective, nxt.group, nxt.rule, nxt.premise, nxt.detail,
                                   tuple(ctx[d] for d in nxt.group)), final=ctx)
        cur = nxt
    ctx = memo.states[cur]
    goal_id = memo.goal(reduction_groups, n, k)
    if cur == goal_id:
        return Verdict(True, len(program.steps), None, (), final=ctx)
    goal = memo.states[goal_id]
    short = []
    for d in range(n):
        for r in range(k):
            have, want = ctx[d][r], goal[d][r]
            if have != want:
                short.append(Shortfall(d, r, tuple(bits(want & ~have)), tuple(bits(have & ~want))))
    return Verdict(not short, len(program.steps), None, tuple(short), final=ctx)


def require_valid(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]],
                  memo: ReplayMemo | None = None) -> Verdict:
    """:func:`replay`, raising :class:`VerificationError` when the program is not valid."""
    v = replay(program, reduction_groups, memo=memo)
    if not v.valid:
        raise VerificationError(f"re-check failed: {v.reason()}")
    return v


@dataclass(frozen=True, slots=True)
class Crossing:
    """The first step after which a device holds data from outside its reduction group."""

    step: int  # 1-based
    collective: Collective
    group: tuple[int, ...]
    device: int
    chunk: int
    foreign: int

    def __str__(self) -> str:
        return (f"step {self.step}, {self.collective} over devices {list(self.group)} first puts device "
                f"{self.foreign}'s data into chunk {self.chunk} of device {self.device}, which is not in "
                f"device {self.device}'s reduction group — the step reduces across a non-reduction axis "
                "(P2 Lemma B.3)")


def first_crossing(program: LoweredProgram, reduction_groups: Sequence[Sequence[int]],
                   chunks: int | None = None) -> Crossing | None:
    """Explain extra contributions: the first step that mixes data of different reduction groups.

    Replays like :func:`replay` and returns ``None`` when no step does so (or a rule fails first)."""
    k = chunks if chunks is not None else chunks_for(reduction_groups)
    n = program.num_devices
    allowed = [1 << d for d in range(n)]
    for g in reduction_groups:
        mask = sum(1 << d for d in g)
        for d in g:
            allowed[d] = mask
    ctx = initial_context(n, k)
    for i, step in enumerate(program.steps, 1):
        try:
            ctx = apply_step(ctx, step.collective, step.groups)
        except RuleViolation:
            return None
        for g in step.groups:
            for d in g:
                for r, m in enumerate(ctx[d]):
                    extra = m & ~allowed[d]
                    if extra:
                        return Crossing(i, step.collective, tuple(g), d, r, bits(extra)[0])
    return None
