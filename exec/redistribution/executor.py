"""A redistribution program inside the caller's MPI program: ``y = plan.bind(comm)(x)`` (paper §5–7).

:class:`RedistributionExecutor` runs a planned program (all-gathers and all-to-alls on sub-communicators of
the device groups, dynamic slices locally, a final ``allpermute`` as a point-to-point exchange) on this
rank's tile.  Rank ``r`` of the communicator is device ``r`` of the mesh (row-major over the mesh axes, the
first axis outermost).  Everything a call needs — each step's device group, sub-communicator, slice and
peer — is resolved once at bind (:func:`compile_program`), and the steps' shapes and bytes on the first call
with a dtype (:func:`compile_steps`); a call allocates the step buffers and hands them to MPI (the plain
sub-communicators; the bytes go to ``counter`` once per call).  The source tile is never written, and no step
holds more per device than the plan's height (the larger of the two tiles, §7): each step's arrays are made
afresh and dropped after the next step, never kept between calls.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py.util.dtlib import from_numpy_dtype

from meshplan.exec.runtime.comms import SubComms
from meshplan.exec.runtime.data import index_tile
from meshplan.exec.runtime.executor import Executor
from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, groups
from meshplan.models.redistribution.offsets import axes_tile_index
from meshplan.models.redistribution.pieces import exchange_layout
from meshplan.models.redistribution.split import exchange_counts
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice

__all__ = ["RedistributionExecutor", "compile_program", "compile_steps", "run_program", "Moved"]


@dataclass(frozen=True, slots=True, eq=False)
class Moved:
    """What :func:`run_program` leaves: the final ``tile``, whether every checked step matched (``ok``), and
    the largest tile and live bytes held during a step."""

    tile: np.ndarray
    ok: bool
    peak_tile_bytes: int
    peak_live_bytes: int


def _join(recv: np.ndarray, dim: int) -> np.ndarray:
    """Concatenate the ``n`` received pieces ``recv[0..n)`` along ``dim`` (no copy for ``dim == 0``)."""
    n = recv.shape[0]
    shape = list(recv.shape[1:])
    shape[dim] *= n
    if dim == 0:
        return recv.reshape(shape)
    return np.ascontiguousarray(np.moveaxis(recv, 0, dim)).reshape(shape)


@dataclass(frozen=True)
class _Action:
    """One step of a compiled program for this rank (everything but the data decided up front)."""

    kind: str
    dim: int = 0             # gathered / sliced / concatenated dimension
    n: int = 1               # group size
    sub: object = None       # sub-communicator
    lo: int = 0              # dynslice: slice [lo, hi) of ``dim``
    hi: int = 0
    dest: int = 0            # allpermute: send to, receive from
    source: int = 0
    split: Any = None        # allpermute split among replicas: the step (its chunks by split.exchange)
    expect: tuple = ()       # base offset and local type after the step (for checks)
    layout: Any = None       # alltoall: its ExchangeLayout (its pieces and how they join)


def compile_program(comm, comms: SubComms, mesh, coords0, src, steps) -> list[_Action]:
    """Resolve the device groups, slices and peers of every step for this rank (not timed)."""
    rank = comm.Get_rank()
    state = Assignment(src, coords0)
    actions = []
    for step in steps:
        new_state = apply_lowlevel(mesh, state, step, coords0)
        expect = (tuple(new_state.offsets(mesh)[rank].tolist()), new_state.type.localtype)
        if isinstance(step, (AllGather, AllToAll)):
            color, key, n = groups(mesh, state, step)
            sub = comms.split(color, key)
            if isinstance(step, AllGather):
                actions.append(_Action("allgather", dim=step.dim, n=n, sub=sub, expect=expect))
            else:
                actions.append(_Action("alltoall", dim=step.src, n=n, sub=sub, expect=expect,
                                       layout=exchange_layout(mesh, state.type, step)))
        elif isinstance(step, DynSlice):
            c = new_state.type.dims[step.dim].local
            v = int(axes_tile_index(mesh, step.axes, state.coords)[rank])
            actions.append(_Action("dynslice", dim=step.dim, lo=v * c, hi=(v + 1) * c, expect=expect))
        elif isinstance(step, AllPermute):
            actions.append(_Action("allpermute", dest=step.source.index(rank), source=step.source[rank],
                                   expect=expect, split=step if step.holders is not None else None))
        else:  # pragma: no cover - step_from_dict only builds the four kinds
            raise TypeError(f"unknown step {step!r}")
        state = new_state
    return actions


def _into(dest: np.ndarray | None, shape: tuple, dtype) -> np.ndarray:
    """``dest`` itself when given (the caller's output, already known to be C-contiguous, of the step's shape
    and dtype: :func:`_direct`), else a new array."""
    return dest if dest is not None else np.empty(shape, dtype=dtype)


def _direct(out: np.ndarray | None, tile: np.ndarray, shape: tuple) -> np.ndarray | None:
    """``out`` when the last step can write its result straight into it — C-contiguous, of the final ``shape``
    and the tile's dtype, sharing no memory with the source ``tile`` — else None (checked once, before the
    steps run, so that no step checks it again)."""
    if (out is not None and out.flags.c_contiguous and out.shape == shape and out.dtype == tile.dtype
            and not np.may_share_memory(out, tile)):
        return out
    return None


class _Step:
    """One action compiled for this rank's tile shape and dtype: ``run(tile, dest)`` makes the next tile (in
    ``dest`` where the result can land there directly) on the plain communicators; ``live`` the bytes alive
    during it (its input, buffers and output), ``sent``/``received`` what it hands to MPI, by the counting
    communicator's rules (counted once per call)."""

    __slots__ = ("run", "live", "sent", "received", "shape")

    def __init__(self, run, live: int, counted: tuple[int, int] = (0, 0)) -> None:
        self.run, self.live = run, live
        self.sent, self.received = counted
        self.shape: tuple = ()   # the tile's shape after the step (set by compile_steps)


