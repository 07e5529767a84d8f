"""Meshes of named axes (paper Fig. 6: ``H ::= {x1:k1, …, xn:kn}``).

A mesh is a logical space of device coordinates, not hardware.  Physical
devices (MPI ranks) are numbered row-major over the mesh axes in the order the
mesh lists them, the last axis varying fastest (DESIGN.md, numbering
conventions); :meth:`Mesh.coords` gives the coordinates of every device.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from meshplan.models.core.errors import ModelError, ParseError

__all__ = ["Mesh", "parse_mesh", "AXIS_NAME"]

#: axis names: identifiers (sub-axes of a decomposed axis ``x`` are ``x_0, x_1, …``)
AXIS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Mesh:
    """Named axes with sizes, e.g. ``Mesh((("x", 4), ("y", 6)))`` (paper §2.1)."""

    axes: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for item in self.axes:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ModelError(f"a mesh axis is a (name, size) pair, got {item!r}")
            name, size = item
            if not isinstance(name, str) or not AXIS_NAME.fullmatch(name):
                raise ModelError(f"bad mesh axis name {name!r}; use an identifier like x or dev_1")
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise ModelError(f"mesh axis {name} must have a positive integer size, got {size!r}")
            if name in seen:
                raise ModelError(f"mesh axis {name} is listed twice")
            seen.add(name)

    # -- queries -------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        """The axis names, in mesh order."""
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """The axis sizes, in mesh order."""
        return tuple(k for _, k in self.axes)

    @property
    def num_devices(self) -> int:
        """The number of devices: the product of the axis sizes."""
        return math.prod(self.sizes)

    def __contains__(self, name: object) -> bool:
        return any(n == name for n, _ in self.axes)

    def size(self, name: str) -> int:
        """``k`` for ``name : k ∈ H``; a :class:`ModelError` names the mesh otherwise."""
        for n, k in self.axes:
            if n == name:
                return k
        raise ModelError(f"axis {name!r} is not in the mesh {self}; add it to the mesh: {self.cli()},{name}=N",
                         param="mesh")

    def index(self, name: str) -> int:
        """The position of axis ``name``; raises :class:`ModelError` when the mesh has no such axis."""
        for i, (n, _) in enumerate(self.axes):
            if n == name:
                return i
        raise ModelError(f"axis {name!r} is not in the mesh {self}")

    def coords(self) -> np.ndarray:
        """``coords()[d, a]`` = coordinate of device ``d`` along axis ``a`` (row-major, last fastest)."""
        if not self.axes:
            return np.zeros((1, 0), dtype=np.int64)
        grids = np.indices(self.sizes).reshape(len(self.axes), -1)
        return np.ascontiguousarray(grids.T.astype(np.int64))

    # -- printing ------------------------------------------------------------------------------
    def __str__(self) -> str:
        return "{" + ",".join(f"{n}:{k}" for n, k in self.axes) + "}"

    def cli(self) -> str:
        """The ``--mesh`` spelling, ``x=4,y=6``."""
        return ",".join(f"{n}={k}" for n, k in self.axes)


def parse_mesh(text: str) -> Mesh:
    """Parse ``x=4,y=6`` or the paper's ``{x:4, y:6}`` / ``{"x": 4, "y": 6}``."""
    src = str(text).strip()
    body = src
    if body.startswith("{"):
        if not body.endswith("}"):
            raise ParseError("mesh opens with '{' but does not close with '}'", line=1, column=len(src))
        body = body[1:-1]
    axes = []
    pos = 0
    for part in body.split(","):
        col = pos + 1 + (1 if src.startswith("{") else 0)
        pos += len(part) + 1
        part = part.strip()
        if not part:
            if body.strip() == "":
                break
            raise ParseError("empty mesh axis; write the mesh as x=4,y=6", line=1, column=col)
        m = re.fullmatch(r'"?([A-Za-z_][A-Za-z0-9_]*)"?\s*[=:]\s*(\d+)', part)
        if not m:
            raise ParseError(f"bad mesh axis {part!r}; write name=size, e.g. x=4", line=1, column=col)
        axes.append((m.group(1), int(m.group(2))))
    if not axes:
        raise ModelError("the mesh has no axes; write it as x=4,y=6")
    return Mesh(tuple(axes))
