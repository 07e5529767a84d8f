"""Distributed layers from the tensor primitives and the sequential numpy kernels (DistDL paper, section 4).

**Output ownership (one rule for every layer).**  A layer's output lives on its output partition — the
input's partition ``P`` for convolution and pooling, ``P_y`` for :class:`Linear` — as the balanced
decomposition of the output's global shape: exactly the block ``P.scatter`` of the sequential output would
give that rank.  Weights are replicated: ``layer.weight`` / ``layer.bias`` hold torch's full shapes on every
rank (set them identically everywhere); after ``backward`` every member rank holds the full, summed
``weight_grad`` / ``bias_grad``.

* Convolution ``Conv{1,2,3}d(P, …)`` with ``P`` over ``(batch, channel, *spatial)``: a halo exchange
  (:class:`HaloExchange`) builds the extended local input; the rank convolves its input-channel block with
  the matching weight slice for *all* output channels; a reduce-scatter over the channel axis of ``P``
  sums the partial outputs and leaves each rank its output-channel block (with ``P_c = 1`` it moves
  nothing).  Backward: all-gather (its adjoint), the local Jacobian adjoints, the adjoint halo exchange,
  and one all-sum-reduce of the weight and bias gradients.  Feature-, channel-, batch-partitioned and
  general partitions are the same code.
* Pooling ``MaxPool{1,2,3}d`` / ``AvgPool{1,2,3}d``: halo exchange → local pooling (Fig. 3).
* ``Linear(P_x, P_y, P_w, …)`` (Fig. 5): ``P_x = 1×P_fi`` over ``(batch, in)``, ``P_y = 1×P_fo`` over
  ``(batch, out)``, ``P_w = P_fo×P_fi``: broadcast ``x`` onto ``P_w``, local affine product with the weight
  block, sum-reduce onto ``P_y``.

Every rank of the communicator constructs each layer and calls ``forward`` / ``backward`` (None off the
partition).
"""

from __future__ import annotations

import math

import numpy as np

from meshplan.exec.tensor.partition import Partition, check_local
from meshplan.exec.tensor.primitives import AllSumReduce, Broadcast, HaloExchange, ReduceScatter, SumReduce, _Closing
from meshplan.models.core.errors import ModelError
from meshplan.models.tensor import kernels as K
from meshplan.models.tensor.halo import Window, output_shape
from meshplan.models.tensor.partition import CartesianPartition, balanced_block

__all__ = ["Conv1d", "Conv2d", "Conv3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
           "AvgPool3d", "Linear"]


