"""Classical matrix multiplication (thesis chapter 3): C += A*B."""


def mmm(M, N, K):
    for i in range(M):
        for j in range(N):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]
