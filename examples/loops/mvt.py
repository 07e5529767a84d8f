"""PolyBench mvt: x1 += A y1, x2 += A^T y2."""


def mvt(N):
    for i in range(N):
        for j in range(N):
            x1[i] += A[i, j] * y1[j]
    for i in range(N):
        for j in range(N):
            x2[i] += A[j, i] * y2[j]
