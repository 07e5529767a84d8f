"""Redistribution planning: memory-bounded weak shortest paths (``search``), lowering with one
final allpermute (``lower``), the planner (``plan``), the XLA-style ``baseline`` and the
``exhaustive`` reference.  See docs/redistribute.md."""

from meshplan.solvers.redistribution.baseline import baseline_plan
from meshplan.solvers.redistribution.exhaustive import exhaustive_optimum
from meshplan.solvers.redistribution.plan import Plan, plan_redistribution

__all__ = ["Plan", "plan_redistribution", "baseline_plan", "exhaustive_optimum"]
