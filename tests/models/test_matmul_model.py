"""models/matmul: grids, blocked layouts, exact per-rank volumes, Table 3.3 and the bounds (thesis ch. 3)."""

import math
import random

import numpy as np
import pytest

from meshplan.models.matmul.costs import (cosma_max_words, cosma_memory, cosma_rank_words, cosma_rounds,
                                          domain_words, lower_bound, parse_strategy, sequential_bound,
                                          strategy, summa_rank_words, table33)
from meshplan.models.core.errors import ModelError
from meshplan.models.matmul.problem import Grid, MatmulError, MatmulProblem, part, rank_blocks, split


def test_split_sizes_and_order():
    assert split(10, 3) == ((0, 4), (4, 7), (7, 10))
    assert split(10, 3, larger_first=False) == ((0, 3), (3, 6), (6, 10))
    assert split(2, 4) == ((0, 1), (1, 2), (2, 2), (2, 2))


@pytest.mark.parametrize("bad, msg, param", [
    (dict(m=0, n=4, k=4, p=2), "m must be a positive", "m"),
    (dict(m=4, n=2.5, k=4, p=2), "n must be a positive", "n"),
    (dict(m=4, n=4, k=4, p=0), "p must be a whole number of ranks, at least 1", "p"),
    (dict(m=4, n=4, k=4, p=True), "p must be a whole number", "p"),
    (dict(m=4, n=4, k=4, p=2, memory=10), "memory too small", ("memory", "p")),
    (dict(m=4, n=4, k=4, p=2, memory=0), "memory (words per rank) must be a positive", "memory"),
    (dict(m=4, n=4, k=4, p=2, memory=2**62 + 1), "memory is more than 2**62", "memory"),
    (dict(m=2**21, n=2**21, k=2**21, p=7), "is more than 2**62", ("m", "n", "k")),
    (dict(m=4, n=4, k=4, p=2, dtype="f16"), "dtype 'f16' is not supported", None),
    (dict(m=4, n=4, k=4, p=2, dtype="f128"), "dtype 'f128' is not an element type", None),
])
def test_bad_problems_say_what_to_do(bad, msg, param):
    with pytest.raises(ModelError) as err:
        MatmulProblem(**bad)
    assert msg in str(err.value) and "--" not in str(err.value)
    if param is not None:
        assert err.value.param == param


def test_problem_is_a_value_normalized_once():
    prob = MatmulProblem(np.int64(5), 6, 7, np.int32(2), dtype="float32")
    assert (prob.m, prob.p, prob.dtype, prob.itemsize) == (5, 2, "f32", 4) and type(prob.m) is int
    assert prob.to_json() == {"m": 5, "n": 6, "k": 7, "p": 2, "memory": None, "dtype": "f32"}
    assert Grid(2, 3, 4).to_json() == [2, 3, 4] and hash(prob) == hash(MatmulProblem(5, 6, 7, 2, None, "f32"))


def test_grid_checks():
    prob = MatmulProblem(4, 4, 2, 8)
    with pytest.raises(MatmulError, match="empty local domain"):
        Grid(1, 1, 4).check_fits(prob)
    with pytest.raises(MatmulError, match="only 8"):
        Grid(3, 3, 1).check_fits(prob)
    g = Grid(2, 3, 4)
    assert [g.rank(*g.coords(r)) for r in range(24)] == list(range(24))


def _simulate(prob, grid):
    """Words received per rank, replaying the collectives on index sets (no MPI)."""
    out = []
    for r in range(grid.used):
        bl = rank_blocks(prob, grid, r)
        kl = bl.ks[1] - bl.ks[0]
        a = sum((b - a_) * kl for q, (a_, b) in enumerate(bl.a_row_parts) if q != grid.coords(r)[1])
        b = sum((y - x) * kl for q, (x, y) in enumerate(bl.b_col_parts) if q != grid.coords(r)[0])
        c = (grid.pk - 1) * (bl.c_elems[1] - bl.c_elems[0])
        out.append(a + b + c)
    return out


