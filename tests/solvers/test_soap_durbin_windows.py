"""durbin's N ≫ S piece (docs/bound.md, "Leading terms against the published entries", durbin): the
window argument's counts against the I/O of counted schedules.

Let ``T_k`` be the first computation of ``alpha`` in step ``k``.  Every instance of ``sum += r[k - i - 1]·y[i]``
of step ``k`` depends on ``alpha`` of step ``k − 1`` and ``alpha`` of step ``k`` depends on all of them, so
each is first computed in ``(T_{k−1}, T_k]``, where the ``k + 1`` inputs ``r[0..k]`` are all read: at least
``k + 1 − S`` loads of ``r`` per window, with recomputation allowed.  Without recomputation, the ``k`` values
of ``y`` after step ``k − 1`` are all computed before ``T_k`` and all read after it (``z[i] = y[i] + α·y[k − i
− 1]``), and at most ``S − 1`` stay red beside ``alpha``: ``2(k − S + 1)`` stores and loads more.  The sum
is ``3N²/2 − O(NS)``, the published entry's leading term, and 0 while ``N ≤ S``.  With recomputation the
window also loads about ``k − S`` more (the disjoint paths of solvers/soap/window.py: each ``y[q]`` needs a
load on its path back to an earlier ``alpha``, or that step's ``sum`` is recomputed and the ``r`` both
chains read are loaded twice): ``Σ (2k − 2S)⁺ = N² − O(NS)`` (see test_soap_durbin_recompute.py).  The
split count (solvers/soap/window_parts.py: the window in four parts, a weighted cut per part) gives the
entry with recomputation, ``Σ (3k + 1 − 8S)⁺ = 3N²/2 − O(NS)`` (see test_soap_durbin_split.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import sympy as sp

from meshplan.models.loops.frontend import parse_file, parse_source
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.models.loops.program import sym
from meshplan.solvers.soap.bound import analyze
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.pebbling import cdag, optimal_io
from meshplan.solvers.soap.window import window_bound

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"
N_, S_ = sym("N"), S


@functools.lru_cache(maxsize=None)
def _analyzed(source: str | None = None):
    """durbin (or the program of ``source``) and its bound, derived once for the module."""
    (p,) = parse_file(str(EX / "durbin.py")) if source is None else parse_source(source)
    return p, analyze(p)


def windows(n: int, s: int) -> tuple[int, int]:
    """``(loads of r, stores + loads of y)`` the window argument forces at N = n, S = s."""
    r = sum(max(0, k + 1 - s) for k in range(1, n))
    y = 2 * sum(max(0, k - s + 1) for k in range(2, n))
    return r, y


def forced(n: int, s: int) -> int:
    """The paths count with recomputation: loads the window argument forces at N = n, S = s."""
    return sum(max(0, 2 * k - 2 * s) for k in range(2, n))


def split(n: int, s: int) -> int:
    """The split count with recomputation (four parts, solvers/soap/window_parts.py): loads and stores
    forced at N = n, S = s by ``3k + 1`` per window less ``2S`` per part."""
    return sum(max(0, 3 * k + 1 - 8 * s) for k in range(3, n))


def test_the_pieces():
    assert windows(16, 64) == (0, 0)                       # N < S: the vectors fit, nothing forced
    r, y = windows(4096, 64)
    assert abs((r + y) / (1.5 * 4096 ** 2) - 1) < 0.05      # N ≫ S: 3N²/2 − O(NS)
    assert forced(16, 64) == 0 and abs(forced(4096, 64) / 4096 ** 2 - 1) < 0.05     # N² − O(NS)
    assert split(16, 64) == 0 and abs(split(4096, 16) / (1.5 * 4096 ** 2) - 1) < 0.05    # 3N²/2 − O(NS)


@pytest.mark.parametrize("n, s", [(16, 64), (64, 16), (128, 32), (256, 64)])
def test_the_window_counts_are_below_the_loop_order(n, s):
    p, res = _analyzed()
    tr = build_trace(p, {"N": n})
    io = replay_order(tr, loop_order(tr), s)
    r, y = windows(n, s)
    assert r + y // 2 <= io.loads and y // 2 <= io.stores
    assert res.evaluate({"N": n, "S": s}) <= io.total
    at = {N_: n, S_: s}
    w = res.window
    # the tool's window pieces are at most the hand counts (an integral under each sum), the forced loads
    # are at most the loop order's, and the piece without recomputation is at most what the loop order
    # (which recomputes nothing) moves
    assert float(w.bound.subs(at)) <= max(r, forced(n, s), split(n, s)) and forced(n, s) <= io.loads
    assert split(n, s) <= io.total
    assert float(w.no_recomputation.subs(at)) <= r + y <= io.total



def test_the_tool_derives_the_window():
    _, res = _analyzed()
    w = res.window
    assert (w.pivot, w.loop) == ("S4", "k")                     # alpha = -(r[k] + sum)/beta
    k = sym("k")
    assert sp.simplify(w.reads - (k + 1)) == 0                  # r[0..k]
    assert sp.simplify(w.live - (k + 1)) == 0                   # y after step k − 1, and beta
    assert sp.simplify(w.paths - (2 * k - 1)) == 0              # c(k) + k − 2
    assert sp.simplify(w.split - (3 * k + 1)) == 0 and w.parts == 4   # per position r, and y or its pair
    assert w.leading == 3 * N_ ** 2 / 2 and w.leading_no_recomputation == 3 * N_ ** 2 / 2
    assert res.leading == 3 * N_ ** 2 / 2                       # the N ≫ S piece leads 7N²/(8S): the entry
    assert res.evaluate({"N": 16, "S": 64}) < 53                # N < S: the SOAP and trivial pieces
    assert res.evaluate({"N": 4096, "S": 64}) >= (2 * 4096 - 128 - 3) ** 2 / 4 - 1
    assert res.evaluate({"N": 4096, "S": 16}) >= (3 * 4096 - 128 - 2) ** 2 / 6 - 1   # the split count leads


CHAIN = """
def chain(N):
    for k in range(1, N):
        for i in range(k + 1):
            s += r[i]
        s = s * s
"""


def test_the_window_is_below_the_optimal_pebbling():
    """A chain small enough for the exhaustive red–blue pebbling (recomputation allowed): at N = 4, S = 3 the
    window of step 3 reads r[0..3], one more than fits."""
    p, res = _analyzed(CHAIN)
    w = res.window
    assert w is not None and w.pivot == "S2"
    value = float(w.bound.subs({N_: 4, S_: 3}))
    best = optimal_io(cdag(p, {"N": 4}), 3)
    assert 0 < value <= best
    assert res.evaluate({"N": 4, "S": 3}) <= best


@pytest.mark.parametrize("n, s", [(32, 8), (64, 16)])
def test_the_chain_window_is_below_the_loop_order(n, s):
    p, res = _analyzed(CHAIN)
    tr = build_trace(p, {"N": n})
    io = replay_order(tr, loop_order(tr), s)
    exact = sum(max(0, k + 1 - s) for k in range(2, n))          # r[0..k] in window k ≥ 2
    assert float(res.window.bound.subs({N_: n, S_: s})) <= exact <= io.total
    assert res.evaluate({"N": n, "S": s}) <= io.total


def test_no_window_without_a_chain_or_with_two_sizes():
    two = CHAIN.replace("(N)", "(N, M)").replace("range(k + 1)", "range(M)").replace("r[i]", "r[i]")
    (p,) = parse_source(two)
    assert window_bound(p) is None                               # two size parameters: not fitted
    (p,) = parse_file(str(EX / "gemm.py"))
    assert window_bound(p) is None
