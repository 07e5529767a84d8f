"""Cholesky factorization (thesis Listing 4.1), lower triangle in place."""


def cholesky(N):
    for k in range(N):
        L[k, k] = sqrt(L[k, k])
        for i in range(k + 1, N):
            L[i, k] = L[i, k] / L[k, k]
        for i in range(k + 1, N):
            for j in range(k + 1, i + 1):
                L[i, j] = L[i, j] - L[i, k] * L[j, k]
