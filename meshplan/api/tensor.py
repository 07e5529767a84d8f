"""DistDL-style tensor partitions (DistDL paper, sections 3–4; docs/tensor.md): the halo exchange's spine and
the MPI check suite.

:class:`~meshplan.models.tensor.problem.HaloProblem` → :func:`plan_halo` → :class:`HaloPlan` (``meshplan tensor
halo``; its fields are that verb's ``--json`` keys) → ``plan.bind(comm)`` (a
:class:`~meshplan.exec.tensor.executor.HaloExecutor`: the halo exchange on this rank's block, with its adjoint).
:func:`check_tensor` is ``meshplan tensor check`` and returns a :class:`TensorRun`.  The other primitives and
the distributed layers live in :mod:`meshplan.tensor`.
"""

from __future__ import annotations

from typing import Any

from meshplan.api.inputs import as_seconds
from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, library_field, value
from meshplan.models.tensor.problem import HaloProblem

__all__ = ["RankHaloEntry", "HaloPlan", "plan_halo", "TensorRun", "check_tensor"]


@value
class RankHaloEntry(Value):
    """One rank of a halo plan: its grid coordinates, owned input block, output block, needed input range,
    halo widths per dimension (negative: owned inputs not needed), the ranks it reads from and its bytes."""

    rank: int
    coords: tuple[int, ...]
    owned: tuple[tuple[int, int], ...]
    output: tuple[tuple[int, int], ...]
    needed: tuple[tuple[int, int], ...]
    halo: tuple[tuple[int, int], ...]
    sources: tuple[int, ...]
    bytes_sent: int
    bytes_received: int


@value
class HaloPlan(Value):
    """Per rank of a partitioned convolution/pooling window: owned input block, output block, needed input
    range, halo widths, source ranks and bytes (docs/tensor.md).  With three or more dimensions the first two
    are batch and channel.  ``geometry`` holds the model's
    :class:`~meshplan.models.tensor.halo.HaloGeometry`, ``problem`` the problem."""

    partition: tuple[int, ...]
    shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    itemsize: int
    ranks: tuple[RankHaloEntry, ...]
    total_bytes: int
    geometry: Any = library_field()
    problem: Any = library_field()

    def bind(self, comm: Any, *, pad_value: float = 0.0):
        """The halo exchange on ``comm`` (grid index ``i`` on rank ``i``; collective over ``comm``): see
        :class:`~meshplan.exec.tensor.executor.HaloExecutor`."""
        from meshplan.exec.tensor.executor import HaloExecutor

        return HaloExecutor(self.problem, comm, pad_value=pad_value)


def plan_halo(partition: Any, shape: Any = None, kernel: Any = None, *, stride: Any = 1, padding: Any = 0,
              dilation: Any = 1, dtype: Any = "f64") -> HaloPlan:
    """The halo geometry of a window on a tensor of ``shape`` partitioned by ``partition`` (``"1,1,4"`` or a
    tuple; or one :class:`HaloProblem`): ``kernel``, ``stride``, ``padding``, ``dilation`` take one value or one
    per spatial dimension; ``dtype`` sets the bytes.  No MPI."""
    from meshplan.models.tensor.halo import halo_geometry

    if isinstance(partition, HaloProblem):
        problem = partition
    else:
        if shape is None or kernel is None:
            raise ModelError("plan_halo needs partition, shape and kernel", param=("shape", "kernel"))
        problem = HaloProblem.of(partition, shape, kernel, stride, padding, dilation, dtype)
    part, win = problem.partition, problem.window
    try:
        geo = halo_geometry(part, problem.shape, win)
    except ModelError as err:
        if err.param:  # a limit names its own parameter and environment variable
            raise
        raise ModelError(f"shape: {err}", param="shape") from err
    from meshplan.models.core.dtypes import as_dtype

    itemsize = as_dtype(problem.dtype).itemsize
    sent = {r: 0 for r in part.ranks}
    recv = {r: 0 for r in part.ranks}
    sources: dict[int, set[int]] = {r: set() for r in part.ranks}
    for t in geo.transfers:
        if t.src != t.dst:
            sent[t.src] += t.volume * itemsize
            recv[t.dst] += t.volume * itemsize
            sources[t.dst].add(t.src)
    ranks = tuple(RankHaloEntry(r.rank, tuple(part.coords(r.index)), r.owned, r.out, r.needed, r.halos,
                                tuple(sorted(sources[r.rank])), sent[r.rank], recv[r.rank]) for r in geo.ranks)
    return HaloPlan(part.shape, tuple(problem.shape), tuple(geo.output_shape), win.kernel, win.stride, win.padding,
                    win.dilation, itemsize, ranks, sum(sent.values()), geometry=geo, problem=problem)


@value
class TensorRun(Value):
    """Verdicts of the tensor check suite on ``np`` ranks: adjoint test and exact bytes per primitive case,
    errors of output and gradients per layer case (docs/tensor.md)."""

    np: int
    passed: int
    failed: tuple[str, ...]
    cases: tuple

    @property
    def ok(self) -> bool:
        return not self.failed


def check_tensor(np: int, *, suite: str = "all", timeout: float = 600.0) -> TensorRun:
    """Run the adjoint and layer-equivalence suite (``suite``: all, adjoint, layers) on ``np`` MPI ranks; every
    primitive runs through the same classes a user's program builds."""
    from meshplan.exec.runtime.launch import check_np, run_job
    from meshplan.models.core.values import freeze

    if suite not in ("all", "adjoint", "layers"):
        raise ModelError(f"suite must be all, adjoint or layers, got {suite!r}", param="suite")
    timeout = as_seconds(timeout, "timeout")
    check_np(np)
    out = run_job(np, "meshplan.exec.tensor.rank_main", {"suite": suite}, timeout_s=timeout)
    cases = out["cases"]
    failed = tuple(c["name"] for c in cases if not c["ok"])
    return TensorRun(np=np, passed=len(cases) - len(failed), failed=failed, cases=freeze(cases))
