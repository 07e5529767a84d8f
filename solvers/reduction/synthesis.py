"""Syntax-guided synthesis of reduction programs (P2 §3.5).

Programs are enumerated in increasing size over a synthesis hierarchy
(by default (d)), each candidate step is pruned by the Figure 8 semantics as
soon as it is applied, and exactly one program is kept per distinct lowering.
The search runs on one replica (one reduction group for hierarchy (d)); every
result is then lowered to the whole system and re-checked by
:func:`meshplan.models.reduction.checker.require_valid`.

Two dialects (docs/synthesis.md):

* ``full``  — the language of §3.3 as written;
* ``paper`` — the restriction that reproduces §4's counts (3 programs for a
  one-level and 47 for a two-level synthesis hierarchy at size ≤ 5):
  (1) the ``Master`` form is used only with ``AllReduce`` (its one use in the
  paper: Figure 3c's Reduce–AllReduce(Master)–Broadcast, Table 2), and
  (2) no collective moves empty buffers: every member of a group holds at
  least one chunk, except Broadcast, where the root must.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.reduction.checker import ReplayMemo, require_valid
from meshplan.models.reduction.dsl import FormKind, Instruction, Program, group_spec, instructions, point_groups
from meshplan.models.reduction.hierarchy import SynthesisHierarchy
from meshplan.models.reduction.lowering import LoweredProgram, lower_instruction
from meshplan.models.reduction.state import Context, goal_context, initial_context
from meshplan.models.reduction.symmetry import LocalMemo, Quotient, recheck_symmetric, replay_symmetric
from meshplan.solvers.reduction.packed_semantics import PackedSemantics

__all__ = ["Candidate", "clear_cache", "SynthesisResult", "candidates", "synthesize", "DIALECTS"]

DIALECTS = ("full", "paper")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A distinct step on one replica: an instruction and its point groups."""

    instruction: Instruction
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class SynthesisResult:
    """The programs of one synthesis (shortest first), lowered, with the search time and its settings."""

    hierarchy: SynthesisHierarchy
    programs: tuple[Program, ...]
    lowered: tuple[LoweredProgram, ...]
    seconds: float
    dialect: str
    max_size: int


def _allowed(ins: Instruction, dialect: str) -> bool:
    if dialect == "full":
        return True
    if dialect == "paper":
        return ins.form.kind is not FormKind.MASTER or ins.collective is Collective.ALL_REDUCE
    raise ModelError(f"unknown DSL dialect {dialect!r}; use {' or '.join(DIALECTS)}")


def _moves_empty_buffers(state: tuple[int, ...], collective: Collective,
                         groups: Sequence[Sequence[int]]) -> bool:
    """The paper dialect's extra premise: a member (the root, for Broadcast) holds no chunk."""
    for g in groups:
        members = g[:1] if collective is Collective.BROADCAST else g
        if any(not state[d] for d in members):
            return True
    return False


_CANDIDATES: dict[tuple, tuple[Candidate, ...]] = {}


def candidates(h: SynthesisHierarchy, dialect: str = "full") -> tuple[Candidate, ...]:
    """Instructions of the dialect, one per distinct (collective, point groups); they depend only on the
    level names and sizes, so they are cached across placements."""
    key = (h.names, h.sizes, h.aliases, dialect)
    got = _CANDIDATES.get(key)
    if got is None:
        got = _CANDIDATES[key] = _candidates(h, dialect)
    return got


def _candidates(h: SynthesisHierarchy, dialect: str) -> tuple[Candidate, ...]:
    seen: set = set()
    out = []
    for ins in instructions(h):
        if not _allowed(ins, dialect):
            continue
        groups = point_groups(h, group_spec(h, ins))
        key = (ins.collective, groups)
        if key in seen:
            continue
        seen.add(key)
        out.append(Candidate(ins, groups))
    return tuple(out)


