"""User constraints on parallelism matrices (``--pin``, ``--inside``).

* pin a factor: axis ``i`` is split ``v`` ways across level ``j`` (``X[i][j] = v``);
* keep an axis inside one level: every factor of axis ``i`` outside level ``j`` is 1.

Levels may be given by name or index; :meth:`PlacementConstraints.parse`
reads the CLI forms ``AXIS:LEVEL=V`` and ``AXIS:LEVEL``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from meshplan.models.core.errors import ModelError
from meshplan.models.placement.matrix import ParallelismMatrix
from meshplan.models.core.system import System

__all__ = ["PlacementConstraints"]


@dataclass(frozen=True, slots=True)
class PlacementConstraints:
    """User constraints on a parallelism matrix: pinned factors ``(axis, level, factor)`` and axes kept inside a
    level."""

    pins: tuple[tuple[int, int, int], ...] = ()  # (axis, level, factor)
    inside: tuple[tuple[int, int], ...] = ()  # (axis, level)

    def validate(self, system: System, axes: Sequence[int]) -> None:
        """Raise :class:`ModelError` unless every pin and inside constraint fits ``system`` and ``axes``."""
        n = len(system.levels)
        for i, j, v in self.pins:
            self._check_axis_level(i, j, len(axes), n)
            if v < 1 or system.levels[j].size % v or axes[i] % v:
                raise ModelError(f"pin axis {i} at level {system.levels[j].name} = {v}: {v} must divide both "
                                 f"the level size {system.levels[j].size} and the axis size {axes[i]}")
        for i, j in self.inside:
            self._check_axis_level(i, j, len(axes), n)

    @staticmethod
    def _check_axis_level(i: int, j: int, m: int, n: int) -> None:
        if not 0 <= i < m:
            raise ModelError(f"constraint names axis {i}, but there are {m} axes (0..{m - 1})")
        if not 0 <= j < n:
            raise ModelError(f"constraint names level {j}, but the system has {n} levels (0..{n - 1})")

    def fixed(self, num_levels: int) -> dict[tuple[int, int], int]:
        """Entries of the matrix the constraints fix."""
        out: dict[tuple[int, int], int] = {}
        for i, j in self.inside:
            for k in range(num_levels):
                if k != j:
                    out[(i, k)] = 1
        for i, j, v in self.pins:
            out[(i, j)] = v
        return out

    def holds(self, m: ParallelismMatrix) -> bool:
        """Whether the matrix ``m`` satisfies the pinned factors."""
        return all(m.rows[i][j] == v for (i, j), v in self.fixed(len(m.system.levels)).items())

    @classmethod
    def parse(cls, system: System, pins: Iterable[str] = (), inside: Iterable[str] = ()) -> "PlacementConstraints":
        """Constraints from their CLI spellings (``--pin AXIS:LEVEL=FACTOR``, ``--inside AXIS:LEVEL``); levels by
        name or index."""
        def level(tok: str) -> int:
            return int(tok) if tok.isdigit() else system.level_index(tok)

        ps = []
        for text in pins:
            m = re.fullmatch(r"\s*(\d+):([A-Za-z0-9_\-]+)=(\d+)\s*", text)
            if not m:
                raise ModelError(f"bad pin {text!r}; write AXIS:LEVEL=FACTOR, e.g. 0:node=2", param="pin")
            ps.append((int(m.group(1)), level(m.group(2)), int(m.group(3))))
        ins = []
        for text in inside:
            m = re.fullmatch(r"\s*(\d+):([A-Za-z0-9_\-]+)\s*", text)
            if not m:
                raise ModelError(f"bad inside {text!r}; write AXIS:LEVEL, e.g. 1:gpu", param="inside")
            ins.append((int(m.group(1)), level(m.group(2))))
        return cls(tuple(ps), tuple(ins))
