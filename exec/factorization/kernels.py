"""Level-3 BLAS on views, in place: the trailing (Schur) update of the factorizations.

``scipy.linalg.blas.dgemm`` copies an output that is not a whole contiguous array and returns the copy, so an
update of a trailing block ``A[s:, c:]`` of a larger local tile — the "local domain" of COnfLUX (Kwasniewski,
*Performance Modeling and Optimal Schedules for Data Oblivious Programs*, section 4.7, Algorithm 2 line 11) —
would cost a gather, a product and a scatter.  :func:`gemm_update` calls the same BLAS through the function
pointers that SciPy exports for Cython (``scipy.linalg.cython_blas``), with leading dimensions, so the update
reads and writes the tile once, as ScaLAPACK's ``pdgemm`` does (``beta = 1``).  Any 2-D view with one unit
stride is accepted (a row-major ``C`` is updated as ``Cᵀ = Bᵀ·Aᵀ``); the transposition flags follow from the
strides.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

__all__ = ["gemm_update"]

_INT = ctypes.c_int
_PTR = ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def _gemm(dtype: str):
    """The ``dgemm`` / ``sgemm`` of ``scipy.linalg.cython_blas`` as a ctypes function (Fortran ABI: every
    argument by reference)."""
    from scipy.linalg import cython_blas

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    cap = cython_blas.__pyx_capi__[{"float64": "dgemm", "float32": "sgemm"}[dtype]]
    ptr = api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap))
    return ctypes.CFUNCTYPE(None, *[_PTR] * 13)(ptr)


def _operand(X: np.ndarray) -> tuple[bytes, int, np.ndarray]:
    """``(trans, ld, array)`` of an operand for a column-major BLAS: a column-major view as is (``N``), a
    row-major one as its transpose (``T``), anything else copied."""
    item = X.itemsize
    if X.shape[0] <= 1 or X.strides[0] == item:
        if X.shape[1] <= 1 or X.strides[1] % item == 0 and X.strides[1] >= item * max(1, X.shape[0]):
            return b"N", max(1, X.strides[1] // item if X.shape[1] > 1 else X.shape[0]), X
    if X.shape[1] <= 1 or X.strides[1] == item:
        if X.shape[0] <= 1 or X.strides[0] % item == 0 and X.strides[0] >= item * max(1, X.shape[1]):
            return b"T", max(1, X.strides[0] // item if X.shape[0] > 1 else X.shape[1]), X
    X = np.asfortranarray(X)
    return b"N", max(1, X.shape[0]), X


def gemm_update(C: np.ndarray, A: np.ndarray, B: np.ndarray, alpha: float = -1.0, beta: float = 1.0) -> None:
    """``C ← beta·C + alpha·A·B`` in place, for a view ``C`` with one unit stride (a block of a C- or
    Fortran-ordered array); ``A`` and ``B`` any 2-D arrays of ``C``'s dtype (float64 or float32)."""
    m, n = C.shape
    k = A.shape[1]
    if m == 0 or n == 0:
        return
    item = C.itemsize
    column_major = (m == 1 or C.strides[0] == item) and (n == 1 or C.strides[1] >= item * m)
    if not column_major and (n == 1 or C.strides[1] == item) and (m == 1 or C.strides[0] >= item * n):
        return gemm_update(C.T, B.T, A.T, alpha, beta)  # a row-major view: Cᵀ = Bᵀ·Aᵀ, column-major
    if C.dtype.name not in ("float64", "float32") or A.dtype != C.dtype or B.dtype != C.dtype:
        raise TypeError(f"gemm_update: dtypes {A.dtype}, {B.dtype} into {C.dtype}")
    if A.shape != (m, k) or B.shape != (k, n):
        raise ValueError(f"gemm_update: shapes {A.shape} · {B.shape} into {C.shape}")
    if not column_major:
        raise ValueError("gemm_update: C must be a view with one unit stride (a block of a C- or "
                         "Fortran-ordered array)")
    if k == 0:
        if beta != 1.0:
            C *= beta
        return
    ta, lda, A = _operand(A)
    tb, ldb, B = _operand(B)
    ldc = max(1, C.strides[1] // C.itemsize if n > 1 else m)
    scalar = ctypes.c_double if C.dtype.name == "float64" else ctypes.c_float
    al, be = scalar(alpha), scalar(beta)
    _gemm(C.dtype.name)(ctypes.c_char_p(ta), ctypes.c_char_p(tb), ctypes.byref(_INT(m)), ctypes.byref(_INT(n)),
                        ctypes.byref(_INT(k)), ctypes.byref(al), A.ctypes.data, ctypes.byref(_INT(lda)),
                        B.ctypes.data, ctypes.byref(_INT(ldb)), ctypes.byref(be), C.ctypes.data,
                        ctypes.byref(_INT(ldc)))
