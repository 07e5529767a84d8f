"""Values from their string forms: what every front-door function accepts (DESIGN.md, Python API).

Each ``as_*`` helper returns its argument unchanged when it already is the value, and otherwise parses
the string form the CLI documents (docs/formats.md), raising a :class:`ModelError` (or
:class:`ParseError`) that names the argument as the CLI flag it corresponds to.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from meshplan.models.core.checks import as_int_tuple
from meshplan.models.core.errors import ModelError, quote

__all__ = ["is_file", "as_system", "as_int_tuple", "as_bytes", "as_matrix_rows", "as_params", "as_mesh", "as_type",
           "choose_placement", "as_seconds", "MAX_SECONDS"]


def is_file(text: Any) -> bool:
    """Whether ``text`` (a str or path) names an existing file; False for text that cannot be a path."""
    from pathlib import Path

    try:
        return Path(text).is_file()
    except (OSError, ValueError, TypeError):  # a name too long for a path, a NUL byte
        return False


def as_system(system: Any):
    """A :class:`~meshplan.models.core.system.System`: a System, a preset name (``a100-4x16``), a
    ``.json``/``.toml`` system file, or levels like ``node=4,gpu=16``."""
    from meshplan.models.core.system import System

    if isinstance(system, System):
        return system
    if hasattr(system, "__fspath__"):
        return System.load(system)
    if isinstance(system, str):
        return System.parse(system)
    raise ModelError(f"system must be a System, a preset name, a file or levels like node=4,gpu=8, "
                     f"got {type(system).__name__}")


#: the longest time limit accepted (one week, in seconds)
MAX_SECONDS = 7 * 24 * 3600


def as_seconds(value: Any, what: str = "timeout") -> float:
    """A time limit: a positive finite number of seconds, at most :data:`MAX_SECONDS` (one week); NaN,
    infinities, zero and negative numbers are errors naming ``what``."""
    import math

    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ModelError(f"{what} must be a number of seconds like 60 or 2.5, got {quote(value)}", param=what) from None
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds <= 0:
        raise ModelError(f"{what} must be a positive number of seconds like 60 or 2.5, got {quote(value)}", param=what)
    if seconds > MAX_SECONDS:
        raise ModelError(f"{what} {quote(value)} is more than a week ({MAX_SECONDS:,} s), the longest limit "
                         "meshplan accepts", param=what)
    return seconds


def as_bytes(value: Any, what: str = "bytes") -> int:
    """A positive byte count: an integer or a size like ``4096``, ``64MiB``, ``1GiB`` or ``2GB``."""
    from meshplan.models.core.units import parse_bytes

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ModelError(f"{what} must be a size like 64MiB or a number of bytes, got {value!r}", param=what)
    return parse_bytes(value)


def as_matrix_rows(value: Any) -> list[list[int]]:
    """A parallelism matrix as integer rows, from rows or from text like ``'[[2,2],[2,8]]'``
    (:func:`meshplan.models.placement.matrix.matrix_rows`)."""
    from meshplan.models.placement.matrix import matrix_rows

    return matrix_rows(value)


def choose_placement(system, axes: Sequence[int], matrix: Any = None):
    """The :class:`~meshplan.models.placement.matrix.ParallelismMatrix` given by ``matrix`` (a matrix, its
    rows or their text), or the only one that places ``axes`` on ``system``; otherwise an error listing
    the candidates (P2 §3.1)."""
    from meshplan.models.placement.matrix import ParallelismMatrix

    if isinstance(matrix, ParallelismMatrix):
        return matrix
    if matrix is not None:
        return ParallelismMatrix.of(system, as_matrix_rows(matrix), axes)
    from meshplan.solvers.placement.enumerate import enumerate_placements

    cands = enumerate_placements(system, axes)
    if len(cands) == 1:
        return cands[0]
    listed = " ".join(f"'{m}'" for m in cands[:12]) + (f" … ({len(cands)} in all)" if len(cands) > 12 else "")
    raise ModelError(f"{len(cands)} parallelism matrices place axes {list(axes)} on {system}; choose one "
                     f"with matrix: {listed}", param="matrix")


def as_params(value: Any, what: str = "params", *, minimum: int = 1) -> dict[str, int]:
    """Sizes like ``"N=4096,S=65536,p=16"`` or a mapping -> ``{"N": 4096, "S": 65536, "p": 16}``; values
    below ``minimum`` (1 for sizes, 0 for parameter values such as a loop count) are rejected."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items()]
    else:
        items = []
        for part in str(value).replace(" ", "").split(","):
            if not part:
                continue
            name, eq, v = part.partition("=")
            if not eq or not name.isidentifier():
                raise ModelError(f"{what} entry {part!r} is not NAME=INTEGER (e.g. {what} N=4096,S=65536)", param=what)
            try:
                items.append((name, int(v)))
            except ValueError:
                raise ModelError(f"{what} {name}={v!r}: the value must be an integer", param=what) from None
    out: dict[str, int] = {}
    for name, v in items:
        if not isinstance(name, str) or not name.isidentifier():
            raise ModelError(f"{what} names must be identifiers, got {name!r}", param=what)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ModelError(f"{what} {name}={v!r}: the value must be an integer", param=what)
        if v < minimum:
            raise ModelError(f"{what} {name}={v}: " + ("sizes must be positive" if minimum > 0
                                                       else "values must be non-negative"), param=what)
        if v > 2**62:
            raise ModelError(f"{what} {name}={quote(v)}: more than 2**62, beyond the 64-bit integers of the "
                             "solvers; give a smaller value", param=what)
        if name in out:
            raise ModelError(f"{what} gives {name} twice", param=what)
        out[name] = v
    return out


def as_mesh(mesh: Any):
    """A :class:`~meshplan.models.redistribution.mesh.Mesh`: a Mesh, ``x=4,y=6``, ``{x:4, y:6}`` or a
    mapping ``{"x": 4, "y": 6}`` (paper §2.1)."""
    from meshplan.models.redistribution.mesh import Mesh, parse_mesh

    from meshplan.models.core.limits import check_limit

    if isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, (dict, str)):
        out = Mesh(tuple(mesh.items())) if isinstance(mesh, dict) else parse_mesh(mesh)
        if len(out.axes) > 32:  # the planner's arrays have one dimension per axis (numpy allows 64)
            raise ModelError(f"the mesh has {len(out.axes):,} axes; meshplan handles at most 32 (merge axes of "
                             "size 1 away)")
        check_limit("devices", out.num_devices, f"the mesh {quote(mesh)}")
        return out
    raise ModelError(f"mesh must be a Mesh or text like x=4,y=6, got {type(mesh).__name__}")


def as_type(value: Any):
    """A distributed array type: a value or its paper notation, e.g. ``'[64{x,y}1024,128]'`` (§2.2)."""
    from meshplan.models.redistribution.types import DistType, parse_type

    if isinstance(value, DistType):
        return value
    if isinstance(value, str):
        return parse_type(value)
    raise ModelError(f"a distributed type must be a DistType or text like '[3{{x}}12,2{{y}}12]', "
                     f"got {type(value).__name__}")
