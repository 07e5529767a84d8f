"""Distributed matrix multiplication C = A·B: the problem, the processor grid and the blocked layouts.

Notation of the thesis, chapter 3 (section 3.6.1): A is m×k, B is k×n, C is m×n; p ranks, each with a
fast memory of S words.  A processor grid ``[pm, pn, pk]`` cuts the iteration space m×n×k into
``pm·pn·pk ≤ p`` local domains (ranks beyond the grid stay idle, section 3.7.1).  Grid coordinates of a
used rank ``r``: ``r = (i·pn + j)·pk + l``.

Blocked layout (section 3.7.6): the local domain of rank (i, j, l) is ``M_i × N_j × K_l``.  Each block of A
that the domain needs, ``A[M_i, K_l]``, is needed by the ``pn`` ranks (i, ·, l); it is split by rows into
``pn`` pieces and rank (i, j, l) starts with piece j.  Likewise ``B[K_l, N_j]`` is split by columns into
``pm`` pieces, piece i on rank (i, j, l); and C ends with ``C[M_i, N_j]`` (row-major) cut into ``pk``
contiguous element ranges, range l on rank (i, j, l) — whole rows when pk divides |M_i|, and never an empty
range while |M_i|·|N_j| ≥ pk.  So no data is reshuffled before or after the schedule.

Split conventions (chosen so that rank 0 is a worst rank for every term of the cost, see
:mod:`meshplan.models.matmul.costs`): the grid splits of m, n, k and the C row split put the larger parts
first; the A row split and the B column split put the smaller parts first; the C element split puts the
larger parts first.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from meshplan.models.core.checks import check_ranks
from meshplan.models.core.dtypes import FLOAT, as_dtype
from meshplan.models.core.errors import ModelError, quote
from meshplan.models.core.values import Value, value

__all__ = ["MatmulError", "MatmulProblem", "Grid", "split", "part", "RankBlocks", "rank_blocks", "BlockCyclic",
           "SIZE_LIMIT"]

#: the largest m·n·k (and memory) the planner takes: its integers are 64-bit
SIZE_LIMIT = 2**62


class MatmulError(ModelError):
    """A matrix-multiplication problem or grid is ill-formed."""


def split(n: int, parts: int, *, larger_first: bool = True) -> tuple[tuple[int, int], ...]:
    """``n`` indices cut into ``parts`` contiguous ranges ``(start, stop)`` whose sizes differ by ≤ 1."""
    if parts < 1:
        raise MatmulError(f"cannot split {n} indices into {parts} parts; use at least 1 part")
    base, extra = divmod(n, parts)
    sizes = [base + (1 if (q < extra if larger_first else q >= parts - extra) else 0) for q in range(parts)]
    out, start = [], 0
    for s in sizes:
        out.append((start, start + s))
        start += s
    return tuple(out)


def part(n: int, parts: int, q: int, *, larger_first: bool = True) -> tuple[int, int]:
    """``split(n, parts, larger_first=…)[q]`` without building the other parts."""
    base, extra = divmod(n, parts)
    if larger_first:
        start = q * base + min(q, extra)
        return start, start + base + (1 if q < extra else 0)
    small = parts - extra  # the first `small` parts have `base` items
    start = q * base + max(0, q - small)
    return start, start + base + (1 if q >= small else 0)


def _whole(v: object) -> object:
    """``v`` as a Python int when it is an integer of any kind (numpy's too), else unchanged."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        return v
    return operator.index(v)


def _positive(name: str, v: object, what: str | None = None) -> int:
    v = _whole(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise MatmulError(f"{what or name} must be a positive integer, got {quote(v)}", param=name)
    return v


@value
class MatmulProblem(Value):
    """C = A·B with A m×k, B k×n on ``p`` ranks of ``memory`` words each (section 3.6), in ``dtype``
    (``f64`` or ``f32``, either spelling; kept as the short name).

    ``memory=None`` means unlimited (plan for the least communication).  A finite memory must hold the
    matrices collectively: ``p·S ≥ mn + mk + nk`` (assumption of section 3.6).  This is the one place the
    inputs of a matmul are checked; every error names the parameter."""

    m: int
    n: int
    k: int
    p: int
    memory: int | None = None
    dtype: str = "f64"

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))
        object.__setattr__(self, "p", check_ranks(_whole(self.p), "p"))
        object.__setattr__(self, "dtype", as_dtype(self.dtype, allowed=FLOAT).short)
        if self.m * self.n * self.k > SIZE_LIMIT:
            raise MatmulError(f"m·n·k = {self.m * self.n * self.k:.3g} is more than 2**62, beyond the planner's "
                              "64-bit integers; give smaller matrices", param=("m", "n", "k"))
        if self.memory is not None:
            mem = _positive("memory", self.memory, "memory (words per rank)")
            object.__setattr__(self, "memory", mem)
            if mem > SIZE_LIMIT:
                raise MatmulError("memory is more than 2**62 words; leave it out for no limit",
                                  param="memory")
            need = self.m * self.n + self.m * self.k + self.n * self.k
            if self.p * mem < need:
                raise MatmulError(
                    f"memory too small: {self.p} ranks × {mem} words cannot hold A, B and C "
                    f"({need} words); give memory ≥ {-(-need // self.p)} or use more ranks (p)",
                    param=("memory", "p"))

    @property
    def itemsize(self) -> int:
        return as_dtype(self.dtype).itemsize

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def __str__(self) -> str:
        mem = "∞" if self.memory is None else str(self.memory)
        return f"{self.m}x{self.n}x{self.k} on {self.p} ranks, S={mem} words, {self.dtype}"


