"""The window bound (meshplan.solvers.soap.window) on random chains: one value per outer step that the
next step waits for.  Every piece the rule derives — with recomputation and without — is at most the I/O
the program's own loop order moves through an LRU memory (a red–blue pebbling that recomputes nothing)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from meshplan.models.loops.frontend import parse_source
from meshplan.models.loops.program import sym
from meshplan.models.soap.replay import build_trace, loop_order, replay_order
from meshplan.solvers.soap.chi import S
from meshplan.solvers.soap.window import window_bound


@st.composite
def chains(draw):
    """``for k``: a reduction into ``s``, the pivot ``p`` from it, then updates of ``y`` that read ``p``."""
    lo = draw(st.sampled_from(["0", "1"]))
    hi = draw(st.sampled_from(["k", "k + 1"]))
    reads = draw(st.lists(st.sampled_from(["r[i]", "r[k - i]", "y[i]", "y[k - i]", "q[i]", "p"]),
                          min_size=1, max_size=2, unique=True))
    pivot = draw(st.sampled_from(["s", "s * p", "s * r[k]", "s + p * q[k]"]))
    upd = draw(st.sampled_from(["y[j] + p * y[k - j]", "r[j] * p", "y[j] * p", "p"]))
    reset = draw(st.booleans())
    lines = ["def gen(N):", "    for k in range(1, N):"]
    if reset:
        lines.append("        s = 0.0")
    lines += [f"        for i in range({lo}, {hi}):", f"            s += {' * '.join(reads)}",
              f"        p = {pivot}", f"        for j in range(0, {hi}):", f"            y[j] = {upd}"]
    return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=None)
@given(src=chains(), memory=st.integers(2, 6))
def test_random_windows_are_below_the_loop_order(src, memory):
    (p,) = parse_source(src)
    w = window_bound(p)
    if w is None:
        return
    for n in (12, 20):
        tr = build_trace(p, {"N": n})
        io = replay_order(tr, loop_order(tr), memory)
        at = {sym("N"): n, S: memory}
        assert float(w.bound.subs(at)) <= float(w.no_recomputation.subs(at)) <= io.total, src


def test_the_strategy_finds_windows():
    src = ("def gen(N):\n    for k in range(1, N):\n        s = 0.0\n        for i in range(0, k + 1):\n"
           "            s += r[k - i] * y[i]\n        p = s * p\n        for j in range(0, k + 1):\n"
           "            y[j] = y[j] + p * y[k - j]\n")
    w = window_bound(parse_source(src)[0])
    assert w is not None and w.leading == 3 * sym("N") ** 2 / 2       # the split count (durbin-like)
