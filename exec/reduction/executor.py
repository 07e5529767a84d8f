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
(in place or not, staged or not) into one straight-line function of the call's arrays — the per-call
Python before a collective costs more than its own time when ranks share cores (docs/library.md,
"Overhead").  It hands MPI the plain sub-communicators and adds the call's bytes to ``counter`` once, at the
end: the totals a counting communicator counts message by message (:meth:`CountingComm.bytes_of`);
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


class _Arg(str):
    """The call's ``x`` or ``out`` (:data:`X`, :data:`OUT`) in a compiled operation's arguments."""


X, OUT = _Arg("x"), _Arg("out")


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _alias(x: np.ndarray, out: np.ndarray) -> int:
    """How ``out`` lies on ``x``: 0 the same array (in place), 1 overlapping otherwise, 2 apart."""
    if x is out:
        return 0
    if not np.may_share_memory(x, out):
        return 2
    return 0 if x.shape == out.shape and _address(x) == _address(out) else 1


def _copy_in(dst: np.ndarray, src: np.ndarray) -> None:  # a staged input: the chunks of ``src`` (any shape)
    np.copyto(dst, src.reshape(dst.shape))


def _stage_in(flat: np.ndarray, x: np.ndarray, n: int) -> None:  # padded chunks: x, then zeros
    flat[:n] = x.reshape(-1)
    flat[n:] = 0


def _take(gathered: np.ndarray, perm: np.ndarray, dst: np.ndarray) -> None:  # re-sort by chunk label
    np.take(gathered, perm, axis=0, out=dst.reshape(gathered.shape))


def _put(out: np.ndarray, result: np.ndarray, n: int) -> None:  # the sum into out, without the padding
    out.reshape(-1)[:] = result.reshape(-1)[:n]


def _straight(ops: Sequence[tuple[Callable[..., Any], tuple]], add: Any = None) -> Callable[..., None]:
    """``run(x, out)``: the calls ``ops`` (``(function, arguments)``, :data:`X`, :data:`OUT` for run's), then
    ``add = (counter.add, sent, received)`` if given, as straight-line code — no loop, no frame per step: the
    Python between collectives runs cache-cold when ranks share cores (docs/library.md, "Overhead")."""
    names: dict[str, Any] = {}

    def name(v: Any) -> str:  # a constant's name in run's globals; x and out are run's arguments
        key = str(v) if isinstance(v, _Arg) else f"c{len(names)}"
        names[key] = v
        return key
    lines = [f"{name(f)}({', '.join(map(name, args))})" for f, args in ops]
    if add is not None:
        lines.append(f"{name(add[0])}({add[1]}, {add[2]})")
    exec("def run(x=None, out=None):\n    " + "\n    ".join(lines or ["pass"]), names)
    return names["run"]


