"""Thesis Example 5.1: 3-point stencil with an explicit time dimension."""


def stencil_5_1(N, T):
    for t in range(1, T):
        for i in range(t, N - t):
            A[i, t + 1] = (A[i - 1, t] + A[i, t] + A[i + 1, t]) / 3 + B[i]
