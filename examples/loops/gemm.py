"""PolyBench gemm: C = alpha*A*B + beta*C."""


def gemm(NI, NJ, NK, alpha, beta):
    for i in range(NI):
        for j in range(NJ):
            C[i, j] *= beta
        for k in range(NK):
            for j in range(NJ):
                C[i, j] += alpha * A[i, k] * B[k, j]
