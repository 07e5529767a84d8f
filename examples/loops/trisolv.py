"""PolyBench trisolv: forward substitution L x = b."""


def trisolv(N):
    for i in range(N):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
