"""Checking lowered programs one reduction group at a time: the quotient by the reduction groups
(P2 §3.4–§3.5, Lemma B.3).

A lowered program whose every group lies inside one reduction group never mixes data of two reduction
groups, so the Figure 8 replay of the whole system is the product of independent replays, one per
reduction group: a device's state only ever holds bits of its own group (by induction over the steps),
and renaming the members of a reduction group to their positions ``0 … k−1`` (ascending device order) is
a bijection that preserves every premise (overlap, equality, emptiness) and every post-state (``⊕`` is
``|``).  Two reduction groups whose *local programs* — the steps' groups restricted to them and renamed —
are equal therefore get the same verdict.  For a program lowered from a synthesis hierarchy (d) all
reduction groups have the same local program (§3.4 repeats every point group in every replica), so the
whole check is **one** replay over ``k`` points instead of ``N`` devices: ``O(k²)`` bits per state instead
of ``O(N·k)``, and the decomposition itself is linear in ``N``.

:func:`replay_symmetric` returns the same :class:`~meshplan.models.reduction.checker.Verdict` as
:func:`~meshplan.models.reduction.checker.replay` (validity, the failing step and its rule, every
shortfall, in device numbers) except ``final``, which it leaves empty; a program with a group that
crosses reduction groups falls back to the full replay.  ``tests/models/test_symmetry.py`` checks the two
agree on exhaustive families of small systems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from meshplan.models.core.collectives import Collective
from meshplan.models.reduction.bitsets import BitContexts
from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.reduction.checker import Failure, ReplayMemo, Shortfall, Verdict, chunks_for, replay
from meshplan.models.reduction.lowering import LoweredProgram, LoweredStep
from meshplan.models.reduction.semantics import RuleViolation, apply_rule

__all__ = ["LocalStep", "Quotient", "replay_symmetric", "LocalMemo", "recheck_symmetric", "simulate_symmetric"]

Groups = tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class LocalStep:
    """A step seen from the reduction groups: its distinct local group sets (positions, root first) and,
    per reduction group, which one applies (``which is None``: all use ``patterns[0]``)."""

    collective: Collective
    patterns: tuple[Groups, ...]
    which: tuple[int, ...] | None
    #: ``patterns`` as steps over the ``k`` positions of one reduction group
    steps: tuple[LoweredStep, ...] = field(default=(), compare=False, repr=False)


class Quotient:
    """The reduction groups of a placement as classes of devices: device ``d`` is member ``pos_of[d]`` of
    reduction group ``group_of[d]`` (members in ascending device order)."""

    def __init__(self, reduction_groups: Sequence[Sequence[int]], num_devices: int,
                 memo: "LocalMemo | None" = None) -> None:
        self.members: Groups = tuple(tuple(sorted(g)) for g in reduction_groups)
        self.k = chunks_for(self.members)
        self.num_devices = num_devices
        self.group_of = [-1] * num_devices
        self.pos_of = [0] * num_devices
        for r, g in enumerate(self.members):
            for p, d in enumerate(g):
                if not 0 <= d < num_devices or self.group_of[d] != -1:
                    raise ModelError(f"device {d} is out of range or in two reduction groups")
                self.group_of[d], self.pos_of[d] = r, p
        if -1 in self.group_of:
            raise ModelError(f"device {self.group_of.index(-1)} is in no reduction group")
        self.whole: Groups = (tuple(range(self.k)),)  # the one reduction group of the positions
        self._table = None
        self._same_hosts: bool | None = None
        self._local: dict[tuple, tuple[Groups, LocalStep | None]] = {}
        # local steps are shared through ``memo`` so that placements with equal local programs share replays
        self._steps: dict[tuple, LoweredStep] = memo.local_steps if memo is not None else {}

    def table(self):
        """The members as an array of shape ``(reduction groups, k)`` (cached)."""
        if self._table is None:
            import numpy as np

            self._table = np.array(self.members, dtype=np.intp)
        return self._table

    def same_hosts(self, host) -> bool:
        """Whether every reduction group spreads over hosts (``host[d]``) as the first one does: the same
        positions share a host.  Then a tree over one group's hosts is the tree of every group."""
        if self._same_hosts is None:
            import numpy as np

            h = np.asarray(host)[self.table()].tolist()
            pattern = self._pattern(h[0])
            self._same_hosts = all(self._pattern(row) == pattern for row in h)
        return self._same_hosts

    @staticmethod
    def _pattern(row) -> tuple[int, ...]:
        seen: dict = {}
        return tuple(seen.setdefault(x, len(seen)) for x in row)

    def local(self, step: LoweredStep) -> LocalStep | None:
        """The step restricted to each reduction group, or ``None`` when a group crosses reduction groups
        (linear in the step's devices; cached per step)."""
        key = (id(step.groups), step.collective)
        hit = self._local.get(key)
        if hit is not None and hit[0] is step.groups:
            return hit[1]
        got = self._decompose(step)
        self._local[key] = (step.groups, got)  # the reference keeps the id from being reused
        return got

    def _decompose(self, step: LoweredStep) -> LocalStep | None:
        group_of, pos_of = self.group_of, self.pos_of
        per: dict[int, list[tuple[int, ...]]] = {}
        for g in step.groups:
            r = group_of[g[0]]
            for d in g:
                if group_of[d] != r:
                    return None
            per.setdefault(r, []).append(tuple(pos_of[d] for d in g))
        index: dict[Groups, int] = {}
        which = []
        for r in range(len(self.members)):
            which.append(index.setdefault(tuple(per.get(r, ())), len(index)))
        patterns = tuple(index)
        return LocalStep(step.collective, patterns, None if len(patterns) == 1 else tuple(which),
                         tuple(self._local_step(step.collective, p) for p in patterns))

    def _local_step(self, collective: Collective, pattern: Groups) -> LoweredStep:
        key = (collective, pattern)
        st = self._steps.get(key)
        if st is None:
            st = self._steps[key] = LoweredStep(collective, pattern)
        return st

    def classes(self, locals_: Sequence[LocalStep]) -> list[tuple[tuple[int, ...], list[int]]]:
        """``[(pattern index per step, reduction groups)]``: the reduction groups with equal local
        programs (one class when every step is uniform)."""
        if all(ls.which is None for ls in locals_):
            return [((0,) * len(locals_), list(range(len(self.members))))]
        out: dict[tuple[int, ...], list[int]] = {}
        for r in range(len(self.members)):
            out.setdefault(tuple(0 if ls.which is None else ls.which[r] for ls in locals_), []).append(r)
        return list(out.items())

    def local_program(self, locals_: Sequence[LocalStep], key: Sequence[int]) -> LoweredProgram:
        """The local program of the reduction groups of class ``key`` (see :meth:`classes`)."""
        return LoweredProgram(tuple(ls.steps[i] for ls, i in zip(locals_, key)), self.k)

    def globalize(self, mask: int, r: int) -> int:
        """A row mask over the positions of reduction group ``r`` as a mask over devices."""
        out, p, g = 0, 0, self.members[r]
        while mask:
            if mask & 1:
                out |= 1 << g[p]
            mask >>= 1
            p += 1
        return out


