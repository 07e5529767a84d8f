"""Patch embedding: a convolution whose stride equals its 4×4 kernel (Swin/ViT stem).

Each image element feeds one output pixel: the access Img[b, c, 4h + r, 4w + s]
with r, s in range(4) is injective by stride — the thesis's case
σ ≥ |D^r| of Example 5.6 — so ρ = √S/2, as for a matrix multiplication.
"""


def patch_embed(NB, NK, NC, NH, NW):
    for b in range(NB):
        for k in range(NK):
            for h in range(NH):
                for w in range(NW):
                    for c in range(NC):
                        for r in range(4):
                            for s in range(4):
                                Out[b, k, h, w] += Img[b, c, 4 * h + r, 4 * w + s] * Flt[k, c, r, s]
