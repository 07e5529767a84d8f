"""A 3-layer MLP: three dense layers with ReLU, Z3 = relu(relu(relu(X W1^T) W2^T) W3^T), width NI→NH→NH→NO."""


def mlp3(NB, NI, NH, NO):
    for b in range(NB):
        for o in range(NH):
            Y1[b, o] = 0.0
            for i in range(NI):
                Y1[b, o] += X[b, i] * W1[o, i]
            Z1[b, o] = max(Y1[b, o], 0.0)
    for b in range(NB):
        for o in range(NH):
            Y2[b, o] = 0.0
            for i in range(NH):
                Y2[b, o] += Z1[b, i] * W2[o, i]
            Z2[b, o] = max(Y2[b, o], 0.0)
    for b in range(NB):
        for o in range(NO):
            Y3[b, o] = 0.0
            for i in range(NH):
                Y3[b, o] += Z2[b, i] * W3[o, i]
            Z3[b, o] = max(Y3[b, o], 0.0)