def _joined(shape: tuple, dim: int) -> tuple:
    """The shape :func:`_join` makes of received pieces of ``shape`` (pieces along the first axis)."""
    out = list(shape[1:])
    out[dim] *= shape[0]
    return tuple(out)


def compile_steps(comm, actions: list[_Action], shape: tuple, dtype) -> list[_Step]:
    """The actions as :class:`_Step` s for a source tile of ``shape`` and ``dtype`` (``comm``: the executor's
    counting communicator; the steps call the plain ones underneath)."""
    dt, rank = np.dtype(dtype), comm.rank
    nb = lambda shp: math.prod(shp) * dt.itemsize  # noqa: E731
    probe = lambda shp: np.empty(shp, dtype=dt)  # noqa: E731 - sized, never touched: for the byte rules
    steps, s = [], tuple(shape)
    for act in actions:
        if act.kind in ("allgather", "alltoall"):
            lay = act.layout
            if act.kind == "allgather":
                send_shape, recv_shape, pack = s, (act.n,) + s, None
            else:  # an alltoall: the pieces of its layout, sent from the tile itself where they are it (no copy)
                send_shape = recv_shape = lay.sent
                pack = None if lay.send_is_tile else (lay.send_view, lay.send_perm)
            method = "Allgather" if act.kind == "allgather" else "Alltoall"
            counted = act.sub.bytes_of(method, probe(send_shape), probe(recv_shape))
            new = _joined(recv_shape, act.dim) if lay is None else lay.shape
            copied = act.dim if lay is None else not lay.recv_is_tile   # the received pieces joined by a copy
            live = nb(s) + (nb(send_shape) if pack else 0) + nb(recv_shape) + (nb(new) if copied else 0)
            steps.append(_Step(_collective(getattr(act.sub.comm, method), send_shape, recv_shape, pack,
                                           act.dim, dt, act.layout), live, counted))
        elif act.kind == "dynslice":
            sl = tuple(slice(act.lo, act.hi) if k == act.dim else slice(None) for k in range(len(s)))
            new = s[:act.dim] + (act.hi - act.lo,) + s[act.dim + 1:]
            steps.append(_Step(_slicer(sl, new, dt), nb(s) + nb(new)))
        else:  # allpermute
            new = s
            if act.split is not None:   # chunks from every holder of the tile, in one Alltoallv
                counts = exchange_counts(act.split, rank, math.prod(s))
                t = from_numpy_dtype(dt)
                counted = comm.bytes_of("Alltoallv", [probe(s), *counts[:2], t], [probe(s), *counts[2:], t])
                steps.append(_Step(_chunk_permuter(comm.comm.Alltoallv, counts, t, s, dt), 2 * nb(s), counted))
            elif act.dest == rank and act.source == rank:
                steps.append(_Step(_permuter(None, 0, 0, s, dt), 2 * nb(s)))
            else:
                counted = comm.bytes_of("Sendrecv", probe(s), act.dest, 7, probe(s), act.source, 7)
                steps.append(_Step(_permuter(comm.comm.Sendrecv, act.dest, act.source, s, dt), 2 * nb(s), counted))
        steps[-1].shape = s = new
    return steps


