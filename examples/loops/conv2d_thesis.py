"""Direct convolution exactly as thesis Example 5.6 writes it (stride 1, Filter[k, r, s]).

The thesis's statement indexes the filter without the channel c; with it the
analysis gives ρ = S/2, the thesis's ρ_max (docs/bound.md, "Example 5.6").
"""


def conv2d_thesis(NB, NC, NK, NW, NH, NR, NS):
    for b in range(NB):
        for c in range(NC):
            for k in range(NK):
                for w in range(NW):
                    for h in range(NH):
                        for r in range(NR):
                            for s in range(NS):
                                Out[k, h, w, b] += Image[r + w, s + h, c, b] * Filter[k, r, s]