def replay_symmetric(program: LoweredProgram, quotient: Quotient, memo: ReplayMemo | None = None) -> Verdict:
    """:func:`~meshplan.models.reduction.checker.replay` by the quotient: one replay over ``k`` positions
    per class of reduction groups with equal local programs (module docstring).  ``memo`` holds the local
    replays (share one among programs of any placement).  ``final`` is left empty."""
    q = quotient
    if program.num_devices != q.num_devices:
        raise ModelError(f"the program has {program.num_devices} devices, the reduction groups {q.num_devices}")
    locals_ = [q.local(st) for st in program.steps]
    if any(ls is None for ls in locals_):
        return replay(program, q.members, q.k)
    memo = memo if memo is not None else ReplayMemo()
    whole = q.whole
    failing: list[tuple[list[int], Verdict]] = []  # classes whose replay breaks a rule
    short: list[Shortfall] = []
    for key, rs in q.classes(locals_):  # type: ignore[arg-type]
        v = replay(q.local_program(locals_, key), whole, q.k, memo=memo)  # type: ignore[arg-type]
        if v.valid:
            continue
        if v.failure is not None:
            failing.append((rs, v))
            continue
        for r in rs:
            g = q.members[r]
            short += [Shortfall(g[s.device], s.chunk, tuple(sorted(g[p] for p in s.missing)),
                                tuple(sorted(g[p] for p in s.extra))) for s in v.shortfalls]
    n = len(program.steps)
    if failing:
        return Verdict(False, n, _first_failure(q, program, failing))
    short.sort(key=lambda s: (s.device, s.chunk))
    return Verdict(not short, n, None, tuple(short))


def _first_failure(q: Quotient, program: LoweredProgram, failing: list[tuple[list[int], Verdict]]) -> Failure:
    """The failure the full replay reports: at the earliest failing step, the failing group that comes
    first in the step's group order (the full replay applies the groups in that order)."""
    step = min(v.failure.step for _, v in failing)  # type: ignore[union-attr]
    order = {g[0]: i for i, g in enumerate(program.steps[step - 1].groups)}
    best = min(((order[q.members[r][v.failure.group[0]]], r, v) for rs, v in failing  # type: ignore[union-attr]
                if v.failure.step == step for r in rs), key=lambda t: t[0])  # type: ignore[union-attr]
    return _device_failure(q, step, best[1], best[2])


def _device_failure(q: Quotient, step: int, r: int, local: Verdict) -> Failure:
    """The local failure in device numbers: the rule re-applied to the device group and its states."""
    f = local.failure
    assert f is not None
    g = q.members[r]
    group = tuple(g[p] for p in f.group)
    states = tuple(tuple(q.globalize(m, r) for m in s) for s in f.states_before)
    try:
        apply_rule(f.collective, group, states)
    except RuleViolation as err:
        return Failure(step, f.collective, err.group, err.rule, err.premise, err.detail, states)
    raise AssertionError("a rule that fails on positions holds on devices")  # the renaming is a bijection


