"""PolyBench correlation (data mining), without the eps guard on stddev."""


def correlation(M, N, float_n):
    for j in range(M):
        mean[j] = 0.0
        for i in range(N):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for j in range(M):
        stddev[j] = 0.0
        for i in range(N):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] = sqrt(stddev[j] / float_n)
    for i in range(N):
        for j in range(M):
            data[i, j] = (data[i, j] - mean[j]) / (sqrt(float_n) * stddev[j])
    for i in range(M):
        for j in range(i + 1, M):
            corr[i, j] = 0.0
            for k in range(N):
                corr[i, j] += data[k, i] * data[k, j]
