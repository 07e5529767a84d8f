"""Dense LU / Cholesky factorization problems and their 2.5-D processor grids (thesis section 4.7).

* :class:`FactorProblem` — ``kind`` (``"lu"`` or ``"cholesky"``), the order ``N``, the number of
  ranks ``p``, the fast (local) memory ``S`` in words per rank (``memory``; ``None``: unbounded), the
  dtype, and optional pins of the block size ``block`` and the grid ``grid``.  It is the one place these
  inputs are validated (:meth:`FactorProblem.__post_init__`); every deeper function takes it typed.
* :class:`FactorGrid` — the grid ``[Px, Py, Pz]`` and the block size ``v``.  Rows are distributed
  block-cyclically over ``Px`` (row ``i`` on ``px = (i // v) mod Px``), columns over ``Py``
  (``py = (j // v) mod Py``); the ``Pz`` layers hold partial sums of the same tile (2.5-D, section
  4.7.2), and layer ``z`` performs the part ``s_z`` of every rank-``v`` Schur update, so ``v ≥ Pz``
  (the section 4.7.2 constraint ``v ≥ c = pS/N²``).  Rank ``(px, py, pz)`` has number
  ``px + Px·(py + Py·pz)``.

Both raise :class:`FactorModelError` (a :class:`~meshplan.models.core.errors.ModelError` naming the
parameter) with a message saying what to change.  ``str(grid) == "[2,2,2] v=16"`` and
``FactorGrid.parse`` reads it back; :func:`parse_grid` reads a grid written ``"2,2,2"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from meshplan.models.core.checks import check_ranks
from meshplan.models.core.dtypes import FLOAT, DType, as_dtype
from meshplan.models.core.errors import ModelError, quote
from meshplan.models.core.values import Value, value

__all__ = ["FactorModelError", "FactorProblem", "FactorGrid", "KINDS", "parse_grid", "owner_of",
           "local_count", "layer_slices", "MAX_CUBE"]

#: the two factorizations
KINDS = ("lu", "cholesky")
#: the largest ``N³`` the models' 64-bit integer step sums hold
MAX_CUBE = 2**62


class FactorModelError(ModelError):
    """A factorization problem, grid or block size is ill-formed."""


def _whole(val: Any) -> bool:
    return isinstance(val, (int, np.integer)) and not isinstance(val, bool)


def parse_grid(text: Any) -> tuple[int, int, int]:
    """A grid pin as ``(Px, Py, Pz)``: a sequence of three positive integers or its text ``"2,2,1"``."""
    vals: Any = None
    if isinstance(text, str):
        try:
            vals = tuple(int(x) for x in text.replace(" ", "").split(","))
        except ValueError:
            vals = None
    elif isinstance(text, (tuple, list)) and all(_whole(x) for x in text):
        vals = tuple(int(x) for x in text)
    if vals is None or len(vals) != 3 or min(vals) < 1:
        raise FactorModelError(f"grid must be three positive integers PX,PY,PZ (e.g. 2,2,1), got {quote(text)}",
                               param="grid")
    return vals  # type: ignore[return-value]


@value
class FactorProblem(Value):
    """Factor an ``N × N`` matrix on ``p`` ranks with at most ``S`` words of memory per rank (``memory``),
    in ``dtype``; ``block`` / ``grid`` pin the block size ``v`` / the grid ``(Px, Py, Pz)``."""

    kind: str
    N: int
    p: int
    memory: int | None = None
    dtype: DType | str = "f64"
    block: int | None = None
    grid: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FactorModelError(f"unknown factorization {quote(self.kind)}; use one of {', '.join(KINDS)}",
                                   param="kind")
        if not _whole(self.N) or self.N < 1:
            raise FactorModelError(f"the matrix order N must be a positive integer, got {quote(self.N)}",
                                   param="N")
        object.__setattr__(self, "N", int(self.N))
        if self.N**3 > MAX_CUBE:
            raise FactorModelError(f"N = {self.N:,}: N³ is more than 2**62, beyond the models' 64-bit integers; "
                                   "give a smaller N", param="N")
        object.__setattr__(self, "p", check_ranks(int(self.p) if _whole(self.p) else self.p, "p"))
        if self.memory is not None:
            if not _whole(self.memory) or self.memory < 1:
                raise FactorModelError(f"memory must be a positive number of words per rank, got "
                                       f"{quote(self.memory)}", param="memory")
            if self.memory > MAX_CUBE:
                raise FactorModelError("memory is more than 2**62 words; leave it out for unlimited memory",
                                       param="memory")
            object.__setattr__(self, "memory", int(self.memory))
            if self.memory * self.p < self.N * self.N:
                raise FactorModelError(
                    f"memory too small: p·S = {self.p}·{self.memory} = {self.p * self.memory} words cannot hold "
                    f"the N² = {self.N * self.N} words of the matrix; give memory ≥ {-(-self.N * self.N // self.p)} "
                    "or more ranks", param="memory")
        object.__setattr__(self, "dtype", as_dtype(self.dtype, allowed=FLOAT))
        if self.dtype.itemsize < 8 and self.N > 2**24:
            raise FactorModelError(f"N = {self.N:,} row indices are not exact in {self.dtype.short} (the pivot "
                                   "indices travel in the matrix dtype); use dtype f64", param="dtype")
        self._check_pins()

    def _check_pins(self) -> None:
        if self.block is not None:
            if not _whole(self.block) or self.block < 1:
                raise FactorModelError(f"block must be a positive block size, got {quote(self.block)}",
                                       param="block")
            object.__setattr__(self, "block", int(self.block))
        if self.grid is None:
            return
        g = parse_grid(self.grid)
        object.__setattr__(self, "grid", g)
        if g[0] * g[1] * g[2] != self.p:
            raise FactorModelError(f"grid {','.join(map(str, g))} has {g[0] * g[1] * g[2]} ranks but p = {self.p}; "
                                   "the product PX·PY·PZ must equal p", param=("grid", "p"))
        FactorGrid(*g, v=self.block if self.block is not None else g[2])  # v ≥ Pz (section 4.7.2)

    @property
    def S(self) -> int | None:
        """The fast memory ``S`` of section 4.6 in words per rank (``memory``)."""
        return self.memory


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
                raise FactorModelError(f"grid {name} must be a positive integer, got {val!r}", param="grid")
        if self.v < self.Pz:
            raise FactorModelError(
                f"the block size v = {self.v} is smaller than the number of layers Pz = {self.Pz}: each layer "
                f"does v/Pz of every rank-v update (section 4.7.2, v ≥ c); use block ≥ {self.Pz} or fewer layers",
                param="block")

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
            raise FactorModelError(f"a grid is written '[PX,PY,PZ] v=V' (e.g. '[2,2,2] v=16'), got {quote(text)}",
                                   param="grid")
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
                                   "the product Px·Py·Pz must equal p", param=("grid", "p"))
        nb = -(-problem.N // self.v)
        if nb < max(self.Px, self.Py):
            raise FactorModelError(
                f"grid {self}: N = {problem.N} gives {nb} blocks of size v = {self.v}, fewer than "
                f"max(Px, Py) = {max(self.Px, self.Py)}, so some ranks would own no rows or columns; "
                "use a smaller block or a flatter grid", param=("block", "grid"))
        if self.Pz > 1 and nb < 2:
            raise FactorModelError(
                f"grid {self}: N = {problem.N} is a single block of size v = {self.v}, so there is no Schur "
                f"update for the Pz = {self.Pz} layers to share (one rank would factor alone); "
                "use a smaller block or Pz = 1", param=("block", "grid"))


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