def _collective(method, send_shape, recv_shape, pack, dim: int, dt, layout=None):
    """An all-gather along ``dim`` (``layout`` None) or an all-to-all by its ``layout``; the pieces packed by a
    copy when ``pack`` is ``(view, order)``, the received pieces joined by a copy unless they are the new tile
    (blocks along dimension 0, or a layout's :attr:`recv_is_tile`)."""
    view, order = (None, None) if pack is None else pack[:2]
    joined = _joined(recv_shape, dim) if layout is None else layout.shape
    join = None
    if layout is not None and not layout.recv_is_tile:
        def join(recv):
            return np.ascontiguousarray(recv.reshape(layout.recv_view).transpose(layout.recv_perm)).reshape(joined)
    elif layout is None and dim:
        def join(recv):
            return _join(recv, dim)

    def run(tile: np.ndarray, dest: np.ndarray | None) -> np.ndarray:
        if pack is None:
            send = tile.reshape(send_shape)
        else:   # a new array of send_shape, in the pieces' order
            send = np.ascontiguousarray(tile.reshape(view).transpose(order))
        if join is not None:
            recv = np.empty(recv_shape, dtype=dt)
            method(send, recv)
            return join(recv)
        # the received pieces are the new tile: received in place of it, into dest when given (the caller's
        # output, checked by _direct: C-contiguous, of this step's result shape and dtype), which is returned
        # as it is: nothing but the return after the MPI call
        if dest is not None:
            method(send, dest.reshape(recv_shape))
            return dest
        recv = np.empty(recv_shape, dtype=dt)
        method(send, recv)
        return recv.reshape(joined)
    return run


def _slicer(sl, shape, dt):
    def run(tile: np.ndarray, dest: np.ndarray | None) -> np.ndarray:
        new = _into(dest, shape, dt)
        np.copyto(new, tile[sl])
        return new
    return run


def _permuter(sendrecv, dest_rank: int, source: int, shape, dt):
    def run(tile: np.ndarray, dest: np.ndarray | None) -> np.ndarray:
        new = dest if dest is not None else np.empty(shape, dtype=dt)   # _into, inline: one frame less per call
        if sendrecv is None:  # this rank keeps its tile
            np.copyto(new, tile)
        else:
            sendrecv(tile, dest_rank, 7, new, source, 7)
        return new
    return run


def _chunk_permuter(alltoallv, counts, mpitype, shape, dt):
    keep = not counts[2].any()   # this rank already holds its new tile

    def run(tile: np.ndarray, dest: np.ndarray | None) -> np.ndarray:
        new = dest if dest is not None else np.empty(shape, dtype=dt)
        if keep:
            np.copyto(new, tile)
        alltoallv([tile.reshape(-1), counts[0], counts[1], mpitype], [new.reshape(-1), counts[2], counts[3], mpitype])
        return new
    return run


