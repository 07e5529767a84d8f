"""C = A·B inside the caller's MPI program: what ``plan_matmul(…).bind(comm)`` returns (thesis ch. 3, COSMA).

:class:`MatmulExecutor` runs a :class:`~meshplan.solvers.matmul.plan.MatmulSchedule` on this rank's pieces
of A and B, on any communicator of ``p`` ranks, reusable for any number of calls::

    ex = mp.plan_matmul(m, n, k, comm.Get_size()).bind(comm)
    A_loc = ex.distribute("A", A)       # A only on the root (rank 0); None elsewhere
    B_loc = ex.distribute("B", B)
    C_loc = ex(A_loc, B_loc)            # this rank's piece of C = A·B
    C = ex.collect(C_loc)               # the global C on the root, None elsewhere

Pieces (``ex.shape(name)`` is this rank's shape; ``G[ex.indices(name)]`` is the piece of a global ``G``):

* ``layout="blocked"`` (section 3.7.6; :mod:`meshplan.models.matmul.problem`): rank r = (i·pn + j)·pk + l
  of grid [pm, pn, pk] holds the rows ``a_rows`` × ``K_l`` of A (its row piece j of A[M_i, K_l]) and the
  rows ``K_l`` × columns ``b_cols`` of B (its column piece i of B[K_l, N_j]), both 2-D; its C piece is 1-D,
  the range ``c_elems`` of the row-major elements of C[M_i, N_j].  Ranks r ≥ pm·pn·pk are idle: they take
  (0, 0) pieces and return a (0,) piece.
* ``layout="scalapack"``: ScaLAPACK's 2-D block-cyclic descriptor, as ``pdgemm`` reads it: A (m×k), B (k×n)
  and C (m×n) in ``mb×nb`` blocks over a row-major ``pr×pc`` process grid (ranks ``0 … pr·pc−1`` of the
  communicator; the others hold (0, 0) pieces), source process (0, 0).  Local arrays have ScaLAPACK's
  numroc sizes; C comes back Fortran-ordered.  One Alltoallv moves A and one B into the blocked pieces,
  the schedule runs, one moves C back, each packed and unpacked by slice copies of rectangles planned once,
  at bind (:mod:`meshplan.exec.matmul.layout`); ``pdgemm`` on the same pieces gives the same C.

The schedule (sections 3.6.3, 3.7.2, 3.7.3): in each of ``rounds`` slabs of K_l an Allgatherv of the A
pieces along the j-fiber and of the (transposed) B pieces along the i-fiber, a local gemm into the C
accumulator, and at the end a Reduce_scatter of it along the l-fiber; double-buffered rounds post slab
s + 1 (Iallgatherv) before multiplying slab s.  The fibers are made at bind and freed by ``close()``.

Inputs may be any numpy-compatible arrays of the right shape, in any memory order; they are converted to
the plan's dtype only when they differ.  ``out=`` (the right shape) is written in place.  A wrong shape
raises :class:`~meshplan.models.core.errors.ModelError` on the rank that passed it, naming that rank's
expected shape; the other ranks then wait in a collective, so run with ``python -m mpi4py`` to abort the
job on any rank's exception.  ``ex.words`` counts the words this rank received from other ranks per matrix
(``a``, ``b``, ``c``; ``a_in``, ``b_in``, ``c_out`` for the scalapack layout's conversions) from the
byte counter ``ex.counter``, summed over calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from meshplan.exec.runtime.comms import buffer_bytes
from meshplan.exec.matmul.layout import Conversion, blocked_regions
from meshplan.exec.runtime.executor import Executor, gather_pieces, scatter_pieces
from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError, quote
from meshplan.models.matmul.layouts import check_block, check_layout, cyclic_indices, scalapack_block
from meshplan.models.matmul.problem import rank_blocks, split

__all__ = ["MatmulExecutor"]

_EMPTY = np.empty(0, dtype=np.int64)


def _len(r) -> int:
    return r[1] - r[0]


def _check_grid(grid: Any, p: int) -> tuple[int, int]:
    try:
        pr, pc = grid
        ok = all(not isinstance(v, bool) and hasattr(v, "__index__") and int(v) >= 1 for v in (pr, pc))
    except (TypeError, ValueError):
        ok = False
    if not ok or int(pr) * int(pc) > p:
        raise ModelError(f"grid must be (pr, pc), a process grid of at most p={p} ranks, got {quote(grid)}",
                         param="grid")
    return int(pr), int(pc)


class MatmulExecutor(Executor):
    """C = A·B on this rank's pieces (module docstring).  Made by ``MatmulPlan.bind(comm, layout=…,
    block=…, grid=…)``; collective over ``comm``, like every call, ``distribute``, ``collect`` and ``close``."""

    def __init__(self, comm: Any, schedule: Any, *, layout: str = "blocked", block: Any = None,
                 grid: Any = None) -> None:
        super().__init__(comm, {"problem": schedule.problem, "grid": schedule.grid, "rounds": schedule.rounds,
                                "double_buffered": schedule.double_buffered, "layout": layout, "block": block,
                                "process_grid": grid})
        self.schedule = schedule
        self.problem = prob = schedule.problem
        self.layout = check_layout(layout)
        if self.size != prob.p:
            raise ModelError(f"the plan is for p={prob.p} ranks but comm has {self.size}; plan for "
                             f"comm.Get_size() ranks", param="comm")
        self.dtype = np.dtype(as_dtype(prob.dtype).numpy)
        self.words: dict[str, int] = {"a": 0, "b": 0, "c": 0}
        #: the scalapack layout's process grid (pr, pc) and block (mb, nb); None for the blocked layout
        self.grid = self.block = None
        if self.layout == "scalapack":
            self.grid = _check_grid(schedule.summa_grid if grid is None else grid, prob.p)
            self.block = check_block(scalapack_block(prob.m, prob.n, prob.k, *self.grid) if block is None
                                     else block)
        elif grid is not None or block is not None:
            raise ModelError("block and grid describe the scalapack layout; pass layout='scalapack' with them",
                             param=("block", "grid"))
        self._setup_schedule()
        self._shapes = {w: [self._shape(w, r) for r in range(self.size)] for w in "ABC"}
        if self.layout == "scalapack":
            self._setup_conversions()

    # -- what this rank holds ---------------------------------------------------------------------

    def shape(self, which: str) -> tuple[int, ...]:
        """The shape of this rank's piece of ``which`` ("A", "B" or "C") in the executor's layout."""
        return self._shapes[self._which(which, "ABC")][self.rank]

    def indices(self, which: str, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(I, J)``: integer arrays such that ``G[I, J]`` is the piece of the global matrix ``G`` (``which``:
        "A", "B" or "C") that rank ``rank`` (default this rank) holds, element for element."""
        which = self._which(which, "ABC")
        r = self.rank if rank is None else int(rank)
        if not 0 <= r < self.size:
            raise ModelError(f"rank must be a rank of the communicator (0..{self.size - 1}), got {r}", param="rank")
        if self.layout == "scalapack":
            rows, cols = self._cyclic(which, r)
            return rows[:, None], cols[None, :]
        return self._blocked_indices(which, r)

    def _blocked_indices(self, which: str, r: int) -> tuple[np.ndarray, np.ndarray]:
        if r >= self.schedule.grid.used:
            return (_EMPTY, _EMPTY) if which == "C" else (_EMPTY[:, None], _EMPTY[None, :])
        bl = rank_blocks(self.problem, self.schedule.grid, r)
        ranges = {"A": (bl.a_rows, bl.ks), "B": (bl.ks, bl.b_cols)}
        if which in ranges:
            (r0, r1), (c0, c1) = ranges[which]
            return np.arange(r0, r1)[:, None], np.arange(c0, c1)[None, :]
        e = np.arange(*bl.c_elems)
        return bl.rows[0] + e // _len(bl.cols), bl.cols[0] + e % _len(bl.cols)

    def global_shape(self, which: str) -> tuple[int, int]:
        pr = self.problem
        return {"A": (pr.m, pr.k), "B": (pr.k, pr.n), "C": (pr.m, pr.n)}[self._which(which, "ABC")]

    def _which(self, which: Any, allowed: str) -> str:
        if which not in tuple(allowed):
            raise ModelError(f"which must be one of {', '.join(allowed)}, got {quote(which)}", param="which")
        return which

    def _cyclic(self, which: str, r: int) -> tuple[np.ndarray, np.ndarray]:
        (pr, pc), (mb, nb) = self.grid, self.block
        if r >= pr * pc:
            return _EMPTY, _EMPTY
        prow, pcol = divmod(r, pc)
        rows, cols = self.global_shape(which)
        return cyclic_indices(rows, mb, pr, prow), cyclic_indices(cols, nb, pc, pcol)

    def _shape(self, which: str, r: int) -> tuple[int, ...]:
        if self.layout == "scalapack":
            rows, cols = self._cyclic(which, r)
            return (len(rows), len(cols))
        return self._blocked_shape(which, r)

    def _blocked_shape(self, which: str, r: int) -> tuple[int, ...]:
        g = self.schedule.grid
        if r >= g.used:
            return (0,) if which == "C" else (0, 0)
        bl = rank_blocks(self.problem, g, r)
        return {"A": (_len(bl.a_rows), _len(bl.ks)), "B": (_len(bl.ks), _len(bl.b_cols)),
                "C": (_len(bl.c_elems),)}[which]

    # -- bind: fibers, buffers, conversions ----------------------------------------------------------

    def _setup_schedule(self) -> None:
        g, p, r = self.schedule.grid, self.size, self.rank
        coords = [g.coords(q) if q < g.used else (-1, -1, -1) for q in range(p)]
        fibers = {  # name: (needed, colour, key) -- A pieces travel along j, B along i, C is reduced along l
            "j": (g.pn > 1, [(i * g.pk + l_) if i >= 0 else -1 for i, _, l_ in coords], [c[1] for c in coords]),
            "i": (g.pm > 1, [(j * g.pk + l_) if i >= 0 else -1 for i, j, l_ in coords], [c[0] for c in coords]),
            "l": (g.pk > 1, [(i * g.pn + j) if i >= 0 else -1 for i, j, _ in coords], [c[2] for c in coords]),
        }
        self._fib = {d: self.comms.split(color, key) if needed else None
                     for d, (needed, color, key) in fibers.items()}
        self._active = r < g.used
        if not self._active:
            return
        bl = self._blocks = rank_blocks(self.problem, g, r)
        self._mi, self._nj, kl = _len(bl.rows), _len(bl.cols), _len(bl.ks)
        self._slabs = [s for s in split(kl, int(self.schedule.rounds)) if _len(s)]
        width = max(_len(s) for s in self._slabs)
        self._overlap = bool(self.schedule.double_buffered) and len(self._slabs) > 1
        nbuf = 2 if self._overlap else 1
        dt = self.dtype
        self._a_parts = [_len(q) for q in bl.a_row_parts]
        self._b_parts = [_len(q) for q in bl.b_col_parts]
        self._a_pan = [np.empty(self._mi * width, dtype=dt) for _ in range(nbuf)] if g.pn > 1 else None
        self._b_pan = [np.empty(self._nj * width, dtype=dt) for _ in range(nbuf)] if g.pm > 1 else None
        self._c_acc = np.empty((self._mi, self._nj), dtype=dt) if g.pk > 1 else None
        self._c_counts = [_len(q) for q in bl.c_elem_parts]

    def _setup_conversions(self) -> None:
        """The three conversions (:mod:`meshplan.exec.matmul.layout`) and the blocked pieces they fill: A's
        and C's row-major, B's column-major (its slabs go to gemm as they are and travel transposed with
        contiguous rows, and its conversion from the Fortran-ordered block-cyclic piece copies no transpose)."""
        prob, g, me, p, dt = self.problem, self.schedule.grid, self.rank, self.size, self.dtype

        def regions(which):
            def of(r):
                if r >= g.used:
                    return []
                bl = rank_blocks(prob, g, r)
                return {"A": lambda: blocked_regions(bl.a_rows, bl.ks), "B": lambda: blocked_regions(bl.ks, bl.b_cols),
                        "C": lambda: blocked_regions(bl.rows, bl.cols, bl.c_elems)}[which]()
            return of

        self._a_blk = np.empty(self._blocked_shape("A", me), dtype=dt)
        self._b_blk = np.empty(self._blocked_shape("B", me), dtype=dt, order="F")
        self._c_blk = np.empty(self._blocked_shape("C", me), dtype=dt)
        conv = lambda w, blk, order, into: Conversion(me, p, self.block, self.grid, regions(w), blk, order,  # noqa: E731
                                                      to_blocked=into)
        self._xa = conv("A", self._a_blk, "C", True)
        self._xb = conv("B", self._b_blk, "F", True)
        self._xc = conv("C", self._c_blk, "C", False)
        self.words.update(a_in=0, b_in=0, c_out=0)

    # -- a call ---------------------------------------------------------------------------------------

    def __call__(self, A_loc: Any, B_loc: Any, out: np.ndarray | None = None) -> np.ndarray:
        """This rank's piece of C = A·B from its pieces of A and B (written into ``out`` when given)."""
        self._require_open()
        a, b = self._input("A", A_loc), self._input("B", B_loc)
        if out is not None:
            out_arr = np.asarray(out)
            if not isinstance(out, np.ndarray) or out_arr.shape != self.shape("C") or not out_arr.flags.writeable:
                raise ModelError(f"out on rank {self.rank} must be a writeable array of this rank's C shape "
                                 f"{self.shape('C')}, got {type(out).__name__} of shape {np.shape(out)}",
                                 param="out")
        if self.layout == "blocked":
            c = self._target(out, "C")
            if self._active:
                self._multiply(a, b, c)
            if out is not None and c is not out:
                out[...] = c
            return out if out is not None else c
        self._xa.run(self, "a_in", a)
        self._xb.run(self, "b_in", b)
        if self._active:
            self._multiply(self._a_blk, self._b_blk, self._c_blk)
        res = out if out is not None and out.dtype == self.dtype and out.flags.f_contiguous \
            else np.empty(self.shape("C"), dtype=self.dtype, order="F")
        self._xc.run(self, "c_out", res)
        if out is not None and res is not out:
            out[...] = res
            return out
        return res

    def _input(self, which: str, x: Any) -> np.ndarray:
        arr = np.asarray(x)
        want = self.shape(which)
        if arr.shape != want:
            where = "block-cyclic (ScaLAPACK)" if self.layout == "scalapack" else "blocked"
            raise ModelError(f"{which}_loc on rank {self.rank} has shape {arr.shape}; this rank's {where} piece "
                             f"of {which} {self.global_shape(which)} has shape {want} (ex.shape({which!r}))",
                             param=f"{which}_loc")
        return arr if arr.dtype == self.dtype else arr.astype(self.dtype)

    def _target(self, out: np.ndarray | None, which: str) -> np.ndarray:
        """Where the blocked C piece is computed: ``out`` when it is contiguous in the plan's dtype."""
        if out is not None and out.dtype == self.dtype and out.flags.c_contiguous:
            return out
        return np.empty(self.shape(which), dtype=self.dtype)

    def _multiply(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        """The COSMA schedule on this (used) rank: blocked pieces ``a``, ``b`` -> the contiguous C piece ``c``."""
        acc = self._c_acc if self._c_acc is not None else c.reshape(self._mi, self._nj)
        if self._overlap:
            self._rounds_overlapped(a, b, acc)
        else:
            for idx, (s0, s1) in enumerate(self._slabs):
                a_blk = self._panel(a, s0, s1, "a", 0)
                b_mat = self._panel(b, s0, s1, "b", 0)
                self._gemm(idx, a_blk, b_mat, acc)
        if self._c_acc is not None:
            _, r0 = self.counter.snapshot()
            self._fib["l"].Reduce_scatter(acc, c, self._c_counts, MPI.SUM)
            _, r1 = self.counter.snapshot()
            self.words["c"] += (self.schedule.grid.pk - 1) * (r1 - r0) // self.dtype.itemsize

    @staticmethod
    def _gemm(idx: int, a_blk: np.ndarray, b_mat: np.ndarray, acc: np.ndarray) -> None:
        if idx == 0:
            np.matmul(a_blk, b_mat, out=acc)
        else:
            acc += a_blk @ b_mat

    def _spec(self, key: str, s0: int, s1: int, buf: int, x: np.ndarray):
        """``(send, [panel, counts], panel as a matrix)`` of slab s0:s1 of piece ``x`` (key "a" or "b")."""
        w = s1 - s0
        if key == "a":
            send = np.ascontiguousarray(x[:, s0:s1])
            pan = self._a_pan[buf][:self._mi * w]
            return send, [pan, [q * w for q in self._a_parts]], pan.reshape(self._mi, w)
        send = np.ascontiguousarray(x[s0:s1, :].T)  # B pieces travel transposed: the panel is B_slabᵀ
        pan = self._b_pan[buf][:self._nj * w]
        return send, [pan, [q * w for q in self._b_parts]], pan.reshape(self._nj, w).T

    def _panel(self, x: np.ndarray, s0: int, s1: int, key: str, buf: int) -> np.ndarray:
        """The whole panel of slab s0:s1 along the fiber: an Allgatherv of the pieces, or the own piece."""
        if (self._a_pan if key == "a" else self._b_pan) is None:
            return x[:, s0:s1] if key == "a" else x[s0:s1, :]
        send, spec, mat = self._spec(key, s0, s1, buf, x)
        s_0, r_0 = self.counter.snapshot()
        self._fib["j" if key == "a" else "i"].Allgatherv(send, spec)
        s_1, r_1 = self.counter.snapshot()
        self.words[key] += ((r_1 - r_0) - (s_1 - s_0)) // self.dtype.itemsize
        return mat

    def _post(self, a: np.ndarray, b: np.ndarray, s0: int, s1: int, buf: int):
        """Start slab s0:s1's Iallgathervs (counted like the blocking call): ``(requests, a, b, sends)``."""
        reqs, mats, keep = [], [], []
        for key, x in (("a", a), ("b", b)):
            if (self._a_pan if key == "a" else self._b_pan) is None:
                mats.append(x[:, s0:s1] if key == "a" else x[s0:s1, :])
                continue
            send, spec, mat = self._spec(key, s0, s1, buf, x)
            sent, got = buffer_bytes(send), buffer_bytes(spec)
            self.counter.add(sent, got)
            self.words[key] += (got - sent) // self.dtype.itemsize
            reqs.append(self._fib["j" if key == "a" else "i"].comm.Iallgatherv(send, spec))
            mats.append(mat)
            keep.append(send)  # the send buffer stays alive until the wait
        return reqs, mats[0], mats[1], keep

    def _rounds_overlapped(self, a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> None:
        """Double-buffered rounds (section 3.7.3): slab s + 1 travels while slab s is multiplied."""
        slabs = self._slabs
        cur = self._post(a, b, *slabs[0], 0)
        for idx in range(len(slabs)):
            nxt = self._post(a, b, *slabs[idx + 1], (idx + 1) % 2) if idx + 1 < len(slabs) else None
            MPI.Request.Waitall(cur[0])
            self._gemm(idx, cur[1], cur[2], acc)
            cur = nxt

    # -- moving data in and out (not counted) ---------------------------------------------------------

    def distribute(self, which: str, global_array: Any, root: int = 0) -> np.ndarray:
        """This rank's piece of ``which`` ("A" or "B") from the global matrix that only ``root`` passes (the
        other ranks pass None); Fortran-ordered in the scalapack layout."""
        self._require_open()
        which = self._which(which, "AB")
        got = scatter_pieces(self.comm, root, global_array, self._shapes[which],
                             lambda arr, r: arr[self.indices(which, r)], self.dtype, what=which,
                             global_shape=self.global_shape(which))
        return np.asfortranarray(got) if self.layout == "scalapack" else got

    def collect(self, C_loc: Any, root: int = 0) -> np.ndarray | None:
        """The global C on ``root`` from every rank's piece (None on the other ranks)."""
        self._require_open()

        def place(out: np.ndarray, r: int, piece: np.ndarray) -> None:
            out[self.indices("C", r)] = piece

        return gather_pieces(self.comm, root, C_loc, self._shapes["C"], place, self.global_shape("C"),
                             self.dtype, what="C")

    def __repr__(self) -> str:
        extra = f", block={self.block}, grid={self.grid}" if self.layout == "scalapack" else ""
        return (f"MatmulExecutor({self.problem}, grid {self.schedule.grid}, rounds={self.schedule.rounds}, "
                f"layout={self.layout!r}{extra}, rank {self.rank}{', closed' if self.closed else ''})")
