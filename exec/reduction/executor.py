"""A reduction program inside the caller's MPI program: ``red = plan.bind(comm); red.allreduce(x)`` (P2 §3.2).

:class:`ReductionExecutor` runs a lowered reduction program (a sequence of collectives over device groups,
synthesized by ``solve_placement`` or written by hand and checked) on this rank's array.  Rank ``r`` of the
communicator is device ``r`` of the system; the program sums every rank's array over its reduction group.

How an array runs: it is viewed as ``k`` chunks of ``E = ⌈n/k⌉`` elements (``k`` the reduction-group size),
exactly as the checker splits a device's buffer (docs/run.md), and every step hands MPI the chunks this rank
holds, in label order (:func:`~meshplan.exec.reduction.driver.chunk_layouts`): a ReduceScatter is a
``Reduce_scatter_block``, an AllGather an ``Allgather`` (re-sorted by label locally when needed), and so on, on
sub-communicators made once at bind.  When ``k`` divides ``n`` the first step reads the caller's array and the
last writes the output in place — no staging copy; otherwise the chunks are padded with zeros in one staging
buffer (one copy in, one out).  Buffers between steps are kept per (length, dtype) and reused.

The program must be valid (every member ends with the sum of its group): :func:`bind` re-checks it by the
solver-free replay of P2 Figure 8 and refuses an invalid one; ``check=False`` (for ``meshplan run``, which runs
invalid programs to show they fail) skips that, and :meth:`ReductionExecutor.step_calls` then exposes what
each step leaves.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI

from meshplan.exec.reduction.driver import chunk_layouts, gather_order
from meshplan.exec.runtime.executor import Executor
from meshplan.models.core.collectives import Collective
from meshplan.models.core.errors import ModelError, VerificationError
from meshplan.models.reduction.lowering import LoweredProgram

__all__ = ["ReductionExecutor"]

#: (length, dtype) shapes whose step buffers an executor keeps (the most recent ones)
KEEP_SHAPES = 4


class _Step:
    """One step for this rank: its collective, sub-communicator (None: the rank sits out), chunk counts
    before and after, the AllGather re-sort and whether this rank is a rooted step's root."""

    __slots__ = ("collective", "sub", "held", "after", "perm", "root")

    def __init__(self, collective: Collective, sub, held: int, after: int, perm, root: bool) -> None:
        self.collective, self.sub, self.held, self.after, self.perm, self.root = \
            collective, sub, held, after, perm, root


class _Buffers:
    """Step buffers for one chunk length: ``get(name, rows)`` is a ``rows × E`` array, made on first use."""

    __slots__ = ("E", "dtype", "arrays")

    def __init__(self, E: int, dtype: np.dtype) -> None:
        self.E, self.dtype, self.arrays = E, dtype, {}

    def get(self, name: Any, rows: int) -> np.ndarray:
        a = self.arrays.get(name)
        if a is None or a.shape[0] < rows:
            a = self.arrays[name] = np.empty((rows, self.E), dtype=self.dtype)
        return a[:rows]