def run_program(comm, actions: list[_Action], tile: np.ndarray, *, check: bool = False,
                globaltype: tuple = (), fault: bool = False, initial: np.ndarray | None = None,
                out: np.ndarray | None = None) -> Moved:
    """Run compiled ``actions`` from this rank's source ``tile`` (never written: every step makes a new
    array and drops the previous one, so a step holds only its input, its buffers and its output — except
    that ``fault`` corrupts one element first, the runtime's ``corrupt`` fault, a test of the checker).  The
    last step writes into ``out`` where its result can land there directly.  With ``check`` the tile is
    compared with the linear-index test array after every step.  The actions run as :func:`compile_steps`
    makes them (as the executor's calls do); the bytes go to ``comm``'s counter at the end."""
    steps = compile_steps(comm, actions, tile.shape, tile.dtype)
    if fault:
        tile.flat[0] += 1
    ok = True
    peak_tile = peak_live = tile.nbytes
    last = len(steps) - 1
    direct = _direct(out, tile, steps[-1].shape) if steps else None
    for i, st in enumerate(steps):
        new = st.run(tile, direct if i == last else None)
        del tile
        tile = new
        peak_tile = max(peak_tile, tile.nbytes)
        peak_live = max(peak_live, st.live)
        if check:
            offsets, localtype = actions[i].expect
            want = index_tile(globaltype, offsets, localtype, tile.dtype)
            ok = ok and tile.shape == want.shape and bool(np.array_equal(tile, want))
    if steps:
        comm.counter.add(sum(st.sent for st in steps), sum(st.received for st in steps))
    if check and not actions and initial is not None:  # empty program: the source tile is the answer
        ok = bool(np.array_equal(tile, initial))
    return Moved(tile, ok, peak_tile, peak_live)


def _one_step(add, last, sent: int, received: int):
    """:meth:`RedistributionExecutor._run` for a one-step program whose step writes into the caller's
    (checked) ``out``: the bytes counted, the step run, ``out`` returned (a repeated call's few lines)."""
    def run(tile: np.ndarray, out: np.ndarray) -> np.ndarray:
        add(sent, received)
        y = last(tile, out)
        if y is not out and y.base is not (out if out.base is None else out.base):
            out[...] = y
        return out
    return run


def _nothing() -> None:
    """What a remembered "no ``out``" dereferences to (as a weak reference to ``out`` does to ``out``)."""


