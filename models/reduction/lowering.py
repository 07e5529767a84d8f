"""Lowering reduction programs to device groups of the whole system (P2 §3.4).

A program over a synthesis hierarchy lowers to a sequence of steps
``(C_i, groups_i)`` where ``groups_i`` are disjoint groups of global device
ids (root first).  For hierarchy (d) each point group is repeated in every
reduction group (:meth:`SynthesisHierarchy.lower_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from meshplan.models.core.collectives import COLLECTIVES, Collective
from meshplan.models.core.errors import ModelError
from meshplan.models.reduction.dsl import Instruction, Program, group_spec, point_groups
from meshplan.models.reduction.hierarchy import SynthesisHierarchy

__all__ = ["LoweredStep", "LoweredProgram", "lower", "lower_instruction"]


@dataclass(frozen=True, slots=True)
class LoweredStep:
    """One collective over disjoint device groups; ``instruction`` when it came from the DSL."""

    collective: Collective
    groups: tuple[tuple[int, ...], ...]
    instruction: Instruction | None = None
    #: the smallest and largest device of the groups (checked once here, so a program's range check is O(1)
    #: per step however many devices the step covers)
    span: tuple[int, int] = field(default=(0, -1), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise ModelError(f"unknown collective {self.collective!r}; use one of {', '.join(COLLECTIVES)}")
        object.__setattr__(self, "collective", Collective(self.collective))
        seen: set[int] = set()
        for g in self.groups:
            if not g:
                raise ModelError("a device group is empty")
            for d in g:
                if d in seen:
                    raise ModelError(f"device {d} appears twice in the groups of one {self.collective} step")
                seen.add(d)
        if seen:
            object.__setattr__(self, "span", (min(seen), max(seen)))

    @property
    def key(self) -> tuple[Collective, tuple[tuple[int, ...], ...]]:
        """What the step does: its collective and its groups (root first), in sorted group order."""
        return (self.collective, tuple(sorted(self.groups)))


@dataclass(frozen=True, slots=True)
class LoweredProgram:
    """A lowered program (§3.4): its steps over global device ids and the number of devices."""

    steps: tuple[LoweredStep, ...]
    num_devices: int

    def __post_init__(self) -> None:
        for i, st in enumerate(self.steps, 1):
            lo, hi = st.span
            if lo < 0 or hi >= self.num_devices:
                d = lo if lo < 0 else hi
                raise ModelError(f"step {i}: device {d} out of range 0..{self.num_devices - 1}")

    @property
    def key(self) -> tuple:
        """What the program does, step by step (see :attr:`LoweredStep.key`)."""
        return tuple(s.key for s in self.steps)

    def __len__(self) -> int:
        return len(self.steps)


@lru_cache(maxsize=4096)
def lower_instruction(h: SynthesisHierarchy, ins: Instruction) -> LoweredStep:
    """One instruction lowered to its device groups on the whole system (cached)."""
    return LoweredStep(ins.collective, h.lower_groups(point_groups(h, group_spec(h, ins))), ins)


def lower(h: SynthesisHierarchy, program: Program | Sequence[Instruction]) -> LoweredProgram:
    """Lower a program (or a sequence of instructions) over ``h`` to steps over global device ids."""
    ins = program.instructions if isinstance(program, Program) else tuple(program)
    return LoweredProgram(tuple(lower_instruction(h, i) for i in ins), h.matrix.system.num_devices)
