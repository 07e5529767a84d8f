"""Reduction programs: synthesize, place, simulate and check them (P2 §3–§5; docs/check.md).

:func:`check_program` is ``meshplan check PROGRAM.txt``, :func:`check_schedule` is ``meshplan check
SCHEDULE.json``; both return frozen results whose fields are the keys of the verb's ``--json``.
:func:`synthesize` and :func:`simulate` accept a system and placement in their string forms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from meshplan.api.inputs import as_bytes, as_int_tuple, as_system, choose_placement
from meshplan.api.reduction_plan import plan_reduction
from meshplan.api.results import Result, value, freeze, library_field
from meshplan.models.core.errors import ModelError, VerificationError

__all__ = ["synthesize", "simulate", "ProgramCheck", "ScheduleCheck",
           "check_program", "check_schedule", "check_json"]


def synthesize(system: Any, axes: Any = None, reduce: Any = None, *, matrix: Any = None, max_size: int = 5,
               dsl: str = "full"):
    """Every valid reduction program of size ≤ ``max_size`` over a synthesis hierarchy, shortest first,
    each re-checked by replay (P2 §3.3–3.5).  ``system`` is a
    :class:`~meshplan.models.reduction.hierarchy.SynthesisHierarchy`, or a system (any form) with
    ``axes``, ``reduce`` and optionally ``matrix``.  Returns the library's ``SynthesisResult``
    (``programs``, ``lowered``, ``hierarchy``, ``seconds``)."""
    from meshplan.models.reduction.hierarchy import SynthesisHierarchy, synthesis_hierarchy
    from meshplan.solvers.reduction.synthesis import synthesize as _synthesize

    if isinstance(system, SynthesisHierarchy):
        h = system
    else:
        if axes is None or reduce is None:
            raise ModelError("synthesize needs a synthesis hierarchy, or a system with axes and reduce")
        sysv = as_system(system)
        axes_t = as_int_tuple(axes, "axes")
        h = synthesis_hierarchy(choose_placement(sysv, axes_t, matrix), as_int_tuple(reduce, "reduce"))
    return _synthesize(h, max_size=max_size, dialect=dsl)


def simulate(system: Any, program: Any, *, axes: Any = None, reduce: Any = None, matrix: Any = None,
             bytes: Any = "1GiB", algo: str = "ring", chunks: int | None = None):
    """Simulated time of a valid reduction program on the system's interconnects (P2 §5): a
    ``ProgramTime`` with ``time_s`` and per-step times.  ``program`` is a ``LoweredProgram`` (then give
    ``chunks``, the reduction-group size) or a text program with ``axes`` and ``reduce``."""
    from meshplan.models.reduction.lowering import LoweredProgram
    from meshplan.models.reduction.simulator import simulate as _simulate

    sysv = as_system(system)
    if isinstance(program, LoweredProgram):
        if chunks is None:
            raise ModelError("simulating a lowered program needs chunks= (the size of a reduction group)")
        lowered, k = program, chunks
    else:
        if axes is None or reduce is None:
            raise ModelError("simulating a text program needs axes= and reduce= (its placement)")
        placed = plan_reduction(program, sysv, axes, reduce, matrix=matrix)
        lowered, k = placed.lowered, (chunks or len(placed.reduction_groups[0]))
    return _simulate(sysv, lowered, bytes_per_device=as_bytes(bytes), chunks=k, algo=algo)


def check_json(res, lines: Sequence[int] | None) -> dict[str, Any]:
    """The JSON of one checked program (docs/check.md): verdict, proof, numeric run, time."""
    from meshplan.models.core.bits import bits

    v = res.verdict
    fail = None
    if v.failure is not None:
        f = v.failure
        fail = {"step": f.step, "collective": f.collective, "group": list(f.group), "rule": f.rule,
                "premise": f.premise, "detail": f.detail,
                "line": lines[f.step - 1] if lines else None,
                "states_before": {str(d): [bits(m) for m in s] for d, s in zip(f.group, f.states_before)}}
    proof = None
    if res.proof is not None:
        pr = res.proof
        proof = {"status": pr.status, "reason": pr.reason, "step": pr.step, "counterexample": None}
        if pr.counterexample is not None:
            ce = pr.counterexample
            n = max(d for d, _ in ce.inputs) + 1
            inputs = [[ce.inputs[(d, r)] for r in range(res.chunks)] for d in range(n)]
            proof["counterexample"] = {
                "inputs": inputs,
                "wrong": [{"device": w.device, "chunk": w.chunk, "got": w.got, "expected": w.expected,
                           "sum": [list(t) for t in w.terms], "group": list(w.group)} for w in ce.wrong]}
    return {
        "valid": v.valid,
        "steps": v.steps,
        "reason": v.reason(),
        "failure": fail,
        "shortfalls": [{"device": s.device, "chunk": s.chunk, "missing": list(s.missing), "extra": list(s.extra)}
                       for s in v.shortfalls],
        "proof": proof,
        "crossing": None if res.crossing is None else {
            "step": res.crossing.step, "collective": res.crossing.collective, "group": list(res.crossing.group),
            "device": res.crossing.device, "chunk": res.crossing.chunk, "foreign": res.crossing.foreign,
            "detail": str(res.crossing)},
        "numeric": {"correct": res.numeric.correct, "reason": res.numeric.reason,
                    "damage": None if res.damage is None else {
                        "step": res.damage.step, "group": list(res.damage.group), "device": res.damage.device,
                        "chunk": res.damage.chunk, "kind": res.damage.kind, "detail": res.damage.detail}},
        "agree": res.agree,
        "note": res.note,
        "chunks": res.chunks,
        "time_s": res.time_s,
    }


def _raise_if_disagree(results) -> None:
    bad = next((r for r in results if r.valid and not r.agree), None)
    if bad is not None:
        raise VerificationError(f"the referees disagree: {bad.note}; please report this program")


@value
class ProgramCheck(Result):
    """The answer of :func:`check_program`: the placement, then the verdicts (docs/check.md, JSON).
    ``result`` holds the library's ``CheckResult``, ``placed`` the
    :class:`~meshplan.api.reduction_plan.ReductionPlan`."""

    file: str | None
    system: str
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    matrix: tuple
    synthesis_hierarchy: tuple
    reduction_groups: tuple
    bytes_per_device: int
    algo: str
    valid: bool
    steps: int
    reason: str
    failure: Mapping | None
    shortfalls: tuple
    proof: Mapping | None
    crossing: Mapping | None
    numeric: Mapping
    agree: bool
    note: str
    chunks: int
    time_s: float | None
    result: Any = library_field()
    placed: Any = library_field()

    def raise_if_disagree(self) -> None:
        """Raise :class:`VerificationError` when the program is valid but the referees disagree."""
        _raise_if_disagree([self.result])


def check_program(program: Any, system: Any, axes: Any, reduce: Any, *, matrix: Any = None,
                  bytes: Any = "1GiB", algo: str = "ring", proof: bool = True) -> ProgramCheck:
    """Prove that a reduction program computes exactly the requested reduction (P2 Figure 8 replay, a z3
    proof by symbolic execution unless ``proof=False``, and a numpy run), and simulate it when valid.
    ``program`` as in :func:`~meshplan.api.reduction_plan.plan_reduction`.  A negative verdict is a result (``valid`` False), not an
    error."""
    from meshplan.solvers.reduction.proof import check_program as _check

    placed = plan_reduction(program, system, axes, reduce, matrix=matrix)
    nbytes = as_bytes(bytes)
    res = _check(placed.system_value, placed.lowered, placed.reduction_groups, bytes_per_device=nbytes, algo=algo,
                 proof=proof)
    doc = {"file": placed.source, "system": placed.system, "axes": list(placed.axes),
           "reduce": list(placed.reduce), "matrix": placed.placement.tolist(),
           "synthesis_hierarchy": [{"name": lv.name, "size": lv.size} for lv in placed.hierarchy.levels],
           "reduction_groups": [list(g) for g in placed.reduction_groups], "bytes_per_device": nbytes,
           "algo": algo}
    doc.update(check_json(res, placed.program.lines))
    return ProgramCheck(**{k: freeze(v) for k, v in doc.items()}, result=res, placed=placed)


@value
class ScheduleCheck(Result):
    """The answer of :func:`check_schedule` (docs/check.md, JSON of a schedule): one entry per checked
    program in ``results``.  ``checks`` holds ``(placement, program, CheckResult)`` triples and
    ``schedule`` the :class:`~meshplan.schedule.Schedule`."""

    file: str | None
    system: str
    axes: tuple[int, ...]
    reduce: tuple[int, ...]
    bytes_per_device: int
    algo: str
    valid: bool
    results: tuple
    checks: tuple = library_field(())
    schedule: Any = library_field()

    def raise_if_disagree(self) -> None:
        """Raise :class:`VerificationError` when a program is valid but the referees disagree."""
        _raise_if_disagree([r for _, _, r in self.checks])


def check_schedule(schedule: Any, *, placement: Any = None, program: Any = None, bytes: Any = None,
                   algo: str | None = None, proof: bool = True,
                   progress: Callable[[int, int], None] | None = None) -> ScheduleCheck:
    """Check the programs of a schedule (a path, a :class:`~meshplan.schedule.Schedule`, its JSON or a
    :class:`~meshplan.api.placement.PlacementPlan`) as :func:`check_program` does.  ``placement`` and
    ``program`` select indices (``"0,2"``, an int or a sequence; default all); ``bytes`` and ``algo``
    default to the schedule's.  ``progress(done, total)`` is called per program."""
    from meshplan.schedule import load_schedule
    from meshplan.solvers.reduction.proof import check_program as _check

    sched = load_schedule(schedule)
    file = str(schedule) if isinstance(schedule, (str, Path)) else None
    nbytes = as_bytes(bytes) if bytes is not None else sched.bytes_per_device
    algo = algo or sched.algo
    todo = sched.select(placement, program)
    checks = []
    for i, (pl, pr) in enumerate(todo, 1):
        res = _check(sched.system, pr.lowered, pl.reduction_groups, bytes_per_device=nbytes, algo=algo, proof=proof)
        checks.append((pl, pr, res))
        if progress is not None:
            progress(i, len(todo))
    out = []
    for pl, pr, res in checks:
        doc = {"placement": pl.id, "program": pr.id, "matrix": pl.matrix.tolist(), "text": pr.text}
        doc.update(check_json(res, None))
        out.append(doc)
    return ScheduleCheck(file, sched.system.short(), tuple(sched.axes), tuple(sched.reduce), nbytes, algo,
                         all(r.valid for _, _, r in checks), freeze(out), tuple(checks), sched)
