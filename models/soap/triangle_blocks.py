"""Projective planes for triangle-block schedules of symmetric kernels.

Beaumont, Eyraud-Dubois, Langou and Vérité ("I/O-Optimal Algorithms for Symmetric Linear Algebra
Kernels", SPAA 2022, section 4) partition the pairs ``(i, j)``, ``j < i``, of ``q² + q + 1`` rows by the
lines of the projective plane of order ``q``: every two points lie on exactly one line, and a line holds
``q + 1`` points, so a line's block of ``C`` pairs is computed from ``q + 1`` rows of the input where a
square block of the same size would need about ``√2`` times as many.  The counter-schedules of the SOAP
entries that count a triangular pair as two arrays (Kwasniewski's thesis, section 4.6.2) are built on it.
"""

from __future__ import annotations

import numpy as np

from meshplan.models.core.errors import ModelError


def projective_plane(q: int) -> list[list[int]]:
    """The ``q² + q + 1`` lines of the projective plane over GF(q) (``q`` prime), each as the sorted list of
    its ``q + 1`` point numbers.  Points are the normalized vectors ``(1, a, b)``, ``(0, 1, b)`` and
    ``(0, 0, 1)``; line ``m`` is the set of points orthogonal to point ``m`` (duality)."""
    if q < 2 or any(q % d == 0 for d in range(2, int(q ** 0.5) + 1)):
        raise ModelError(f"the plane's order must be a prime, got {q}", param="q")
    pts = [(1, a, b) for a in range(q) for b in range(q)] + [(0, 1, b) for b in range(q)] + [(0, 0, 1)]
    P = np.array(pts)
    on = (P @ P.T) % q == 0
    return [np.flatnonzero(on[:, m]).tolist() for m in range(len(pts))]
