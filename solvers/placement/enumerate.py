"""Enumerating parallelism matrices with a solver backend (P2 §3.1), re-checked.

:func:`enumerate_placements` asks CP-SAT (default) or z3 for *all* solutions
of :func:`meshplan.encodings.placement.model.encode_placement`, rebuilds each as a
:class:`ParallelismMatrix` (whose constructor re-checks equation 1), checks
equation 2 and the user constraints without the solver, and returns them
sorted.  :func:`brute_force_placements` is the solver-free reference used by
the tests.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

from meshplan.encodings.placement.model import divisors, encode_placement
from meshplan.models.core.errors import Infeasible, SolverTimeout, VerificationError
from meshplan.models.placement.matrix import ParallelismMatrix, check_axes
from meshplan.models.placement.constraints import PlacementConstraints
from meshplan.models.core.system import System
from meshplan.solvers.backends.base import Status, get_backend

__all__ = ["enumerate_placements", "brute_force_placements"]


def enumerate_placements(system: System, axes: Sequence[int], *, backend: str = "cpsat",
                         constraints: PlacementConstraints | None = None,
                         time_limit_s: float | None = 60.0) -> list[ParallelismMatrix]:
    """Every parallelism matrix for ``axes`` on ``system``, lexicographically sorted."""
    axes = check_axes(system, axes)
    constraints = constraints or PlacementConstraints()
    b = get_backend(backend)
    enc = encode_placement(system, axes, b.library, constraints)
    found = set()
    for sol in b.enumerate(enc, time_limit_s=time_limit_s):
        if sol.status is Status.TIMEOUT:
            raise SolverTimeout(f"{backend} did not enumerate all placements within {time_limit_s} s")
        rows = enc.decode(sol.values)
        m = ParallelismMatrix(system, rows)  # re-checks equation (1)
        if m.axes != axes or not constraints.holds(m):
            raise VerificationError(f"{backend} returned a matrix that violates the placement equations: {rows}")
        found.add(rows)
    if not found:
        raise Infeasible(f"no parallelism matrix places axes {list(axes)} on {system} under the given constraints; "
                         "relax pin and inside", param=("pin", "inside"))
    return [ParallelismMatrix(system, r) for r in sorted(found)]


def _column_splits(size: int, m: int, axes: Sequence[int]) -> list[tuple[int, ...]]:
    out = []
    for combo in itertools.product(*(divisors(math.gcd(size, a)) for a in axes)):
        if math.prod(combo) == size:
            out.append(combo)
    return out


def brute_force_placements(system: System, axes: Sequence[int],
                           constraints: PlacementConstraints | None = None) -> list[ParallelismMatrix]:
    """Reference enumeration without a solver: every column split, filtered by the rows."""
    axes = check_axes(system, axes)
    constraints = constraints or PlacementConstraints()
    cols = [_column_splits(h, len(axes), axes) for h in system.sizes]
    out = []
    for choice in itertools.product(*cols):
        rows = tuple(tuple(col[i] for col in choice) for i in range(len(axes)))
        if tuple(math.prod(r) for r in rows) == axes:
            m = ParallelismMatrix(system, rows)
            if constraints.holds(m):
                out.append(m)
    return sorted(out, key=lambda m: m.rows)
