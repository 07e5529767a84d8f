"""Dense LU / Cholesky factorization problems and their 2.5-D processor grids (thesis section 4.7).

* :class:`FactorProblem` — ``kind`` (``"lu"`` or ``"cholesky"``), the order ``N``, the number of
  ranks ``p``, the fast (local) memory ``S`` in words per rank (``None``: unbounded) and the dtype.
* :class:`FactorGrid` — the grid ``[Px, Py, Pz]`` and the block size ``v``.  Rows are distributed
  block-cyclically over ``Px`` (row ``i`` on ``px = (i // v) mod Px``), columns over ``Py``
  (``py = (j // v) mod Py``); the ``Pz`` layers hold partial sums of the same tile (2.5-D, section
  4.7.2), and layer ``z`` performs the part ``s_z`` of every rank-``v`` Schur update, so ``v ≥ Pz``
  (the section 4.7.2 constraint ``v ≥ c = pS/N²``).  Rank ``(px, py, pz)`` has number
  ``px + Px·(py + Py·pz)``.

Both validate in ``__post_init__`` and raise :class:`FactorModelError` with a message saying what
to change.  ``str(grid) == "[2,2,2] v=16"`` and ``FactorGrid.parse`` reads it back; :func:`parse_grid`
reads a ``--grid`` value ``"2,2,2"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from meshplan.models.core.errors import ModelError

__all__ = ["FactorModelError", "FactorProblem", "FactorGrid", "KINDS", "parse_grid", "owner_of",
           "local_count", "layer_slices"]

#: the two factorizations
KINDS = ("lu", "cholesky")


class FactorModelError(ModelError):
    """A factorization problem, grid or block size is ill-formed."""


@dataclass(frozen=True, slots=True)
class FactorProblem:
    """Factor an ``N × N`` matrix on ``p`` ranks with at most ``S`` words of memory per rank."""

    kind: str
    N: int
    p: int
    S: int | None = None
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FactorModelError(f"unknown factorization {self.kind!r}; use one of {', '.join(KINDS)}")
        if not isinstance(self.N, (int, np.integer)) or self.N < 1:
            raise FactorModelError(f"the matrix order N must be a positive integer, got {self.N!r}")
        if not isinstance(self.p, (int, np.integer)) or self.p < 1:
            raise FactorModelError(f"the number of ranks p must be a positive integer, got {self.p!r}")
        if self.S is not None and (not isinstance(self.S, (int, np.integer)) or self.S < 1):
            raise FactorModelError(f"the memory S must be a positive number of words per rank, got {self.S!r}")
        if self.dtype not in ("float64", "float32"):
            raise FactorModelError(f"dtype {self.dtype!r} is not supported; use float64 or float32")
        if self.S is not None and self.S * self.p < self.N * self.N:
            raise FactorModelError(
                f"memory too small: p·S = {self.p}·{self.S} = {self.p * self.S} words cannot hold the "
                f"N² = {self.N * self.N} words of the matrix; give --memory ≥ {-(-self.N * self.N // self.p)} "
                "or more ranks")


@dataclass(frozen=True, slots=True)
class FactorGrid:
    """The 2.5-D grid ``[Px, Py, Pz]`` and block size ``v`` (section 4.7.2)."""

    Px: int
    Py: int
    Pz: int
    v: int

    def __post_init__(self) -> None:
        for name in ("Px", "Py", "Pz", "v"):
            val = getattr(self, name)
            if not isinstance(val, (int, np.integer)) or val < 1:
                raise FactorModelError(f"grid {name} must be a positive integer, got {val!r}")
        if self.v < self.Pz:
            raise FactorModelError(
                f"block size v = {self.v} is smaller than the number of layers Pz = {self.Pz}: each layer "
                f"updates v/Pz of every block (section 4.7.2, v ≥ c); use --block ≥ {self.Pz} or fewer layers")

    @property
    def p(self) -> int:
        return self.Px * self.Py * self.Pz

    def __str__(self) -> str:
        return f"[{self.Px},{self.Py},{self.Pz}] v={self.v}"

    @classmethod
    def parse(cls, text: str) -> "FactorGrid":
        """``"[2,2,2] v=16"`` (what ``str`` prints) back into a grid."""
        m = re.fullmatch(r"\s*\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]\s+v\s*=\s*(\d+)\s*", str(text))
        if m is None:
            raise FactorModelError(f"a grid is written '[PX,PY,PZ] v=V' (e.g. '[2,2,2] v=16'), got {text!r}")
        return cls(*(int(x) for x in m.groups()))

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(px, py, pz)`` of a rank number (``px`` fastest)."""
        return rank % self.Px, (rank // self.Px) % self.Py, rank // (self.Px * self.Py)

    def rank(self, px: int, py: int, pz: int) -> int:
        return px + self.Px * (py + self.Py * pz)

    def check(self, problem: FactorProblem) -> None:
        """Raise :class:`FactorModelError` if the grid does not fit the problem."""
        if self.p != problem.p:
            raise FactorModelError(f"grid {self} has {self.p} ranks but the problem has p = {problem.p}; "
                                   "the product Px·Py·Pz must equal --np")
        nb = -(-problem.N // self.v)
        if nb < max(self.Px, self.Py):
            raise FactorModelError(
                f"grid {self}: N = {problem.N} gives {nb} blocks of size v = {self.v}, fewer than "
                f"max(Px, Py) = {max(self.Px, self.Py)}, so some ranks would own no rows or columns; "
                "use a smaller --block or a flatter grid")
        if self.Pz > 1 and nb < 2:
            raise FactorModelError(
                f"grid {self}: N = {problem.N} is a single block of size v = {self.v}, so there is no Schur "
                f"update for the Pz = {self.Pz} layers to share (one rank would factor alone); "
                "use a smaller --block or Pz = 1")


def parse_grid(text: str) -> tuple[int, int, int]:
    """``"2,2,1"`` → ``(2, 2, 1)`` (a ``--grid`` value)."""
    try:
        vals = tuple(int(x) for x in str(text).replace(" ", "").split(","))
    except ValueError:
        raise FactorModelError(f"--grid must be PX,PY,PZ (three integers), got {text!r}") from None
    if len(vals) != 3 or min(vals) < 1:
        raise FactorModelError(f"--grid must be three positive integers PX,PY,PZ, got {text!r}")
    return vals  # type: ignore[return-value]


def owner_of(index, v: int, P: int):
    """The grid coordinate that owns row (column) ``index`` in a block-cyclic layout with block ``v``."""
    return (np.asarray(index) // v) % P


def local_count(N: int, v: int, P: int, coord: int, start: int = 0) -> int:
    """How many of the indices ``start … N-1`` coordinate ``coord`` owns (block-cyclic, block ``v``)."""
    idx = np.arange(start, N)
    return int(np.count_nonzero(owner_of(idx, v, P) == coord))


def layer_slices(width: int, Pz: int) -> list[tuple[int, int]]:
    """The contiguous part ``s_z = [lo, hi)`` of a ``width``-wide block that layer ``z`` updates
    (sizes differ by at most one; empty when ``width < Pz``)."""
    base, extra = divmod(width, Pz)
    out, lo = [], 0
    for z in range(Pz):
        hi = lo + base + (1 if z < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out
