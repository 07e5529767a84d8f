"""COnfCHOX's precomputed steps (no MPI): the block columns of the lower-half update cover every entry they
must update exactly once, and on every grid every message a holder plans has a receive of the same length on its
destination, carrying exactly the rows :func:`panel_rows` says that rank reads (the words of the model)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from meshplan.exec.factorization.common import Layout
from meshplan.exec.factorization.confchox import block_columns, panel_rows, steps
from meshplan.models.factorization.cost import confchox_cost
from meshplan.models.factorization.problem import FactorGrid, FactorProblem


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 4)), min_size=0, max_size=9), st.integers(0, 6))
def test_block_columns_cover_the_lower_half_once(widths_steps, extra):
    blocks, c, r = [], 0, 0
    for w, dr in widths_steps:
        r += dr
        blocks.append((c, c + w, r))
        c += w
    R = r + extra
    count = np.zeros((max(R, 1), max(c, 1)), dtype=int)
    for r0, r1, c0, c1 in block_columns(blocks, R):
        assert r0 < r1 and c0 < c1
        count[r0:r1, c0:c1] += 1
    want = np.zeros_like(count)
    for c0, c1, rb in blocks:
        want[rb:R, c0:c1] = 1
    assert np.array_equal(count, want)


@pytest.mark.parametrize("N, shape, v", [(90, (2, 2, 1), 16), (100, (1, 4, 1), 8), (77, (4, 1, 1), 16),
                                         (90, (2, 1, 2), 16), (50, (3, 1, 1), 7), (40, (1, 1, 1), 8)])
def test_each_step_updates_every_trailing_lower_block_once(N, shape, v):
    """The rectangles of a step (now and later together) cover, in the local tile, exactly the trailing
    entries whose row block is at or below their column block, once each (the diagonal blocks whole)."""
    g = FactorGrid(*shape, v=v)
    for r in range(g.p):
        rows, cols = Layout(N, g, r).rows, Layout(N, g, r).cols
        for t, s in enumerate(steps(N, g, r)):
            if s.hi <= s.lo:
                continue
            c1 = min(N, (t + 1) * v)
            count = np.zeros((len(rows), len(cols)), dtype=int)
            for r0, r1, b0, b1 in s.now + s.later:
                count[s.rr0 + r0:s.rr0 + r1, s.rc0 + b0:s.rc0 + b1] += 1
            want = ((rows[:, None] >= c1) & (cols[None, :] >= c1)
                    & (rows[:, None] // v >= cols[None, :] // v)).astype(int)
            assert np.array_equal(count, want), (r, t)


GRIDS = [(90, (2, 2, 1), 16), (100, (1, 4, 1), 8), (77, (4, 1, 1), 16), (90, (2, 1, 2), 16), (64, (1, 2, 2), 8),
         (120, (2, 2, 2), 16), (50, (3, 1, 1), 7)]


@pytest.mark.parametrize("N, shape, v", GRIDS)
def test_planned_messages_pair_up_and_carry_the_panel_rows(N, shape, v):
    g = FactorGrid(*shape, v=v)
    plans = [steps(N, g, r) for r in range(g.p)]
    total = 0
    for t in range(-(-N // v)):
        c1 = min(N, (t + 1) * v)
        vt = c1 - t * v
        sent = {}
        for r in range(g.p):
            for dest, a, b, at, (zl, zh) in plans[r][t].sends:
                assert (r, dest) not in sent
                sent[(r, dest)] = (b - a if at is None else len(at), zh - zl)
        got = {}
        for r in range(g.p):
            s = plans[r][t]
            w = s.hi - s.lo
            if s.row_src >= 0 and not s.holder:
                got[(s.row_src, r)] = (s.n_rows, w)
            for src, n in s.col_recvs:
                got[(src, r)] = (n, w)
            if s.now or s.later:  # what it reads is exactly panel_rows: its rows from the row panel on, its columns
                x, y, _z = g.coords(r)
                assert s.n_rows + sum(n for _s, n in s.col_recvs) == len(panel_rows(N, g, x, y, c1))
        assert {k: v2 for k, v2 in sent.items() if v2[0] and v2[1]} == {k: v2 for k, v2 in got.items() if v2[0] and v2[1]}
        total += sum(n * w for n, w in sent.values())
        # the diagonal block goes to the holders below it, one triangle each
        for r in range(g.p):
            for d in plans[r][t].diag_dests:
                assert plans[d][t].diag_src == r and plans[d][t].holder and vt > 0
    assert total > 0


def test_steps_are_cached_per_problem():
    g = FactorGrid(2, 2, 1, v=16)
    assert steps(90, g, 1) is steps(90, g, 1)
    assert confchox_cost(FactorProblem("cholesky", 90, 4), g).per_rank > 0
