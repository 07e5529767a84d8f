"""Owner-aligned (left-looking) schedules of models/soap/aligned.py: legal, computing the same values,
never below the SOAP bound, and within 4x of it for LU and Cholesky at N = 32, S = 64
(docs/bound.md, "Table 5.2, kernel by kernel")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from meshplan.api.soap import analyze_bound
from meshplan.models.loops.frontend import parse_file
from meshplan.models.soap.aligned import owner_blocks, owner_orders, owner_sizes
from meshplan.models.soap.replay import build_trace, legal, loop_order, replay_order
from meshplan.models.soap.schedules import best_schedule

EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def _lower(p, sizes):
    v = analyze_bound(p, params=sizes, tiles=False).values
    return max(v["bound"], v["bound_numeric"])


@pytest.mark.parametrize("name", ["lu", "cholesky", "ludcmp"])
def test_owner_orders_are_legal_and_compute_the_same(name, final_memory):
    (p,) = parse_file(str(EX / f"{name}.py"))
    sizes = {"N": 9, "S": 16}
    tr = build_trace(p, sizes)
    ref = final_memory(tr, loop_order(tr))
    lower = _lower(p, sizes)
    found = 0
    for _label, order, on in owner_orders(tr, sizes, 16):
        assert sorted(order.tolist()) == list(range(tr.instances))
        assert legal(on, order)
        assert final_memory(on, order) == ref
        assert replay_order(on, order, 16).total >= lower
        found += 1
    assert found >= len(owner_sizes(16))


def test_ludcmp_reorders_whole_chains_through_its_scalar(final_memory):
    """``w = A[i, j]; w -= …; A[i, j] = w / A[j, j]``: each chain of ``w`` belongs to the block of its
    ``A[i, j]``, and chains of different blocks are reordered (the writes of ``w`` change order, every
    read still sees its writer)."""
    (p,) = parse_file(str(EX / "ludcmp.py"))
    sizes = {"N": 8, "S": 16}
    tr = build_trace(p, sizes)
    blocks = owner_blocks(tr, sizes, (2, 2))
    w = [si for si, st in enumerate(p.statements) if st.output.array == "w"]
    assert len(np.unique(blocks[np.isin(tr.stmt, w)])) > 1
    label, order, on = next(iter(owner_orders(tr, sizes, 16)))
    assert on is tr and not np.array_equal(order, loop_order(tr))
    assert legal(tr, order) and final_memory(tr, order) == final_memory(tr, loop_order(tr))


def test_ludcmp_chains_run_in_place_level_by_level(final_memory):
    """Each chain of ``w`` is stored in the ``A[i, j]`` (``y[i]``, ``x[i]``) it ends by writing, except
    the chain that leaves ``w``'s final value; the chains of a block then advance together."""
    (p,) = parse_file(str(EX / "ludcmp.py"))
    sizes = {"N": 8, "S": 16}
    tr = build_trace(p, sizes)
    merged = [(lab, o, on) for lab, o, on in owner_orders(tr, sizes, 16) if on is not tr]
    assert merged and all("in place" in lab for lab, _, _ in merged)
    w = [si for si, st in enumerate(p.statements) if st.output.array == "w"]
    kept = np.isin(tr.stmt, w) & (merged[0][2].elems == tr.elems).all(axis=1)
    assert 0 < kept.sum() < np.isin(tr.stmt, w).sum()
    for _lab, order, on in merged:
        assert legal(on, order) and final_memory(on, order) == final_memory(tr, loop_order(tr))
        assert not legal(tr, order)        # with the one scalar w the interleaved chains would clash


def test_reversed_chains_are_illegal():
    """The relaxed check (reads and last writers only) still rejects an order that changes a read."""
    (p,) = parse_file(str(EX / "ludcmp.py"))
    tr = build_trace(p, {"N": 4})
    assert not legal(tr, loop_order(tr)[::-1])


@pytest.mark.parametrize("name", ["lu", "cholesky", "ludcmp"])
def test_left_looking_schedule_within_four_times_the_bound(name):
    (p,) = parse_file(str(EX / f"{name}.py"))
    sizes = {"N": 32, "S": 64}
    res = best_schedule(p, sizes, 64)
    lower = _lower(p, sizes)
    assert res.best.legal and res.best.label.startswith("owner blocks")
    assert lower <= res.best.io.total <= 4 * lower
    assert res.best.io.total < res.loop_order.total / 2


def test_blocks_of_negative_subscripts_stay_apart():
    from meshplan.models.loops.frontend import parse_source

    (p,) = parse_source("""
def shifted(N):
    for i in range(N):
        for j in range(N):
            A[i - N, j - N] = B[i, j] + A[i - N, j - N]
""")
    tr = build_trace(p, {"N": 4})
    assert len(np.unique(owner_blocks(tr, {"N": 4}, (2, 2)))) == 4
