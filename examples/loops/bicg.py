"""PolyBench bicg: s = A^T r, q = A p."""


def bicg(M, N):
    for i in range(N):
        q[i] = 0.0
        for j in range(M):
            sv[j] += r[i] * A[i, j]
            q[i] += A[i, j] * pv[j]
