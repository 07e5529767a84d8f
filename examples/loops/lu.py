"""LU factorization without pivoting (thesis Figure 4.3 / Example 5.4)."""


def lu(N):
    for k in range(N):
        for i in range(k + 1, N):
            A[i, k] = A[i, k] / A[k, k]
        for i in range(k + 1, N):
            for j in range(k + 1, N):
                A[i, j] = A[i, j] - A[i, k] * A[k, j]
