"""Exact per-rank communication volumes, memory, rounds and lower bounds of distributed MMM (thesis ch. 3).

Words are matrix elements.  "Words moved" by a rank are the words it *receives* from other ranks (what the
Python counter of the runtime and the PMPI counter both count: for Allgather(v) the pieces of the other
ranks, for Bcast the buffer on every non-root, for Reduce_scatter (g−1)·|own piece|).

* COSMA schedule on grid [pm, pn, pk] (sections 3.6.3, 3.7.2): Allgather of A pieces along j, of B pieces
  along i (in ``rounds`` slabs of K_l), local gemm, Reduce_scatter of C along l.  Rank (i, j, l) receives
  ``(|M_i|−|A piece|)·|K_l| + (|N_j|−|B piece|)·|K_l| + (pk−1)·|C piece|``.  With the split conventions
  of :mod:`~meshplan.models.matmul.problem` rank 0 maximizes each term, so :func:`cosma_max_words` is the
  closed form of the maximum over ranks.
* 2-D SUMMA on a pr×pc grid (section 3.6.2, schedule P_ij): Bcast of A panels along rows and of B panels
  along columns; rank (i, j) receives ``|M_i|·(k−|Kc_j|) + |N_j|·(k−|Kr_i|)``.
* Table 3.3's 2-D, 2.5-D, recursive (CARMA) and COSMA I/O costs (domain I/O, continuous), Theorem 3.2's
  parallel lower bound and Theorem 3.1's sequential bound 2mnk/√S + mn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshplan.models.matmul.problem import Grid, MatmulError, MatmulProblem, part
from meshplan.models.redistribution.decompose import prime_factors

__all__ = ["RankWords", "cosma_rank_words", "cosma_max_words", "cosma_memory", "cosma_rounds",
           "thesis_rounds", "domain_words", "summa_grid", "summa_rank_words", "summa_max_words", "lower_bound",
           "sequential_bound", "table33", "carma_grid", "strategy", "parse_strategy"]


def _len(r: tuple[int, int]) -> int:
    return r[1] - r[0]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class RankWords:
    """Words one rank receives (and sends) per matrix."""

    a: int
    b: int
    c: int
    sent: int

    @property
    def total(self) -> int:
        return self.a + self.b + self.c


def cosma_rank_words(prob: MatmulProblem, grid: Grid, r: int) -> RankWords:
    """Exact words rank ``r`` receives in the COSMA schedule (0 for idle ranks); independent of rounds."""
    if r >= grid.used:
        return RankWords(0, 0, 0, 0)
    i, j, l_ = grid.coords(r)
    mi = _len(part(prob.m, grid.pm, i))
    nj = _len(part(prob.n, grid.pn, j))
    kl = _len(part(prob.k, grid.pk, l_))
    a_own = _len(part(mi, grid.pn, j, larger_first=False))
    b_own = _len(part(nj, grid.pm, i, larger_first=False))
    c_own = _len(part(mi * nj, grid.pk, l_))
    a = (mi - a_own) * kl
    b = (nj - b_own) * kl
    c = (grid.pk - 1) * c_own
    sent = (grid.pn - 1) * a_own * kl + (grid.pm - 1) * b_own * kl + mi * nj - c_own
    return RankWords(a, b, c, sent)


def cosma_max_words(m: int, n: int, k: int, pm: int, pn: int, pk: int) -> int:
    """Closed form of ``max_r cosma_rank_words(r).total`` (attained by rank 0)."""
    cm, cn, ck = _cdiv(m, pm), _cdiv(n, pn), _cdiv(k, pk)
    return (cm - cm // pn) * ck + (cn - cn // pm) * ck + (pk - 1) * _cdiv(cm * cn, pk)


def _held(m: int, n: int, k: int, pm: int, pn: int, pk: int) -> tuple[int, int]:
    """``(words held whatever the rounds, words per column/row of a receive slab)`` of the largest domain:
    the own A and B pieces and C piece, the C accumulator only when C is reduced (pk > 1; otherwise the
    product lands in the C piece itself), an A panel only when A pieces are gathered (pn > 1), a B panel
    only when B pieces are (pm > 1) — the buffers :class:`~meshplan.exec.matmul.executor.MatmulExecutor`
    allocates."""
    cm, cn, ck = _cdiv(m, pm), _cdiv(n, pn), _cdiv(k, pk)
    base = _cdiv(cm, pn) * ck + _cdiv(cn, pm) * ck + _cdiv(cm * cn, pk) + (cm * cn if pk > 1 else 0)
    return base, (cm if pn > 1 else 0) + (cn if pm > 1 else 0)


def cosma_memory(m: int, n: int, k: int, pm: int, pn: int, pk: int, rounds: int, buffers: int = 1) -> int:
    """Words per rank (an upper bound over ranks, tight for the largest domain) the COSMA schedule holds:
    own A and B pieces, the own C piece, the C accumulator (only when pk > 1), and one A receive panel
    (only when pn > 1) and one B receive panel (only when pm > 1) of ⌈|K_l|/rounds⌉ columns/rows
    (section 3.7.5's preallocated buffers) — ``buffers=2`` panels of each when the rounds are
    double-buffered (section 3.7.3).  Only buffers that exist are counted: a grid with pm = pn = 1
    receives no panel, and with pk = 1 the product is accumulated in the C piece itself."""
    base, per = _held(m, n, k, pm, pn, pk)
    return base + buffers * per * _cdiv(_cdiv(k, pk), rounds)


def cosma_rounds(m: int, n: int, k: int, pm: int, pn: int, pk: int, memory: int | None) -> int | None:
    """Fewest sequential rounds (K_l cut into slabs, COSMA's sequential steps in k) whose buffers fit
    ``memory``; None when none fits (the I/O–latency trade-off of section 3.6.3 with the I/O fixed by the
    grid: rounds add messages, not words)."""
    ck = _cdiv(k, pk)
    if memory is None:
        return 1
    base, per = _held(m, n, k, pm, pn, pk)
    room = memory - base
    if room < 0 or (per and room < per):
        return None
    if not per:
        return 1
    slab = min(ck, room // per)
    t = _cdiv(ck, slab)
    while t > 1 and cosma_memory(m, n, k, pm, pn, pk, t - 1) <= memory:  # ceil effects
        t -= 1
    return t


def thesis_rounds(m: int, n: int, k: int, p: int, memory: int | None) -> int:
    """Section 3.6.3's latency of the I/O-optimal schedule, L = ⌈2ab/(S − a²)⌉ with a, b of eq. 3.32
    (continuous sizes; 1 without a memory limit or when a² fills S)."""
    if memory is None:
        return 1
    v = m * n * k / p
    a = min(math.sqrt(memory), v ** (1 / 3))
    b = v / (a * a)
    room = memory - a * a
    return 1 if room <= 0 else max(1, math.ceil(2 * a * b / room - 1e-9))


def domain_words(m: int, n: int, k: int, pm: int, pn: int, pk: int) -> int:
    """The thesis's accounting (section 3.6.3): |A_l| + |B_l| + |C_l| of the largest local domain
    ⌈m/pm⌉×⌈n/pn⌉×⌈k/pk⌉ — the dominator set of the domain, owned parts included."""
    cm, cn, ck = _cdiv(m, pm), _cdiv(n, pn), _cdiv(k, pk)
    return cm * ck + ck * cn + cm * cn


# -- 2-D SUMMA --------------------------------------------------------------------------------------

def summa_grid(p: int, m: int | None = None, n: int | None = None) -> tuple[int, int]:
    """The most square pr×pc = p grid (pr ≤ pc), the 2-D decomposition of Table 3.3 (schedule P_ij)."""
    if p < 1:
        raise MatmulError(f"SUMMA needs at least 1 rank, got {p}")
    pr = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
    pr, pc = pr, p // pr
    if m is not None and n is not None and m > n:
        pr, pc = pc, pr
    return pr, pc


def summa_rank_words(prob: MatmulProblem, pr: int, pc: int, r: int) -> RankWords:
    """Exact words rank ``r`` (row-major on the pr×pc grid) receives in SUMMA: A owner blocks
    ``A[M_i, Kc_j]`` broadcast along grid rows, B blocks ``B[Kr_i, N_j]`` along grid columns."""
    if r >= pr * pc:
        return RankWords(0, 0, 0, 0)
    i, j = divmod(r, pc)
    mi = _len(part(prob.m, pr, i))
    nj = _len(part(prob.n, pc, j))
    kcj = _len(part(prob.k, pc, j))
    kri = _len(part(prob.k, pr, i))
    return RankWords(mi * (prob.k - kcj), nj * (prob.k - kri), 0, mi * kcj * (pc - 1) + nj * kri * (pr - 1))


def summa_max_words(prob: MatmulProblem, pr: int, pc: int) -> int:
    return max(summa_rank_words(prob, pr, pc, r).total for r in range(pr * pc))


# -- bounds and Table 3.3 ---------------------------------------------------------------------------

def lower_bound(m: int, n: int, k: int, p: int, memory: float | None) -> float:
    """Theorem 3.2: per-rank I/O ≥ 2mnk/(p√S) + S if p ≤ mnk/S^{3/2}, else 3(mnk/p)^{2/3}
    (unlimited memory: the second regime)."""
    v = m * n * k
    if memory is not None and p <= v / memory ** 1.5:
        return 2 * v / (p * math.sqrt(memory)) + memory
    return 3 * (v / p) ** (2 / 3)


def sequential_bound(m: int, n: int, k: int, memory: float) -> float:
    """Theorem 3.1: a sequential schedule with S words of fast memory does ≥ 2mnk/√S + mn I/O."""
    return 2 * m * n * k / math.sqrt(memory) + m * n


def carma_grid(m: int, n: int, k: int, p: int) -> tuple[int, int, int]:
    """CARMA's recursive decomposition (section 3.6.2): halve the largest dimension log2(p') times,
    p' the largest power of two ≤ p."""
    g = [1, 1, 1]
    dims = [m, n, k]
    for _ in range(p.bit_length() - 1):
        q = max(range(3), key=lambda d: (dims[d] / g[d], -d))
        g[q] *= 2
    return g[0], g[1], g[2]


def table33(m: int, n: int, k: int, p: int, memory: float | None) -> dict[str, float]:
    """Per-rank I/O of Table 3.3's decompositions (domain I/O, continuous sizes; CARMA without a memory
    limit): 2-D [√p, √p, 1];
    2.5-D [√(p/c), √(p/c), c] with c = pS/(mk+nk) clamped to [1, p^{1/3}]; CARMA's recursive grid;
    COSMA = Theorem 3.2 (eq. 3.33)."""
    q2 = k * (m + n) / math.sqrt(p) + m * n / p
    c = 1.0 if memory is None else p * memory / (m * k + n * k)
    c = min(max(c, 1.0), p ** (1 / 3)) if memory is not None else p ** (1 / 3)
    g = math.sqrt(p / c)
    q25 = (m + n) * k / (c * g) + m * n / (g * g)
    cm, cn, ck = carma_grid(m, n, k, p)
    qc = m * k / (cm * ck) + n * k / (cn * ck) + m * n / (cm * cn)
    return {"2d": q2, "2.5d": q25, "carma": qc, "cosma": lower_bound(m, n, k, p, memory)}


# -- strategy strings -------------------------------------------------------------------------------

def strategy(grid: Grid, rounds: int) -> str:
    """COSMA's strategy string: parallel steps ``pm2,pn3,…`` (prime factors of the grid, m, n, k order)
    then the sequential step ``sk<rounds>`` (omitted for one round); ``""`` for one rank and one round."""
    steps = [f"p{d}{f}" for d, x in (("m", grid.pm), ("n", grid.pn), ("k", grid.pk))
             for f in sorted(prime_factors(x))]
    if rounds > 1:
        steps.append(f"sk{rounds}")
    return ",".join(steps)


def parse_strategy(text: str) -> tuple[Grid, int]:
    """Inverse of :func:`strategy`: ``"pm2,pn2,pk2,sk4"`` → (Grid(2,2,2), 4)."""
    g = {"m": 1, "n": 1, "k": 1}
    rounds = 1
    for step in filter(None, text.replace(" ", "").split(",")):
        if len(step) < 3 or step[0] not in "ps" or step[1] not in "mnk" or not step[2:].isdigit() \
                or int(step[2:]) < 1:
            raise MatmulError(f"bad strategy step {step!r}; write steps like pm2, pn3, pk2, sk4")
        if step[0] == "p":
            g[step[1]] *= int(step[2:])
        elif step[1] == "k":
            rounds *= int(step[2:])
        else:
            raise MatmulError(f"sequential step {step!r}: only k is split sequentially (sk<rounds>)")
    return Grid(g["m"], g["n"], g["k"]), rounds