def test_blocked_layout_partitions_the_matrices_and_closed_form_is_the_max():
    rnd = random.Random(7)
    for _ in range(200):
        m, n, k = (rnd.randint(1, 30) for _ in range(3))
        pm, pn, pk = rnd.randint(1, m), rnd.randint(1, n), rnd.randint(1, k)
        if pm * pn * pk > 64:
            continue
        g = Grid(pm, pn, pk)
        prob = MatmulProblem(m, n, k, g.used)
        cover_a, cover_b, cover_c = np.zeros((m, k), int), np.zeros((k, n), int), np.zeros((m, n), int)
        for r in range(g.used):
            bl = rank_blocks(prob, g, r)
            cover_a[bl.a_rows[0]:bl.a_rows[1], bl.ks[0]:bl.ks[1]] += 1
            cover_b[bl.ks[0]:bl.ks[1], bl.b_cols[0]:bl.b_cols[1]] += 1
            blk = cover_c[bl.rows[0]:bl.rows[1], bl.cols[0]:bl.cols[1]].reshape(-1).copy()
            blk[bl.c_elems[0]:bl.c_elems[1]] += 1
            cover_c[bl.rows[0]:bl.rows[1], bl.cols[0]:bl.cols[1]] = blk.reshape(
                bl.rows[1] - bl.rows[0], bl.cols[1] - bl.cols[0])
        assert (cover_a == 1).all() and (cover_b == 1).all() and (cover_c == 1).all()
        words = [cosma_rank_words(prob, g, r).total for r in range(g.used)]
        assert words == _simulate(prob, g)
        assert max(words) == words[0] == cosma_max_words(m, n, k, pm, pn, pk)
        # what is received is what the others sent
        assert sum(words) == sum(cosma_rank_words(prob, g, r).sent for r in range(g.used))


def test_summa_volume_square():
    prob = MatmulProblem(64, 64, 64, 4)
    # 2x2 grid: each rank receives half of its A row panel and half of its B column panel
    assert {summa_rank_words(prob, 2, 2, r).total for r in range(4)} == {2 * 32 * 32}


def test_rounds_follow_memory():
    m = n = k = 64
    assert cosma_rounds(m, n, k, 2, 2, 2, None) == 1
    big = cosma_memory(m, n, k, 2, 2, 2, 1)
    assert cosma_rounds(m, n, k, 2, 2, 2, big) == 1
    t = cosma_rounds(m, n, k, 2, 2, 2, big - 100)
    assert t > 1 and cosma_memory(m, n, k, 2, 2, 2, t) <= big - 100
    assert cosma_memory(m, n, k, 2, 2, 2, t - 1) > big - 100
    assert cosma_rounds(m, n, k, 2, 2, 2, 100) is None


def test_theorem_3_2_regimes_and_sequential_bound():
    # limited memory: p <= mnk / S^1.5 -> 2mnk/(p sqrt S) + S
    assert lower_bound(1000, 1000, 1000, 8, 10_000) == pytest.approx(2e9 / (8 * 100) + 10_000)
    # enough memory: 3 (mnk/p)^(2/3)
    assert lower_bound(64, 64, 64, 8, 10**9) == pytest.approx(3 * 32 ** 2)
    assert lower_bound(64, 64, 64, 8, None) == pytest.approx(3 * 32 ** 2)
    assert sequential_bound(100, 100, 100, 400) == pytest.approx(2e6 / 20 + 1e4)


def test_domain_io_never_beats_the_cubic_bound():
    rnd = random.Random(3)
    for _ in range(300):
        m, n, k = (rnd.randint(1, 200) for _ in range(3))
        pm, pn, pk = rnd.randint(1, 8), rnd.randint(1, 8), rnd.randint(1, 8)
        p = pm * pn * pk
        assert domain_words(m, n, k, pm, pn, pk) >= 3 * (m * n * k / p) ** (2 / 3) - 1e-9


