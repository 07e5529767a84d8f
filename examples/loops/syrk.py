"""PolyBench syrk: C = alpha*A*A^T + beta*C (lower triangle)."""


def syrk(N, M, alpha, beta):
    for i in range(N):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
