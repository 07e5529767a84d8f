"""The rate of a matrix multiply as a function of its inner dimension (``Rates.rate``, ``System.gemm_half_k``
measured by calibrate) and the factorization time objective that prices a rank-``v`` trailing update at it
(Kwasniewski's thesis section 4.8: smaller blocks run smaller, slower local BLAS calls)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from meshplan.models.core.errors import ModelError
from meshplan.models.core.system import System
from meshplan.models.factorization.cost import factor_cost
from meshplan.models.factorization.problem import FactorGrid, FactorProblem
from meshplan.models.factorization.time import factor_time
from meshplan.models.matmul.time import Rates
from meshplan.solvers.factorization.plan import schedule_factorization, search

#: rates as ``meshplan calibrate --np 2`` measured them on the 2-core SkylakeX host of the project (link latency
#: 6 us, 15 GB/s, a 512³ multiply at 65 Gflop/s, half of it at inner dimension 7.4, synchronisation 23 us)
HERE = Rates(2.3e-5, 1.53e10, 6.5e10, 7.4)


def test_rate_is_the_half_performance_form():
    r = Rates(1e-6, 1e10, 6e10, 8.0)
    ks = [1, 2, 4, 8, 16, 64, 128, 512, 1 << 20]
    rates = [r.rate(k) for k in ks]
    assert all(a < b for a, b in zip(rates, rates[1:]))  # monotonic in k
    assert r.rate(8) == pytest.approx(3e10)  # half the rate at k = gemm_half_k
    assert r.rate(1 << 20) == pytest.approx(6e10, rel=1e-5) and r.rate(1 << 20) < 6e10  # r∞ = flop_rate
    assert r.rate() == 6e10  # no inner dimension: flop_rate
    flat = Rates(1e-6, 1e10, 6e10)  # not measured: every multiply at flop_rate
    assert flat.gemm_half_k == 0.0 and {flat.rate(k) for k in ks} == {6e10}


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), True, "8"])
def test_rate_refuses_a_bad_half_k(bad):
    with pytest.raises(ModelError, match="gemm_half_k"):
        Rates(1e-6, 1e10, 6e10, bad)
    with pytest.raises(ModelError, match="gemm_half_k"):
        System.from_dict(System.from_short("gpu=2").to_dict() | {"flop_rate": 6e10, "gemm_half_k": bad})


def test_gemm_half_k_round_trips_and_old_files_load():
    base = dataclasses.replace(System.from_short("node=2,gpu=2"), flop_rate=6e10, sync_latency=((2, 2e-5),))
    s = dataclasses.replace(base, gemm_half_k=7.5)
    doc = json.loads(json.dumps(s.to_dict()))
    assert doc["gemm_half_k"] == 7.5
    back = System.from_dict(doc)
    assert back == s and back.gemm_half_k == 7.5 and Rates.of(back).gemm_half_k == 7.5
    assert s.for_collective("allreduce").gemm_half_k == 7.5
    old = System.from_dict(base.to_dict())  # a system file written before the key existed
    assert old.gemm_half_k is None and "gemm_half_k" not in old.to_dict()
    assert Rates.of(old).gemm_half_k == 0.0 and Rates.of(old).rate(16) == 6e10


def test_factor_time_prices_the_updates_at_the_block_rate():
    pr = FactorProblem("cholesky", 2048, 2)
    flat = dataclasses.replace(HERE, gemm_half_k=0.0)
    for v in (16, 32, 64, 128):
        g = FactorGrid(1, 2, 1, v)
        cost = factor_cost(pr, g)
        a, b = factor_time(pr, g, cost, flat), factor_time(pr, g, cost, HERE)
        assert b.flops == a.flops and b.latency_s == a.latency_s and b.bandwidth_s == a.bandwidth_s
        assert b.compute_s == pytest.approx(a.compute_s * (v + HERE.gemm_half_k) / v)
    # with the same flops per step the update's time falls as the block grows
    comp = [factor_time(pr, FactorGrid(1, 2, 1, v), factor_cost(pr, FactorGrid(1, 2, 1, v)), HERE).compute_s
            - 2048 ** 2 * v / 4 / HERE.rate(v) for v in (16, 32, 64, 128)]
    assert all(x > y for x, y in zip(comp, comp[1:]))


@pytest.mark.parametrize("kind", ["lu", "cholesky"])
@pytest.mark.parametrize("N", [2048, 4096])
def test_time_objective_at_two_ranks_takes_large_blocks(kind, N):
    """With this machine's rates the time objective no longer picks v = 16 at 2 ranks (it did when every
    multiply ran at the 512³ rate: 16 or 32), and its choice is the brute-force minimum of the model."""
    pr = FactorProblem(kind, N, 2)
    s = schedule_factorization(pr, "time", HERE)
    assert s.grid.v >= 64
    times = [factor_time(pr, g, c, HERE).total_s for _k, g, c, _m in search(pr)[0]]
    assert factor_time(pr, s.grid, s.cost, HERE).total_s <= min(times) * (1 + 1e-12)
    assert "at the chosen block's rank-" in s.explanation[0]
    # the same machine priced at one rate for every multiply, with the idle link latency, takes small blocks
    flat = schedule_factorization(pr, "time", dataclasses.replace(HERE, latency=6e-6, gemm_half_k=0.0))
    assert flat.grid.v <= 32
