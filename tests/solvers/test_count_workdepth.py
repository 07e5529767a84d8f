"""Work and depth of a rank-distributed loop that starts at an offset (jacobi-1d's interior block): the
depth D = N(p -> oo) is the count of the most loaded rank once every rank holds at most one point, not 0."""

from __future__ import annotations

from meshplan.models.counting.execute import execute_ranks
from meshplan.models.counting.problem import CountProblem
from meshplan.solvers.counting.count import count_problem

JACOBI_1D = """
def jacobi1d(T, n, p, rank):
    for t in range(T):
        for i in range(1 + rank * (n - 2) // p, 1 + min((rank + 1) * (n - 2) // p, n - 2)):
            B[i] = A[i - 1] + A[i] + A[i + 1]
        for i in range(1 + rank * (n - 2) // p, 1 + min((rank + 1) * (n - 2) // p, n - 2)):
            A[i] = B[i]
"""


def test_offset_block_depth_matches_execution():
    (res,) = count_problem(CountProblem.of(JACOBI_1D))
    m = res.metrics
    for T in (1, 3):
        for n in (2, 3, 7, 12):
            for p in (1, 2, 3, 8):
                vals = {"T": T, "n": n, "p": p}
                _, total = execute_ranks(res.flow, vals)
                assert res.evaluate(res.total.value, vals) == total, (vals, total)
            _, most = execute_ranks(res.flow, {"T": T, "n": n, "p": max(n, 1)})  # every rank at most one point
            assert res.evaluate(m["depth"], {"T": T, "n": n}) == most, (T, n)
            _, one = execute_ranks(res.flow, {"T": T, "n": n, "p": 1})
            assert res.evaluate(m["work"], {"T": T, "n": n}) == one


LU_ROWS = """
def lu(n, p, rank):
    for k in range(n):
        for i in range(max(k + 1, rank * n // p), min((rank + 1) * n // p, n)):
            A[i, k] /= A[k, k]
            for j in range(k + 1, n):
                A[i, j] -= A[i, k] * A[k, j]
"""

CHOLESKY_ROWS = """
def cholesky(n, p, rank):
    for j in range(n):
        for k in range(j):
            A[j, j] -= A[j, k] * A[j, k]
        A[j, j] = A[j, j] ** 0.5
        for i in range(max(j + 1, rank * n // p), min((rank + 1) * n // p, n)):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
"""


def _check_against_ranks(src: str) -> None:
    """The count of the most loaded rank, W and D against executing every rank of the program."""
    (res,) = count_problem(CountProblem.of(src))
    assert res.exact and not res.unknowns
    m = res.metrics
    for n in (0, 1, 2, 3, 5, 9):
        for p in (1, 2, 3, 8):
            vals = {"n": n, "p": p}
            per, total = execute_ranks(res.flow, vals)
            assert res.evaluate(res.total.value, vals) == total, (vals, total)
            for st in res.statements:
                assert res.evaluate(st.count.value, vals) == per[st.name], (vals, st.name)
        _, one = execute_ranks(res.flow, {"n": n, "p": 1})
        assert res.evaluate(m["work"], {"n": n}) == one, n
        _, most = execute_ranks(res.flow, {"n": n, "p": max(n, 1)})  # every rank at most one row
        assert res.evaluate(m["depth"], {"n": n}) == most, n


def test_lu_by_block_rows_is_exact():
    _check_against_ranks(LU_ROWS)


def test_cholesky_by_block_rows_is_exact():
    _check_against_ranks(CHOLESKY_ROWS)


JACOBI_2D = """
def jacobi2d(T, n, p, rank):
    for t in range(T):
        for i in range(1 + rank * (n - 2) // p, 1 + min((rank + 1) * (n - 2) // p, n - 2)):
            for j in range(1, n - 1):
                B[i, j] = A[i, j] + A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1]
        for i in range(1 + rank * (n - 2) // p, 1 + min((rank + 1) * (n - 2) // p, n - 2)):
            for j in range(1, n - 1):
                A[i, j] = B[i, j]
"""


def test_jacobi_2d_offset_block_is_exact():
    """Rows distributed from 1 to n - 2: the extent n - 2 is negative at n < 2, where no rank runs anything."""
    (res,) = count_problem(CountProblem.of(JACOBI_2D))
    assert res.exact
    m = res.metrics
    for T in (1, 2):
        for n in (0, 1, 2, 3, 4, 7, 10):
            for p in (1, 2, 3, 8):
                vals = {"T": T, "n": n, "p": p}
                assert res.evaluate(res.total.value, vals) == execute_ranks(res.flow, vals)[1], vals
            assert res.evaluate(m["work"], {"T": T, "n": n}) == execute_ranks(res.flow, {"T": T, "n": n, "p": 1})[1]
            most = execute_ranks(res.flow, {"T": T, "n": n, "p": max(n, 1)})[1]
            assert res.evaluate(m["depth"], {"T": T, "n": n}) == most, (T, n)
