"""Parallelism matrices and the device ↔ axis-coordinate map (P2 §2.1, §3.1).

A parallelism matrix ``X`` has one row per parallelism axis and one column
per hardware level; ``X[i][j]`` is how many ways axis ``i`` is split across
level ``j``.  Equations (1)–(2): every column multiplies to the level's
cardinality and every row to the axis size.

Numbering (DESIGN.md): inside level ``j`` the factors of the axes are laid
out with axis 0 outermost, so a device's level coordinate ``c_j`` is mixed
radix over ``(X[0][j], …, X[m][j])``; a device's coordinate along axis ``i``
is mixed radix over ``(u_{i,0}, …, u_{i,n})``, outer level most significant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Sequence

from meshplan.models.core.errors import ModelError, quote
from meshplan.models.core.system import System

__all__ = ["ParallelismMatrix", "check_axes", "check_reduce"]


def check_axes(system: System, axes: Sequence[int]) -> tuple[int, ...]:
    """The axes as a tuple, validated against the system (equation 2: their product is the device count)."""
    axes = tuple(axes)
    if not axes:
        raise ModelError("give at least one parallelism axis in axes, e.g. 4,16", param="axes")
    for a in axes:
        if not isinstance(a, int) or isinstance(a, bool) or a < 1:
            raise ModelError(f"axis sizes must be positive integers, got {a!r}")
    if math.prod(axes) != system.num_devices:
        raise ModelError(f"the axes {','.join(map(str, axes))} multiply to {math.prod(axes)}, but system "
                         f"{system} has {system.num_devices} devices; make their product {system.num_devices}")
    return axes


def check_reduce(axes: Sequence[int], reduce: Iterable[int]) -> tuple[int, ...]:
    """The reduction axes, sorted and deduplicated, validated against the axes."""
    red = tuple(sorted(set(reduce)))
    if not red:
        raise ModelError("give at least one reduction axis in reduce, e.g. 0", param="reduce")
    for r in red:
        if not 0 <= r < len(axes):
            raise ModelError(f"reduction axis {r} out of range: there are {len(axes)} axes (0..{len(axes) - 1})")
    return red


def matrix_rows(value: Any) -> list[list[int]]:
    """A parallelism matrix as integer rows, from rows (or an array) or from text like ``'[[2,2],[2,8]]'``."""
    import json

    if hasattr(value, "tolist"):
        value = value.tolist()
    text = value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            raise ModelError(f"matrix must be a list of rows like '[[2,2],[2,8]]', got {quote(text)}",
                             param="matrix") from None
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(r, (list, tuple)) and r
                       and all(isinstance(x, int) and not isinstance(x, bool) for x in r) for r in value)):
        raise ModelError(f"matrix must be a list of integer rows like '[[2,2],[2,8]]', got {quote(text)}",
                         param="matrix")
    return [list(r) for r in value]


@dataclass(frozen=True, slots=True)
class ParallelismMatrix:
    """Rows = axes, columns = levels, validated against equations (1)–(2)."""

    system: System
    rows: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        rows = tuple(tuple(int(x) for x in r) for r in self.rows)
        object.__setattr__(self, "rows", rows)
        n = len(self.system.levels)
        for i, r in enumerate(rows):
            if len(r) != n:
                raise ModelError(f"row {i} of the matrix has {len(r)} entries; the system has {n} levels")
            if any(x < 1 for x in r):
                raise ModelError(f"row {i} of the matrix has a factor < 1: {list(r)}")
        for j, lv in enumerate(self.system.levels):
            col = math.prod(r[j] for r in rows)
            if col != lv.size:
                raise ModelError(f"column {j} ({lv.name}) multiplies to {col}, not {lv.size} (equation 1)")

    @classmethod
    def of(cls, system: System, rows: Sequence[Sequence[int]], axes: Sequence[int] | None = None) -> "ParallelismMatrix":
        """A matrix from its rows; with ``axes``, raise :class:`ModelError` unless the rows multiply to them
        (equation 2)."""
        m = cls(system, tuple(tuple(r) for r in rows))
        if axes is not None and m.axes != tuple(axes):
            raise ModelError(f"matrix rows multiply to {list(m.axes)}, not the axes {list(axes)} (equation 2)")
        return m

    @property
    def axes(self) -> tuple[int, ...]:
        """The size of each parallelism axis: the product of its row."""
        return tuple(math.prod(r) for r in self.rows)

    @property
    def num_axes(self) -> int:
        """The number of parallelism axes (rows)."""
        return len(self.rows)

    def tolist(self) -> list[list[int]]:
        """The rows as nested lists (the JSON form)."""
        return [list(r) for r in self.rows]

    def __str__(self) -> str:
        return "[" + ",".join("[" + ",".join(map(str, r)) + "]" for r in self.rows) + "]"

    # -- device <-> coordinates -------------------------------------------------------------
    def sub_coords(self, device: int) -> tuple[tuple[int, ...], ...]:
        """``u[i][j]``: the coordinate of ``device`` on axis ``i``'s factor at level ``j``."""
        return _sub_coords_table(self.system, self.rows)[device]

    def axis_coords(self, device: int) -> tuple[int, ...]:
        """The device's coordinate along every axis (mixed radix, outer level most significant)."""
        u = self.sub_coords(device)
        out = []
        for i, r in enumerate(self.rows):
            v = 0
            for j, f in enumerate(r):
                v = v * f + u[i][j]
            out.append(v)
        return tuple(out)

    def device_of(self, axis_coords: Sequence[int]) -> int:
        """Inverse of :meth:`axis_coords`."""
        if len(axis_coords) != self.num_axes:
            raise ModelError(f"need {self.num_axes} axis coordinates, got {len(axis_coords)}")
        n = len(self.system.levels)
        u = [[0] * n for _ in range(self.num_axes)]
        for i, (v, r) in enumerate(zip(axis_coords, self.rows)):
            if not 0 <= v < math.prod(r):
                raise ModelError(f"coordinate {v} out of range for axis {i} of size {math.prod(r)}")
            for j in reversed(range(n)):
                u[i][j] = v % r[j]
                v //= r[j]
        coords = []
        for j in range(n):
            c = 0
            for i in range(self.num_axes):
                c = c * self.rows[i][j] + u[i][j]
            coords.append(c)
        return self.system.device(tuple(coords))

    def device_order(self) -> list[list[int]] | list[int]:
        """Devices as a nested array indexed by axis coordinates (for jax/torch meshes)."""
        import numpy as np

        arr = np.zeros(self.axes, dtype=int)
        for d in range(self.system.num_devices):
            arr[self.axis_coords(d)] = d
        return arr.tolist()

    def reduction_groups(self, reduce: Iterable[int]) -> list[tuple[int, ...]]:
        """Devices that share their coordinates on every non-reduction axis (sorted)."""
        red = check_reduce(self.axes, reduce)
        groups: dict[tuple[int, ...], list[int]] = {}
        for d in range(self.system.num_devices):
            ac = self.axis_coords(d)
            key = tuple(v for i, v in enumerate(ac) if i not in red)
            groups.setdefault(key, []).append(d)
        return sorted(tuple(g) for g in groups.values())


@lru_cache(maxsize=256)
def _sub_coords_table(system: System, rows: tuple[tuple[int, ...], ...]) -> tuple[tuple[tuple[int, ...], ...], ...]:
    m, n = len(rows), len(system.levels)
    table = []
    for d in range(system.num_devices):
        c = system.coords(d)
        u = [[0] * n for _ in range(m)]
        for j in range(n):
            rest = c[j]
            for i in reversed(range(m)):
                u[i][j] = rest % rows[i][j]
                rest //= rows[i][j]
        table.append(tuple(tuple(r) for r in u))
    return tuple(table)
