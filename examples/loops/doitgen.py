"""PolyBench doitgen: multiresolution analysis kernel (tensor times matrix)."""


def doitgen(NR, NQ, NP):
    for r in range(NR):
        for q in range(NQ):
            for pp in range(NP):
                acc[pp] = 0.0
                for s in range(NP):
                    acc[pp] += A[r, q, s] * C4[s, pp]
            for pp in range(NP):
                A[r, q, pp] = acc[pp]
