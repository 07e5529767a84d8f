"""One MLP layer: Z = relu(X W^T + bias)."""


def mlp(NB, NO, NI):
    for b in range(NB):
        for o in range(NO):
            Y[b, o] = bias[o]
            for i in range(NI):
                Y[b, o] += X[b, i] * Wt[o, i]
            Z[b, o] = max(Y[b, o], 0.0)
