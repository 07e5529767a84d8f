"""PolyBench gemm (C = alpha*A*B + beta*C) on a p x q process grid: rank (ri, rj) owns the block of rows
ri*NI/p … and columns rj*NJ/q … of C, scales it and accumulates NK rank-1 updates into it.  The assert
declares the grid: one rank variable and one process count per grid dimension."""


def gemm(NI, NJ, NK, alpha, beta, p, q, ri, rj):
    assert 0 <= ri < p and 0 <= rj < q
    for i in range(ri * NI // p, min((ri + 1) * NI // p, NI)):
        for j in range(rj * NJ // q, min((rj + 1) * NJ // q, NJ)):
            C[i, j] *= beta  # count: scale
        for k in range(NK):
            for j in range(rj * NJ // q, min((rj + 1) * NJ // q, NJ)):
                C[i, j] += alpha * A[i, k] * B[k, j]  # count: update
