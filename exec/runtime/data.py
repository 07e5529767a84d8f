"""Seeded test data for rank programs, and the block helpers that cut a global array into tiles.

* :func:`integer_array` — random integer values (|x| ≤ 1000 by default) stored
  in any dtype, seeded by ``(seed, *key)``: every rank can regenerate any
  device's data without communicating, and sums of up to thousands of such
  arrays are exact in float32/float64, so a plan's result can be checked for
  exact equality against numpy.
* :func:`index_tile` — the tile of the "linear index" test array (value
  ``(linear index) mod 16777213`` at every index) at a base offset: a rank
  builds or checks any tile of any layout from its offsets alone.
* :func:`block_range`, :func:`block_slices`, :func:`block_of`,
  :func:`cyclic_indices` — balanced block and block-cyclic distributions of a
  global array over a process grid.
* :func:`numpy_dtype` — dtype names the CLI accepts (``int64``/``i64``,
  ``float32``/``f32``, …) as numpy dtypes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from meshplan.models.core.dtypes import as_dtype
from meshplan.models.core.errors import ModelError

__all__ = ["integer_array", "index_tile", "INDEX_MOD", "block_range", "block_slices", "block_of",
           "cyclic_indices", "numpy_dtype"]

#: modulus of :func:`index_tile`'s values (a prime below 2^24: exact in float32)
INDEX_MOD = 16777213
def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype data of element type ``name`` (either spelling) is held in
    (:func:`~meshplan.models.core.dtypes.as_dtype`; ``bf16`` runs as float32: numpy has no bfloat16)."""
    return np.dtype(as_dtype(name).numpy_runnable)


def integer_array(seed: int, key: int | Sequence[int], shape: int | Sequence[int], dtype="int64", *,
                  low: int = -1000, high: int = 1000) -> np.ndarray:
    """Random integers in ``[low, high)`` of ``shape`` as ``dtype``, the same for the same ``(seed, key)``."""
    keys = [int(key)] if isinstance(key, (int, np.integer)) else [int(k) for k in key]
    rng = np.random.default_rng([int(seed), *keys])
    return rng.integers(low, high, size=shape).astype(np.dtype(dtype))


def index_tile(globalshape: Sequence[int], offsets: Sequence[int], localshape: Sequence[int],
               dtype) -> np.ndarray:
    """The tile of shape ``localshape`` at base ``offsets`` of the linear-index test array of ``globalshape``.

    Values are reduced to stay exact in ``dtype`` (integers wrap at the type's
    maximum, 16-bit floats modulo 2048)."""
    nd = len(globalshape)
    lin = np.zeros((1,) * nd, dtype=np.int64)
    stride = 1
    for k in range(nd - 1, -1, -1):
        shape = [1] * nd
        shape[k] = localshape[k]
        idx = (np.arange(localshape[k], dtype=np.int64) + int(offsets[k])).reshape(shape)
        lin = lin + idx * stride
        stride *= globalshape[k]
    vals = lin % INDEX_MOD
    dt = np.dtype(dtype)
    if dt.kind == "i" and np.iinfo(dt).max < INDEX_MOD:
        vals = vals % (np.iinfo(dt).max + 1)
    elif dt.itemsize == 2:
        vals = vals % 2048  # exact in float16
    return np.ascontiguousarray(vals.astype(dt))


def block_range(n: int, parts: int, i: int) -> tuple[int, int]:
    """``[lo, hi)`` of block ``i`` when ``n`` items are split into ``parts`` balanced blocks
    (the first ``n % parts`` blocks one longer)."""
    if parts < 1 or not 0 <= i < parts:
        raise ModelError(f"block {i} of {parts} does not exist")
    q, r = divmod(n, parts)
    lo = i * q + min(i, r)
    return lo, lo + q + (1 if i < r else 0)


def block_slices(shape: Sequence[int], grid: Sequence[int], coords: Sequence[int]) -> tuple[slice, ...]:
    """The slices of the block at grid ``coords`` of an array of ``shape`` split over ``grid``."""
    if not len(shape) == len(grid) == len(coords):
        raise ModelError(f"shape {tuple(shape)}, grid {tuple(grid)} and coords {tuple(coords)} differ in length")
    return tuple(slice(*block_range(n, p, c)) for n, p, c in zip(shape, grid, coords))


def block_of(a: np.ndarray, grid: Sequence[int], coords: Sequence[int]) -> np.ndarray:
    """A contiguous copy of the block of ``a`` at grid ``coords``."""
    return np.ascontiguousarray(a[block_slices(a.shape, grid, coords)])


def cyclic_indices(n: int, parts: int, i: int, block: int = 1) -> np.ndarray:
    """Global indices owned by process ``i`` of ``parts`` in a block-cyclic distribution of ``n`` items
    with blocks of ``block`` (``block=1``: cyclic; ScaLAPACK's 1-D layout)."""
    if parts < 1 or not 0 <= i < parts or block < 1:
        raise ModelError(f"process {i} of {parts} with block {block} does not exist")
    idx = np.arange(n)
    return idx[(idx // block) % parts == i]