class _Program:
    """The steps of one (length, dtype, aliasing), compiled once: ``steps`` their operations (``(function,
    arguments)``, :data:`X` and :data:`OUT` for the call's arrays, none where the rank sits out), ``run(x,
    out)`` all of them in one function, then the copy into ``out`` unless the last step wrote it there.  It
    keeps no array of a call: ``x`` and ``out`` are the compiling call's (``k × E`` views, or flat when
    padded), used while compiling and by :meth:`ReductionExecutor.step_calls`."""

    __slots__ = ("n", "x", "out", "stage", "steps", "result", "counter", "sent", "received", "run")

    def __init__(self, n: int, x: np.ndarray, out: np.ndarray, counter: Any) -> None:
        self.n, self.x, self.out = n, x, out
        self.stage: list[tuple] = []
        self.steps: list[list[tuple]] = []
        #: the counter the calls count into: per message (None), or once per call (``sent``, ``received``)
        self.counter, self.sent, self.received = counter, 0, 0

    def arr(self, a: Any) -> Any:
        """The compiling call's array for :data:`X` or :data:`OUT`; anything else as it is."""
        return self.x if a is X else self.out if a is OUT else a

    def mpi(self, sub: Any, name: str, *args: Any) -> tuple[Callable[..., Any], tuple]:
        """The operation ``sub.<name>(*args)``: the counting communicator's method (counted per message), or
        the plain one, whose bytes — what the counting method counts for the compiling call's arrays, the
        same sizes in every call — are added to the counter once per call."""
        if self.counter is None:
            return getattr(sub, name), args
        s, r = sub.bytes_of(name, *map(self.arr, args))
        self.sent += s
        self.received += r
        return getattr(sub.comm, name), args

    def finish(self, result: Any) -> None:
        """``result`` holds the sum at the end; it is already in ``out`` when it is ``out`` itself, or ``x``
        in place (decided on the arrays of the compiling call, the same for every call of this aliasing)."""
        self.result = r = result
        copy = not (r is OUT or (r is X and self.x.shape == self.out.shape
                                 and _address(self.x) == _address(self.out)))
        ops = self.stage + [op for step in self.steps for op in step] + ([(_put, (OUT, r, self.n))] if copy else [])
        self.run = _straight(ops, None if self.counter is None else (self.counter.add, self.sent, self.received))


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
        # the same arrays as the last call (a training loop's gradient buffers): nothing to check again — an
        # ndarray keeps its memory, size and dtype (weak references: the executor keeps no array alive; a
        # closed one has forgotten them)
        same = self._same
        if same is not None and same[0]() is x and x.dtype is same[3] and x.size == same[2]:
            if out is None:
                if same[1] is None:
                    same[4](x, x)
                    return x
            elif same[1] is not None and same[1]() is out:
                same[4](x, out)
                return out
        if self._closed:
            self._require_open()
        out_arg = out
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
            bufs = self._step_buffers(max(1, -(-x.size // self.k)), x.dtype)
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
            self._same = (weakref.ref(x), None if out is None else weakref.ref(out), x.size, x.dtype, prog.run)
        except TypeError:  # pragma: no cover - an ndarray subclass without weak references
            self._same = None

    __call__ = allreduce

    # -- what the rank programs time step by step ------------------------------------------------------

    def step_calls(self, x: np.ndarray, out: np.ndarray) -> tuple[list[Callable[[], None] | None], np.ndarray]:
        """``(calls, result)``: one callable per step (``None`` where this rank sits out) that together run
        the program from ``x`` to ``result``, a ``(chunks held at the end, E)`` array — ``out`` viewed as
        ``k × E`` when no padding is needed and the rank ends holding all ``k`` chunks.  Build once, call in
        order (the rank programs time them one by one)."""
        prog = self._compile(x, out, self._step_buffers(max(1, -(-x.size // self.k)), x.dtype), per_message=True)
        # for good: these calls run on these arrays
        fixed = [[(f, tuple(map(prog.arr, args))) for f, args in ops] for ops in [prog.stage] + prog.steps]
        _straight(fixed[0])()
        return [_straight(ops) if ops else None for ops in fixed[1:]], prog.arr(prog.result)

    def _compile(self, x: np.ndarray, out: np.ndarray, bufs: "_Buffers", *, per_message: bool = False) -> "_Program":
        """The program's steps for arrays like ``x`` and ``out`` (their length, dtype and aliasing): which
        buffer each step reads and writes, in place or not, staged or not — decided here, once; the calls
        take the caller's arrays as arguments (:data:`X`, :data:`OUT`).  They call the plain
        sub-communicators and count their bytes once per call (the same totals), or ``per_message`` through
        the counting ones (what the rank programs read step by step)."""
        n, k, E = x.size, self.k, bufs.E
        padded = n != k * E
        shape = (-1,) if padded else (k, E)
        prog = _Program(n, x.reshape(shape), out.reshape(shape), None if per_message else self.counter)
        if padded:  # the chunks are padded with zeros in one staging buffer, filled first in every call
            cur = bufs.get("stage", k)
            prog.stage.append((_stage_in, (cur.reshape(-1), X, n)))
        else:
            cur = X
        x_view = cur
        target = None if padded or len(self.final_labels) != k else OUT
        last = len(self._steps) - 1
        for i, st in enumerate(self._steps):
            if i == last and target is not None:
                dst = target
            elif cur is not x_view and st.sub is not None and st.collective is Collective.ALL_REDUCE:
                dst = cur  # an AllReduce of an internal buffer runs in place: MPI copies nothing first
            else:
                dst = bufs.get(("out", i), st.after)
            ops, cur = self._call(prog, st, cur, dst, lambda rows, i=i: bufs.get(("spare", i), rows))
            prog.steps.append(ops)
        prog.finish(cur)
        return prog

    def _call(self, prog: "_Program", st: _Step, inp: Any, dst: Any, spare: Callable[[int], np.ndarray]):
        """``(operations, output)`` of one step from ``inp`` into ``dst`` (a kept buffer, or :data:`X` or
        :data:`OUT`); ``spare(rows)`` is a scratch buffer (made on first use) for a staged input or a gathered
        block that must be re-sorted."""
        if st.sub is None:
            return [], inp
        c, sub = st.collective, st.sub
        i_a, d_a = prog.arr(inp), prog.arr(dst)
        E = i_a.shape[1]
        if d_a.shape[0] != st.after:  # only a kept buffer can be longer than a step needs, never x or out
            dst = d_a = d_a[: st.after]
        if c.reduces:
            same = i_a.shape == d_a.shape and _address(i_a) == _address(d_a)
            kept = dst if st.root or c is not Collective.REDUCE else np.empty((0, E), d_a.dtype)
            if not same and np.may_share_memory(i_a, d_a):  # overlapping but not identical: stage the input
                src = spare(i_a.shape[0])
                return [(_copy_in, (src, inp)), self._reduce_op(prog, st, src, dst, same=False)], kept
            return [self._reduce_op(prog, st, inp, dst, same=same)], kept
        if c.gathers:
            if st.perm is None and not np.may_share_memory(i_a, d_a):
                return [prog.mpi(sub, "Allgather", inp, dst)], dst
            gathered = spare(st.after)
            perm = st.perm if st.perm is not None else np.arange(st.after)
            return [prog.mpi(sub, "Allgather", inp, gathered), (_take, (gathered, perm, dst))], dst
        # Broadcast: the root keeps its chunks, the others receive them
        if st.root:
            return [prog.mpi(sub, "Bcast", inp, 0)], inp
        got = dst if d_a.shape == (st.after, E) else spare(st.after)
        return [prog.mpi(sub, "Bcast", got, 0)], got

    @staticmethod
    def _reduce_op(prog: "_Program", st: _Step, inp: Any, dst: Any, *, same: bool) -> tuple:
        """The MPI call of a reducing step; ``same``: ``inp`` is ``dst`` (an in-place AllReduce or root Reduce;
        a ReduceScatter's output is smaller than its input, so it is never in place)."""
        sub, c, SUM = st.sub, st.collective, MPI.SUM
        send = MPI.IN_PLACE if same else inp
        if c is Collective.ALL_REDUCE:
            return prog.mpi(sub, "Allreduce", send, dst, SUM)
        if c is Collective.REDUCE_SCATTER:
            return prog.mpi(sub, "Reduce_scatter_block", inp, dst, SUM)
        if not st.root:
            return prog.mpi(sub, "Reduce", inp, None, SUM, 0)
        return prog.mpi(sub, "Reduce", send, dst, SUM, 0)

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
