"""PolyBench trmm: B = alpha*A^T*B with A unit lower triangular."""


def trmm(M, N, alpha):
    for i in range(M):
        for j in range(N):
            for k in range(i + 1, M):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
