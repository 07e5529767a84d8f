"""PolyBench ludcmp: LU decomposition (Doolittle, in place) and the two triangular solves.

The back substitution runs i from N-1 down to 0 as in PolyBench (a descending loop: the
replay follows it; the bound's access sets do not depend on the direction).
"""


def ludcmp(N):
    for i in range(N):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
    for i in range(N):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    for i in range(N - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, N):
            w -= A[i, j] * x[j]
        x[i] = w / A[i, i]
