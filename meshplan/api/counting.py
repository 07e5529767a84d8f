"""Loop iteration counts, work, depth and parallel efficiency (thesis chapter 2; docs/count.md).

The spine without an executor: :class:`~meshplan.models.counting.problem.CountProblem` → :func:`count_iterations`
→ :class:`CountPlan` (the symbolic counts; its fields are the keys of ``meshplan count --json``) →
``plan.verify(params)`` → :class:`CountRun` (the program executed with those values, every count compared).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from meshplan.api.inputs import as_params
from meshplan.models.core.errors import ModelError
from meshplan.models.core.values import Value, freeze, library_field, optional_field, value
from meshplan.models.counting.problem import CountProblem

__all__ = ["CountRun", "CountPlan", "count_iterations"]


@value
class CountRun(Value):
    """The program executed with ``values``: per statement (and ``total``) the executed count next to the
    symbolic lower and upper bound; ``ok`` when every executed count lies within them."""

    ok: bool
    values: Mapping
    rows: tuple


@value
class CountPlan(Value):
    """Counts of the most loaded process of one function (docs/count.md, JSON): per statement and in total
    (``iterations``), W, D, E_p and the available parallelism as expressions, ``bounds`` where a count is only
    bounded; ``values`` (evaluated at given parameter values) and ``verification`` (a :class:`CountRun`) when
    asked for.  ``methods`` names per statement how it was counted (``"barvinok"``: Barvinok's algorithm on its
    quasi-affine domain; ``"closed form"``: the sums of thesis sections 2.3–2.5); ``cases`` holds Barvinok's
    piecewise quasi-polynomials as ``{"count", "when"}`` rows.  ``result`` holds the library's count with its
    sympy expressions."""

    function: str
    parameters: tuple[str, ...]
    rank: str | None
    iterations: Mapping
    lines: Mapping
    work: str | None
    depth: str | None
    efficiency: str | None
    available_parallelism: str | None
    exact: bool
    bounds: Mapping
    unknowns: tuple[str, ...]
    notes: tuple[str, ...]
    methods: Mapping
    cases: Mapping
    values: Mapping | None = optional_field()
    verification: CountRun | None = optional_field()
    grid: Mapping | None = optional_field()
    result: Any = library_field()

    @property
    def known(self) -> set[str]:
        """The names ``params`` may give: the parameters, the process count and the unknown loop counts."""
        return {self.result.p.name, *self.unknowns, *self.result.flow.params}

    def at(self, params: Any) -> "CountPlan":
        """This plan with every count and metric evaluated at ``params`` (``"n=1024,p=16"`` or a mapping)."""
        vals = self._values(params)
        return replace(self, values=freeze(self.result.to_json(vals)["values"]))

    def verify(self, params: Any) -> CountRun:
        """Execute the program with ``params`` (every parameter and unknown needs a value) and compare each
        statement's executed count with its symbolic bounds."""
        vals = self._values(params)
        missing = [x for x in (*self.result.flow.params, *self.unknowns) if x not in vals]
        if missing:
            raise ModelError(f"verifying {self.function} needs a value for {missing[0]} in params", param="params")
        got = self.result.verify(vals)
        return CountRun(bool(got["ok"]), freeze(got["values"]), freeze(got["rows"]))

    def _values(self, params: Any) -> dict[str, int]:
        vals = as_params(params, "params", minimum=0)
        unknown = sorted(set(vals) - self.known)
        if unknown:
            raise ModelError(f"params names {unknown[0]!r}, which is not a parameter of {self.function} "
                             f"(parameters: {', '.join(sorted(self.known))})", param="params")
        return vals


def _plan_of(result) -> CountPlan:
    doc = result.to_json(None)
    return CountPlan(doc["function"], tuple(doc["parameters"]), doc["rank"], freeze(doc["iterations"]),
                     freeze(doc["lines"]), doc["work"], doc["depth"], doc["efficiency"],
                     doc["available_parallelism"], doc["exact"], freeze(doc["bounds"]), tuple(doc["unknowns"]),
                     tuple(doc["notes"]), freeze(doc["methods"]), freeze(doc["cases"]),
                     grid=freeze(doc["grid"]) if "grid" in doc else None, result=result)


def count_iterations(program: Any, *, function: str | None = None, procs: str = "p", rank: str | None = None,
                     bounds: Any = None, params: Any = None, verify: bool = False):
    """Count the iterations of every statement of a Python loop program (thesis chapter 2): a
    :class:`CountPlan`, or a list of them when the file holds several functions and ``function`` is not given.

    ``program``: a :class:`CountProblem`, a ``.py`` path, Python source text or a parsed ``Flow``; ``bounds``:
    bounds of unknown loop counts ``u_k`` (``"u1=0..100"`` or a mapping); ``params``: parameter values to
    evaluate at (``"n=1024,p=16"``, the same spelling as ``analyze_bound``'s); ``verify=True`` also executes the
    program with them (``plan.verification``)."""
    from meshplan.solvers.counting.count import count_problem

    problem = program if isinstance(program, CountProblem) else CountProblem.of(
        program, function=function, procs=procs, rank=rank, bounds=bounds)
    if verify and not params:
        raise ModelError("verify runs the program, so it needs params (e.g. n=64,p=4)", param=("verify", "params"))
    plans = [_plan_of(r) for r in count_problem(problem)]
    if params:
        vals = as_params(params, "params", minimum=0)
        known = set().union(*(p.known for p in plans))
        unknown = sorted(set(vals) - known)
        if unknown:
            raise ModelError(f"params names {unknown[0]!r}, which is not a parameter of the program "
                             f"(parameters: {', '.join(sorted(known))})", param="params")
        plans = [p.at(vals) for p in plans]
        if verify:
            plans = [replace(p, verification=p.verify(vals)) for p in plans]
    return plans[0] if len(plans) == 1 else plans
