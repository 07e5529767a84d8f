"""durbin's N ≫ S piece (docs/bound.md, "Leading terms against the published entries", durbin): the
window argument's counts against the I/O of counted schedules.

Let ``T_k`` be the first computation of ``alpha`` in step ``k``.  Every instance of ``sum += r[k - i - 1]·y[i]``
of step ``k`` depends on ``alpha`` of step ``k − 1`` and ``alpha`` of step ``k`` depends on all of them, so
each is first computed in ``(T_{k−1}, T_k]``, where the ``k + 1`` inputs ``r[0..k]`` are all read: at least
``k + 1 − S`` loads of ``r`` per window, with recomputation allowed.  Without recomputation, the ``k`` values
of ``y`` after step ``k − 1`` are all computed before ``T_k`` and all read after it (``z[i] = y[i] + α·y[k − i
− 1]``), and at most ``S − 1`` stay red beside ``alpha``: ``2(k − S + 1)`` stores and loads more.  The sum
is ``3N²/2 − O(NS)``, the published entry's leading term, and 0 while ``N ≤ S``."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.models.loops.frontend import parse_file
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.solvers.soap.bound import analyze

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def windows(n: int, s: int) -> tuple[int, int]:
    """``(loads of r, stores + loads of y)`` the window argument forces at N = n, S = s."""
    r = sum(max(0, k + 1 - s) for k in range(1, n))
    y = 2 * sum(max(0, k - s + 1) for k in range(2, n))
    return r, y


def test_the_pieces():
    assert windows(16, 64) == (0, 0)                       # N < S: the vectors fit, nothing forced
    r, y = windows(4096, 64)
    assert abs((r + y) / (1.5 * 4096 ** 2) - 1) < 0.05      # N ≫ S: 3N²/2 − O(NS)


@pytest.mark.parametrize("n, s", [(16, 64), (64, 16), (128, 32), (256, 64)])
def test_the_window_counts_are_below_the_loop_order(n, s):
    (p,) = parse_file(str(EX / "durbin.py"))
    tr = build_trace(p, {"N": n})
    io = replay_order(tr, loop_order(tr), s)
    r, y = windows(n, s)
    assert r + y // 2 <= io.loads and y // 2 <= io.stores
    assert analyze(p).evaluate({"N": n, "S": s}) <= io.total
