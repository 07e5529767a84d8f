"""The local kernels of the factorization rank programs (no MPI): GEPP row selection and factors,
triangular solves, the Cholesky block with breakdown detection, the input matrices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from meshplan.exec.factorization.common import chol_block, gepp, solve_unit_lower_right, solve_upper_right
from meshplan.exec.factorization.matrices import make_matrix


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 6), st.integers(0, 2**31 - 1))
def test_gepp_is_partial_pivoting(k, extra, seed):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((k + extra, k))
    order, LU, bad = gepp(M, k)
    assert bad is None and sorted(order.tolist()) == list(range(k + extra))
    L = np.tril(LU[:, :k], -1) + np.eye(k + extra, k)
    U = np.triu(LU[:k, :k])
    assert np.allclose(M[order], L @ U)
    assert np.all(np.abs(np.tril(LU[:, :k], -1)) <= 1 + 1e-12)  # |multipliers| ≤ 1


def test_gepp_reports_the_first_zero_pivot():
    M = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 1.0]])
    _order, _LU, bad = gepp(M, 3, tol=1e-12)
    assert bad == 1


def test_triangular_solves_and_cholesky_block():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    _o, LU, _b = gepp(A, 6)
    B = rng.standard_normal((4, 6))
    assert np.allclose(solve_upper_right(B, LU) @ np.triu(LU), B)
    assert np.allclose(solve_unit_lower_right(B, LU) @ (np.tril(LU, -1) + np.eye(6)), B)
    S = A @ A.T
    L, bad = chol_block(S)
    assert bad is None and np.allclose(L, np.linalg.cholesky(S))
    S[3, 3] = -1.0
    assert chol_block(S)[1] is not None


@pytest.mark.parametrize("typ", ["random", "spd", "zero_lead", "wilkinson", "singular", "indefinite"])
def test_matrices_are_reproducible(typ):
    a = make_matrix("lu", 40, {"type": typ, "seed": 5, "block": 4})
    assert np.array_equal(a, make_matrix("lu", 40, {"type": typ, "seed": 5, "block": 4}))
    if typ == "spd":
        np.linalg.cholesky(a)
    if typ == "zero_lead":
        assert not a[:4, :4].any()
    if typ == "singular":
        assert np.linalg.matrix_rank(a) < 40


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gemm_update_in_place_on_views(order, dtype):
    """C -= A·B on a block of a larger C- or Fortran-ordered tile, in place (the tile's other entries
    untouched), against numpy; operands of either order, transposed views, empty and one-row cases."""
    from meshplan.exec.factorization.kernels import gemm_update

    rng = np.random.default_rng(3)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for (r0, c0, k) in ((5, 7, 6), (0, 0, 1), (29, 3, 4), (10, 39, 3)):
        T = np.array(rng.standard_normal((30, 40)), dtype=dtype, order=order)
        want = T.astype(np.float64)
        m, n = 30 - r0, 40 - c0
        A = rng.standard_normal((m, k)).astype(dtype)
        B = np.asfortranarray(rng.standard_normal((k, n)).astype(dtype))
        view = T[r0:, c0:]
        gemm_update(view, A if r0 % 2 else np.asfortranarray(A), B.T.copy().T if c0 % 2 else B)
        want[r0:, c0:] -= A.astype(np.float64) @ B.astype(np.float64)
        assert np.allclose(T, want, atol=tol, rtol=tol), (order, dtype, r0, c0, k)
    T = np.zeros((4, 4), dtype=dtype, order=order)
    gemm_update(T[4:, :], np.zeros((0, 2), dtype), np.zeros((2, 4), dtype))  # nothing to do
    with pytest.raises(TypeError):
        gemm_update(T, np.zeros((4, 2)), np.zeros((2, 4), dtype=np.float32))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_trsm_inplace_on_views(order, dtype):
    """B ← op(T)⁻¹·B / B·op(T)⁻¹ in place on a block of a larger tile of either order (the tile's other
    entries untouched), for every side, triangle, transposition and diagonal, T of either order, against
    scipy's solve_triangular; empty blocks do nothing."""
    from scipy.linalg import solve_triangular

    from meshplan.exec.factorization.kernels import trsm_inplace

    rng = np.random.default_rng(5)
    tol = 1e-10 if dtype == np.float64 else 1e-3
    for left in (True, False):
        for lower in (True, False):
            for trans in (True, False):
                for unit in (True, False):
                    k = 6
                    T = rng.standard_normal((k, k)) + 4 * np.eye(k)
                    tile = np.array(rng.standard_normal((20, 30)), dtype=dtype, order=order)
                    want = tile.astype(np.float64)
                    view = tile[3:3 + k, 5:] if left else tile[3:, 5:5 + k]
                    Tk = np.asarray(T, dtype=dtype, order="F" if unit else "C")
                    trsm_inplace(view, Tk, left=left, lower=lower, trans=trans, unit=unit)
                    Tm = np.tril(T, -1 if unit else 0) if lower else np.triu(T, 1 if unit else 0)
                    if unit:
                        Tm = Tm + np.eye(k)
                    op = Tm.T if trans else Tm
                    if left:
                        want[3:3 + k, 5:] = solve_triangular(op, want[3:3 + k, 5:], lower=(lower != trans))
                    else:
                        want[3:, 5:5 + k] = solve_triangular(op.T, want[3:, 5:5 + k].T, lower=(lower == trans)).T
                    assert np.allclose(tile, want, atol=tol, rtol=tol), (order, dtype, left, lower, trans, unit)
    trsm_inplace(np.zeros((0, 3), dtype), np.eye(3, dtype=dtype), left=False, lower=True, trans=True)
    with pytest.raises(TypeError):
        trsm_inplace(np.zeros((3, 3), dtype), np.eye(3, dtype=np.float64 if dtype == np.float32 else np.float32),
                     left=True, lower=True, trans=False)


def test_gepp_with_trailing_columns_is_one_lu_step():
    """GEPP on the first k columns of a wider block applies the swaps, U12 = L11⁻¹·A12 and the Schur
    complement to the rest, exactly as unblocked elimination does."""
    rng = np.random.default_rng(7)
    M = rng.standard_normal((9, 6))
    order, LU, bad = gepp(M, 3)
    assert bad is None
    L = np.tril(LU[:, :3], -1) + np.eye(9, 3)
    U12 = LU[:3, 3:]
    assert np.allclose(M[order][:, :3], L @ np.triu(LU[:3, :3]))
    assert np.allclose(M[order][:3, 3:], L[:3] @ U12)
    assert np.allclose(LU[3:, 3:], M[order][3:, 3:] - L[3:] @ U12)
