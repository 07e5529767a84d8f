"""The generated check suite of the tensor capability: partition pairs for the dot-product adjoint test
(DistDL paper, section 3.3, eq. 26) and a grid of layer cases compared with the sequential reference.

Pure functions of the number of ranks ``np``; every case is a JSON-able dict.  Partition pairs cover
overlapping, disjoint, disjoint with idle ranks, unbalanced and empty blocks, in 1–3 dimensions.  The
layer grid includes the four 1-D feature convolutions on which DistDL 0.x fails (kernel 5 on 10 elements;
kernel 7, padding 3; dilation 3 on 16 elements; stride 2 on 16 elements)."""

from __future__ import annotations

__all__ = ["adjoint_cases", "layer_cases", "DISTDL_FAILURES", "factor_pairs", "total_cases"]

#: (name, length, kernel, stride, padding, dilation) of the DistDL failures (1-D conv over 4 ranks)
DISTDL_FAILURES = (
    ("distdl-k5-n10", 10, 5, 1, 0, 1),
    ("distdl-k7-p3-n10", 10, 7, 1, 3, 1),
    ("distdl-k3-d3-n16", 16, 3, 1, 0, 3),
    ("distdl-k3-s2-n16", 16, 3, 2, 0, 1),
)


def factor_pairs(n: int) -> list[tuple[int, int]]:
    return [(a, n // a) for a in range(1, n + 1) if n % a == 0]


def _p(shape, ranks) -> dict:
    return {"shape": list(shape), "ranks": list(ranks)}


def adjoint_cases(np_: int) -> list[dict]:
    W = np_
    allr = list(range(W))
    half = max(1, W // 2)
    first, last = allr[:half], allr[W - half:]
    k = max(1, W // 3)
    cases: list[dict] = []

    def add(kind, name, **kw):
        cases.append({"kind": kind, "name": f"{kind}:{name}", **kw})

    # repartition: overlapping, disjoint, idle, scatter/gather, unbalanced, empty blocks, 1-3-D
    add("repartition", "1d-overlap-reversed", px=_p((W,), allr), py=_p((W,), allr[::-1]), shape=[2 * W + 1])
    add("repartition", "1d-empty-blocks", px=_p((W,), allr), py=_p((half,), last), shape=[W - 1 if W > 1 else 1])
    add("repartition", "1d-disjoint", px=_p((len(first),), first), py=_p((len(last),), last), shape=[3 * W + 2])
    add("repartition", "1d-idle", px=_p((k,), allr[:k]), py=_p((k,), allr[W - k:]), shape=[5])
    add("repartition", "scatter", px=_p((1, 1), [W - 1]), py=_p(factor_pairs(W)[len(factor_pairs(W)) // 2], allr),
        shape=[5, 7])
    for a, b in factor_pairs(W):
        add("repartition", f"2d-{a}x{b}-to-{b}x{a}", px=_p((a, b), allr), py=_p((b, a), allr[::-1]), shape=[7, 5])
    a, b = factor_pairs(W)[len(factor_pairs(W)) // 2]
    add("repartition", "3d", px=_p((a, 1, b), allr), py=_p((1, b, a), allr), shape=[3, 4, 5])
    add("repartition", "3d-to-one", px=_p((a, b, 1), allr), py=_p((1, 1, 1), [W // 2]), shape=[3, 2, 4])
    # broadcast and sum-reduce (adjoints of each other); source partitions inside or outside the target
    for a, b in factor_pairs(W):
        add("broadcast", f"1x{b}-to-{a}x{b}", px=_p((1, b), allr[W - b:]), py=_p((a, b), allr), shape=[3, 2 * b + 1])
        add("sumreduce", f"{a}x{b}-to-1x{b}", px=_p((a, b), allr), py=_p((1, b), allr[:b]), shape=[3, 2 * b + 1])
    add("broadcast", "one-to-all", px=_p((1, 1), [W - 1]), py=_p((1, W), allr), shape=[2, 3])
    add("sumreduce", "all-to-idle-one", px=_p((1, len(first)), first), py=_p((1, 1), [last[-1]]), shape=[2, 3])
    add("broadcast", "3d", px=_p((1, 1, b), allr[:b]), py=_p((a, 1, b), allr), shape=[2, 3, b + 1])
    # a permutation: rank 0 sends to W-1 and receives from it, so the groups overlap (no Bcast/Reduce)
    add("broadcast", "overlapping-groups", px=_p((1, W), allr), py=_p((1, W), allr[::-1]), shape=[3, W + 2])
    add("sumreduce", "overlapping-groups", px=_p((1, W), allr), py=_p((1, W), allr[::-1]), shape=[3, W + 2])
    # all-sum-reduce
    for a, b in factor_pairs(W):
        for axes in ([0], [1], [0, 1]):
            add("allsumreduce", f"{a}x{b}-axes{axes}", p=_p((a, b), allr), axes=axes, block=[3, 2])
    # all-gather / reduce-scatter
    for a, b in factor_pairs(W):
        add("allgather", f"{a}x{b}-axis1", p=_p((a, b), allr), axes=[1], shape=[5, b + 1])
        add("reducescatter", f"{a}x{b}-axis0", p=_p((a, b), allr), axes=[0], shape=[max(1, a - 1), 4])
    # consecutive slabs: an Allgather / Reduce_scatter_block per group when the blocks are equal, the
    # transfers when they are not
    add("allgather", "slab-axis0", p=_p((W, 1), allr[::-1]), axes=[0], shape=[W + 2, 3])
    add("allgather", "slab-axis1", p=_p((1, W), allr), axes=[1], shape=[1, 2 * W + 1])
    add("reducescatter", "slab-axis1", p=_p((1, W), allr[::-1]), axes=[1], shape=[1, 2 * W - 1])
    add("allgather", "slab-axis0-equal", p=_p((W, 1), allr[::-1]), axes=[0], shape=[2 * W, 3])
    add("allgather", "slab-axis1-equal", p=_p((1, W), allr), axes=[1], shape=[1, 3 * W])
    add("reducescatter", "slab-axis1-equal", p=_p((1, W), allr[::-1]), axes=[1], shape=[1, 2 * W])
    # halo exchange: 1-D feature windows incl. multi-hop, stride gaps, empty output blocks; 2-D and 3-D
    for name, n, kk, s, pd, d in DISTDL_FAILURES:
        add("halo", name, p=_p((1, 1, W), allr), shape=[1, 2, n], kernel=[1, 1, kk], stride=[1, 1, s],
            padding=[0, 0, pd], dilation=[1, 1, d])
    add("halo", "1d-empty-out", p=_p((1, 1, W), allr), shape=[1, 1, 7], kernel=[1, 1, 3], stride=[1, 1, 3],
        padding=[0, 0, 1], dilation=[1, 1, 1])
    add("halo", "1d-skip", p=_p((1, 1, W), allr[::-1]), shape=[2, 1, 13], kernel=[1, 1, 2], stride=[1, 1, 5],
        padding=[0, 0, 0], dilation=[1, 1, 1])
    # dilated windows with few outputs per rank: runs with unread gaps between them, read from other ranks
    add("halo", "1d-dilated-gap", p=_p((1, 1, W), allr), shape=[1, 2, 8 * W], kernel=[1, 1, 2], stride=[1, 1, 1],
        padding=[0, 0, 0], dilation=[1, 1, 4 * W])
    add("halo", "2d-dilated-gap", p=_p((1, 1, a, b), allr), shape=[1, 1, 6 * a, 6 * b], kernel=[1, 1, 2, 2],
        stride=[1, 1, 1, 2], padding=[0, 0, 1, 0], dilation=[1, 1, 3 * a, 3 * b])
    add("halo", "2d", p=_p((1, 1, a, b), allr), shape=[1, 2, 9, 8], kernel=[1, 1, 3, 4], stride=[1, 1, 1, 2],
        padding=[0, 0, 1, 2], dilation=[1, 1, 2, 1])
    add("halo", "3d", p=_p((1, a, 1, b), allr), shape=[2, 3, 5, 6], kernel=[1, 1, 2, 3], stride=[1, 1, 2, 1],
        padding=[0, 0, 1, 0], dilation=[1, 1, 1, 2])
    return cases


def layer_cases(np_: int) -> list[dict]:
    W = np_
    allr = list(range(W))
    a, b = factor_pairs(W)[len(factor_pairs(W)) // 2]
    cases: list[dict] = []

    def add(kind, name, **kw):
        cases.append({"kind": kind, "name": f"{kind}:{name}", **kw})

    for name, n, k, s, p, d in DISTDL_FAILURES:
        add("conv", name, p=[1, 1, W], x=[2, 3, n], out_channels=2, kernel=[k], stride=[s], padding=[p], dilation=[d])
    add("conv", "1d-dilated-gap", p=[1, 1, W], x=[1, 2, 8 * W], out_channels=2, kernel=[2], stride=[1],
        padding=[0], dilation=[4 * W])
    add("conv", "1d-channels", p=[1, a, b], x=[2, 3, 11], out_channels=5, kernel=[3], stride=[2], padding=[2],
        dilation=[1])
    add("conv", "1d-batch-channels", p=[a, b, 1], x=[3, 2, 9], out_channels=3, kernel=[4], stride=[1], padding=[1],
        dilation=[2])
    add("conv", "1d-general", p=[1, a, b], x=[1, 4, 2 * W + 3], out_channels=3, kernel=[5], stride=[2], padding=[3],
        dilation=[1], bias=False)
    add("conv", "2d", p=[1, 1, a, b], x=[2, 2, 9, 8], out_channels=3, kernel=[3, 2], stride=[1, 2], padding=[1, 1],
        dilation=[2, 1])
    add("conv", "3d", p=[1, 1, 1, a, b], x=[1, 2, 3, 5, 6], out_channels=2, kernel=[2, 3, 2], stride=[1, 1, 2],
        padding=[0, 1, 1], dilation=[1, 2, 1])
    for mode in ("max", "avg"):
        add(mode + "pool", "1d-k2-s2-n10", p=[1, 1, W], x=[1, 2, 10], kernel=[2], stride=[2], padding=[0],
            dilation=[1])
        add(mode + "pool", "1d-k3-s2-p1-d2", p=[1, 1, W], x=[2, 1, 17], kernel=[3], stride=[2], padding=[1],
            dilation=[2])
        add(mode + "pool", "2d", p=[1, a, 1, b], x=[1, 3, 7, 9], kernel=[3, 2], stride=[2, 1], padding=[1, 1],
            dilation=[1, 2])
        add(mode + "pool", "3d", p=[1, 1, a, 1, b], x=[1, 1, 6, 4, 7], kernel=[2, 2, 3], stride=[2, 1, 2],
            padding=[1, 0, 1], dilation=[1, 1, 1])
    for fo, fi in factor_pairs(W):
        add("linear", f"{fo}x{fi}", px=_p((1, fi), allr[:fi]), py=_p((1, fo), allr[W - fo:]),
            pw=_p((fo, fi), allr[::-1]), batch=3, in_features=2 * fi + 1, out_features=fo + 2)
    return cases


def total_cases(np_: int) -> int:
    return len(adjoint_cases(np_)) + len(layer_cases(np_))

