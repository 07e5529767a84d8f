"""The collective semantics of P2 Figure 8 as pure functions on states.

Each rule takes the states of one device group (the group's first device is
the root, §3.2) and returns their post-states, or raises
:class:`RuleViolation` naming the rule, the group and the premise that fails,
in words a user can act on.  :func:`apply_step` applies one collective to
disjoint groups of a whole context; devices outside the groups keep their
state (the instruction rule of §3.3).

The premises are this module's own; once they hold, the post-states are those
of the one buffer model, :func:`meshplan.models.core.collectives.apply_collective`,
applied to each device's non-empty rows with ``⊕`` (bitwise or) as the combine
operation.

Rules (``rows`` = non-empty rows, ``⊕`` = addition of disjoint rows):

* R-ALLREDUCE     all ``rows`` equal; every chunk's columns pairwise disjoint; all get ``⊕ s_i``
* R-REDUCESCATTER as AllReduce; the ``rows`` of ``⊕ s_i`` split evenly, member i keeps block i
* R-ALLGATHER     ``rows`` pairwise disjoint and equally many; all get ``⊕ s_i``
* R-REDUCE        as AllReduce; the root gets ``⊕ s_i``, the others become empty
* R-BROADCAST     every ``s_i ≤ s_0`` and some ``s_i < s_0``; all get ``s_0``
"""

from __future__ import annotations

from typing import Sequence

from meshplan.models.core.collectives import COLLECTIVES, Collective, apply_collective
from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.core.bits import bits
from meshplan.models.reduction.state import Context, State, rows

__all__ = ["COLLECTIVES", "RULES", "RuleViolation", "apply_rule", "apply_step"]

#: the Figure 8 rule of each collective
RULES: dict[Collective, str] = {c: c.rule for c in Collective}


class RuleViolation(VerificationError):
    """A collective's precondition does not hold for a device group."""

    def __init__(self, collective: str, group: Sequence[int], premise: str, detail: str) -> None:
        self.collective = collective
        self.rule = RULES.get(collective, collective)  # type: ignore[call-overload]
        self.group = tuple(group)
        self.premise = premise
        self.detail = detail
        super().__init__(f"{collective} over devices {list(self.group)}: {detail} ({self.rule}: {premise})")


def _fmt(chunks) -> str:
    return "{" + ", ".join(map(str, sorted(chunks))) + "}"


def _check_reducible(collective: str, group: Sequence[int], states: Sequence[State]) -> None:
    """Premises shared by AllReduce, ReduceScatter and Reduce."""
    r0 = rows(states[0])
    for d, s in zip(group[1:], states[1:]):
        rd = rows(s)
        if rd != r0:
            raise RuleViolation(collective, group, "all devices hold the same chunks",
                                f"device {d} holds chunks {_fmt(rd)} but device {group[0]} holds "
                                f"{_fmt(r0)} — a reduction combines the same chunks on every device")
    for r in sorted(r0):
        seen = 0
        for d, s in zip(group, states):
            overlap = seen & s[r]
            if overlap:
                who = bits(overlap)[0]
                raise RuleViolation(collective, group, "each chunk's contributions are disjoint",
                                    f"chunk {r} on device {d} already contains device {who}'s contribution "
                                    "— it would be reduced twice")
            seen |= s[r]


def _post(c: Collective, states: Sequence[State]) -> list[State]:
    """Post-states by the buffer model: a state's buffer is its non-empty rows, combined with ``|``."""
    k = len(states[0])
    bufs = []
    for s in states:
        held = tuple(r for r in range(k) if s[r])
        bufs.append((held, [s[r] for r in held]))

    def union(blocks: list) -> list[int]:
        out = list(blocks[0])
        for b in blocks[1:]:
            out = [x | y for x, y in zip(out, b)]
        return out

    post = []
    for labels, values in apply_collective(c, bufs, union):
        state = [0] * k
        for r, m in zip(labels, values):
            state[r] = m
        post.append(tuple(state))
    return post


def apply_rule(collective: Collective | str, group: Sequence[int], states: Sequence[State]) -> list[State]:
    """Post-states of ``group`` (root first) after ``collective`` by its rule of Figure 8; raises
    :class:`RuleViolation` naming the premise that fails."""
    n = len(group)
    if n != len(states) or n == 0:
        raise ValueError("group and states must have the same non-zero length")
    try:
        c = Collective(collective)
    except ValueError:
        raise ModelError(f"unknown collective {collective!r}; one of {', '.join(COLLECTIVES)}") from None
    if c.reduces:
        _check_reducible(c, group, states)
        if c.splits_output:
            nonempty = sorted(rows(states[0]))
            if len(nonempty) % n:
                raise RuleViolation(c, group, "the chunks divide evenly among the devices",
                                    f"the {len(nonempty)} chunks {_fmt(nonempty)} cannot be scattered evenly "
                                    f"over {n} devices")
    elif c.gathers:
        counts = [len(rows(s)) for s in states]
        seen: dict[int, int] = {}
        for d, s in zip(group, states):
            for r in sorted(rows(s)):
                if r in seen:
                    raise RuleViolation(c, group, "the devices hold disjoint chunks",
                                        f"devices {seen[r]} and {d} both hold chunk {r} — AllGather "
                                        "would combine copies of the same chunk")
                seen[r] = d
        if len(set(counts)) > 1:
            i = next(i for i, c in enumerate(counts) if c != counts[0])
            raise RuleViolation(c, group, "every device holds equally many chunks",
                                f"device {group[0]} holds {counts[0]} chunks but device {group[i]} holds "
                                f"{counts[i]} — AllGather needs equal shares")
    else:  # Broadcast
        root = states[0]
        for d, s in zip(group[1:], states[1:]):
            for r, (a, b) in enumerate(zip(s, root)):
                extra = a & ~b
                if extra:
                    raise RuleViolation(c, group, "every device's data is contained in the root's",
                                        f"device {d} holds in chunk {r} the contribution of device "
                                        f"{bits(extra)[0]} that the root device {group[0]} lacks — "
                                        "broadcasting would lose it")
        if all(s == root for s in states[1:]):
            raise RuleViolation(c, group, "the root holds more than some device",
                                f"every device already holds the data of root device {group[0]} — "
                                "the broadcast would change nothing")
    return _post(c, states)


def apply_step(context: Context, collective: Collective | str, groups: Sequence[Sequence[int]]) -> Context:
    """Apply ``collective`` on every group of a step (groups are disjoint); others unchanged."""
    new = list(context)
    for g in groups:
        post = apply_rule(collective, g, [context[d] for d in g])
        for d, s in zip(g, post):
            new[d] = s
    return tuple(new)
