"""Row-wise softmax of an N×M matrix (numerically stable: row max, exponentials and their sum, normalize in place)."""


def softmax(N, M):
    for i in range(N):
        mx[i] = X[i, 0]
        for j in range(M):
            mx[i] = max(mx[i], X[i, j])
        s[i] = 0.0
        for j in range(M):
            Y[i, j] = exp(X[i, j] - mx[i])
            s[i] += Y[i, j]
        for j in range(M):
            Y[i, j] = Y[i, j] / s[i]
