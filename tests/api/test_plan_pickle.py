"""Every plan is a value a user can send to ranks: ``pickle`` round-trips it to an equal plan, with the same
JSON and repr, that still works (binds, gives its programs, evaluates its counts).  mpi4py's lowercase
``comm.bcast(plan)`` pickles it."""

from __future__ import annotations

import pickle

import pytest

import meshplan as mp
from meshplan.models.core.values import FrozenMap, freeze

COUNT_SRC = '''
def tree_reduction(n, p, rank):
    for i in range(rank * n // p, min((rank + 1) * n // p, n)):
        s[rank] += a[i]
    i = 1
    while i < p:
        combine(s)
        i *= 2
'''


def _plans():
    placement = mp.solve_placement("node=2,gpu=2", "2,2", "0,1", max_size=3)
    return {
        "placement": placement,
        "reduction": placement.program(placement=0, program=0),
        "hand-written reduction": mp.plan_reduction(
            "ReduceScatter slice=gpu\nAllReduce slice=node form=Parallel(root)\nAllGather slice=gpu",
            "node=2,gpu=2", "4", "0"),
        "redistribution": mp.plan_redistribution("[3{x}12,2{y}12]", "[2{y}12,3{x}12]", "x=4,y=6"),
        "lu": mp.plan_factorization("lu", 90, 4),
        "cholesky": mp.plan_factorization("cholesky", 1536, 8),
        "matmul": mp.plan_matmul(64, 48, 80, 4),
        "halo": mp.plan_halo("1,1,2,2", (2, 3, 20, 21), 5),
        "count": mp.count_iterations(COUNT_SRC),
    }


PLANS = _plans()


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plan_pickles_to_an_equal_plan(name):
    plan = PLANS[name]
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(plan, protocol=protocol))
        assert type(back) is type(plan)
        assert back == plan
        assert back.to_json() == plan.to_json()
        assert repr(back) == repr(plan)


def test_unpickled_plans_still_work():
    back = {k: pickle.loads(pickle.dumps(v)) for k, v in PLANS.items()}
    assert back["placement"].program(placement=0, program=0) == PLANS["reduction"]
    assert back["count"].at({"n": 1000, "p": 16}).values["total"] == 67
    assert back["count"].verify({"n": 1000, "p": 16}).ok


def test_frozen_documents_stay_read_only_and_equal_to_their_dicts():
    doc = {"a": [1, {"b": 2}], "c": {"d": (3, 4)}}
    frozen = freeze(doc)
    assert isinstance(frozen, FrozenMap) and isinstance(frozen["c"], FrozenMap)
    assert frozen == {"a": (1, {"b": 2}), "c": {"d": (3, 4)}} and {"c": {"d": (3, 4)}, "a": (1, {"b": 2})} == frozen
    assert frozen != {"a": (1, {"b": 2})}
    with pytest.raises(TypeError):
        frozen["a"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        frozen._items = {}  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(frozen)) == frozen
    assert repr(frozen) == repr({"a": (1, {"b": 2}), "c": {"d": (3, 4)}})
