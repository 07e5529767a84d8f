"""A halo exchange to plan: a window on a tensor partitioned over a Cartesian grid of ranks (DistDL §3.2.5).

:class:`HaloProblem` is validated once, here: the partition's part counts, the tensor's shape (one length per
partitioned dimension, each at least as long as its part count), the window (one kernel, stride, padding and
dilation per dimension) and the element type.  With three or more dimensions the first two are batch and
channel, which the window leaves alone (:meth:`HaloProblem.of`).
"""

from __future__ import annotations

import math
from typing import Any

from meshplan.models.core.checks import as_int_tuple
from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, value
from meshplan.models.tensor.halo import Window
from meshplan.models.tensor.partition import CartesianPartition

__all__ = ["HaloProblem"]


def _spatial(val: Any, what: str, n_spatial: int, minimum: int) -> tuple[int, ...]:
    """One value per spatial dimension from an int, a sequence or text like ``3`` / ``3,5``."""
    vals = as_int_tuple(val, what)
    if len(vals) == 1:
        vals = vals * n_spatial
    if len(vals) != n_spatial:
        raise ModelError(f"{what} gives {len(vals)} values but the tensor has {n_spatial} spatial dimension(s)",
                         param=what)
    if any(v < minimum for v in vals):
        raise ModelError(f"{what} must be >= {minimum}, got {','.join(map(str, vals))}", param=what)
    return vals


@value
class HaloProblem(Value):
    """A ``window`` on a tensor of global ``shape`` partitioned by ``partition`` (part counts per dimension),
    elements of ``dtype`` (its short name)."""

    partition: CartesianPartition
    shape: tuple[int, ...]
    window: Window
    dtype: str = "f64"

    def __post_init__(self) -> None:
        if not isinstance(self.partition, CartesianPartition):
            raise ModelError(f"partition must be a CartesianPartition, got {type(self.partition).__name__}",
                             param="partition")
        object.__setattr__(self, "dtype", as_dtype(self.dtype).short)
        if len(self.shape) != self.partition.ndim:
            raise ModelError(f"shape has {len(self.shape)} dimensions but partition has {self.partition.ndim}; "
                             "give one part count per tensor dimension", param=("shape", "partition"))
        self.partition.check_tensor(self.shape, what="shape")
        if self.window.ndim != len(self.shape):
            raise ModelError(f"the window has {self.window.ndim} dimensions, the tensor {len(self.shape)}",
                             param="kernel")

    @classmethod
    def of(cls, partition: Any, shape: Any, kernel: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           dtype: Any = "f64") -> "HaloProblem":
        """The problem from part counts and a shape (sequences or text like ``1,1,4``) and per-spatial-dimension
        window values (one value for every spatial dimension, or one each)."""
        parts = as_int_tuple(partition, "partition")
        dims = as_int_tuple(shape, "shape")
        if any(n < 0 for n in dims):
            raise ModelError(f"shape {','.join(map(str, dims))} has a negative length", param="shape")
        if any(p < 1 for p in parts):
            raise ModelError(f"partition {','.join(map(str, parts))} must hold part counts >= 1", param="partition")
        from meshplan.models.core.limits import check_limit

        check_limit("devices", math.prod(parts), f"partition {','.join(map(str, parts))[:60]}", param="partition")
        if len(dims) != len(parts):
            raise ModelError(f"shape has {len(dims)} dimensions but partition has {len(parts)}; give one part "
                             "count per tensor dimension", param=("shape", "partition"))
        lead = 2 if len(dims) >= 3 else 0
        ns = len(dims) - lead
        win = Window((1,) * lead + _spatial(kernel, "kernel", ns, 1), (1,) * lead + _spatial(stride, "stride", ns, 1),
                     (0,) * lead + _spatial(padding, "padding", ns, 0),
                     (1,) * lead + _spatial(dilation, "dilation", ns, 1))
        return cls(CartesianPartition.of(parts), dims, win, dtype)
