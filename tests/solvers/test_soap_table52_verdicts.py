"""Table 5.2 entries that are not lower bounds in some regime, shown by counted counter-schedules
(docs/bound.md, "Table 5.2, kernel by kernel").  Each schedule is legal (checked exactly against
program order) and its I/O is counted by the LRU replay of models/soap/replay.py; meshplan's own
bound stays below it."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.api.soap import analyze_bound
from meshplan.models.loops.frontend import parse_file
from meshplan.models.soap.replay import build_trace, legal, loop_order, replay_order, tiled_order

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


@pytest.mark.slow
def test_durbin_entry_fails_when_the_vectors_fit():
    """Entry 3N²/2: with N = 16, S = 64 the program's own loop order moves 53 words."""
    (p,) = parse_file(str(EX / "durbin.py"))
    tr = build_trace(p, {"N": 16})
    io = replay_order(tr, loop_order(tr), 64)
    assert io.total < 3 * 16 ** 2 / 2
    assert io.loads >= 16 - 1          # every r[k] read once at least (r[0..N-1], but r[N-1] only via r[k])
    r = analyze_bound(p, params={"N": 16, "S": 64}, tiles=False)
    assert r.values["bound"] <= io.total


def test_softmax_attains_the_trivial_floor_when_a_row_fits():
    """A row of M = 32 ≤ S = 64 words: X read once, Y written once, plus the 2N row scalars —
    any entry above 2NM + O(N) is not a lower bound there."""
    (p,) = parse_file(str(EX / "softmax.py"))
    n, m = 64, 32
    tr = build_trace(p, {"N": n, "M": m})
    io = replay_order(tr, loop_order(tr), 64)
    assert 2 * n * m <= io.total <= 2 * n * m + 6 * n
    r = analyze_bound(p, params={"N": n, "M": m, "S": 64}, tiles=False)
    assert r.values["bound"] <= io.total


@pytest.mark.slow
def test_stride_one_convolution_beats_the_injective_term():
    """Direct convolution at stride 1 (overlapping 3×3 windows): output tiles k=h=w=8 over one channel
    at a time need (8+2)² image and 8·9 filter words per channel, so a legal schedule moves fewer words
    than 2|V|/√S, the term of the injective case (ρ = √S/2, stride = kernel)."""
    (p,) = parse_file(str(EX / "conv2d.py"))
    sizes = {"NB": 1, "NK": 16, "NC": 16, "NH": 8, "NW": 8, "NR": 3, "NS": 3}
    tr = build_trace(p, sizes)
    order = tiled_order(tr, [((v,), t) for v, t in dict(b=1, k=8, h=8, w=8, c=1, r=3, s=3).items()])
    assert legal(tr, order)
    io = replay_order(tr, order, 1024)
    assert io.total < 2 * tr.instances / 1024 ** 0.5
    r = analyze_bound(p, params={**sizes, "S": 1024}, tiles=False)
    assert r.values["bound"] <= io.total
