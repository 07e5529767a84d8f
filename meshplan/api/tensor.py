"""DistDL-style tensor partitions (DistDL paper, sections 3–4; docs/tensor.md): the halo planning aid and the
MPI check suite.  :func:`tensor_halo` is ``meshplan tensor halo``, :func:`check_tensor` is ``meshplan tensor
check``; their results' fields are the keys of those verbs' ``--json``.  The distributed tensors themselves
(``Partition``, the primitives and layers) live in :mod:`meshplan.tensor`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from meshplan.api.inputs import as_int_tuple, as_seconds
from meshplan.api.results import Result, value, freeze, library_field
from meshplan.models.core.errors import ModelError

__all__ = ["HaloReport", "tensor_halo", "halo_report", "TensorCheck", "check_tensor"]


def _window_values(value: Any, flag: str, n_spatial: int, minimum: int) -> tuple[int, ...]:
    vals = as_int_tuple(value, flag)
    if len(vals) == 1:
        vals = vals * n_spatial
    if len(vals) != n_spatial:
        raise ModelError(f"{flag} gives {len(vals)} values but the tensor has {n_spatial} spatial dimension(s)")
    if any(v < minimum for v in vals):
        raise ModelError(f"{flag} must be >= {minimum}, got {','.join(map(str, vals))}")
    return vals


def halo_report(partition: Any, shape: Any, kernel: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                itemsize: int = 8) -> tuple[dict, Any]:
    """The ``tensor halo --json`` document and the model's :class:`~meshplan.models.tensor.halo.HaloPlan`."""
    from meshplan.models.tensor.halo import Window, halo_plan
    from meshplan.models.tensor.partition import CartesianPartition

    partition, shape = as_int_tuple(partition, "--partition"), as_int_tuple(shape, "--shape")
    if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize < 1:
        raise ModelError(f"--itemsize must be a positive integer, got {itemsize!r}")
    if len(shape) != len(partition):
        raise ModelError(f"--shape has {len(shape)} dimensions but --partition has {len(partition)}; give one part "
                         "count per tensor dimension")
    if any(n < 0 for n in shape):
        raise ModelError(f"--shape {','.join(map(str, shape))} has a negative length")
    if any(p < 1 for p in partition):
        raise ModelError(f"--partition {','.join(map(str, partition))} must hold part counts >= 1")
    part = CartesianPartition.of(partition)
    lead = 2 if len(shape) >= 3 else 0
    ns = len(shape) - lead
    win = Window((1,) * lead + _window_values(kernel, "--kernel", ns, 1),
                 (1,) * lead + _window_values(stride, "--stride", ns, 1),
                 (0,) * lead + _window_values(padding, "--padding", ns, 0),
                 (1,) * lead + _window_values(dilation, "--dilation", ns, 1))
    try:
        plan = halo_plan(part, shape, win)
    except ModelError as err:
        raise ModelError(f"--shape: {err}") from err
    sent = {r: 0 for r in part.ranks}
    recv = {r: 0 for r in part.ranks}
    for t in plan.transfers:
        if t.src != t.dst:
            sent[t.src] += t.volume * itemsize
            recv[t.dst] += t.volume * itemsize
    ranks = []
    for r in plan.ranks:
        ranks.append({"rank": r.rank, "coords": list(part.coords(r.index)), "owned": [list(b) for b in r.owned],
                      "output": [list(b) for b in r.out], "needed": [list(b) for b in r.needed],
                      "halo": [list(h) for h in r.halos],
                      "sources": sorted({t.src for t in plan.transfers if t.dst == r.rank and t.src != r.rank}),
                      "bytes_sent": sent[r.rank], "bytes_received": recv[r.rank]})
    doc = {"partition": list(part.shape), "shape": list(shape), "output_shape": list(plan.output_shape),
           "kernel": list(win.kernel), "stride": list(win.stride), "padding": list(win.padding),
           "dilation": list(win.dilation), "itemsize": itemsize, "ranks": ranks,
           "total_bytes": sum(sent.values())}
    return doc, plan


@value
class HaloReport(Result):
    """Per rank of a partitioned convolution/pooling window: owned input block, output block, needed input
    range, halo widths (negative: owned inputs not needed), source ranks and bytes (docs/tensor.md).  With
    three or more dimensions the first two are batch and channel.  ``plan`` holds the model's ``HaloPlan``."""

    partition: tuple
    shape: tuple
    output_shape: tuple
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    itemsize: int
    ranks: tuple
    total_bytes: int
    plan: Any = library_field()


def tensor_halo(partition: Any, shape: Any, kernel: Any, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                itemsize: int = 8) -> HaloReport:
    """The halo geometry of a window (``kernel``, ``stride``, ``padding``, ``dilation``: one value or one per
    spatial dimension) on a tensor of ``shape`` partitioned by ``partition`` (``"1,1,4"`` or a tuple); no MPI."""
    from meshplan.models.core.limits import check_limit

    parts = as_int_tuple(partition, "--partition")
    if all(p > 0 for p in parts):
        check_limit("devices", math.prod(parts), f"--partition {','.join(map(str, parts))[:60]}")
    doc, plan = halo_report(partition, shape, kernel, stride, padding, dilation, itemsize)
    return HaloReport(**{k: freeze(v) for k, v in doc.items()}, plan=plan)


@value
class TensorCheck(Result):
    """Verdicts of the tensor check suite on ``np`` ranks: adjoint test and exact bytes per primitive case,
    errors of output and gradients per layer case (docs/tensor.md)."""

    np: int
    passed: int
    failed: tuple
    cases: tuple

    @property
    def ok(self) -> bool:
        return not self.failed


def check_tensor(np: int, *, suite: str = "all", timeout_s: float = 600.0) -> TensorCheck:
    """Run the adjoint and layer-equivalence suite (``suite``: all, adjoint, layers) on ``np`` MPI ranks."""
    from meshplan.exec.runtime.launch import check_np, run_job

    if suite not in ("all", "adjoint", "layers"):
        raise ModelError(f"suite must be all, adjoint or layers, got {suite!r}")
    timeout_s = as_seconds(timeout_s, "--timeout")
    check_np(np)
    out = run_job(np, "meshplan.exec.tensor.rank_main", {"suite": suite}, timeout_s=timeout_s)
    cases = out["cases"]
    failed = [c["name"] for c in cases if not c["ok"]]
    return TensorCheck(np=np, passed=len(cases) - len(failed), failed=freeze(failed), cases=freeze(cases))