def _search(cands: Sequence[Candidate], start: Context, goal: Context, max_size: int,
            dialect: str = "full") -> list[tuple[int, ...]]:
    """All candidate-index sequences of length ≤ max_size from start to goal, each step valid and
    changing the state (on packed states, :mod:`meshplan.solvers.reduction.packed_semantics`).

    States are interned to small numbers and each state's successors are computed once (not once per
    remaining budget), so the work is one rule application per (reachable state, candidate)."""
    sem = PackedSemantics(len(start), len(start[0]) if start else 0)
    strict = dialect == "paper"
    ids: dict[tuple[int, ...], int] = {}
    states: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # (state, occupancies)
    succ: dict[int, tuple[tuple[int, int], ...]] = {}

    def intern(state: tuple[int, ...], occ: tuple[int, ...] | None = None) -> int:
        i = ids.get(state)
        if i is None:
            i = ids[state] = len(states)
            states.append((state, occ if occ is not None else tuple(sem.occupancy(x) for x in state)))
        return i

    start_id, goal_id = intern(sem.pack(start)), intern(sem.pack(goal))

    def moves(sid: int) -> tuple[tuple[int, int], ...]:
        got = succ.get(sid)
        if got is None:
            (state, occ), out = states[sid], []
            for ci, c in enumerate(cands):
                if strict and _moves_empty_buffers(state, c.instruction.collective, c.groups):
                    continue
                nxt = sem.apply_occ(state, occ, c.instruction.collective, c.groups)
                if nxt is None or nxt[0] == state:
                    continue
                out.append((ci, intern(*nxt)))
            got = succ[sid] = tuple(out)
        return got

    @lru_cache(maxsize=None)
    def suffixes(sid: int, budget: int) -> tuple[tuple[int, ...], ...]:
        if sid == goal_id:
            return ((),)
        if budget == 0:
            return ()
        out = []
        for ci, nxt in moves(sid):
            for suf in suffixes(nxt, budget - 1):
                out.append((ci, *suf))
        return tuple(out)

    found = list(suffixes(start_id, max_size))
    found.sort(key=lambda seq: (len(seq), seq))
    return found


def synthesize(h: SynthesisHierarchy, *, max_size: int = 5, dialect: str = "full",
               recheck: bool | str = True, memo: ReplayMemo | LocalMemo | None = None) -> SynthesisResult:
    """Every valid program of size ≤ ``max_size`` over ``h``, one per distinct lowering, shortest first
    (P2 §3.5).  Each lowered program is re-checked by the solver-free reference rules, independently of the
    search's packed rules: ``recheck=True`` (or ``"symmetric"``) replays it by the quotient of the
    reduction groups with the bit-array rules
    (:func:`~meshplan.models.reduction.symmetry.recheck_symmetric`: one replay over a reduction group's
    positions, linear in the devices), ``"full"`` on every device with the reference rules (quadratic;
    the oracle of the tests), ``False`` not at all.  Pass one
    :class:`~meshplan.models.reduction.symmetry.LocalMemo` (or, for ``"full"``, a
    :class:`~meshplan.models.reduction.checker.ReplayMemo`) as ``memo`` to share replays among
    placements."""
    if max_size < 1:
        raise ModelError(f"max_size must be at least 1, got {max_size}", param="max_size")
    t0 = time.perf_counter()
    cands = candidates(h, dialect)
    seqs = _point_programs(h, cands, dialect, max_size)
    programs = tuple(Program(tuple(cands[i].instruction for i in seq)) for seq in seqs)
    steps = [lower_instruction(h, c.instruction) for c in cands]  # each candidate lowered once
    n = h.matrix.system.num_devices
    lowered = tuple(LoweredProgram(tuple(steps[i] for i in seq), n) for seq in seqs)
    if recheck:
        groups = tuple(h.matrix.reduction_groups(h.reduce))
        if recheck == "full":
            full = memo.replay if isinstance(memo, LocalMemo) else memo
            for lp in lowered:
                require_valid(lp, groups, memo=full)
        else:
            local = memo if isinstance(memo, LocalMemo) else LocalMemo()
            q = Quotient(groups, h.matrix.system.num_devices, local)
            for lp in lowered:
                if not recheck_symmetric(lp, q, local):
                    raise VerificationError(f"re-check failed: {replay_symmetric(lp, q, local.replay).reason()}")
    return SynthesisResult(h, programs, lowered, time.perf_counter() - t0, dialect, max_size)


_SEARCH_CACHE: dict[tuple, tuple[tuple[int, ...], ...]] = {}


def _point_programs(h: SynthesisHierarchy, cands: Sequence[Candidate], dialect: str,
                    max_size: int) -> tuple[tuple[int, ...], ...]:
    """The search on one replica depends only on the level sizes (candidate order is fixed by
    them) and on the reduction groups as point sets, so it is cached across placements."""
    replica = h.replicas()[0]
    where = {d: p for p, d in enumerate(replica)}
    goal_groups = tuple(sorted(tuple(sorted(where[d] for d in g))
                               for g in h.matrix.reduction_groups(h.reduce) if g[0] in where))
    key = (h.sizes, goal_groups, dialect, max_size)
    if key not in _SEARCH_CACHE:
        g = h.num_points
        start = initial_context(g, len(goal_groups[0]))
        goal = goal_context(goal_groups, g, len(goal_groups[0]))
        _SEARCH_CACHE[key] = tuple(_search(cands, start, goal, max_size, dialect))
    return _SEARCH_CACHE[key]


def clear_cache() -> None:
    """Forget cached searches (for benchmarks that time cold synthesis)."""
    _SEARCH_CACHE.clear()
    _CANDIDATES.clear()
