"""The capability spine (DESIGN.md): every capability exposes the same five names — a frozen ``…Problem``
validated once, a pure ``plan_…`` function that takes it, a frozen ``…Plan`` whose JSON is derived from its
fields, ``plan.bind(comm) -> …Executor`` (reusable, ``close()`` / ``with``) where the capability executes, and a
typed ``…Run`` — exported by ``import meshplan as mp``; and every value's ``repr`` is short."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import meshplan as mp
from meshplan.models.core.values import REPR_LIMIT, Value

#: capability -> (Problem, plan function, Plan, Executor or None, Run); the one table of the spine
SPINE = {
    "placement": ("PlacementProblem", "solve_placement", "PlacementPlan", None, "ReductionRun"),
    "reduction": ("ReductionProblem", "plan_reduction", "ReductionPlan", "ReductionExecutor", "ReductionRun"),
    "redistribution": ("RedistributionProblem", "plan_redistribution", "RedistributionPlan",
                       "RedistributionExecutor", "RedistributionRun"),
    "matmul": ("MatmulProblem", "plan_matmul", "MatmulPlan", "MatmulExecutor", "MatmulRun"),
    "factorization": ("FactorProblem", "plan_factorization", "FactorPlan", "FactorExecutor", "FactorRun"),
    "tensor": ("HaloProblem", "plan_halo", "HaloPlan", "HaloExecutor", "TensorRun"),
    "counting": ("CountProblem", "count_iterations", "CountPlan", None, "CountRun"),
}


def _problem(capability: str):
    """A small problem of each capability, built from its typed values (what the plan function takes)."""
    from meshplan.models.core.system import System
    from meshplan.models.redistribution.mesh import parse_mesh
    from meshplan.models.redistribution.types import parse_type
    from meshplan.models.reduction.program_text import parse_program

    sysv = System.parse("node=2,gpu=2")
    return {
        "placement": lambda: mp.PlacementProblem(sysv, (2, 2), (0,), max_size=2),
        "reduction": lambda: mp.ReductionProblem(parse_program("AllReduce slice=root"), sysv, (2, 2), (0,),
                                                 [[2, 1], [1, 2]]),
        "redistribution": lambda: mp.RedistributionProblem(parse_type("[4{x}16,16]"), parse_type("[16,4{x}16]"),
                                                           parse_mesh("x=4")),
        "matmul": lambda: mp.MatmulProblem(64, 48, 40, 4),
        "factorization": lambda: mp.FactorProblem("lu", 64, 4),
        "tensor": lambda: mp.HaloProblem.of((1, 1, 4), (1, 1, 10), 3, padding=1),
        "counting": lambda: mp.CountProblem.of("def f(n):\n    for i in range(n):\n        S()\n"),
    }[capability]()


@pytest.mark.parametrize("capability", sorted(SPINE))
def test_every_capability_exposes_the_five_names(capability):
    for name in SPINE[capability]:
        if name is not None:
            assert name in mp.__all__, f"meshplan.{name} ({capability}) is not exported"
            assert getattr(mp, name) is not None
    problem, plan_fn, plan, executor, run = (getattr(mp, n) if n else None for n in SPINE[capability])
    for cls in (problem, plan, run):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        assert issubclass(cls, Value), f"{cls.__name__} does not derive its JSON by the value protocol"
    assert "__post_init__" in vars(problem) or any("__post_init__" in vars(b) for b in problem.__mro__[1:-1]), \
        f"{problem.__name__} validates nothing"
    assert callable(plan_fn) and inspect.signature(plan_fn).parameters
    if executor is not None:
        from meshplan.exec.runtime.executor import Executor

        assert issubclass(executor, Executor)
        assert all(hasattr(executor, m) for m in ("close", "__enter__", "__exit__"))
        bound = plan if capability != "placement" else mp.ReductionPlan
        assert callable(getattr(bound, "bind", None)), f"{bound.__name__} has no bind(comm)"


@pytest.mark.parametrize("capability", sorted(SPINE))
def test_the_plan_function_takes_the_problem_and_returns_the_plan(capability):
    _, plan_fn, plan_cls, _, _ = (getattr(mp, n) if n else None for n in SPINE[capability])
    problem = _problem(capability)
    got = plan_fn(problem)
    assert isinstance(got, plan_cls)
    assert list(got.to_json()) == [k for k in plan_cls.json_keys() if k in got.to_json()]
    assert len(repr(got)) <= REPR_LIMIT and len(repr(problem)) <= REPR_LIMIT
    with pytest.raises(dataclasses.FrozenInstanceError):
        object.__getattribute__(got, "__setattr__")(plan_cls.json_keys()[0], None)


def test_placement_programs_bind_as_reduction_plans():
    plan = mp.solve_placement("node=2,gpu=2", "2,2", "0", max_size=2)
    red = plan.program(placement=0, program=0)
    assert isinstance(red, mp.ReductionPlan) and red.reduction_groups
    assert red == mp.load_schedule(plan).program(placement=0, program=0)
    with pytest.raises(mp.ModelError, match="placement must be an index"):
        plan.program(placement=7)


def test_a_placement_plan_prints_short():
    plan = mp.solve_placement("node=4,gpu=8", "4,8", "0", max_size=3)
    assert len(repr(plan)) <= REPR_LIMIT, repr(plan)
