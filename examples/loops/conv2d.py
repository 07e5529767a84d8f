"""Direct convolution, one layer (thesis Example 5.6, stride 1)."""


def conv2d(NB, NK, NC, NH, NW, NR, NS):
    for b in range(NB):
        for k in range(NK):
            for h in range(NH):
                for w in range(NW):
                    for c in range(NC):
                        for r in range(NR):
                            for s in range(NS):
                                Out[b, k, h, w] += Img[b, c, h + r, w + s] * Flt[k, c, r, s]
