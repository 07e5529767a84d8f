"""The synchronisation latency of busy ranks (``System.sync_latency``, measured by calibrate per rank count) and
the factorization time objective that charges it per message on a step's critical path (Kwasniewski's thesis
section 4.8: the latency of many small steps)."""

from __future__ import annotations

import dataclasses
import json

import pytest

import meshplan as mp
from meshplan.exec.reduction.compute_rates import sync_counts
from meshplan.models.core.errors import ModelError
from meshplan.models.core.system import System
from meshplan.models.factorization.cost import factor_cost
from meshplan.models.factorization.problem import FactorProblem
from meshplan.models.factorization.time import factor_time, step_rates
from meshplan.models.matmul.time import Rates
from meshplan.solvers.factorization.plan import schedule_factorization, search


def _system(sync=((2, 2e-5), (4, 2e-3))) -> System:
    base = System.from_short("node=2,gpu=2")
    return dataclasses.replace(base, flop_rate=1e10, sync_latency=sync)


def test_sync_latency_round_trips_and_is_looked_up_by_rank_count():
    s = _system(((4, 2e-3), (2, 2e-5)))  # any order in, sorted by rank count
    assert s.sync_latency == ((2, 2e-5), (4, 2e-3))
    back = System.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s and back.to_dict()["sync_latency"] == {"2": 2e-5, "4": 2e-3}
    assert [s.sync_latency_at(p) for p in (1, 2, 3, 4, 8)] == [2e-5, 2e-5, 2e-5, 2e-3, 2e-3]
    assert System.from_short("gpu=2").sync_latency_at(4) is None
    assert s.for_collective("allreduce").sync_latency == s.sync_latency
    assert sync_counts(2) == [2] and sync_counts(6) == [2, 4, 6] and sync_counts(8) == [2, 4, 8]


@pytest.mark.parametrize("bad", [{"x": 1e-3}, {"4": -1.0}, {"0": 1e-3}, {"4": float("inf")}, [1, 2]])
def test_sync_latency_bad_values_are_refused(bad):
    doc = _system().to_dict() | {"sync_latency": bad}
    with pytest.raises(ModelError, match="sync_latency"):
        System.from_dict(doc)


def test_step_rates_take_the_latency_measured_at_the_run_rank_count():
    rates = Rates(5e-6, 1e10, 1e10)
    s = _system()
    assert step_rates(rates, s, 4).latency == 2e-3
    assert step_rates(rates, s, 2).latency == 2e-5
    assert step_rates(Rates(1e-4, 1e10, 1e10), s, 2).latency == 1e-4  # never below the link's latency
    assert step_rates(rates, System.from_short("gpu=4"), 4) is rates  # nothing measured: unchanged


def test_time_objective_with_sync_latency_is_the_brute_force_minimum(tmp_path):
    """plan_factorization(objective="time", system=…) minimizes the modelled time with the latency of busy
    ranks at p (checked against every candidate); a costly synchronisation buys fewer, larger steps than the
    words objective and than the same machine without the measurement."""
    path = tmp_path / "sys.json"
    sync = _system(((2, 1e-6), (4, 3e-3)))
    path.write_text(json.dumps(sync.to_dict()))
    plain = dataclasses.replace(sync, sync_latency=())
    for kind in ("lu", "cholesky"):
        pr = FactorProblem(kind, 2048, 4)
        plan = mp.plan_factorization(kind, 2048, 4, objective="time", system=str(path))
        rates = step_rates(Rates.of(sync), sync, 4)
        times = [factor_time(pr, g, factor_cost(pr, g), rates).total_s for _k, g, _c, _m in search(pr)[0]]
        chosen = factor_time(pr, plan.schedule.grid, factor_cost(pr, plan.schedule.grid), rates).total_s
        assert chosen <= min(times) * (1 + 1e-9)
        assert "3000.00 us per message" in plan.explanation[0]
        unsynced = schedule_factorization(pr, "time", Rates.of(plain))  # idle latency: 10 us, smaller blocks
        assert plan.block > unsynced.grid.v and plan.block >= mp.plan_factorization(kind, 2048, 4).block
