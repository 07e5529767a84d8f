"""models/tensor: balanced partitions, primitive index arithmetic and halo geometry against brute force
(DistDL paper, sections 3.1, 3.2 and appendix B)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from meshplan.models.core.errors import ModelError
from meshplan.models.tensor.halo import Window, halo_geometry, needed_indices, output_length
from meshplan.models.tensor.partition import CartesianPartition, balanced_bounds, box_intersect, box_is_empty
from meshplan.models.tensor.plans import (allgather_transfers, allsumreduce_groups, broadcast_transfers,
                                          repartition_transfers, sumreduce_transfers)


@given(st.integers(0, 60), st.integers(1, 12))
def test_balanced_bounds(n, p):
    b = balanced_bounds(n, p)
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(b[i][1] == b[i + 1][0] for i in range(p - 1))
    sizes = [hi - lo for lo, hi in b]
    assert sizes == [n // p + (1 if c < n % p else 0) for c in range(p)]


@st.composite
def halo_cases(draw, max_dims=3):
    ndim = draw(st.integers(1, max_dims))
    parts = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    kernel = tuple(draw(st.integers(1, 7)) for _ in range(ndim))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    padding = tuple(draw(st.integers(0, 4)) for _ in range(ndim))
    dilation = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    shape = []
    for k in range(ndim):
        lo = max(1, dilation[k] * (kernel[k] - 1) + 1 - 2 * padding[k])
        shape.append(draw(st.integers(lo, lo + 14)))
    perm = draw(st.permutations(range(math.prod(parts))))
    return CartesianPartition(parts, tuple(perm)), tuple(shape), Window(kernel, stride, padding, dilation)


@settings(max_examples=300, deadline=None)
@given(halo_cases())
def test_halo_geometry_matches_brute_force(case):
    part, shape, win = case
    plan = halo_geometry(part, shape, win)
    assert plan.output_shape == tuple(output_length(n, *a) for n, *a in
                                      zip(shape, win.kernel, win.stride, win.padding, win.dilation))
    for r in plan.ranks:
        if box_is_empty(r.out):
            assert box_is_empty(r.needed)
            continue
        for k, n in enumerate(shape):
            (o0, o1), (e0, e1), (u0, u1) = r.out[k], r.extended[k], r.needed[k]
            need = needed_indices(n, o0, o1, win.kernel[k], win.stride[k], win.padding[k], win.dilation[k])
            # every index read lies in the extended range, the ends are read, and the valid convolution
            # of the extended array has exactly the output block's length
            reads = [i * win.stride[k] - win.padding[k] + j * win.dilation[k]
                     for i in range(o0, o1) for j in range(win.kernel[k])]
            assert (min(reads), max(reads) + 1) == (e0, e1)
            assert (e1 - e0 - win.extent(k)) // win.stride[k] + 1 == o1 - o0
            if not box_is_empty(r.needed):
                assert need and (min(need), max(need) + 1) == (u0, u1)
        if box_is_empty(r.needed):  # nothing needed: some dimension's outputs read only padding
            assert any(not needed_indices(n, o0, o1, kk, s, p, d) for n, (o0, o1), kk, s, p, d in
                       zip(shape, r.out, win.kernel, win.stride, win.padding, win.dilation))
    # the transfers into each rank cover exactly the inputs it reads (brute force), each once, from the
    # owner: nothing unread inside the needed hull is sent (a stride wider than the window skips inputs)
    owned = {r.rank: r.owned for r in plan.ranks}
    for r in plan.ranks:
        if box_is_empty(r.needed):
            assert not any(t.dst == r.rank for t in plan.transfers)
            continue
        read = np.zeros(shape, dtype=bool)
        read[np.ix_(*[sorted(needed_indices(n, o0, o1, kk, s, p, d)) for n, (o0, o1), kk, s, p, d in
                      zip(shape, r.out, win.kernel, win.stride, win.padding, win.dilation)])] = True
        cover = np.zeros(shape, dtype=int)
        for t in plan.transfers:
            if t.dst != r.rank:
                continue
            assert box_intersect(t.box, owned[t.src]) == t.box
            sel = [list(range(lo, hi)) for lo, hi in t.box] if t.runs is None else \
                [[i for a, b in rr for i in range(a, b)] for rr in t.runs]
            assert all(lo <= min(ix) and max(ix) < hi for ix, (lo, hi) in zip(sel, t.box))
            assert t.volume == math.prod(len(ix) for ix in sel)
            cover[np.ix_(*sel)] += 1
        assert ((cover == 1) == read).all() and cover.max() == 1
    assert plan.bytes_sent(8) == {q: 8 * sum(t.volume for t in plan.transfers if t.src == q != t.dst)
                                  for q in part.ranks}


def test_halo_sends_only_the_inputs_read():
    # kernel 2, stride 4 on 16 inputs over 2 ranks: outputs read {0,1,4,5,8,9,12,13}; rank 1 (outputs 2,3)
    # reads 8,9,12,13 — all its own; a dilated single output reads 2 inputs 5 apart and nothing between
    plan = halo_geometry(CartesianPartition.of((2,)), (16,), Window.of(1, 2, 4, 0, 1))
    assert plan.ranks[0].reads == (((0, 2), (4, 6)),) and plan.ranks[1].reads == (((8, 10), (12, 14)),)
    assert all(t.src == t.dst for t in plan.transfers)
    plan = halo_geometry(CartesianPartition.of((4,)), (12,), Window.of(1, 2, 3, 0, 5))
    assert [r.out[0] for r in plan.ranks] == [(0, 1), (1, 2), (2, 3), (3, 3)]
    assert plan.ranks[1].reads == (((3, 4), (8, 9)),)
    assert {(t.src, t.box, t.volume) for t in plan.transfers if t.dst == 1} == {(1, ((3, 4),), 1), (2, ((8, 9),), 1)}


def test_paper_appendix_b_halos():
    P3, P6 = CartesianPartition.of((3,)), CartesianPartition.of((6,))
    halos = lambda p, n, k, s, pad: [r.halos[0] for r in halo_geometry(p, (n,), Window.of(1, k, s, pad, 1)).ranks]
    assert halos(P3, 11, 5, 1, 2) == [(0, 2), (2, 2), (2, 0)]                # B.2 uniform
    assert halos(P3, 11, 5, 1, 0) == [(0, 3), (1, 1), (3, 0)]                # B.3 unbalanced
    assert halos(P3, 10, 2, 2, 0) == [(0, 0), (0, 1), (-1, 0)]               # B.4 simple pooling
    assert halos(P6, 20, 2, 2, 0) == [(0, 0), (0, 0), (0, 1), (-1, 2), (-2, 1), (-1, 0)]  # B.5


def test_multi_hop_halo_and_empty_ranks():
    # kernel 7, padding 3 on 10 elements over 4 ranks: rank 0 needs the whole block of rank 1 and more
    plan = halo_geometry(CartesianPartition.of((4,)), (10,), Window.of(1, 7, 1, 3, 1))
    assert [r.owned[0] for r in plan.ranks] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert plan.ranks[0].needed[0] == (0, 6) and plan.ranks[2].needed[0] == (3, 10)
    assert {t.src for t in plan.transfers if t.dst == 2} == {1, 2, 3}
    # 3 outputs over 4 ranks: the last output block is empty and needs nothing
    plan = halo_geometry(CartesianPartition.of((4,)), (7,), Window.of(1, 3, 2, 0, 1))
    assert plan.output_shape == (3,) and box_is_empty(plan.ranks[3].out)
    assert all(t.dst != 3 for t in plan.transfers)


@st.composite
def partition_pairs(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 9)) for _ in range(ndim))
    px = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    py = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    world = max(math.prod(px), math.prod(py)) + draw(st.integers(0, 3))
    rx = draw(st.permutations(range(world)))[:math.prod(px)]
    ry = draw(st.permutations(range(world)))[:math.prod(py)]
    return CartesianPartition(px, tuple(rx)), CartesianPartition(py, tuple(ry)), shape


@settings(max_examples=200, deadline=None)
@given(partition_pairs())
def test_repartition_moves_every_element_once(pair):
    px, py, shape = pair
    count = np.zeros(shape, dtype=int)
    xb = dict(zip(px.ranks, px.blocks(shape)))
    yb = dict(zip(py.ranks, py.blocks(shape)))
    for t in repartition_transfers(px, py, shape):
        assert box_intersect(t.box, xb[t.src]) == t.box and box_intersect(t.box, yb[t.dst]) == t.box
        count[tuple(slice(lo, hi) for lo, hi in t.box)] += 1
    assert (count == 1).all()


def test_broadcast_and_sumreduce_patterns():
    px = CartesianPartition((1, 3), (5, 6, 7))
    py = CartesianPartition((2, 3), (0, 1, 2, 3, 4, 5))
    tr = broadcast_transfers(px, py, (4, 7))
    assert [(t.src, t.dst) for t in tr] == [(5, 0), (6, 1), (7, 2), (5, 3), (6, 4), (7, 5)]
    assert [t.box for t in tr[:3]] == [((0, 4), (0, 3)), ((0, 4), (3, 5)), ((0, 4), (5, 7))]
    back = sumreduce_transfers(py, px, (4, 7))
    assert sorted((t.dst, t.src) for t in back) == sorted((t.src, t.dst) for t in tr)
    with pytest.raises(ModelError, match="P_x"):
        broadcast_transfers(CartesianPartition.of((2, 3)), CartesianPartition.of((2, 2)), (4, 4))
    with pytest.raises(ModelError, match="different numbers of dimensions"):
        repartition_transfers(CartesianPartition.of((2,)), CartesianPartition.of((2, 1)), (4,))


def test_allsumreduce_groups_and_allgather():
    p = CartesianPartition.of((2, 3))
    assert allsumreduce_groups(p, [1]) == ((0, 1, 2), (3, 4, 5))
    assert allsumreduce_groups(p, [0]) == ((0, 3), (1, 4), (2, 5))
    tr = allgather_transfers(p, (4, 2), [1])  # blocks of 2 along dim 1 over 3 parts: one empty
    assert all(t.box[1] != (2, 2) for t in tr) and len(tr) == 2 * 2 * 3


@pytest.mark.parametrize("bad,match", [
    (lambda: CartesianPartition((1, 1, 4), (0, 1, 2)), "needs 4 ranks"),
    (lambda: CartesianPartition((0, 2), ()), "integers >= 1"),
    (lambda: CartesianPartition((2,), (1, 1)), "twice"),
    (lambda: Window.of(1, kernel=0), "kernel"),
    (lambda: Window.of(1, kernel=3, padding=-1), "padding"),
    (lambda: Window.of(1, kernel=3, dilation=0), "dilation"),
    (lambda: Window.of(1, kernel=3, stride=0), "stride"),
    (lambda: halo_geometry(CartesianPartition.of((2,)), (3,), Window.of(1, 5)), r"global_shape\[0\] = 3 is smaller"),
    (lambda: halo_geometry(CartesianPartition.of((2,)), (3, 3), Window.of(2, 1)), "dimensions"),
])
def test_bad_input_names_the_argument(bad, match):
    with pytest.raises(ModelError, match=match):
        bad()


def test_lowering_choice_and_bytes():
    from meshplan.models.tensor.lowering import (allgather_lowering, broadcast_lowering, reducescatter_lowering,
                                                 sumreduce_lowering)
    one, four = CartesianPartition((1,), (0,)), CartesianPartition.of((4,))
    tr = broadcast_transfers(one, four, (10,))
    low = broadcast_lowering(tr)
    assert low.kind == "bcast" and [g.ranks for g in low.groups] == [(0, 1, 2, 3)]
    assert low.bytes_sent(tr, 8) == {0: 80, 1: 0, 2: 0, 3: 0}          # the root's block, once (a tree)
    # a permutation: every rank sends and receives, so the groups overlap -> the transfers themselves
    perm = broadcast_transfers(CartesianPartition((1, 2), (0, 1)), CartesianPartition((1, 2), (1, 0)), (3, 4))
    assert broadcast_lowering(perm).kind == "transfers"
    assert broadcast_lowering(perm).bytes_sent(perm, 8) == {0: 48, 1: 48}
    # sum-reduce into a rank that holds no input: it contributes zeros, so every member hands one block
    sr = sumreduce_transfers(CartesianPartition((2,), (0, 1)), CartesianPartition((1,), (3,)), (5,))
    low = sumreduce_lowering(sr)
    assert low.kind == "reduce" and low.groups[0].ranks == (3, 0, 1)
    assert low.bytes_sent(sr, 8) == {0: 40, 1: 40, 3: 40}
    # all-gather: equal slabs along the first partitioned axis -> Allgather; unequal slabs (MPICH's slow
    # Allgatherv) and blocks of 2-D tiles -> transfers
    p = CartesianPartition.of((1, 3))
    low = allgather_lowering(p, (1, 9), [1])
    assert low.kind == "allgather" and low.bytes_sent(allgather_transfers(p, (1, 9), [1]), 8) == {0: 24, 1: 24, 2: 24}
    assert reducescatter_lowering(p, (1, 9), [1]).bytes_sent((), 8) == {0: 72, 1: 72, 2: 72}
    uneq = allgather_transfers(p, (1, 7), [1])                                  # blocks of 3, 2, 2
    assert allgather_lowering(p, (1, 7), [1]).kind == "transfers" == reducescatter_lowering(p, (1, 7), [1]).kind
    assert allgather_lowering(p, (1, 7), [1]).bytes_sent(uneq, 8) == {0: 48, 1: 32, 2: 32}  # to each other rank
    assert allgather_lowering(p, (2, 7), [1]).kind == "transfers"                # rows of 2: not slabs
    assert allgather_lowering(CartesianPartition.of((2, 2)), (4, 4), [0, 1]).kind == "transfers"


def test_halo_source_counts_match_the_geometry_brute_force():
    """The vectorized per-coordinate source counts (the up-front transfer bound of the halo_transfers limit) equal
    the number of ranks whose owned block meets each rank's needed box, brute force over all pairs."""
    import random

    from meshplan.models.tensor.halo import Window, halo_geometry, output_shape, source_counts
    from meshplan.models.tensor.partition import CartesianPartition, box_intersect, box_is_empty

    rng = random.Random(7)
    for _ in range(300):
        n, p = rng.randint(1, 30), rng.randint(1, 9)
        kk, s, pad, d = rng.randint(1, 5), rng.randint(1, 3), rng.randint(0, 2), rng.randint(1, 3)
        w = Window.of(1, (kk,), (s,), (pad,), (d,))
        try:
            m = output_shape((n,), w)[0]
        except Exception:  # noqa: BLE001 - a window longer than the padded input: not a case
            continue
        geo = halo_geometry(CartesianPartition.of((p,)), (n,), w)
        brute = [sum(1 for src in geo.ranks if not box_is_empty(dst.needed)
                     and not box_is_empty(box_intersect(src.owned, dst.needed))) for dst in geo.ranks]
        assert list(source_counts(p, n, m, w, 0)) == brute, (n, p, kk, s, pad, d)
