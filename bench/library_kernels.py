"""The rows of ``bench/library.py`` for the matmul and factorization executors (bench/library_rank.py says
how a row is measured).

* matmul (thesis ch. 3, COSMA): the planned grid ``[pm, pn, pk]`` with one round, by hand: the fibers made
  once with ``Comm.Split``, an ``Allgatherv`` of the A pieces on the j-fiber (and of the transposed B pieces
  on the i-fiber), one gemm into a preallocated accumulator, a ``Reduce_scatter`` on the l-fiber.  The
  ScaLAPACK layout adds, on both sides, an ``Alltoallv`` per matrix between the block-cyclic and the blocked
  pieces (index maps built once: ``np.take`` into a send buffer, a scatter out of the receive buffer).
* factorization (thesis 4.7): an LU (COnfLUX) and a Cholesky (COnfCHOX) factorization, and the solve with
  their distributed factors (and, for reference, the hand-written solve with the one small reduction the
  executor keeps in flight during its sweeps: every rank's right-hand side checked, so that a wrong one raises
  everywhere).  The hand-written side calls the same kernels directly on a raw mpi4py
  communicator (``Split`` once) with a :class:`~meshplan.exec.factorization.common.Layout` — what the
  executor wraps — since an LU's communication is inseparable from its algorithm; it copies the tile into a
  working tile kept between calls, as the executor does (the kernels factor in place) and, for LU, reduces
  ``max|A|`` for the pivot tolerance.  The solve rows solve with the executor's factors on both sides (the
  same numbers in the same arrays; the hand-written factors are verified by the factor row): where a 5 MiB
  factor lies moves a solve's time by several per cent, which is placement, not overhead.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import meshplan as mp
from library_rank import Side, measure, mismatch, rounds as _rounds
from meshplan.exec.factorization.common import Layout
from meshplan.exec.factorization.confchox import confchox
from meshplan.exec.factorization.conflux import conflux_lu
from meshplan.exec.factorization.solve import cholesky_solve, lu_solve
from meshplan.models.matmul.problem import rank_blocks

__all__ = ["matmul", "factorization", "HandCosma", "HandConversion"]


class HandCosma:
    """One round of the COSMA schedule written out: fibers by ``Split``, panels and accumulator preallocated."""

    def __init__(self, world, schedule) -> None:
        g, prob, me = schedule.grid, schedule.problem, world.Get_rank()
        if int(schedule.rounds) != 1:
            raise AssertionError(f"the hand-written COSMA does one round; the plan has {schedule.rounds}")
        i, j, l_ = g.coords(me) if me < g.used else (-1, -1, -1)
        used = me < g.used
        split_if = lambda need, color, key: world.Split(color if used else MPI.UNDEFINED, key) if need else None  # noqa: E731
        self.jf = split_if(g.pn > 1, i * g.pk + l_, j)     # A pieces travel along j
        self.if_ = split_if(g.pm > 1, j * g.pk + l_, i)    # B pieces along i
        self.lf = split_if(g.pk > 1, i * g.pn + j, l_)     # C is reduced along l
        self.used = used
        if not used:
            return
        bl = rank_blocks(prob, g, me)
        mi, nj, kl = bl.rows[1] - bl.rows[0], bl.cols[1] - bl.cols[0], bl.ks[1] - bl.ks[0]
        self.mi, self.nj = mi, nj
        self.a_counts = [(b - a) * kl for a, b in bl.a_row_parts]
        self.b_counts = [(b - a) * kl for a, b in bl.b_col_parts]
        self.c_counts = [b - a for a, b in bl.c_elem_parts]
        self.a_pan = np.empty((mi, kl)) if self.jf else None
        self.b_pan = np.empty((nj, kl)) if self.if_ else None
        self.acc = np.empty((mi, nj)) if self.lf else None

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        if not self.used:
            return
        if self.jf is not None:
            self.jf.Allgatherv(a, [self.a_pan, self.a_counts])
            a = self.a_pan
        if self.if_ is not None:
            self.if_.Allgatherv(np.ascontiguousarray(b.T), [self.b_pan, self.b_counts])
            b = self.b_pan.T
        if self.lf is None:
            np.matmul(a, b, out=c.reshape(self.mi, self.nj))
            return
        np.matmul(a, b, out=self.acc)
        self.lf.Reduce_scatter(self.acc, c, self.c_counts, MPI.SUM)

    def free(self) -> None:
        for c in (self.jf, self.if_, self.lf):
            if c is not None and c != MPI.COMM_NULL:
                c.Free()


def _maps(pieces, shape, order):
    """Global ``owner`` and ``position`` (in the owner's piece, memory order ``order``) of every element."""
    owner, pos = np.full(shape, -1, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for r, (I, J) in enumerate(pieces):
        gi, gj = np.broadcast_arrays(I, J)
        owner[gi, gj] = r
        pos[gi, gj] = np.arange(gi.size).reshape(gi.shape, order=order)
    return owner, pos


def _flat(I, J, order):
    gi, gj = np.broadcast_arrays(I, J)
    return gi.ravel(order=order), gj.ravel(order=order)


class HandConversion:
    """One ``Alltoallv`` from one layout of a matrix to another: each rank sends its elements sorted by
    (destination, position there) and scatters what it receives into its positions (maps built once)."""

    def __init__(self, me: int, p: int, src, dst, shape) -> None:
        (s_pieces, s_order), (d_pieces, d_order) = src, dst
        s_owner, _ = _maps(s_pieces, shape, s_order)
        d_owner, d_pos = _maps(d_pieces, shape, d_order)
        gi, gj = _flat(*s_pieces[me], s_order)
        to = d_owner[gi, gj]
        self.send_pos = np.lexsort((d_pos[gi, gj], to))
        self.send_counts = np.bincount(to, minlength=p).tolist()
        di, dj = _flat(*d_pieces[me], d_order)
        frm = s_owner[di, dj]
        self.recv_pos = np.argsort(frm, kind="stable")
        self.recv_counts = np.bincount(frm, minlength=p).tolist()
        self.send, self.recv = np.empty(len(gi)), np.empty(len(di))

    def __call__(self, comm, source: np.ndarray, target: np.ndarray) -> None:
        np.take(source, self.send_pos, out=self.send)
        comm.Alltoallv([self.send, self.send_counts], [self.recv, self.recv_counts])
        target[self.recv_pos] = self.recv


def matmul(ctx, quick: bool, repeats) -> list[dict]:
    world, p, me = ctx.world, ctx.size, ctx.rank
    m = n = k = 192 if quick else 1536
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    C = A @ B
    scale = np.abs(C).max()
    close = lambda got, idx: bool(np.abs(got - C[idx]).max(initial=0.0) <= 1e-12 * scale)  # noqa: E731
    plan = mp.plan_matmul(m, n, k, p)
    cosma = HandCosma(world, plan.schedule)
    rounds = _rounds(repeats, 20, quick)
    rows = []
    with plan.bind(world) as ex:
        a, b = A[ex.indices("A")], B[ex.indices("B")]
        c = np.empty(ex.shape("C"))                         # one output for both sides
        idx = ex.indices("C")
        rows.append(measure(ctx, f"matmul {m}x{n}x{k}, grid {plan.grid}", "Allgatherv ; gemm ; Reduce_scatter "
                            "(Split fibers)", a.nbytes + b.nbytes, ex,
                            Side(lambda: ex(a, b, out=c), lambda: close(c, idx), lambda: mismatch(c, C[idx])),
                            Side(lambda: cosma(a, b, c), lambda: close(c, idx), lambda: mismatch(c, C[idx])),
                            rounds, lambda: c.fill(np.nan)))
        blocked = {w: ([ex.indices(w, r) for r in range(p)], "C") for w in "ABC"}
        blk = {w: np.empty(ex.shape(w)) for w in "ABC"}
    with plan.bind(world, layout="scalapack") as sx:
        cyc = {w: ([sx.indices(w, r) for r in range(p)], "F") for w in "ABC"}
        conv = {w: HandConversion(me, p, *((cyc[w], blocked[w]) if w != "C" else (blocked[w], cyc[w])),
                                  sx.global_shape(w)) for w in "ABC"}
        a_s, b_s = np.asfortranarray(A[sx.indices("A")]), np.asfortranarray(B[sx.indices("B")])
        s_c = np.empty(sx.shape("C"), order="F")
        idx = sx.indices("C")

        def by_hand():
            conv["A"](world, a_s.reshape(-1, order="F"), blk["A"].reshape(-1))
            conv["B"](world, b_s.reshape(-1, order="F"), blk["B"].reshape(-1))
            cosma(blk["A"], blk["B"], blk["C"])
            conv["C"](world, blk["C"], s_c.reshape(-1, order="F"))

        (pr, pc), (mb, nb) = sx.grid, sx.block
        rows.append(measure(ctx, f"matmul {m}x{n}x{k}, scalapack layout {mb}x{nb} on {pr}x{pc}",
                            "Alltoallv ×2 ; the above ; Alltoallv", a_s.nbytes + b_s.nbytes, sx,
                            Side(lambda: sx(a_s, b_s, out=s_c), lambda: close(s_c, idx), lambda: mismatch(s_c, C[idx])),
                            Side(by_hand, lambda: close(s_c, idx), lambda: mismatch(s_c, C[idx])), rounds,
                            lambda: s_c.fill(np.nan)))
    cosma.free()
    return rows


class Residual:
    """The verification of a solve: the scaled residual ‖Ax − b‖ / (‖A‖·‖x‖·N·ε) of the solution whose rows
    this rank holds must be ≤ 10 (:meth:`ok`, collective); :meth:`detail` reports the last one checked."""

    def __init__(self, ex, A, b) -> None:
        self.ex, self.A, self.b, self.last = ex, A, b, None

    def ok(self, x_loc) -> bool:
        x, res = self.ex.collect(x_loc), None
        if self.ex.rank == 0:
            res = float(np.linalg.norm(self.A @ x - self.b) / (np.linalg.norm(self.A) * np.linalg.norm(x) * self.ex.N
                                                              * np.finfo(float).eps))
        self.last = self.ex.comm.bcast(res, root=0)
        return bool(self.last <= 10)  # NaN fails

    def detail(self) -> str:
        return f"scaled residual {self.last:.3g} (must be <= 10)"


def factorization(ctx, quick: bool, repeats) -> list[dict]:
    world, p, me = ctx.world, ctx.size, ctx.rank
    N = 192 if quick else 1536
    rng = np.random.default_rng(3)
    M, b = rng.standard_normal((N, N)), rng.standard_normal(N)
    rows = []
    for kind in ("lu", "cholesky"):
        A = M if kind == "lu" else M @ M.T + N * np.eye(N)
        plan = mp.plan_factorization(kind, N, p)
        dup = world.Split(0, me)                     # by hand: the kernels' private communicator, made once
        with plan.bind(world) as ex:
            lay = Layout(N, ex.grid, me, ex.dtype)
            a_loc = A[np.ix_(ex.rows, ex.cols)]
            b_loc = b[ex.rows]
            first = ex.coords[2] == 0
            got = {}

            def ours():
                got["ours"] = ex.factor(a_loc)

            work = np.empty(ex.local_shape)             # by hand: the working tile, kept like the executor's

            def by_hand():
                tile = work
                if first:
                    np.copyto(tile, a_loc)
                else:
                    tile.fill(0)
                if kind == "cholesky":
                    got["hand"] = confchox(dup, lay, tile)[:1]
                    return
                amax = np.array([np.abs(a_loc).max() if first else 0.0])
                dup.Allreduce(MPI.IN_PLACE, amax, MPI.MAX)
                F, steps, diag, _ = conflux_lu(dup, lay, tile, N * np.finfo(float).eps * amax[0])
                got["hand"] = (F, [np.asarray(s["pivots"], dtype=np.int64) for s in steps if "pivots" in s], diag)

            def hand_solve(B, factors="hand"):
                """The solve kernel by hand with the hand-written factors (verifying them), or with the
                executor's (the same numbers in the same arrays: the solve rows time the solve alone)."""
                if factors == "ours":
                    F = got["ours"]
                    return (cholesky_solve(dup, lay, F.local, B) if kind == "cholesky"
                            else lu_solve(dup, lay, F.local, F._steps, F._diag, B))
                if kind == "cholesky":
                    return cholesky_solve(dup, lay, got["hand"][0], B)
                F, steps, diag = got["hand"]
                return lu_solve(dup, lay, F, steps, diag, B)

            B = b_loc.reshape(-1, 1)
            res_ours, res_hand = Residual(ex, A, b), Residual(ex, A, b)
            ok_ours = lambda: res_ours.ok(got["ours"].solve(b_loc))  # noqa: E731
            ok_hand = lambda: res_hand.ok(hand_solve(B).reshape(-1))  # noqa: E731
            grid = f"grid {list(plan.grid)} v={plan.block}"
            rounds = _rounds(repeats, 12 if kind == "lu" else 40, quick)
            rows.append(measure(ctx, f"{kind} factor N={N}, {grid}", f"{'COnfLUX' if kind == 'lu' else 'COnfCHOX'} "
                                "kernel on a raw comm", a_loc.nbytes, ex, Side(ours, ok_ours, res_ours.detail),
                                Side(by_hand, ok_hand, res_hand.detail), rounds))
            sol, status, agreed = {}, np.array([0, 5, -5], dtype=np.int64), np.empty(3, dtype=np.int64)

            def hand_solve_checked():  # the executor's check of every rank's b_loc, by hand: a reduction of
                check = dup.Iallreduce(status, agreed, MPI.MAX)  # 3 integers in flight during the sweeps
                sol["hand"] = hand_solve(B, "ours")
                check.Wait()

            ours_solve = Side(lambda: sol.__setitem__("ours", got["ours"].solve(b_loc)),
                              lambda: res_ours.ok(sol["ours"]), res_ours.detail)
            ok_solve = lambda: res_hand.ok(sol["hand"].reshape(-1))  # noqa: E731
            solve_rounds = _rounds(repeats, 30 if kind == "lu" else 100, quick)
            rows.append(measure(ctx, f"{kind} solve N={N}, {grid}", "the same solve kernel on a raw comm",
                                b_loc.nbytes, ex, ours_solve,
                                Side(lambda: sol.__setitem__("hand", hand_solve(B, "ours")), ok_solve,
                                     res_hand.detail),
                                solve_rounds))
            rows.append(measure(ctx, f"{kind} solve N={N}, {grid}", "reference: the same with an Iallreduce of 3 "
                                "integers in flight (the executor's check of every rank's b_loc)", b_loc.nbytes, ex,
                                ours_solve, Side(hand_solve_checked, ok_solve, res_hand.detail),
                                solve_rounds))
        dup.Free()
    return rows
