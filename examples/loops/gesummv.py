"""PolyBench gesummv: y = alpha*A x + beta*B x."""


def gesummv(N, alpha, beta):
    for i in range(N):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(N):
            tmp[i] += A[i, j] * x[j]
            y[i] += B[i, j] * x[j]
        y[i] = alpha * tmp[i] + beta * y[i]
