"""PolyBench nussinov: RNA folding by dynamic programming (i runs from N-1 down to 0).

PolyBench's guards are folded away: `j - 1 >= 0` and `i + 1 < N` always hold
(j > i >= 0 and j < N), and the `i < j - 1` branch only decides whether
match(seq[i], seq[j]) is added to table[i + 1, j - 1]; the single statement
below reads seq[i], seq[j] in both cases (one read more per i on the diagonal
j = i + 1; the data flow between table elements is PolyBench's).
"""


def nussinov(N):
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            table[i, j] = max(table[i, j], table[i, j - 1], table[i + 1, j],
                              table[i + 1, j - 1] + match(seq[i], seq[j]))
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