def test_table_3_3_square_limited_memory():
    # square, S = 2N^2/p: the 2-D cost K(M+N)/sqrt(p) + MN/p; nothing beats Theorem 3.2
    n_, p = 4096, 64
    t = table33(n_, n_, n_, p, 2 * n_ * n_ // p)
    assert t["2d"] == pytest.approx(2 * n_ ** 3 / (n_ * math.sqrt(p)) + n_ * n_ / p)
    free = table33(n_, n_, n_, p, None)  # CARMA's model here ignores the memory limit
    assert min(free["2d"], free["2.5d"], free["carma"]) >= free["cosma"] - 1e-6
    assert free["carma"] == pytest.approx(free["cosma"])  # p = 2^(3n), cube: CARMA is optimal


def test_strategy_round_trip():
    for g, t in [(Grid(2, 2, 2), 4), (Grid(1, 1, 1), 1), (Grid(12, 5, 1), 3)]:
        assert parse_strategy(strategy(g, t)) == (g, t)
    assert strategy(Grid(2, 2, 2), 4) == "pm2,pn2,pk2,sk4"
    with pytest.raises(MatmulError, match="bad strategy"):
        parse_strategy("pq2")


def test_part_is_split():
    for n in range(0, 23):
        for parts in range(1, 9):
            for lf in (True, False):
                assert tuple(part(n, parts, q, larger_first=lf) for q in range(parts)) == split(n, parts, larger_first=lf)


def test_layout_owner_maps_match_the_blocks_and_conversions_count_moved_elements():
    from meshplan.models.matmul.layouts import block_cyclic_owners, blocked_owners, conversion_words

    prob, g = MatmulProblem(37, 29, 41, 8), Grid(2, 2, 2)
    own = {M: blocked_owners(prob, g, M) for M in "ABC"}
    for r in range(8):
        bl = rank_blocks(prob, g, r)
        assert (own["A"][bl.a_rows[0]:bl.a_rows[1], bl.ks[0]:bl.ks[1]] == r).all()
        assert (own["B"][bl.ks[0]:bl.ks[1], bl.b_cols[0]:bl.b_cols[1]] == r).all()
        c = own["C"][bl.rows[0]:bl.rows[1], bl.cols[0]:bl.cols[1]].reshape(-1)
        assert (c[bl.c_elems[0]:bl.c_elems[1]] == r).all()
    conv = conversion_words(prob, g, 4, 2, 4)
    bc_a = block_cyclic_owners(37, 41, 4, 2, 4)
    assert sum(c["a_in"] for c in conv) == int((bc_a != own["A"]).sum())
    # one rank: nothing moves
    one = MatmulProblem(5, 6, 7, 1)
    assert conversion_words(one, Grid(1, 1, 1), 2, 1, 1) == [{"a_in": 0, "b_in": 0, "c_out": 0}]


def test_block_cyclic_owners_match_scalapack_local_indices():
    from meshplan.models.matmul.layouts import (block_cyclic_owners, check_block, check_layout, cyclic_indices,
                                                scalapack_block)

    own = block_cyclic_owners(37, 41, (4, 3), 2, 3)
    for prow in range(2):
        for pcol in range(3):
            rows, cols = cyclic_indices(37, 4, 2, prow), cyclic_indices(41, 3, 3, pcol)
            mine = np.argwhere(own == prow * 3 + pcol)
            assert sorted(map(tuple, mine)) == [(r, c) for r in rows for c in cols]
    assert (block_cyclic_owners(9, 9, 2, 2, 2) == block_cyclic_owners(9, 9, (2, 2), 2, 2)).all()
    assert check_block(np.int64(5)) == (5, 5) and check_block((2, 7)) == (2, 7)
    for bad in (0, (1, 0), (1, 2, 3), "4", (True, 2)):
        with pytest.raises(ModelError, match="block must be"):
            check_block(bad)
    with pytest.raises(ModelError, match="unknown layout") as err:
        check_layout("cyclic")
    assert err.value.param == "layout"
    assert scalapack_block(37, 29, 41, 2, 2) == 15 and scalapack_block(10**4, 10**4, 10**4, 2, 2) == 64


def test_memory_counts_only_buffers_that_exist():
    """No receive panel without a gather (pm = pn = 1), no C accumulator without a reduction (pk = 1): the
    1,024-rank RPA-like case fits [1,1,1024] in 3,147,264 words and moves (pk−1)·⌈|C|/pk⌉ words."""
    from meshplan.models.matmul.costs import cosma_max_words, cosma_memory

    m = n = 1024
    assert cosma_memory(m, n, 1048576, 1, 1, 1024, 1) == 2 * 1024 * 1024 + 1024 * 1024 + 1024
    assert cosma_rounds(m, n, 1048576, 1, 1, 1024, 3147264) == 1
    assert cosma_max_words(m, n, 1048576, 1, 1, 1024) == 1047552
    # pk = 1: the product accumulates in the C piece; panels only for the gathered matrix, per round
    assert cosma_memory(2048, 2048, 2048, 8, 1, 1, 8) == 256 * 2048 * 3 + 2048 * 256
    assert cosma_memory(2048, 2048, 2048, 2, 4, 1, 7) == 3 * 524288 + (1024 + 512) * 293
    assert cosma_rounds(2048, 2048, 2048, 2, 2, 2, 2097152) is None  # C accumulator + pieces: 2.5 M words