class ReductionExecutor(Executor):
    """Runs one lowered reduction program on the communicator's ranks (see the module docstring)."""

    def __init__(self, program: LoweredProgram, reduction_groups: Sequence[Sequence[int]], comm: Any, *,
                 check: bool = True) -> None:
        super().__init__(comm)
        if program.num_devices != self.size:
            raise ModelError(f"the program runs on {program.num_devices} devices but comm has {self.size} ranks; "
                             "bind it to a communicator with one rank per device", param="comm")
        self.program = program
        self.groups = tuple(tuple(int(d) for d in g) for g in reduction_groups)
        self.group = next(g for g in self.groups if self.rank in g)
        self.k = len(self.groups[0])
        if check:
            from meshplan.models.reduction.checker import replay

            verdict = replay(program, self.groups)
            if not verdict.valid:
                raise VerificationError(f"the program does not compute the reduction: {verdict.reason()}")
        self.layouts = chunk_layouts(program, self.k)  # NotExecutable (a ModelError) before any MPI call
        self.final_labels = self.layouts[-1][self.rank]
        steps = []
        for st, before, after in zip(program.steps, self.layouts, self.layouts[1:]):
            sub = self.comms.group(st.groups)  # collective over comm, once
            c = Collective.parse(st.collective)
            g = next((g for g in st.groups if self.rank in g), None)
            perm = gather_order(before, g) if (g is not None and c.gathers) else None
            steps.append(_Step(c, sub, len(before[self.rank]), len(after[self.rank]), perm,
                               g is not None and g[0] == self.rank))
        self._steps = tuple(steps)
        self._buffers: dict[tuple[int, str], list] = {}

    # -- the library call ------------------------------------------------------------------------------

    def allreduce(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Sum ``x`` over this rank's reduction group, following the program's collectives.  ``x``: a
        contiguous numpy array of any length and dtype MPI knows; the result goes into ``out`` (same shape
        and dtype) or, without ``out``, into ``x`` itself.  Returns the array holding the result."""
        self._require_open()
        x, out, answer = self._check(x, out)
        calls, result = self.step_calls(x, out)
        for call in calls:
            if call is not None:
                call()
        self._finish(result, out, x.size)
        return answer

    __call__ = allreduce

    # -- what the rank programs time step by step ------------------------------------------------------

    def step_calls(self, x: np.ndarray, out: np.ndarray) -> tuple[list[Callable[[], None] | None], np.ndarray]:
        """``(calls, result)``: one callable per step (``None`` where this rank sits out) that together run
        the program from ``x`` to ``result``, a ``(chunks held at the end, E)`` array — ``out`` viewed as
        ``k × E`` when no padding is needed and the rank ends holding all ``k`` chunks.  Build once, call in
        order (the rank programs time them one by one)."""
        n, k = x.size, self.k
        E = max(1, -(-n // k))
        padded = n != k * E
        bufs = self._step_buffers(E, x.dtype)
        if padded:
            stage = bufs.get("stage", k)
            stage.reshape(-1)[:n] = x.reshape(-1)
            stage.reshape(-1)[n:] = 0
            cur = stage
        else:
            cur = x.reshape(k, E)
        x_view = cur
        target = None if padded or len(self.final_labels) != k else out.reshape(k, E)
        calls: list[Callable[[], None] | None] = []
        last = len(self._steps) - 1
        for i, st in enumerate(self._steps):
            if i == last and target is not None:
                dst = target
            elif cur is not x_view and st.sub is not None and st.collective is Collective.ALL_REDUCE:
                dst = cur  # an AllReduce of an internal buffer runs in place: MPI copies nothing first
            else:
                dst = bufs.get(("out", i), st.after)
            call, cur = self._call(st, cur, dst, lambda rows, i=i: bufs.get(("spare", i), rows))
            calls.append(call)
        return calls, cur

    @staticmethod
    def _finish(result: np.ndarray, out: np.ndarray, n: int) -> None:
        """Copy the result into ``out`` unless the last step wrote it there already."""
        if result.ctypes.data == out.ctypes.data and result.size == n:
            return
        out.reshape(-1)[:] = result.reshape(-1)[:n]

    def _call(self, st: _Step, inp: np.ndarray, dst: np.ndarray, spare: Callable[[int], np.ndarray]):
        """``(callable, output)`` of one step from ``inp`` into ``dst``; ``spare(rows)`` is a scratch buffer
        (made on first use) for a staged input or a gathered block that must be re-sorted."""
        if st.sub is None:
            return None, inp
        c, sub = st.collective, st.sub
        E = inp.shape[1]
        dst = dst[: st.after] if dst.shape[0] != st.after else dst
        if c.reduces:
            same = inp.shape == dst.shape and inp.ctypes.data == dst.ctypes.data
            if not same and np.may_share_memory(inp, dst):  # overlapping but not identical: stage the input
                src = spare(inp.shape[0])
                run = self._reduce_call(st, src, dst, same=False)
                return (lambda: (np.copyto(src, inp), run())), (dst if st.root or c is not Collective.REDUCE
                                                                 else dst[:0])
            run = self._reduce_call(st, inp, dst, same=same)
            return run, (dst if st.root or c is not Collective.REDUCE else dst[:0])
        if c.gathers:
            gathered = spare(st.after) if st.perm is not None or np.may_share_memory(inp, dst) else dst
            if st.perm is None and gathered is dst:
                return (lambda: sub.Allgather(inp, dst)), dst
            perm = st.perm if st.perm is not None else np.arange(st.after)

            def gather_sorted() -> None:
                sub.Allgather(inp, gathered)
                np.take(gathered, perm, axis=0, out=dst)  # local re-sort by chunk label, no communication
            return gather_sorted, dst
        # Broadcast: the root keeps its chunks, the others receive them
        if st.root:
            return (lambda: sub.Bcast(inp, 0)), inp
        out = dst if dst.shape == (st.after, E) else spare(st.after)
        return (lambda: sub.Bcast(out, 0)), out

    @staticmethod
    def _reduce_call(st: _Step, inp: np.ndarray, dst: np.ndarray, *, same: bool) -> Callable[[], None]:
        """The MPI call of a reducing step; ``same``: ``inp`` is ``dst`` (an in-place AllReduce or root Reduce;
        a ReduceScatter's output is smaller than its input, so it is never in place)."""
        sub, c = st.sub, st.collective
        if c is Collective.ALL_REDUCE:
            send = MPI.IN_PLACE if same else inp
            return lambda: sub.Allreduce(send, dst, MPI.SUM)
        if c is Collective.REDUCE_SCATTER:
            return lambda: sub.Reduce_scatter_block(inp, dst, MPI.SUM)
        if st.root:
            send = MPI.IN_PLACE if same else inp
            return lambda: sub.Reduce(send, dst, MPI.SUM, 0)
        return lambda: sub.Reduce(inp, None, MPI.SUM, 0)

    def _step_buffers(self, E: int, dtype: np.dtype) -> "_Buffers":
        """The reusable buffers for chunks of ``E`` elements of ``dtype`` (the last few shapes are kept)."""
        key = (E, np.dtype(dtype).str)
        bufs = self._buffers.pop(key, None)
        if bufs is None:
            if len(self._buffers) >= KEEP_SHAPES:
                self._buffers.pop(next(iter(self._buffers)))
            bufs = _Buffers(E, np.dtype(dtype))
        self._buffers[key] = bufs  # most recently used last
        return bufs

    def _check(self, x: Any, out: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(x, out, answer)``: the arrays in memory order (a Fortran-ordered array as its C-ordered
        transpose: chunks are cut in memory order, and a sum is elementwise) and what to return."""
        if not isinstance(x, np.ndarray):
            raise ModelError(f"x must be a numpy array, got {type(x).__name__}", param="x")
        if not (x.flags.c_contiguous or x.flags.f_contiguous):
            raise ModelError("x must be contiguous (np.ascontiguousarray(x) makes a contiguous copy)", param="x")
        if x.size == 0:
            raise ModelError("x is empty; there is nothing to reduce", param="x")
        if x.dtype.kind not in "iufc" or x.dtype.byteorder not in "=|":
            raise ModelError(f"x has dtype {x.dtype}; MPI sums native integer, float and complex arrays",
                             param="x")
        if out is None:
            out = x
        elif not isinstance(out, np.ndarray) or out.shape != x.shape or out.dtype != x.dtype \
                or not (out.flags.c_contiguous or out.flags.f_contiguous) or not out.flags.writeable:
            raise ModelError(f"out must be a writeable contiguous array of x's shape {x.shape} and dtype "
                             f"{x.dtype}", param="out")
        if not out.flags.writeable:
            raise ModelError("x is read-only; pass out= to write the sum elsewhere", param="x")
        answer = out
        if x.flags.f_contiguous and not x.flags.c_contiguous:
            x = x.T
        if out.flags.f_contiguous and not out.flags.c_contiguous:
            out = out.T
        if x.shape != out.shape:  # one C-, the other Fortran-ordered: copy the input into out's order
            x = np.ascontiguousarray(x.T if x.ndim == out.ndim else x)
        return x, out, answer

    def _release(self) -> None:
        self._buffers.clear()