@value
class Grid(Value):
    """A processor grid ``[pm, pn, pk]`` (section 3.6.1); its ``used`` ranks are ``pm·pn·pk``.  Its JSON is
    the list ``[pm, pn, pk]``."""

    pm: int
    pn: int
    pk: int

    def __post_init__(self) -> None:
        for name in ("pm", "pn", "pk"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))

    @property
    def used(self) -> int:
        return self.pm * self.pn * self.pk

    def as_list(self) -> list[int]:
        return [self.pm, self.pn, self.pk]

    def to_json(self) -> list[int]:  # type: ignore[override] - a grid is written as [pm, pn, pk]
        return self.as_list()

    def coords(self, r: int) -> tuple[int, int, int]:
        """Grid coordinates (i, j, l) of used rank ``r``."""
        if not 0 <= r < self.used:
            raise MatmulError(f"rank {r} is not in grid {self} ({self.used} ranks)")
        ij, l_ = divmod(r, self.pk)
        i, j = divmod(ij, self.pn)
        return i, j, l_

    def rank(self, i: int, j: int, l_: int) -> int:
        return (i * self.pn + j) * self.pk + l_

    def check_fits(self, prob: MatmulProblem) -> None:
        """Every rank of the grid gets a non-empty local domain and the grid fits in ``p`` ranks."""
        if self.used > prob.p:
            raise MatmulError(f"grid {self} needs {self.used} ranks but only {prob.p} are available",
                              param="grid")
        for dim, parts, size in (("m", self.pm, prob.m), ("n", self.pn, prob.n), ("k", self.pk, prob.k)):
            if parts > size:
                raise MatmulError(f"grid {self} cuts {dim}={size} into {parts} parts: some ranks would have "
                                  f"an empty local domain; use at most {size} parts along {dim}", param="grid")

    def __str__(self) -> str:
        return f"[{self.pm},{self.pn},{self.pk}]"


@dataclass(frozen=True, slots=True)
class RankBlocks:
    """What one used rank works on and holds in the blocked layout (section 3.7.6); ranges are
    ``(start, stop)`` global indices."""

    rows: tuple[int, int]        # M_i
    cols: tuple[int, int]        # N_j
    ks: tuple[int, int]          # K_l
    a_rows: tuple[int, int]      # own piece of A[M_i, K_l]: these rows (all of K_l)
    b_cols: tuple[int, int]      # own piece of B[K_l, N_j]: these columns (all of K_l)
    c_elems: tuple[int, int]     # own piece of C[M_i, N_j] at the end: this range of its row-major elements
    a_row_parts: tuple[tuple[int, int], ...]   # the pn row pieces of M_i (global), j-th is ours
    b_col_parts: tuple[tuple[int, int], ...]   # the pm column pieces of N_j (global), i-th is ours
    c_elem_parts: tuple[tuple[int, int], ...]  # the pk element ranges of C[M_i, N_j], l-th is ours


def _shift(parts, start):
    return tuple((a + start, b + start) for a, b in parts)


def rank_blocks(prob: MatmulProblem, grid: Grid, r: int) -> RankBlocks:
    """The blocks of used rank ``r`` (module docstring for the conventions)."""
    i, j, l_ = grid.coords(r)
    rows = split(prob.m, grid.pm)[i]
    cols = split(prob.n, grid.pn)[j]
    ks = split(prob.k, grid.pk)[l_]
    ap = _shift(split(rows[1] - rows[0], grid.pn, larger_first=False), rows[0])
    bp = _shift(split(cols[1] - cols[0], grid.pm, larger_first=False), cols[0])
    cp = split((rows[1] - rows[0]) * (cols[1] - cols[0]), grid.pk)
    return RankBlocks(rows, cols, ks, ap[j], bp[i], cp[l_], ap, bp, cp)


@dataclass(frozen=True, slots=True)
class BlockCyclic:
    """A ScaLAPACK 2-D block-cyclic descriptor (the layout pdgemm reads): a ``rows×cols`` matrix in
    ``mb×nb`` blocks dealt round-robin over a ``nprow×npcol`` process grid (row-major ranks)."""

    rows: int
    cols: int
    mb: int
    nb: int
    nprow: int
    npcol: int

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "mb", "nb", "nprow", "npcol"):
            _positive(name, getattr(self, name))

    def owner(self, gi: int, gj: int) -> tuple[int, int]:
        return (gi // self.mb) % self.nprow, (gj // self.nb) % self.npcol

    def local_indices(self, prow: int, pcol: int) -> tuple[list[int], list[int]]:
        """Global row and column indices held by process (prow, pcol), in local (Fortran) order."""
        ri = [g for g in range(self.rows) if (g // self.mb) % self.nprow == prow]
        ci = [g for g in range(self.cols) if (g // self.nb) % self.npcol == pcol]
        return ri, ci
