"""PolyBench durbin: Levinson–Durbin recursion for a Toeplitz system.

The scalar set-up before the loop (y[0] = -r[0], beta = 1, alpha = -r[0]) is
outside every loop and is left out (the loop frontend analyzes statements inside
loops); beta, alpha and sum are 0-dimensional arrays.
"""


def durbin(N):
    for k in range(1, N):
        beta = (1 - alpha * alpha) * beta
        sum = 0.0
        for i in range(k):
            sum += r[k - i - 1] * y[i]
        alpha = -(r[k] + sum) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha
