"""PolyBench atax: y = A^T (A x)."""


def atax(M, N):
    for i in range(M):
        tmp[i] = 0.0
        for j in range(N):
            tmp[i] += A[i, j] * x[j]
        for j in range(N):
            y[j] += A[i, j] * tmp[i]
