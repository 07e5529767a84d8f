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
buffer (one copy in, one out).  Buffers between steps are kept per (length, dtype) and reused, and so is what
each step reads and writes: the first call of a length, dtype and aliasing of ``x`` and ``out`` decides it
(in place or not, staged or not) and later calls only point the steps at their arrays — the per-call Python
before a collective costs more than its own time when ranks share cores (docs/library.md, "Overhead").  Such
a call hands MPI the plain sub-communicators and adds its bytes to ``counter`` once, at the end: the totals
a counting communicator would count message by message (:meth:`CountingComm.bytes_of`);
:meth:`ReductionExecutor.step_calls` counts step by step.

The program must be valid (every member ends with the sum of its group): :func:`bind` re-checks it by the
solver-free replay of P2 Figure 8 and refuses an invalid one; ``check=False`` (for ``meshplan run``, which runs
invalid programs to show they fail) skips that, and :meth:`ReductionExecutor.step_calls` then exposes what
each step leaves.
"""

from __future__ import annotations

import weakref
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
    """Step buffers for one chunk length: ``get(name, rows)`` is a ``rows × E`` array, made on first use;
    ``programs`` the steps compiled on them, per (array length, aliasing of ``x`` and ``out``)."""

    __slots__ = ("E", "dtype", "arrays", "programs")

    def __init__(self, E: int, dtype: np.dtype) -> None:
        self.E, self.dtype, self.arrays = E, dtype, {}
        self.programs: dict[tuple[int, int], _Program] = {}

    def get(self, name: Any, rows: int) -> np.ndarray:
        a = self.arrays.get(name)
        if a is None or a.shape[0] < rows:
            a = self.arrays[name] = np.empty((rows, self.E), dtype=self.dtype)
        return a[:rows]


class _Slot:
    """An array a compiled step reads or writes: a kept buffer, or the caller's ``x`` or ``out`` (viewed as
    ``k × E``, or flat when padded), set per call by :meth:`_Program.bind`."""

    __slots__ = ("a",)

    def __init__(self, a: np.ndarray | None = None) -> None:
        self.a = a


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _alias(x: np.ndarray, out: np.ndarray) -> int:
    """How ``out`` lies on ``x``: 0 the same array (in place), 1 overlapping otherwise, 2 apart."""
    if x is out:
        return 0
    if not np.may_share_memory(x, out):
        return 2
    return 0 if x.shape == out.shape and _address(x) == _address(out) else 1


class _Program:
    """The steps of one (length, dtype, aliasing), compiled once: ``run(x, out)`` points the two slots at the
    call's arrays, runs the steps, copies the result into ``out`` unless the last step wrote it there, and
    lets go of the arrays."""

    __slots__ = ("n", "k", "E", "padded", "x", "out", "stage", "calls", "result", "copy", "counter", "sent",
                 "received")

    def __init__(self, n: int, k: int, E: int, padded: bool, counter: Any) -> None:
        self.n, self.k, self.E, self.padded = n, k, E, padded
        self.x, self.out = _Slot(), _Slot()
        self.stage: Callable[[], None] | None = None
        self.calls: list[Callable[[], None] | None] = []
        self.result: _Slot | None = None
        self.copy = True
        #: the counter the calls count into: per message (None), or once per call (``sent``, ``received``)
        self.counter, self.sent, self.received = counter, 0, 0

    def method(self, sub: Any, name: str, *args: Any) -> Callable[..., Any]:
        """``sub.<name>`` for a step's call: the counting communicator's method (counted per message), or
        the plain one, whose bytes — what the counting method would count for ``args``, the compiling call's
        arrays, the same sizes in every call — are added to the counter once per call."""
        if self.counter is None:
            return getattr(sub, name)
        s, r = sub.bytes_of(name, *args)
        self.sent += s
        self.received += r
        return getattr(sub.comm, name)

    def bind(self, x: np.ndarray, out: np.ndarray) -> None:
        """Point the slots at ``x`` and ``out`` viewed as the steps see them (``k × E``, or flat when padded)."""
        shape = (-1,) if self.padded else (self.k, self.E)
        self.x.a, self.out.a = x.reshape(shape), out.reshape(shape)

    def finish(self, result: _Slot) -> None:
        """``result`` holds the sum at the end; it is already in ``out`` when it is ``out`` itself, or ``x``
        in place (decided on the arrays of the compiling call, the same for every call of this aliasing)."""
        self.result = result
        o = self.out.a
        self.copy = not (result is self.out or (result is self.x and result.a.shape == o.shape
                                                 and _address(result.a) == _address(o)))

    def run(self, x: np.ndarray, out: np.ndarray) -> None:
        # the arrays themselves, not their k × E views: MPI reads the same bytes, and the few steps that
        # need the shape (a staged or re-sorted step) reshape them
        self.x.a, self.out.a = x, out
        try:
            if self.stage is not None:
                self.stage()
            for call in self.calls:
                if call is not None:
                    call()
            if self.copy:
                out.reshape(-1)[:] = self.result.a.reshape(-1)[: self.n]
            if self.counter is not None:
                self.counter.add(self.sent, self.received)
        finally:
            self.x.a = self.out.a = None


class ReductionExecutor(Executor):
    """Runs one lowered reduction program on the communicator's ranks (see the module docstring)."""

    def __init__(self, program: LoweredProgram, reduction_groups: Sequence[Sequence[int]], comm: Any, *,
                 check: bool = True) -> None:
        super().__init__(comm, {"devices": program.num_devices, "groups": reduction_groups,
                                "steps": [(s.collective, s.groups) for s in program.steps], "check": check})
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
            whole = len(st.groups) == 1 and st.groups[0] == tuple(range(self.size))
            # a group of every rank in order is the communicator itself; others are split once, at bind
            sub = self.counted if whole else self.comms.group(st.groups)
            c = Collective.parse(st.collective)
            g = next((g for g in st.groups if self.rank in g), None)
            perm = gather_order(before, g) if (g is not None and c.gathers) else None
            steps.append(_Step(c, sub, len(before[self.rank]), len(after[self.rank]), perm,
                               g is not None and g[0] == self.rank))
        self._steps = tuple(steps)
        self._buffers: dict[tuple[int, str], _Buffers] = {}
        #: (length, dtype, aliasing, program) of the last call: the next call like it skips the lookups
        self._last: tuple | None = None
        self._same: tuple | None = None

    # -- the library call ------------------------------------------------------------------------------

    def allreduce(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Sum ``x`` over this rank's reduction group, following the program's collectives.  ``x``: a
        contiguous numpy array of any length and dtype MPI knows; the result goes into ``out`` (same shape
        and dtype) or, without ``out``, into ``x`` itself.  Returns the array holding the result."""
        if self._closed:
            self._require_open()
        # the same arrays as the last call (a training loop's gradient buffers): nothing to check again — an
        # ndarray keeps its memory, size and dtype (weak references: the executor keeps no array alive)
        same, out_arg = self._same, out
        if same is not None and same[0]() is x and (same[1] is None if out is None else
                                                     same[1] is not None and same[1]() is out) \
                and x.size == same[2] and x.dtype is same[3]:
            same[4].run(x, x if out is None else out)
            return x if out is None else out
        # the common case in few attribute reads (each µs of Python before a collective costs several when
        # ranks share cores): a C-contiguous ndarray of a native number type, in place or into a like one
        fx = x.flags if type(x) is np.ndarray else None
        if fx is not None and fx.c_contiguous and x.size and x.dtype.kind in "iufc" and x.dtype.isnative:
            if out is None:
                if not fx.writeable:
                    raise ModelError("x is read-only; pass out= to write the sum elsewhere", param="x")
                out, answer, alias = x, x, 0
            elif type(out) is np.ndarray and out.shape == x.shape and out.dtype == x.dtype \
                    and out.flags.c_contiguous and out.flags.writeable:
                answer, alias = out, _alias(x, out)
            else:
                x, out, answer = self._check(x, out)
                alias = _alias(x, out)
        else:
            x, out, answer = self._check(x, out)
            alias = _alias(x, out)
        last = self._last
        if last is not None and last[0] == x.size and last[1] == x.dtype and last[2] == alias:
            prog = last[3]
        else:
            bufs = self._step_buffers(self._chunk(x.size), x.dtype)
            prog = bufs.programs.get((x.size, alias))
            if prog is None:  # the first call of this length, dtype and aliasing: decide every step once
                prog = bufs.programs[(x.size, alias)] = self._compile(x, out, bufs)
            self._last = (x.size, x.dtype, alias, prog)
        prog.run(x, out)
        if answer is out:  # not re-viewed (a Fortran-ordered array is run as its transpose)
            self._remember(x, out_arg, prog)
        return answer

    def _remember(self, x: np.ndarray, out: np.ndarray | None, prog: "_Program") -> None:
        """Keep weak references to this call's arrays: the next call with the same ones runs at once."""
        try:
            self._same = (weakref.ref(x), None if out is None else weakref.ref(out), x.size, x.dtype, prog)
        except TypeError:  # pragma: no cover - an ndarray subclass without weak references
            self._same = None

    __call__ = allreduce

    # -- what the rank programs time step by step ------------------------------------------------------

    def step_calls(self, x: np.ndarray, out: np.ndarray) -> tuple[list[Callable[[], None] | None], np.ndarray]:
        """``(calls, result)``: one callable per step (``None`` where this rank sits out) that together run
        the program from ``x`` to ``result``, a ``(chunks held at the end, E)`` array — ``out`` viewed as
        ``k × E`` when no padding is needed and the rank ends holding all ``k`` chunks.  Build once, call in
        order (the rank programs time them one by one)."""
        prog = self._compile(x, out, self._step_buffers(self._chunk(x.size), x.dtype), per_message=True)
        prog.bind(x, out)  # for good: these calls run on these arrays
        if prog.stage is not None:
            prog.stage()
        return list(prog.calls), prog.result.a

    def _chunk(self, n: int) -> int:
        return max(1, -(-n // self.k))

    def _compile(self, x: np.ndarray, out: np.ndarray, bufs: "_Buffers", *, per_message: bool = False) -> "_Program":
        """The program's steps for arrays like ``x`` and ``out`` (their length, dtype and aliasing): which
        buffer each step reads and writes, in place or not, staged or not — decided here, once; the calls
        read the caller's arrays through the program's two slots (:class:`_Slot`), set per call.  They
        call the plain sub-communicators and count their bytes once per call (the same totals), or
        ``per_message`` through the counting ones (what the rank programs read step by step)."""
        n, k = x.size, self.k
        E = bufs.E
        padded = n != k * E
        prog = _Program(n, k, E, padded, None if per_message else self.counter)
        prog.bind(x, out)  # the arrays of this call stand in while the steps are decided
        if padded:  # the chunks are padded with zeros in one staging buffer, filled first in every call
            stage = bufs.get("stage", k)
            flat, xin = stage.reshape(-1), prog.x

            def stage_in() -> None:
                flat[:n] = xin.a.reshape(-1)
                flat[n:] = 0
            prog.stage = stage_in
            cur = _Slot(stage)
        else:
            cur = prog.x
        x_view = cur
        target = None if padded or len(self.final_labels) != k else prog.out
        last = len(self._steps) - 1
        for i, st in enumerate(self._steps):
            if i == last and target is not None:
                dst = target
            elif cur is not x_view and st.sub is not None and st.collective is Collective.ALL_REDUCE:
                dst = cur  # an AllReduce of an internal buffer runs in place: MPI copies nothing first
            else:
                dst = _Slot(bufs.get(("out", i), st.after))
            call, cur = self._call(prog, st, cur, dst, lambda rows, i=i: bufs.get(("spare", i), rows))
            prog.calls.append(call)
        prog.finish(cur)
        return prog

    def _call(self, prog: "_Program", st: _Step, inp: "_Slot", dst: "_Slot", spare: Callable[[int], np.ndarray]):
        """``(callable, output)`` of one step from ``inp`` into ``dst`` (slots: a kept buffer, or the caller's
        array of the call); ``spare(rows)`` is a scratch buffer (made on first use) for a staged input or a
        gathered block that must be re-sorted."""
        if st.sub is None:
            return None, inp
        c, sub = st.collective, st.sub
        i_a, d_a = inp.a, dst.a
        E = i_a.shape[1]
        if d_a.shape[0] != st.after:  # only a kept buffer can be longer than a step needs, never x or out
            dst = _Slot(d_a[: st.after])
            d_a = dst.a
        if c.reduces:
            same = i_a.shape == d_a.shape and _address(i_a) == _address(d_a)
            kept = dst if st.root or c is not Collective.REDUCE else _Slot(np.empty((0, E), d_a.dtype))
            if not same and np.may_share_memory(i_a, d_a):  # overlapping but not identical: stage the input
                src = spare(i_a.shape[0])
                run = self._reduce_call(prog, st, _Slot(src), dst, same=False)
                return (lambda: (np.copyto(src, inp.a.reshape(src.shape)), run())), kept
            return self._reduce_call(prog, st, inp, dst, same=same), kept
        if c.gathers:
            gathered = spare(st.after) if st.perm is not None or np.may_share_memory(i_a, d_a) else None
            if st.perm is None and gathered is None:
                allgather = prog.method(sub, "Allgather", i_a, d_a)
                return (lambda: allgather(inp.a, dst.a)), dst
            perm = st.perm if st.perm is not None else np.arange(st.after)
            allgather = prog.method(sub, "Allgather", i_a, gathered)

            def gather_sorted() -> None:
                allgather(inp.a, gathered)
                np.take(gathered, perm, axis=0, out=dst.a.reshape(gathered.shape))  # re-sort by chunk label
            return gather_sorted, dst
        # Broadcast: the root keeps its chunks, the others receive them
        if st.root:
            bcast = prog.method(sub, "Bcast", i_a, 0)
            return (lambda: bcast(inp.a, 0)), inp
        got = dst if d_a.shape == (st.after, E) else _Slot(spare(st.after))
        bcast = prog.method(sub, "Bcast", got.a, 0)
        return (lambda: bcast(got.a, 0)), got

    @staticmethod
    def _reduce_call(prog: "_Program", st: _Step, inp: "_Slot", dst: "_Slot", *, same: bool) -> Callable[[], None]:
        """The MPI call of a reducing step; ``same``: ``inp`` is ``dst`` (an in-place AllReduce or root Reduce;
        a ReduceScatter's output is smaller than its input, so it is never in place)."""
        sub, c, SUM = st.sub, st.collective, MPI.SUM
        send = MPI.IN_PLACE if same else inp.a
        if c is Collective.ALL_REDUCE:
            allreduce = prog.method(sub, "Allreduce", send, dst.a, SUM)
            if same:
                return lambda: allreduce(MPI.IN_PLACE, dst.a, SUM)
            return lambda: allreduce(inp.a, dst.a, SUM)
        if c is Collective.REDUCE_SCATTER:
            rsb = prog.method(sub, "Reduce_scatter_block", inp.a, dst.a, SUM)
            return lambda: rsb(inp.a, dst.a, SUM)
        if not st.root:
            reduce = prog.method(sub, "Reduce", inp.a, None, SUM, 0)
            return lambda: reduce(inp.a, None, SUM, 0)
        reduce = prog.method(sub, "Reduce", send, dst.a, SUM, 0)
        if same:
            return lambda: reduce(MPI.IN_PLACE, dst.a, SUM, 0)
        return lambda: reduce(inp.a, dst.a, SUM, 0)

    def _step_buffers(self, E: int, dtype: np.dtype) -> "_Buffers":
        """The reusable buffers for chunks of ``E`` elements of ``dtype`` (the last few shapes are kept, with
        the programs compiled on them)."""
        key = (E, dtype.str)
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
        self._last = None
        self._same = None
