"""Direct convolution with stride 2 (thesis Example 5.6, sigma = 2)."""


def conv2d_strided(NB, NK, NC, NH, NW, NR, NS):
    for b in range(NB):
        for k in range(NK):
            for h in range(NH):
                for w in range(NW):
                    for c in range(NC):
                        for r in range(NR):
                            for s in range(NS):
                                Out[b, k, h, w] += Img[b, c, 2 * h + r, 2 * w + s] * Flt[k, c, r, s]