class RedistributionExecutor(Executor):
    """Runs one redistribution program on the communicator's ranks (see the module docstring).

    ``decomposition`` is the mesh's prime decomposition, ``src`` the source type and ``ops`` the program's steps
    over the prime mesh (a planner's :class:`~meshplan.solvers.redistribution.plan.Plan` has all three).
    ``ex(x_tile)`` returns this rank's target tile; ``ex.source_tile(x_global)`` and
    ``ex.target_tile(x_global)`` cut this rank's tiles out of a global array (no communication);
    ``ex.source_shape``/``ex.target_shape`` and ``ex.source_offsets``/``ex.target_offsets`` say where they lie."""

    def __init__(self, decomposition: Any, src: Any, ops: Any, comm: Any) -> None:
        super().__init__(comm, {"mesh": str(decomposition.prime), "src": str(src),
                                "program": [str(op) for op in ops]})
        dec = decomposition
        n = dec.original.num_devices
        if n != self.size:
            raise ModelError(f"the mesh {dec.original.cli()} has {n} devices but comm has {self.size} ranks; "
                             "bind the plan to a communicator with one rank per device", param="comm")
        mesh, coords0 = dec.prime, dec.coords()
        self.actions = compile_program(self.counted, self.comms, mesh, coords0, src, tuple(ops))
        self.source_offsets = tuple(int(v) for v in Assignment(src, coords0).offsets(mesh)[self.rank])
        self.source_shape = tuple(int(v) for v in src.localtype)
        if self.actions:
            self.target_offsets, self.target_shape = self.actions[-1].expect
        else:
            self.target_offsets, self.target_shape = self.source_offsets, self.source_shape
        self.target_offsets = tuple(int(v) for v in self.target_offsets)
        self.target_shape = tuple(int(v) for v in self.target_shape)
        self.global_shape = tuple(int(v) for v in src.globaltype)
        self._steps: dict[np.dtype, tuple | None] = {}
        self._same: tuple | None = None

    def __call__(self, x: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Redistribute: this rank's source tile ``x`` in, its target tile out (a new array, or ``out``)."""
        same = self._same   # None once closed
        if same is not None and same[0]() is x is not None and same[1]() is out:  # the last call's arrays
            if same[4] is not None and out is not None:                              # (checked then)
                return same[4](x, out)
            return self._run(x, out, same[2], same[3])
        if self._closed:
            self._require_open()
        tile = x if type(x) is np.ndarray and x.flags.c_contiguous else np.ascontiguousarray(x)
        if tile.shape != self.source_shape:
            raise ModelError(f"x has shape {tile.shape} but this rank's source tile has shape {self.source_shape}",
                             param="x")
        if out is not None and (not isinstance(out, np.ndarray) or out.shape != self.target_shape
                                or out.dtype != tile.dtype or not out.flags.writeable):
            raise ModelError(f"out must be a writeable array of the target tile's shape {self.target_shape} and "
                             f"dtype {tile.dtype}", param="out")
        compiled = self._steps.get(tile.dtype)
        if compiled is None:  # the first call with this dtype: every step's shapes, buffers and bytes, once
            steps = compile_steps(self.counted, self.actions, tile.shape, tile.dtype)
            compiled = self._steps[tile.dtype] = (steps[:-1], steps[-1].run, sum(st.sent for st in steps),
                                                  sum(st.received for st in steps), steps[-1].shape) if steps else None
        direct = _direct(out, tile, self.target_shape if compiled is None else compiled[4])
        if tile is x:  # remembered weakly: the next call with the same arrays skips the checks
            one = (compiled is not None and not compiled[0] and direct is not None)
            self._same = (weakref.ref(x), _nothing if out is None else weakref.ref(out), compiled,
                          direct is not None, _one_step(self.counter.add, *compiled[1:4]) if one else None)
        return self._run(tile, out, compiled, direct is not None)

    def _run(self, tile: np.ndarray, out: np.ndarray | None, compiled, direct: bool) -> np.ndarray:
        """Run the compiled steps (run_program without its checks: each step's arrays made afresh); the last
        is handed ``out`` when ``direct`` (:func:`_direct` said it can write there; ``out`` None: a weakly
        remembered ``out`` that is gone, so there is none) and its result is then ``out`` itself or a view of
        it, unless the step joins its pieces by a copy into a new array."""
        if compiled is None:  # an empty program: a copy of the source tile
            if out is None:
                return tile.copy()
            out[...] = tile
            return out
        first, last, sent, received, _ = compiled
        # the call's bytes (the same every call) are counted before its steps, so that no Python but the return
        # runs after the last MPI call: on ranks that share cores, each µs there delays the slowest rank
        self.counter.add(sent, received)
        y = tile
        for st in first:
            y = st.run(y, None)
        if direct and out is not None:
            y = last(y, out)
            # numpy's views keep the array that owns the memory as their base
            if y is not out and y.base is not (out if out.base is None else out.base):
                out[...] = y
            return out
        y = last(y, None)
        if out is None:
            return y
        out[...] = y
        return out

    def _release(self) -> None:
        self._steps.clear()
        self._same = None

    def source_tile(self, x_global: Any) -> np.ndarray:
        """This rank's source tile of the global array (a contiguous copy; no communication)."""
        return self._cut(x_global, self.source_offsets, self.source_shape)

    def target_tile(self, x_global: Any) -> np.ndarray:
        """This rank's target tile of the global array (a contiguous copy; no communication)."""
        return self._cut(x_global, self.target_offsets, self.target_shape)

    def _cut(self, x_global: Any, offsets, shape) -> np.ndarray:
        a = np.asarray(x_global)
        if a.shape != self.global_shape:
            raise ModelError(f"x_global has shape {a.shape}, expected the global shape {self.global_shape}",
                             param="x_global")
        # a copy even where the slice is contiguous already (whole rows): writing the tile never writes x_global
        return np.array(a[tuple(slice(o, o + s) for o, s in zip(offsets, shape))], order="C", copy=True)