class LocalMemo:
    """What the checks of many placements share: reference replays of local programs (``replay``),
    bit-array contexts per group size (:mod:`meshplan.models.reduction.bitsets`) and simulated step
    times (``step_times``)."""

    def __init__(self) -> None:
        self.replay = ReplayMemo()
        self._bits: dict[int, BitContexts] = {}
        self.step_times: dict[tuple, object] = {}
        self.local_steps: dict[tuple, LoweredStep] = {}
        self._wholes: dict[int, tuple[tuple[int, ...], ...]] = {}
        self._held: dict[tuple[int, int], tuple[int, ...]] = {}
        self.moves: dict[tuple, tuple] = {}

    def held(self, bits: BitContexts, state: int) -> tuple[int, ...]:
        """How many chunks each position holds in bit-array context ``state`` (cached)."""
        key = (id(bits), state)
        h = self._held.get(key)
        if h is None:
            h = self._held[key] = tuple((bits.states[state] != 0).any(axis=2).sum(axis=1).tolist())
        return h

    def whole(self, k: int) -> tuple[tuple[int, ...], ...]:
        """The one reduction group ``(0, …, k−1)`` of the positions (one object per ``k``)."""
        w = self._wholes.get(k)
        if w is None:
            w = self._wholes[k] = (tuple(range(k)),)
        return w

    def bits(self, k: int) -> BitContexts:
        """The bit-array contexts of one reduction group of ``k`` devices with ``k`` chunks."""
        b = self._bits.get(k)
        if b is None:
            b = self._bits[k] = BitContexts(k, k)
        return b


def recheck_symmetric(program: LoweredProgram, quotient: Quotient, memo: LocalMemo) -> bool:
    """Whether ``program`` is valid, by the quotient with the bit-array rules (fast; the rules the
    synthesizer's search does not use).  A group crossing reduction groups falls back to the full
    reference replay.  :func:`replay_symmetric` gives the same answer with the reference rules and the
    reasons."""
    q = quotient
    locals_ = [q.local(st) for st in program.steps]
    if any(ls is None for ls in locals_):
        return replay(program, q.members, q.k).valid
    bits = memo.bits(q.k)
    for key, _ in q.classes(locals_):  # type: ignore[arg-type]
        cur: int | None = bits.initial()
        for ls, i in zip(locals_, key):
            cur = bits.advance(cur, ls.collective, ls.steps[i].groups)  # type: ignore[union-attr,arg-type]
            if cur is None:
                return False
        if cur != bits.goal(memo.whole(q.k)):
            return False
    return True


def simulate_symmetric(system, program: LoweredProgram, quotient: Quotient, *, bytes_per_device: float,
                       algo: str = "ring", memo: LocalMemo | None = None):
    """:func:`~meshplan.models.reduction.simulator.simulate` by the quotient (P2 §5): when every step is
    the same in every reduction group, buffer sizes come from one group's positions (the bit-array
    replay) and each step's flows are built once and repeated (:func:`simulate_local_step`), so the cost is
    linear in the devices; step times are cached per (step, chunks held).  Other programs are simulated
    device by device."""
    from meshplan.models.reduction.simulator import ProgramTime, _hosts, simulate, simulate_local_step

    q = quotient
    if bytes_per_device <= 0:
        raise ModelError("bytes per device must be positive")
    memo = memo if memo is not None else LocalMemo()
    bits = memo.bits(q.k)
    chunk = bytes_per_device / q.k
    cur: int | None = bits.initial()
    out = []
    moves = memo.moves
    for st in program.steps:
        # one lookup per (context, step): its time and the next context (filled on first sight)
        key = (id(q), cur, id(st.groups), st.collective, chunk, algo)
        hit = moves.get(key)
        if hit is None or hit[0] is not st.groups:
            ls = q.local(st)
            if ls is None or ls.which is not None or (algo == "tree" and not q.same_hosts(_hosts(system))):
                return simulate(system, program, bytes_per_device=bytes_per_device, chunks=q.k, algo=algo)
            held = memo.held(bits, cur)  # type: ignore[arg-type]
            tkey = (id(st.groups), st.collective, held, chunk, algo)
            t = memo.step_times.get(tkey)
            if t is None or t[0] is not st.groups:  # type: ignore[index]
                t = memo.step_times[tkey] = (st.groups, simulate_local_step(system, q, ls, held, chunk, algo))
            nxt = bits.advance(cur, ls.collective, ls.steps[0].groups)  # type: ignore[arg-type]
            hit = moves[key] = (st.groups, t[1], nxt, q)  # type: ignore[index]  # the references pin the ids
        out.append(hit[1])
        cur = hit[2]
        if cur is None:
            raise VerificationError(f"step {len(out)}, {st.collective}: a rule fails; an invalid program has "
                                    "no simulated time")
    return ProgramTime(sum(s.time_s for s in out), tuple(out))
