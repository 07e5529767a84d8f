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

__all__ = ["gemm_update", "trsm_inplace"]

_INT = ctypes.c_int
_PTR = ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def _blas(name: str, nargs: int):
    """The routine ``name`` of ``scipy.linalg.cython_blas`` as a ctypes function (Fortran ABI: every argument
    by reference)."""
    from scipy.linalg import cython_blas

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    cap = cython_blas.__pyx_capi__[name]
    ptr = api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap))
    return ctypes.CFUNCTYPE(None, *[_PTR] * nargs)(ptr)


#: the BLAS prefix and ctypes scalar of each dtype the kernels take
_REAL = {np.dtype(np.float64): ("d", ctypes.c_double), np.dtype(np.float32): ("s", ctypes.c_float)}


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
    if not _column_major(C) and _column_major(C.T):
        return gemm_update(C.T, B.T, A.T, alpha, beta)  # a row-major view: Cᵀ = Bᵀ·Aᵀ, column-major
    real = _REAL.get(C.dtype)
    if real is None or A.dtype != C.dtype or B.dtype != C.dtype:
        raise TypeError(f"gemm_update: dtypes {A.dtype}, {B.dtype} into {C.dtype}")
    if A.shape != (m, k) or B.shape != (k, n):
        raise ValueError(f"gemm_update: shapes {A.shape} · {B.shape} into {C.shape}")
    if not _column_major(C):
        raise ValueError("gemm_update: C must be a view with one unit stride (a block of a C- or "
                         "Fortran-ordered array)")
    if k == 0:
        if beta != 1.0:
            C *= beta
        return
    ta, lda, A = _operand(A)
    tb, ldb, B = _operand(B)
    ldc = max(1, C.strides[1] // C.itemsize if n > 1 else m)
    al, be = real[1](alpha), real[1](beta)
    _blas(real[0] + "gemm", 13)(ctypes.c_char_p(ta), ctypes.c_char_p(tb), ctypes.byref(_INT(m)), ctypes.byref(_INT(n)),
                        ctypes.byref(_INT(k)), ctypes.byref(al), A.ctypes.data, ctypes.byref(_INT(lda)),
                        B.ctypes.data, ctypes.byref(_INT(ldb)), ctypes.byref(be), C.ctypes.data,
                        ctypes.byref(_INT(ldc)))


def _column_major(X: np.ndarray) -> bool:
    m, n = X.shape
    item = X.itemsize
    return (m <= 1 or X.strides[0] == item) and (n <= 1 or X.strides[1] >= item * max(1, m))


def trsm_inplace(B: np.ndarray, T: np.ndarray, *, left: bool, lower: bool, trans: bool, unit: bool = False) -> None:
    """``B ← op(T)⁻¹·B`` (``left``) or ``B ← B·op(T)⁻¹`` in place (BLAS ``trsm``), ``op(T) = Tᵀ`` if ``trans``;
    ``T`` triangular (its ``lower`` or upper triangle is read; ``unit``: ones on the diagonal), any 2-D array
    of ``B``'s dtype; ``B`` a view with one unit stride (a row-major one is solved as ``Bᵀ``).  The panel
    solve of the factorizations (``L10 = A10·L00⁻ᵀ``) on the panel itself, without the copies that
    ``scipy.linalg.blas.dtrsm`` makes of an output that is not a Fortran-ordered array."""
    m, n = B.shape
    if m == 0 or n == 0:
        return
    if not _column_major(B):
        if not _column_major(B.T):
            raise ValueError("trsm_inplace: B must be a view with one unit stride")
        # X·op(T) = B  ⇔  op(T)ᵀ·Xᵀ = Bᵀ (and the other way round)
        return trsm_inplace(B.T, T, left=not left, lower=lower, trans=not trans, unit=unit)
    real = _REAL.get(B.dtype)
    if real is None or T.dtype != B.dtype:
        raise TypeError(f"trsm_inplace: dtypes {T.dtype} and {B.dtype}")
    k = m if left else n
    if T.shape != (k, k):
        raise ValueError(f"trsm_inplace: T has shape {T.shape}, {(k, k)} needed")
    tt, ldt, T = _operand(T)
    if tt == b"T":  # the buffer holds Tᵀ column-major: its other triangle, the other op
        lower, trans = not lower, not trans
    ldb = max(1, B.strides[1] // B.itemsize if n > 1 else m)
    one = real[1](1.0)
    fn = _blas(real[0] + "trsm", 11)
    fn(ctypes.c_char_p(b"L" if left else b"R"), ctypes.c_char_p(b"L" if lower else b"U"),
       ctypes.c_char_p(b"T" if trans else b"N"), ctypes.c_char_p(b"U" if unit else b"N"), ctypes.byref(_INT(m)),
       ctypes.byref(_INT(n)), ctypes.byref(one), T.ctypes.data, ctypes.byref(_INT(ldt)), B.ctypes.data,
       ctypes.byref(_INT(ldb)))
