"""LU (COnfLUX) and Cholesky (COnfCHOX) inside the caller's MPI program: what ``plan.bind(comm)`` returns
(thesis sections 4.7.2–4.7.5; DESIGN.md, "The capability spine").

Layout (section 4.7.2): rank ``(px, py, pz)`` — number ``px + Px·(py + Py·pz)`` of the communicator —
holds the rows ``(i // v) mod Px = px`` and the columns ``(j // v) mod Py = py`` of ``A``
(:attr:`FactorExecutor.rows`, :attr:`FactorExecutor.cols`, :attr:`FactorExecutor.local_shape`); every
layer ``pz`` is given the same tile, and :meth:`FactorExecutor.factor` starts the layers ``z > 0`` from
zeros (their partial sums).  Right-hand sides and solutions hold the rows :attr:`FactorExecutor.rows` of
``b`` / ``x`` (a vector or ``N × nrhs``), replicated over ``py`` and ``pz``.

::

    ex = mp.plan_factorization("lu", N, comm.Get_size()).bind(comm)
    F = ex.factor(ex.distribute(A))               # A on rank 0, None elsewhere
    x = ex.collect(F.solve(ex.distribute_rhs(b)))  # the global x on rank 0, None elsewhere

The factorization and the solves move their data point to point on a private duplicate of the
communicator (made at bind, freed by :meth:`close`), counted in :attr:`counter`; they create no MPI
handle per call.  Their messages depend only on the plan (and a solve's on the pivots and ``nrhs``), so the first
Cholesky factorization and the first solve of each ``nrhs`` with given factors count them message by message, and
the later ones hand them to the plain communicator and add the same bytes once.  A breakdown — a singular matrix
(LU), one that is not positive definite (Cholesky) —
raises :class:`~meshplan.models.factorization.breakdown.FactorizationBreakdown` (a
``VerificationError``) naming the step, block and column on every rank: the ranks agree on it with one
small uncounted reduction, so none waits for another.  Bad input raises ``ModelError`` on every rank: a
solve checks its right-hand side against the plan's rows on each rank, and the ranks agree on the verdict
(and on ``nrhs``) with one small uncounted reduction that is in flight while the sweeps run, so that a right
one costs no synchronisation of its own.
"""

from __future__ import annotations

import math
import sys
from typing import Any, NoReturn

import numpy as np
from mpi4py import MPI

from meshplan.exec.factorization.common import Layout, copy_tiles
from meshplan.exec.factorization.confchox import confchox
from meshplan.exec.factorization.conflux import conflux_lu
from meshplan.exec.factorization.solve import cholesky_solve, lu_solve
from meshplan.exec.runtime.executor import Executor, check_root, gather_pieces, scatter_pieces
from meshplan.models.core.errors import ModelError
from meshplan.models.factorization.breakdown import breakdown

__all__ = ["FactorExecutor", "Factors"]


