"""Direct convolution whose stride equals its NR×NS kernel (non-overlapping windows, general kernel size).

Img[b, c, NR*h + r, NS*w + s] with r < NR, s < NS: every image element feeds one
output pixel (patch_embed.py is the 4×4 case with constant extents).
"""


def conv2d_stride_kernel(NB, NK, NC, NH, NW, NR, NS):
    for b in range(NB):
        for k in range(NK):
            for h in range(NH):
                for w in range(NW):
                    for c in range(NC):
                        for r in range(NR):
                            for s in range(NS):
                                Out[b, k, h, w] += Img[b, c, NR * h + r, NS * w + s] * Flt[k, c, r, s]
