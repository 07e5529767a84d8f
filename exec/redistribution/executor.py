"""A redistribution program inside the caller's MPI program: ``y = plan.bind(comm)(x)`` (paper §5–7).

:class:`RedistributionExecutor` runs a planned program (all-gathers and all-to-alls on sub-communicators of
the device groups, dynamic slices locally, a final ``allpermute`` as a point-to-point exchange) on this
rank's tile.  Rank ``r`` of the communicator is device ``r`` of the mesh (row-major over the mesh axes, the
first axis outermost).  Everything a call needs — each step's device group, sub-communicator, slice and
peer — is resolved once at bind (:func:`compile_program`); a call allocates the step buffers and hands
them to MPI.  The source tile is never written, and no step holds more per device than the plan's height
(the larger of the two tiles, §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from meshplan.exec.runtime.comms import SubComms
from meshplan.exec.runtime.data import index_tile
from meshplan.exec.runtime.executor import Executor
from meshplan.models.core.errors import ModelError
from meshplan.models.redistribution.lowlevel import Assignment, apply_lowlevel, groups
from meshplan.models.redistribution.steps import AllGather, AllPermute, AllToAll, DynSlice

__all__ = ["RedistributionExecutor", "compile_program", "run_program", "Moved"]


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
    split: int = 0           # alltoall: dimension split into pieces
    n: int = 1               # group size
    sub: object = None       # sub-communicator
    lo: int = 0              # dynslice: slice [lo, hi) of ``dim``
    hi: int = 0
    dest: int = 0            # allpermute: send to, receive from
    source: int = 0
    expect: tuple = ()       # base offset and local type after the step (for checks)


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
                actions.append(_Action("alltoall", dim=step.src, split=step.dst, n=n, sub=sub, expect=expect))
        elif isinstance(step, DynSlice):
            c = new_state.type.dims[step.dim].local
            v, w = 0, 1
            for a in step.axes:
                v += int(state.coords[rank, mesh.index(a)]) * w
                w *= mesh.size(a)
            actions.append(_Action("dynslice", dim=step.dim, lo=v * c, hi=(v + 1) * c, expect=expect))
        elif isinstance(step, AllPermute):
            actions.append(_Action("allpermute", dest=step.source.index(rank), source=step.source[rank],
                                   expect=expect))
        else:  # pragma: no cover - step_from_dict only builds the four kinds
            raise TypeError(f"unknown step {step!r}")
        state = new_state
    return actions


def _into(out: np.ndarray | None, shape: tuple, dtype) -> np.ndarray:
    """``out`` viewed as ``shape`` when the last step can write its result straight into it, else a new array."""
    if out is not None and out.flags.c_contiguous and out.size == int(np.prod(shape)) and out.dtype == dtype:
        return out.reshape(shape)
    return np.empty(shape, dtype=dtype)


def run_program(comm, actions: list[_Action], tile: np.ndarray, *, check: bool = False,
                globaltype: tuple = (), fault: bool = False, initial: np.ndarray | None = None,
                out: np.ndarray | None = None) -> Moved:
    """Run compiled ``actions`` from this rank's source ``tile`` (never written: every step makes a new
    array and drops the previous one, so a step holds only its input, its buffers and its output — except
    that ``fault`` corrupts one element first, the runtime's ``corrupt`` fault, a test of the checker).  The
    last step writes into ``out`` where its result can land there directly.  With ``check`` the tile is
    compared with the linear-index test array after every step."""
    rank = comm.Get_rank()
    if fault:
        tile.flat[0] += 1
    ok = True
    peak_tile = peak_live = tile.nbytes
    last = len(actions) - 1
    for i, act in enumerate(actions):
        dest = out if i == last else None
        if act.kind == "allgather":
            shape = (act.n,) + tile.shape
            recv = _into(dest, shape, tile.dtype) if act.dim == 0 else np.empty(shape, dtype=tile.dtype)
            act.sub.Allgather(tile, recv)
            new = _join(recv, act.dim)
            live = tile.nbytes + recv.nbytes + (0 if new.base is recv else new.nbytes)
            del recv
        elif act.kind == "alltoall":
            if act.split == 0:  # pieces along dimension 0 are contiguous: no copy
                send = tile.reshape((act.n, tile.shape[0] // act.n) + tile.shape[1:])
            else:
                send = np.ascontiguousarray(np.stack(np.split(tile, act.n, axis=act.split)))
            recv = _into(dest, send.shape, tile.dtype) if act.dim == 0 else np.empty_like(send)
            act.sub.Alltoall(send, recv)
            new = _join(recv, act.dim)
            live = (tile.nbytes + (0 if send.base is tile else send.nbytes) + recv.nbytes
                    + (0 if new.base is recv else new.nbytes))
            del send, recv
        elif act.kind == "dynslice":
            sl = [slice(None)] * tile.ndim
            sl[act.dim] = slice(act.lo, act.hi)
            part = tile[tuple(sl)]
            new = _into(dest, part.shape, tile.dtype)
            np.copyto(new, part)
            live = tile.nbytes + new.nbytes
        else:  # allpermute
            new = _into(dest, tile.shape, tile.dtype)
            if act.dest == rank and act.source == rank:
                new[...] = tile
            else:
                comm.Sendrecv(tile, dest=act.dest, sendtag=7, recvbuf=new, source=act.source, recvtag=7)
            live = tile.nbytes + new.nbytes
        del tile
        tile = new
        peak_tile = max(peak_tile, tile.nbytes)
        peak_live = max(peak_live, live)
        if check:
            offsets, localtype = act.expect
            want = index_tile(globaltype, offsets, localtype, tile.dtype)
            ok = ok and tile.shape == want.shape and bool(np.array_equal(tile, want))
    if check and not actions and initial is not None:  # empty program: the source tile is the answer
        ok = bool(np.array_equal(tile, initial))
    return Moved(tile, ok, peak_tile, peak_live)


class RedistributionExecutor(Executor):
    """Runs one redistribution program on the communicator's ranks (see the module docstring).

    ``decomposition`` is the mesh's prime decomposition, ``src`` the source type and ``ops`` the program's steps
    over the prime mesh (a planner's :class:`~meshplan.solvers.redistribution.plan.Plan` has all three).
    ``ex(x_tile)`` returns this rank's target tile; ``ex.source_tile(x_global)`` and
    ``ex.target_tile(x_global)`` cut this rank's tiles out of a global array (no communication);
    ``ex.source_shape``/``ex.target_shape`` and ``ex.source_offsets``/``ex.target_offsets`` say where they lie."""

    def __init__(self, decomposition: Any, src: Any, ops: Any, comm: Any) -> None:
        super().__init__(comm)
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

    def __call__(self, x: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Redistribute: this rank's source tile ``x`` in, its target tile out (a new array, or ``out``)."""
        self._require_open()
        tile = np.ascontiguousarray(x)
        if tile.shape != self.source_shape:
            raise ModelError(f"x has shape {tile.shape} but this rank's source tile has shape {self.source_shape}",
                             param="x")
        if out is not None and (not isinstance(out, np.ndarray) or out.shape != self.target_shape
                                or out.dtype != tile.dtype or not out.flags.writeable):
            raise ModelError(f"out must be a writeable array of the target tile's shape {self.target_shape} and "
                             f"dtype {tile.dtype}", param="out")
        direct = out if out is not None and not np.may_share_memory(out, tile) else None
        y = run_program(self.counted, self.actions, tile, out=direct).tile
        if out is None:
            return tile.copy() if y is tile else y  # an empty program: a copy of the source tile
        if y.ctypes.data != out.ctypes.data or y is tile:
            out[...] = y
        return out

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
        return np.ascontiguousarray(a[tuple(slice(o, o + s) for o, s in zip(offsets, shape))])