class FactorExecutor(Executor):
    """COnfLUX / COnfCHOX on this rank's tile, for a schedule (or a plan holding one) on ``comm``."""

    def __init__(self, schedule: Any, comm: Any) -> None:
        schedule = getattr(schedule, "schedule", schedule)
        pr = schedule.problem
        super().__init__(comm, {"kind": pr.kind, "N": pr.N, "p": pr.p, "dtype": pr.dtype.short,
                                "grid": schedule.grid})
        pr, g = schedule.problem, schedule.grid
        if self.size != pr.p:
            raise ModelError(f"the plan is for p = {pr.p} ranks but comm has {self.size}; plan for "
                             "comm.Get_size() ranks", param="comm")
        self.schedule, self.problem, self.grid = schedule, pr, g
        self.kind, self.N = pr.kind, pr.N
        self.dtype = np.dtype(pr.dtype.numpy)
        self.layout = Layout(pr.N, g, self.rank, self.dtype)
        #: this rank's grid coordinates ``(px, py, pz)``
        self.coords = g.coords(self.rank)
        #: the global rows and columns of this rank's tile (and the rows of its right-hand sides)
        self.rows, self.cols = self.layout.rows, self.layout.cols
        self.local_shape = (len(self.rows), len(self.cols))
        # the plan's own communication: a private duplicate (no clash with the caller's messages)
        self._comm = self.comms.split(np.zeros(self.size, dtype=np.int64), np.arange(self.size))
        self._control = self._comm.comm  # uncounted agreement traffic, and the kernels' messages once counted
        #: the bytes (sent, received) of a Cholesky factorization, counted message by message in the first one
        #: without a breakdown; later ones run on the plain communicator and add them (its messages depend
        #: only on the plan)
        self._factor_bytes: tuple[int, int] | None = None
        # a solve's messages may not match when the ranks' right-hand sides disagree (which its in-flight check
        # then reports on every rank): MPI must return that error, not abort
        self._control.Set_errhandler(MPI.ERRORS_RETURN)
        #: a solve's check: this rank's ``[wrong, shape word, −shape word]`` and the ranks' maximum (reused)
        self._rhs_status, self._rhs_agreed = np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
        self._parts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._work: np.ndarray | None = None  # the working tile a factorization overwrites, reused by every call
        self._input = (self.size, 2 * self.size)   # the first ranks with a wrong tile / wrong values (see _prepare)
        #: the reduction after a factorization: this rank's and the first ``[breakdown, wrong, non-finite]``
        self._agreement = (np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64))

    def __repr__(self) -> str:
        return (f"FactorExecutor({self.kind}, N={self.N}, grid={self.grid}, rank={self.rank} at {self.coords}"
                f"{', closed' if self.closed else ''})")

    def _part(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and columns of rank ``r``'s tile."""
        if r not in self._parts:
            lay = Layout(self.N, self.grid, r)
            self._parts[r] = (lay.rows, lay.cols)
        return self._parts[r]

    # -- moving data in and out (uncounted) -------------------------------------------------------------
    def distribute(self, A_global: Any, root: int = 0) -> np.ndarray:
        """This rank's tile ``A[rows, cols]`` of the ``N × N`` matrix only ``root`` holds (others pass None)."""
        self._require_open()
        shapes = [(len(self._part(r)[0]), len(self._part(r)[1])) for r in range(self.size)]
        return scatter_pieces(self._control, root, A_global, shapes,
                              lambda a, r: a[np.ix_(*self._part(r))], self.dtype, what="A",
                              global_shape=(self.N, self.N))

    def distribute_rhs(self, b_global: Any, root: int = 0) -> np.ndarray:
        """This rank's rows ``b[rows]`` of a right-hand side (length ``N`` or ``N × nrhs``) only ``root`` holds."""
        self._require_open()
        root = check_root(self._control, root)
        shape = None
        if self.rank == root and b_global is not None:
            shape = np.shape(b_global)
        shape = self._control.bcast(shape, root=root)
        if shape is not None and not (len(shape) in (1, 2) and shape[0] == self.N and min(shape) > 0):
            raise ModelError(f"b has shape {tuple(shape)}; give N = {self.N} rows (a vector or N × nrhs)",
                             param="b")
        tail = tuple(shape[1:]) if shape is not None else ()
        shapes = [(len(self._part(r)[0]), *tail) for r in range(self.size)]
        return scatter_pieces(self._control, root, b_global, shapes, lambda a, r: a[self._part(r)[0]],
                              self.dtype, what="b", global_shape=(self.N, *tail))

    def collect(self, x_loc: Any, root: int = 0) -> np.ndarray | None:
        """The global ``x`` (length ``N`` or ``N × nrhs``) on ``root`` from every rank's rows; None elsewhere."""
        self._require_open()
        x = np.asarray(x_loc)
        tail = self._agree_rows(x, "x_loc")
        keep = self.coords[1] == 0 and self.coords[2] == 0  # one copy of each row: the ranks (px, 0, 0)
        shapes = [((len(self._part(r)[0]) if self.grid.coords(r)[1:] == (0, 0) else 0), *tail)
                  for r in range(self.size)]

        def place(out: np.ndarray, r: int, piece: np.ndarray) -> None:
            if piece.shape[0]:
                out[self._part(r)[0]] = piece

        return gather_pieces(self._control, root, x if keep else x[:0], shapes, place, (self.N, *tail),
                             self.dtype, what="x_loc")

    def _agree_rows(self, x: np.ndarray, what: str) -> tuple[int, ...]:
        """Check on every rank that each rank's ``x`` has its rows (and all the same columns); the trailing
        shape.  One small buffer ``Allgather`` of ``(bad, ndim, columns)`` per rank decides (a solve is a
        hot path); only when some rank is wrong do the ranks gather their whole shapes for the message."""
        s = x.shape
        bad = len(s) not in (1, 2) or s[0] != len(self.rows) or (len(s) == 2 and s[1] < 1)
        mine = np.array([int(bad), len(s), s[1] if len(s) == 2 and not bad else 0], dtype=np.int64)
        every = np.empty((self.size, 3), dtype=np.int64)
        self._control.Allgather(mine, every)
        if not every[:, 0].any() and (every[:, 1:] == every[0, 1:]).all():
            return tuple(s[1:])
        self._refuse(x, what)

    def _local_rhs(self, b: np.ndarray) -> np.ndarray:
        """This rank's right-hand side as the ``rows × nrhs`` matrix the sweeps run on (no copy when it is one
        already), checked against the plan's rows here; its status goes to ``_rhs_status`` for the ranks to
        agree on.  A wrong one is replaced by zeros of this rank's rows, so that the sweeps still post every
        message before every rank raises."""
        s = b.shape
        nrhs = s[1] if len(s) == 2 and s[1] > 0 else 1
        B = None
        if len(s) in (1, 2) and s[0] == len(self.rows) and (len(s) == 1 or s[1] > 0):
            try:
                B = np.ascontiguousarray(b.reshape(s[0], nrhs), dtype=self.dtype)
            except (TypeError, ValueError):
                B = None
        word = 4 * nrhs + min(len(s), 3)      # ranks agree when the maximum of word and of −word match
        st = self._rhs_status
        st[0], st[1], st[2] = B is None, word, -word
        return B if B is not None else np.zeros((len(self.rows), nrhs), dtype=self.dtype)

    def _refuse(self, x: np.ndarray, what: str, unconverted: bool = False) -> NoReturn:
        """Raise, on every rank (collective), the ``ModelError`` that names the first rank whose ``x`` does
        not hold its rows with the columns of every other rank, else the first whose values did not convert
        to the plan's dtype (``unconverted`` on that rank)."""
        views = self._control.allgather((tuple(x.shape), str(x.dtype), bool(unconverted)))
        for r, (s, _dt, _u) in enumerate(views):
            want = len(self._part(r)[0])
            if len(s) not in (1, 2) or s[0] != want or s[1:] != views[0][0][1:] or (len(s) == 2 and s[1] < 1):
                raise ModelError(f"{what} on rank {r} has shape {tuple(s)}; it must hold that rank's {want} rows "
                                 f"(ex.rows), with the same number of columns on every rank", param=what)
        r = next((r for r, v in enumerate(views) if v[2]), 0)
        raise ModelError(f"{what} on rank {r} (dtype {views[r][1]}) does not convert to {self.dtype}; give numbers",
                         param=what)

    # -- factor and solve (counted) ------------------------------------------------------------------------
    def factor(self, A_loc: Any) -> "Factors":
        """Factor the matrix whose tile this rank holds (``A_loc = A[rows, cols]``; never modified); returns
        this rank's part of the factors.  Collective over the communicator."""
        return self._finish(self._run(*self._prepare(A_loc)))

    def _prepare(self, A_loc: Any) -> tuple[np.ndarray, float]:
        """Check this rank's tile; this rank's starting tile (a copy on layer 0, zeros above) and, for LU,
        the pivot tolerance ``N·ε·max|A|``.  LU agrees on every rank's tile and on ``max|A|`` with one
        uncounted reduction before it starts (the tolerance needs it).  Cholesky needs no tolerance: its
        ranks agree on their tiles in the reduction after the factorization that also agrees on a breakdown
        (:meth:`_finish`), so it starts at once — a wrong tile is factored as zeros meanwhile (the messages
        depend only on the plan), and then raises on every rank."""
        self._require_open()
        A, numeric = self._numeric(A_loc)
        ok = A.shape == self.local_shape
        first = self.coords[2] == 0
        finite, amax = numeric, 0.0
        if ok and first and A.size and numeric:
            if A.dtype.kind == "f" and self.kind == "cholesky":  # no max|A| needed: one pass, NaN and ±inf show
                with np.errstate(over="ignore", invalid="ignore"):
                    total = float(A.sum())
                finite = math.isfinite(total) or bool(np.isfinite(A).all())  # (or a finite sum overflowed)
            elif A.dtype.kind == "f":  # two passes, no temporary: NaN propagates through max and min, ±inf shows
                hi, lo = float(A.max()), float(A.min())
                finite = math.isfinite(hi) and math.isfinite(lo)
                amax = max(hi, -lo) if finite else 0.0
            else:
                finite = bool(np.isfinite(A).all())
                amax = float(np.max(np.abs(A))) if finite else 0.0
        # the values' verdict: this rank if it holds NaN/inf, rank + size if its values are not numbers
        wrong = self.rank if numeric else self.rank + self.size
        if self.kind == "cholesky":
            self._input = (self.size if ok else self.rank, 2 * self.size if finite else wrong)
            return self._tile(A if ok and finite else None, first), 0.0
        flags = np.array([amax, -1 if ok else self.rank, -1 if finite else wrong], dtype=np.float64)
        agreed = np.empty_like(flags)
        # the agreement travels while this rank copies its tile; nothing runs on the tile before it is known
        pending = self._control.Iallreduce(flags, agreed, MPI.MAX)
        tile = self._tile(A, first) if ok and numeric else None
        pending.Wait()
        if agreed[1] >= 0:
            r = int(agreed[1])
            rows, cols = self._part(r)
            raise ModelError(f"A_loc on rank {r} does not have that rank's tile shape {(len(rows), len(cols))}; "
                             "pass ex.distribute(A) or A[np.ix_(ex.rows, ex.cols)]", param="A_loc")
        if agreed[2] >= 0:
            self._refuse_values(int(agreed[2]))
        self._input = (self.size, 2 * self.size)
        return tile, self.N * np.finfo(self.dtype).eps * agreed[0]

    def _numeric(self, A_loc: Any) -> tuple[np.ndarray, bool]:
        """``A_loc`` as an array, and whether its values are real numbers: an array of another kind (text,
        objects) is converted to the plan's dtype here, so that a rank whose values do not convert reports it
        to the agreement instead of raising alone while the other ranks wait."""
        A = np.asarray(A_loc)
        if A.dtype.kind in "biuf":
            return A, True
        if A.dtype.kind == "c":
            return A, False
        try:
            return A.astype(self.dtype), True
        except (TypeError, ValueError):
            return A, False

    def _refuse_values(self, code: int) -> NoReturn:
        """Raise the agreed verdict on a tile's values: ``code`` is the rank holding NaN or infinity, or that
        rank + size when its values are not real numbers."""
        if code >= self.size:
            raise ModelError(f"A_loc on rank {code - self.size} does not convert to {self.dtype}; give real numbers",
                             param="A_loc")
        raise ModelError(f"A_loc on rank {code} holds NaN or infinity", param="A_loc")

    def _tile(self, A: np.ndarray | None, first: bool) -> np.ndarray:
        """The working tile, kept between calls (LU row-major: a row swap is two contiguous copies; Cholesky
        column-major, as LAPACK's: its update's narrow leaves run BLAS at the tall-matrix rate): a copy of ``A``
        on layer 0, zeros above and for ``A = None``.  COnfCHOX factors in place, so its tile becomes the
        factors; it is reused only when no :class:`Factors` of an earlier call holds it any more."""
        if self._work is not None and self.kind == "cholesky" and sys.getrefcount(self._work) > 2:
            self._work = None  # COnfCHOX factored in place: the Factors of the last call still hold this tile
        if self._work is None:  # LU row-major (a row swap is two contiguous copies), Cholesky column-major
            self._work = np.empty(self.local_shape, self.dtype, order="F" if self.kind == "cholesky" else "C")
        tile = self._work
        if first and A is not None:
            copy_tiles(tile, A)  # a row-major A_loc into Cholesky's column-major tile: cache-sized tiles
        else:
            tile.fill(0)
        return tile

    def _run(self, tile: np.ndarray, tol: float):
        """The factorization proper (all of its words, counted): ``(F, pivots, diag, breakdown)``."""
        if self.kind == "lu":
            F, steps, diag, bad = conflux_lu(self._comm, self.layout, tile, tol)
            return F, [np.asarray(s["pivots"], dtype=np.int64) for s in steps if "pivots" in s], diag, bad
        known = self._factor_bytes
        if known is not None:
            F, bad = confchox(self._control, self.layout, tile)
            self.counter.add(*known)
            return F, None, None, bad
        s0, r0 = self.counter.snapshot()
        F, bad = confchox(self._comm, self.layout, tile)
        if bad is None:
            s1, r1 = self.counter.snapshot()
            self._factor_bytes = (s1 - s0, r1 - r0)
        return F, None, None, bad

    def _finish(self, raw) -> "Factors":
        F, pivots, diag, bad = raw
        self._agree_breakdown(bad)
        return Factors(self, F, pivots, diag)

    def _agree_breakdown(self, bad: tuple[int, int | None] | None) -> None:
        """Every rank learns the first breakdown any rank saw, and (Cholesky) the first rank whose tile was
        wrong (one uncounted MIN reduction), and raises it: a wrong tile first, then a breakdown."""
        v, n = self.grid.v, -(-self.N // self.grid.v)
        code = n * (v + 1) if bad is None else bad[0] * (v + 1) + (v if bad[1] is None else bad[1])
        mine, first = self._agreement
        mine[0], (mine[1], mine[2]) = code, self._input
        self._control.Allreduce(mine, first, MPI.MIN)
        if first[1] < self.size:
            r = int(first[1])
            rows, cols = self._part(r)
            raise ModelError(f"A_loc on rank {r} does not have that rank's tile shape {(len(rows), len(cols))}; "
                             "pass ex.distribute(A) or A[np.ix_(ex.rows, ex.cols)]", param="A_loc")
        if first[2] < 2 * self.size:
            self._refuse_values(int(first[2]))
        if first[0] < n * (v + 1):
            t, k = divmod(int(first[0]), v + 1)
            raise breakdown(self.kind, self.N, v, t, 0 if k == v else k)


class Factors:
    """This rank's part of a distributed factorization (:meth:`FactorExecutor.factor`).

    ``local`` holds the entries this rank finalized (block-cyclic like ``A``: ``L10`` / ``L00``, for LU
    also ``U00`` and the reduced pivot rows ``A01``); ``pivots`` (LU) the rows in pivot order, ``PA = LU``
    (the same on every rank).  :meth:`solve` uses them where they lie."""

    __slots__ = ("executor", "kind", "local", "pivots", "_steps", "_diag", "_bytes")

    def __init__(self, executor: FactorExecutor, F: np.ndarray, steps: list | None, diag: dict | None) -> None:
        self.executor, self.kind, self.local = executor, executor.kind, F
        self._steps, self._diag = steps, diag
        #: nrhs -> the bytes (sent, received) of a solve, counted message by message in the first right one
        #: with that nrhs; later solves run on the plain communicator and add them (a solve's messages depend
        #: only on the plan, the pivots and nrhs)
        self._bytes: dict[int, tuple[int, int]] = {}
        self.pivots = None if steps is None else np.concatenate(steps) if steps else np.zeros(0, np.int64)

    def __repr__(self) -> str:
        return f"Factors({self.kind}, N={self.executor.N}, rank={self.executor.rank}, local={self.local.shape})"

    def solve(self, b_loc: Any) -> np.ndarray:
        """``x_loc`` (this rank's rows of ``x``, shaped like ``b_loc``) with ``A x = b``, from this rank's rows
        of ``b`` (``ex.distribute_rhs(b)``: a vector or ``rows × nrhs``).  Collective; no factor is
        gathered (words: :func:`meshplan.models.factorization.solve_cost.solve_cost`).  A ``b_loc`` that
        does not hold this rank's rows, or whose columns differ from another rank's, raises ``ModelError``
        on every rank (after the sweeps, which then run on zeros)."""
        ex = self.executor
        ex._require_open()
        b = np.asarray(b_loc)
        B = ex._local_rhs(b)
        # every rank's verdict on its b_loc travels while the sweeps run: no synchronisation of its own
        check = ex._control.Iallreduce(ex._rhs_status, ex._rhs_agreed, MPI.MAX)
        faults: list = []  # the MPI errors of messages that do not match (ranks that disagree on nrhs)
        nrhs = B.shape[1]
        known = self._bytes.get(nrhs)
        comm = ex._comm if known is None else ex._control
        s0, r0 = ex.counter.snapshot()
        try:
            if self.kind == "lu":
                X = lu_solve(comm, ex.layout, self.local, self._steps, self._diag, B, faults)
            else:
                X = cholesky_solve(comm, ex.layout, self.local, B, faults)
        finally:
            check.Wait()  # every rank posted it before its sweeps: it completes
            if known is not None:
                ex.counter.add(*known)
        wrong, word, neg = ex._rhs_agreed
        if wrong or word != -neg:
            ex._refuse(b, "b_loc", unconverted=bool(ex._rhs_status[0]))
        if faults:  # messages that did not match although every rank's b_loc is right: not the user's error
            raise faults[0]
        if known is None:
            s1, r1 = ex.counter.snapshot()
            self._bytes[nrhs] = (s1 - s0, r1 - r0)
        return X.reshape(b.shape)