def _positive(value, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ModelError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_param(arr, shape, name: str, dtype) -> np.ndarray:
    a = np.asarray(arr, dtype=dtype)
    if a.shape != tuple(shape):
        raise ModelError(f"{name} has shape {a.shape}; expected {tuple(shape)}")
    return a


class _Layer(_Closing):
    """A layer holding per-shape plans in ``self._plans`` (a primitive, or a tuple holding some)."""

    def close(self) -> None:
        """Free the datatypes of the primitives built so far (the layer builds new ones if used again)."""
        for plan in self._plans.values():
            for p in plan if isinstance(plan, tuple) else (plan,):
                if isinstance(p, _Closing):
                    p.close()
        self._plans.clear()


class _Windowed(_Layer):
    n_spatial = 0

    def _init_window(self, P: Partition, kernel_size, stride, padding, dilation) -> None:
        if not isinstance(P, Partition):
            raise ModelError(f"P must be a meshplan.tensor.Partition, got {type(P).__name__}")
        if P.model.ndim != 2 + self.n_spatial:
            raise ModelError(f"P {P.shape} must have {2 + self.n_spatial} dimensions (batch, channel, "
                             f"{self.n_spatial} spatial) for {type(self).__name__}")
        self.P = P
        self.window = Window.spatial(2 + self.n_spatial, self.n_spatial, kernel_size, stride, padding, dilation)
        self._plans: dict = {}
        self._saved = None

    @property
    def kernel_size(self):
        return self.window.kernel[2:]

    def _halo(self, x, pad_value: float) -> tuple[HaloExchange, tuple[int, ...]]:
        g = self.P.global_shape_of(x)
        if g not in self._plans:
            w = self.window
            try:
                halo = HaloExchange(self.P, g, w.kernel, w.stride, w.padding, w.dilation, pad_value=pad_value,
                                    dtype=self.dtype)
            except ModelError as err:
                raise ModelError(f"x of global shape {g} does not fit {type(self).__name__}: {err}") from err
            self._plans[g] = self._build(g, halo)
        return self._plans[g], g

    def _build(self, g, halo):
        return halo

    def output_global_shape(self, global_shape) -> tuple[int, ...]:
        return output_shape(self.P.model.check_tensor(global_shape, "x global shape"), self.window)

    def local_shapes(self, global_shape):
        """(input block, output block) shapes of this rank for an input of ``global_shape`` (None off ``P``)."""
        return self.P.local_shape(global_shape), self.P.local_shape(self.output_global_shape(global_shape))

    def _need_forward(self):
        if self._saved is None:
            raise ModelError(f"{type(self).__name__}.backward called before forward")
        return self._saved


class _ConvNd(_Windowed):
    def __init__(self, P: Partition, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, bias: bool = True, *, dtype=np.float64, seed: int = 0) -> None:
        self.in_channels = _positive(in_channels, "in_channels")
        self.out_channels = _positive(out_channels, "out_channels")
        self.dtype = np.dtype(dtype)
        self._init_window(P, kernel_size, stride, padding, dilation)
        k = self.kernel_size
        rng = np.random.default_rng(seed)          # the same on every rank
        bound = 1.0 / math.sqrt(self.in_channels * math.prod(k))
        self.weight = rng.uniform(-bound, bound, (self.out_channels, self.in_channels, *k)).astype(self.dtype)
        self.bias = rng.uniform(-bound, bound, self.out_channels).astype(self.dtype) if bias else None
        self.weight_grad = None
        self.bias_grad = None
        self._grad_sum = AllSumReduce(P, range(P.model.ndim), dtype=self.dtype)

    def output_global_shape(self, global_shape) -> tuple[int, ...]:
        g = self.P.model.check_tensor(global_shape, "x global shape")
        return (g[0], self.out_channels, *output_shape(g, self.window)[2:])

    def _build(self, g, halo):
        if g[1] != self.in_channels:
            raise ModelError(f"x has {g[1]} channels but {type(self).__name__} has in_channels={self.in_channels}")
        out_g = (g[0], self.out_channels, *halo.plan.output_shape[2:])
        return halo, ReduceScatter(self.P, [1], out_g, dtype=self.dtype), out_g

    def forward(self, x):
        (halo, rs, out_g), g = self._halo(x, 0.0)
        w = _check_param(self.weight, (self.out_channels, self.in_channels, *self.kernel_size), "weight", self.dtype)
        b = None if self.bias is None else _check_param(self.bias, (self.out_channels,), "bias", self.dtype)
        ext = halo.forward(x)
        yhat = None
        if self.P.active:
            c0, c1 = self.P.local_box(g)[1]
            yhat = K.conv_forward(ext, w[:, c0:c1], self.window.stride[2:], self.window.dilation[2:])
        y = rs.forward(yhat)
        if y is not None and b is not None:
            o0, o1 = self.P.local_box(out_g)[1]
            y += b[o0:o1].reshape((1, -1) + (1,) * self.n_spatial)
        self._saved = (halo, rs, out_g, g, ext, w)
        return y

    def backward(self, dy):
        halo, rs, out_g, g, ext, w = self._need_forward()
        dyhat = rs.adjoint(dy)
        dext, grads = None, None
        if self.P.active:
            c0, c1 = self.P.local_box(g)[1]
            dext, dw = K.conv_backward(ext, w[:, c0:c1], dyhat, self.window.stride[2:], self.window.dilation[2:])
            gw = np.zeros(w.shape, dtype=self.dtype)
            gw[:, c0:c1] = dw
            gb = np.zeros(self.out_channels, dtype=self.dtype)
            if self.bias is not None:
                o0, o1 = self.P.local_box(out_g)[1]
                gb[o0:o1] = np.asarray(dy).sum(axis=tuple(a for a in range(np.ndim(dy)) if a != 1))
            grads = self._grad_sum.forward(np.concatenate([gw.ravel(), gb]))
            self.weight_grad = grads[:gw.size].reshape(w.shape)
            self.bias_grad = None if self.bias is None else grads[gw.size:]
        return halo.adjoint(dext)


class Conv1d(_ConvNd):
    n_spatial = 1


class Conv2d(_ConvNd):
    n_spatial = 2


class Conv3d(_ConvNd):
    n_spatial = 3


class _PoolNd(_Windowed):
    mode = ""

    def __init__(self, P: Partition, kernel_size, stride=None, padding=0, dilation=1, *, dtype=np.float64) -> None:
        self.dtype = np.dtype(dtype)
        self._init_window(P, kernel_size, kernel_size if stride is None else stride, padding, dilation)
        bad = [(p, k) for p, k in zip(self.window.padding[2:], self.kernel_size) if p > k // 2]
        if bad:
            raise ModelError(f"padding must be at most half the kernel_size, got padding {self.window.padding[2:]} "
                             f"for kernel_size {self.kernel_size}")

    def forward(self, x):
        halo, _ = self._halo(x, -np.inf if self.mode == "max" else 0.0)
        ext = halo.forward(x)
        w = self.window
        y = None if ext is None else K.pool_forward(ext, w.kernel[2:], w.stride[2:], w.dilation[2:], self.mode)
        self._saved = (halo, ext)
        return y

    def backward(self, dy):
        halo, ext = self._need_forward()
        w = self.window
        dext = None
        if ext is not None:
            out = K.valid_output_shape(ext.shape[2:], w.kernel[2:], w.stride[2:], w.dilation[2:])
            dy = check_local(dy, (*ext.shape[:2], *out), "dy", self.dtype)
            dext = K.pool_backward(ext, dy, w.kernel[2:], w.stride[2:], w.dilation[2:], self.mode)
        return halo.adjoint(dext)


def _pool(name: str, n: int, mode: str):
    return type(name, (_PoolNd,), {"n_spatial": n, "mode": mode, "__doc__": f"Distributed {mode} pooling, {n}-D."})


MaxPool1d, MaxPool2d, MaxPool3d = (_pool(f"MaxPool{n}d", n, "max") for n in (1, 2, 3))
AvgPool1d, AvgPool2d, AvgPool3d = (_pool(f"AvgPool{n}d", n, "avg") for n in (1, 2, 3))


class Linear(_Layer):
    """``y = x Wᵀ + b`` with ``x`` on ``P_x`` (1×P_fi), ``W`` worked on ``P_w`` (P_fo×P_fi), ``y`` on ``P_y`` (1×P_fo)."""

    def __init__(self, P_x: Partition, P_y: Partition, P_w: Partition, in_features: int, out_features: int,
                 bias: bool = True, *, dtype=np.float64, seed: int = 0) -> None:
        self.in_features = _positive(in_features, "in_features")
        self.out_features = _positive(out_features, "out_features")
        for name, P in (("P_x", P_x), ("P_y", P_y), ("P_w", P_w)):
            if not isinstance(P, Partition) or P.model.ndim != 2:
                raise ModelError(f"{name} must be a 2-D meshplan.tensor.Partition, got {P!r}")
        fi, fo = P_x.shape[1], P_y.shape[1]
        if P_x.shape[0] != 1 or P_y.shape[0] != 1 or P_w.shape != (fo, fi):
            raise ModelError(f"Linear needs P_x = 1×P_fi, P_y = 1×P_fo and P_w = P_fo×P_fi; got P_x {P_x.shape}, "
                             f"P_y {P_y.shape}, P_w {P_w.shape}")
        self.P_x, self.P_y, self.P_w = P_x, P_y, P_w
        self.P_yT = P_y.with_model(CartesianPartition((fo, 1), P_y.ranks))
        self.dtype = np.dtype(dtype)
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight = rng.uniform(-bound, bound, (self.out_features, self.in_features)).astype(self.dtype)
        self.bias = rng.uniform(-bound, bound, self.out_features).astype(self.dtype) if bias else None
        self.weight_grad = None
        self.bias_grad = None
        self.members = tuple(sorted(set(P_x.ranks) | set(P_y.ranks) | set(P_w.ranks)))
        self._sum = P_w.comms.group((self.members,))
        self._plans: dict = {}
        self._saved = None

    def local_shapes(self, global_shape):
        """(input block, output block) shapes of this rank for an input of ``global_shape`` (None off the partitions)."""
        g = tuple(global_shape)
        return self.P_x.local_shape(g), self.P_y.local_shape((g[0], self.out_features))

    def _blocks(self):
        i, j = self.P_w.model.coords(self.P_w.index)
        return (balanced_block(self.out_features, self.P_w.shape[0], i),
                balanced_block(self.in_features, self.P_w.shape[1], j))

    def forward(self, x):
        g = self.P_x.global_shape_of(x)
        if g[1] != self.in_features:
            raise ModelError(f"x has {g[1]} features but Linear has in_features={self.in_features}")
        if g not in self._plans:
            self._plans[g] = (Broadcast(self.P_x, self.P_w, g, dtype=self.dtype),
                              SumReduce(self.P_w, self.P_yT, (self.out_features, g[0]), dtype=self.dtype))
        bx, sr = self._plans[g]
        w = _check_param(self.weight, (self.out_features, self.in_features), "weight", self.dtype)
        b = None if self.bias is None else _check_param(self.bias, (self.out_features,), "bias", self.dtype)
        xh = bx.forward(x)
        yhT = None
        if self.P_w.active:
            (o0, o1), (i0, i1) = self._blocks()
            yhT = w[o0:o1, i0:i1] @ xh.T
        yT = sr.forward(yhT)
        y = None
        if yT is not None:
            y = np.ascontiguousarray(yT.T)
            if b is not None:
                o0, o1 = self.P_y.local_box((g[0], self.out_features))[1]
                y += b[o0:o1]
        self._saved = (bx, sr, g, xh, w)
        return y

    def backward(self, dy):
        if self._saved is None:
            raise ModelError("Linear.backward called before forward")
        bx, sr, g, xh, w = self._saved
        dy = check_local(dy, self.P_y.local_shape((g[0], self.out_features)), "dy", self.dtype)
        dyhT = sr.adjoint(None if dy is None else np.ascontiguousarray(dy.T))
        dxh = None
        grads = np.zeros(w.size + self.out_features, dtype=self.dtype)
        if self.P_w.active:
            (o0, o1), (i0, i1) = self._blocks()
            gw = grads[:w.size].reshape(w.shape)
            gw[o0:o1, i0:i1] = dyhT @ xh
            dxh = dyhT.T @ w[o0:o1, i0:i1]
        if dy is not None and self.bias is not None:
            o0, o1 = self.P_y.local_box((g[0], self.out_features))[1]
            grads[w.size + o0:w.size + o1] += dy.sum(axis=0)
        if self._sum is not None:
            if self._sum.Get_size() > 1:
                self._sum.Allreduce(grads.copy(), grads)
            self.weight_grad = grads[:w.size].reshape(w.shape)
            self.bias_grad = None if self.bias is None else grads[w.size:]
        return bx.adjoint(dxh)
