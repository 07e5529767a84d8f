"""Triangular solves with COnfLUX / COnfCHOX's distributed factors, where they lie (thesis 4.7.2–4.7.5).

``A x = b`` is solved in two sweeps over the block steps, with no factor gathered anywhere: LU uses the
tournament pivots (``PA = LU``), and per step only ``lu00 = L00·U00`` (on the step's solver), the
multipliers ``L10`` (on the holders of the block column) and the reduced pivot rows ``A01`` (where
COnfLUX left them) — ``x_t = lu00⁻¹·(c_t − A01_t·x_{>t})`` with ``c_t`` the forward-reduced pivot rows,
because ``U01 = L00⁻¹·A01``.  Cholesky uses ``L00`` and ``L10`` (``A = L·Lᵀ``).

``B`` is this rank's rows of ``b`` (``rows × nrhs``, rows ``(i // v) mod Px = px``, the same on every
``py``, ``pz``); the result has the same layout.  The scheme and its words are in
:mod:`meshplan.models.factorization.solve_cost`, which the byte counter matches exactly:

* forward, per step: reduce the partial sums of the pivot rows onto the step's solver
  ``(t mod Px, t mod Py, t mod Pz)``, solve the ``v×v`` system there, send ``y_t`` to the holders of
  the block column, which update the partial sums of their remaining rows with ``L10·y_t``;
* backward, per step from the last: reduce the products ``A01·x`` (LU) or ``L10ᵀ·x`` (Cholesky) onto the
  solver, solve there, send ``x_t`` to the ranks that own its rows (and, for LU, its columns).

Every message is a point-to-point buffer on the counting communicator (tags 41–44).  Which messages flow
depends only on the plan; their sizes also on ``nrhs``.  With a list ``faults`` an MPI error of a wait (a
receive longer than its buffer: ranks that disagree on ``nrhs``) is recorded there instead of raised and
every message still completes, so that the caller — which checks the ranks' right-hand sides with a
reduction in flight during the sweeps — raises on every rank after them, where one rank alone would
otherwise leave the others waiting.
"""

from __future__ import annotations

import numpy as np

from meshplan.exec.factorization.common import Layout, exchange
from meshplan.models.factorization.cost import cyclic_count
from meshplan.models.factorization.problem import layer_slices

__all__ = ["lu_solve", "cholesky_solve"]

T_RHS, T_Y, T_PROD, T_X = 41, 42, 43, 44


def _step(lay: Layout, t: int):
    g, N, v = lay.grid, lay.N, lay.grid.v
    c0 = t * v
    vt = min(v, N - c0)
    px_t, py_t, z0 = t % g.Px, t % g.Py, t % g.Pz
    return c0, vt, c0 + vt, px_t, py_t, z0, g.rank(px_t, py_t, z0)


