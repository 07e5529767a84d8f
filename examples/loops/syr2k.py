"""PolyBench syr2k: C = alpha*(A*B^T + B*A^T) + beta*C (lower triangle)."""


def syr2k(N, M, alpha, beta):
    for i in range(N):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]