def _unit_lower(lu: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.linalg.solve(np.tril(lu, -1) + np.eye(lu.shape[0]), c)


def lu_solve(comm, lay: Layout, F: np.ndarray, pivots: list[np.ndarray], diag: dict, B: np.ndarray,
             faults: list | None = None) -> np.ndarray:
    """``x`` (this rank's rows) with ``A x = b`` from COnfLUX's factors: ``F`` (this rank's entries),
    ``pivots`` (per step, global row indices), ``diag`` (``lu00`` of the steps this rank solves);
    ``faults`` as in :func:`~meshplan.exec.factorization.common.exchange`."""
    g, N, dt = lay.grid, lay.N, lay.dtype
    px, py, pz, me = lay.px, lay.py, lay.pz, lay.rank
    nrhs = B.shape[1]
    acc = np.zeros(B.shape, dtype=dt)
    active = np.ones(len(lay.rows), dtype=bool)
    held: set[tuple[int, int]] = set()
    C = {}
    for t in range(len(pivots)):
        c0, vt, c1, px_t, py_t, z0, solver = _step(lay, t)
        piv = pivots[t]
        own = lay.px_of(piv)
        pairs = sorted(held | {(py_t, z0)})
        # reduce the pivot rows' partial sums onto the solver (the rank at (py_t, z0) sends b − acc)
        sends, recvs = [], []
        mine = np.flatnonzero(own == px)
        lr = lay.lrow[piv[mine]]
        if me != solver and (py, pz) in pairs and len(mine):
            sends.append((solver, B[lr] - acc[lr] if (py, pz) == (py_t, z0) else acc[lr]))
        if me == solver:
            for x in range(g.Px):
                ks = np.flatnonzero(own == x)
                recvs += [((y, z), ks, g.rank(x, y, z)) for y, z in pairs if len(ks) and g.rank(x, y, z) != me]
        got = exchange(comm, sends, [(r, (len(ks), nrhs)) for _yz, ks, r in recvs], T_RHS, dt, faults)
        holder = (py, pz) == (py_t, z0)
        y_t = None
        if me == solver:
            c = np.zeros((vt, nrhs), dtype=dt)
            c[mine] = B[lr] - acc[lr]
            for (yz, ks, _r), part in zip(recvs, got):
                c[ks] += part if yz == (py_t, z0) else -part
            C[t] = c
            y_t = _unit_lower(diag[t], c)
        # y_t to the other holders of the block column, which update their remaining rows
        if c1 < N and holder:
            if me == solver:
                exchange(comm, [(g.rank(x, py_t, z0), y_t) for x in range(g.Px) if x != px_t], [], T_Y, dt, faults)
            else:
                y_t = exchange(comm, [], [(solver, (vt, nrhs))], T_Y, dt, faults)[0]
            nonpiv = np.setdiff1d(np.flatnonzero(active), lr, assume_unique=True)
            if len(nonpiv):
                jl = lay.cols_from(c0).start
                acc[nonpiv] += F[nonpiv, jl:jl + vt] @ y_t
        active[lr] = False
        held.add((py_t, z0))
    return _lu_backward(comm, lay, F, pivots, diag, C, nrhs, faults)


def _lu_backward(comm, lay: Layout, F, pivots, diag, C, nrhs: int, faults) -> np.ndarray:
    g, N, dt = lay.grid, lay.N, lay.dtype
    Px, Py, Pz, v = g.Px, g.Py, g.Pz, g.v
    px, py, pz, me = lay.px, lay.py, lay.pz, lay.rank
    X = np.zeros((len(lay.rows), nrhs), dtype=dt)
    Xc = np.zeros((len(lay.cols), nrhs), dtype=dt)
    for t in reversed(range(len(pivots))):
        c0, vt, c1, px_t, py_t, z0, solver = _step(lay, t)
        piv = pivots[t]
        own = lay.px_of(piv)
        zk = np.repeat(np.arange(Pz), [hi - lo for lo, hi in layer_slices(vt, Pz)])
        ys = [y for y in range(Py) if cyclic_count(c1, N, v, Py, y)]
        rc = lay.cols_from(c1)
        mine = np.flatnonzero((own == px) & (zk == pz))
        part = F[lay.lrow[piv[mine]], rc] @ Xc[rc] if py in ys and len(mine) else None
        recvs = []
        if me == solver:
            for x in range(Px):
                for z in range(Pz):
                    ks = np.flatnonzero((own == x) & (zk == z))
                    recvs += [(ks, g.rank(x, y, z)) for y in ys if len(ks) and g.rank(x, y, z) != me]
        sends = [(solver, part)] if part is not None and me != solver else []
        got = exchange(comm, sends, [(r, (len(ks), nrhs)) for ks, r in recvs], T_PROD, dt, faults)
        x_t = None
        if me == solver:
            r = C[t].copy()
            if part is not None:
                r[mine] -= part
            for (ks, _r), got_part in zip(recvs, got):
                r[ks] -= got_part
            x_t = np.linalg.solve(np.triu(diag[t]), _unit_lower(diag[t], r))
            dests = [q for q in range(g.p) if q != me and _needs_x(g, q, t, px_t, py_t)]
            exchange(comm, [(q, x_t) for q in dests], [], T_X, dt, faults)
        elif _needs_x(g, me, t, px_t, py_t):
            x_t = exchange(comm, [], [(solver, (vt, nrhs))], T_X, dt, faults)[0]
        if px == px_t:
            r0 = lay.rows_from(c0).start
            X[r0:r0 + vt] = x_t
        if py == py_t and t > 0:
            j0 = lay.cols_from(c0).start
            Xc[j0:j0 + vt] = x_t
    return X


def _needs_x(g, rank: int, t: int, px_t: int, py_t: int) -> bool:
    """Whether ``rank`` needs ``x_t``: it owns its rows, or (``t > 0``, LU) its columns."""
    x, y, _z = g.coords(rank)
    return x == px_t or (t > 0 and y == py_t)


def cholesky_solve(comm, lay: Layout, F: np.ndarray, B: np.ndarray, faults: list | None = None) -> np.ndarray:
    """``x`` (this rank's rows) with ``A x = b`` from COnfCHOX's factor ``L`` (this rank's entries ``F``);
    ``faults`` as in :func:`~meshplan.exec.factorization.common.exchange`."""
    g, N, dt = lay.grid, lay.N, lay.dtype
    Px, Py, Pz, v = g.Px, g.Py, g.Pz, g.v
    px, py, pz, me = lay.px, lay.py, lay.pz, lay.rank
    nrhs = B.shape[1]
    nsteps = -(-N // v)
    acc = np.zeros(B.shape, dtype=dt)
    held: set[tuple[int, int]] = set()
    Y, L00 = {}, {}

    def below(t: int, c1: int) -> list[int]:  # holders' grid rows, other than the solver's, with rows ≥ c1
        return [x for x in range(Px) if x != t % Px and cyclic_count(c1, N, v, Px, x)]

    for t in range(nsteps):
        c0, vt, c1, px_t, py_t, z0, solver = _step(lay, t)
        r0 = lay.rows_from(c0).start
        others = sorted(held - {(py_t, z0)})
        sends = [(solver, acc[r0:r0 + vt])] if px == px_t and me != solver and (py, pz) in others else []
        srcs = [g.rank(px_t, y, z) for y, z in others] if me == solver else []
        got = exchange(comm, sends, [(s, (vt, nrhs)) for s in srcs], T_RHS, dt, faults)
        holder = (py, pz) == (py_t, z0)
        rr = lay.rows_from(c1)
        jl = lay.cols_from(c0).start if holder else 0
        y_t = None
        if me == solver:
            c = B[r0:r0 + vt] - acc[r0:r0 + vt] - sum(got, np.zeros((vt, nrhs), dtype=dt))
            L00[t] = np.tril(F[r0:r0 + vt, jl:jl + vt])
            y_t = Y[t] = np.linalg.solve(L00[t], c)
            exchange(comm, [(g.rank(x, py_t, z0), y_t) for x in below(t, c1)], [], T_Y, dt, faults)
        elif holder and px in below(t, c1):
            y_t = exchange(comm, [], [(solver, (vt, nrhs))], T_Y, dt, faults)[0]
        if holder and rr.stop > rr.start:
            acc[rr] += F[rr, jl:jl + vt] @ y_t
        held.add((py_t, z0))
    X = np.zeros(B.shape, dtype=dt)
    for t in reversed(range(nsteps)):
        c0, vt, c1, px_t, py_t, z0, solver = _step(lay, t)
        holder = (py, pz) == (py_t, z0)
        rr = lay.rows_from(c1)
        jl = lay.cols_from(c0).start if holder else 0
        part = F[rr, jl:jl + vt].T @ X[rr] if holder and rr.stop > rr.start else None
        srcs = [g.rank(x, py_t, z0) for x in below(t, c1)] if me == solver else []
        sends = [(solver, part)] if part is not None and me != solver else []
        got = exchange(comm, sends, [(s, (vt, nrhs)) for s in srcs], T_PROD, dt, faults)
        r0 = lay.rows_from(c0).start
        if me == solver:
            r = Y[t] - sum(got, np.zeros((vt, nrhs), dtype=dt)) - (part if part is not None else 0)
            x_t = np.linalg.solve(L00[t].T, r)
            exchange(comm, [(g.rank(px_t, y, z), x_t) for y in range(Py) for z in range(Pz)
                            if g.rank(px_t, y, z) != me], [], T_X, dt, faults)
            X[r0:r0 + vt] = x_t
        elif px == px_t:
            X[r0:r0 + vt] = exchange(comm, [], [(solver, (vt, nrhs))], T_X, dt, faults)[0]
    return X
