"""I/O lower bounds and I/O-optimal tiles of loop programs (SOAP, thesis chapter 5; docs/bound.md).

:func:`analyze_bounds` is ``meshplan bound FILE.py`` / ``--einsum``; :func:`analyze_bound` analyzes one
program; their :class:`BoundReport` fields are the keys of ``meshplan bound --json``.
:func:`integer_tiles` computes the best integer tiles of a program's dominant subgraph with CP-SAT.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from meshplan.api.inputs import as_params, as_seconds, is_file
from meshplan.api.results import Result, value, freeze, library_field
from meshplan.models.core.errors import ModelError

__all__ = ["BoundReport", "analyze_bound", "analyze_bounds", "integer_tiles", "load_programs", "report_json",
           "schedule_json"]


def load_programs(source: Any, *, function: str | None = None) -> list:
    """Loop programs from ``source``: a ``Program``, an einsum like ``"ij,jk->ik"``, a ``.py`` file
    (every function with a loop nest, or only ``function``) or Python source text (several lines)."""
    from meshplan.models.loops.frontend import parse_einsum, parse_file, parse_source
    from meshplan.models.loops.program import Program

    if isinstance(source, Program):
        return [source]
    if hasattr(source, "__fspath__"):
        return parse_file(str(source), function=function)
    if not isinstance(source, str):
        raise ModelError(f"a loop program is a Program, an einsum, a .py file or Python source, "
                         f"got {type(source).__name__}")
    if "\n" not in source:  # one line: an einsum, or a file name
        if "->" in source and not is_file(source):
            return [parse_einsum(source)]
        return parse_file(source, function=function)
    return parse_source(source, function=function)


@functools.lru_cache(maxsize=4096, typed=True)
def _s(e) -> str:
    """``str(e)`` (``"oo"`` for ∞), once per distinct expression: the subgraphs of a program share
    their χ, ρ and tiles up to renaming, and sympy's printer is a pure function of the expression."""
    import sympy as sp

    return "oo" if e == sp.oo else str(e)


def report_json(res, values: dict[str, int], *, tiles: bool = True, time_limit_s: float = 3.0) -> dict:
    """The JSON-ready report of one analyzed program (docs/bound.md)."""
    import sympy as sp

    from meshplan.models.loops.program import sym
    from meshplan.models.soap.cases import constraint_text
    from meshplan.solvers.soap.chi import S

    prog = res.program
    dom = res.dominant
    dom_it = res.intensity_of(dom.best) if dom else None
    complete = all(p in values for p in prog.params) and "S" in values
    subs = {sym(k): v for k, v in values.items() if k not in ("S", "p")}
    subgraphs = []
    for it in res.subgraphs:
        entry = {
            "arrays": list(it.problem.arrays),
            "statements": list(it.problem.statements),
            "method": it.method,
            "chi": _s(it.chi) if it.chi is not None else None,
            "X0": _s(it.X0),
            "rho": _s(it.rho),
            "tiles": {c: _s(e) for c, e in it.tiles.items()},
            "tile_variables": {c: list(m) for c, m in it.problem.members.items()},
            "work": str(it.problem.work_expr()),
            "access": str(it.problem.access_expr()),
            "terms": [str(t) for t in it.problem.terms],
            "notes": list(it.problem.notes) + list(it.notes),
            "cases": [{"case": c.problem.case, "constraints": [constraint_text(g) for g in c.problem.constraints],
                       "method": c.method, "chi": _s(c.chi) if c.chi is not None else None,
                       "X0": _s(c.X0), "rho": _s(c.rho)} for c in it.cases],
        }
        if "S" in values:
            entry["rho_value"] = it.rho_at(values["S"])
            entry["tiles_value"] = {c: float(sp.N(e.subs(S, values["S"]))) for c, e in it.tiles.items()}
        subgraphs.append(entry)
    out = {
        "program": prog.name,
        "source": prog.source_name,
        "params": list(prog.params),
        "statements": [{"name": st.name, "line": st.line, "loops": list(st.vars), "output": str(st.output),
                        "reads": [str(a) for a in st.inputs]} for st in prog.statements],
        "bound": _s(res.bound),
        "leading_term": _s(res.leading),
        "parallel_bound": _s(res.parallel),
        "rho": _s(dom.rho) if dom else "oo",
        "tiles": {c: _s(e) for c, e in dom_it.tiles.items()} if dom_it else {},
        "dominant_subgraph": list(dom.best) if dom else [],
        "arrays": [{"array": a.array, "vertices": _s(a.vertices), "rho": _s(a.rho), "subgraph": list(a.best),
                    "statements": list(a.statements)} for a in res.arrays],
        "subgraphs": subgraphs,
        "conditions": [{"statement": f.statement, "condition": f.condition, "status": f.status,
                        "message": f.message} for f in res.findings],
        "notes": list(res.notes),
        "seconds": round(res.seconds, 4),
        "values": None,
        "integer_tiles": None,
        "window": None if res.window is None else {
            "pivot": res.window.pivot, "loop": res.window.loop, "first_step": res.window.first,
            "reads_per_step": _s(res.window.reads), "live_per_step": _s(res.window.live),
            "paths_per_step": _s(res.window.paths),
            "split_per_step": _s(res.window.split), "parts": res.window.parts,
            "bound": _s(res.window.bound), "leading_term": _s(res.window.leading),
            "no_recomputation": _s(res.window.no_recomputation),
            "leading_term_no_recomputation": _s(res.window.leading_no_recomputation)},
        "sweep": None if res.sweep is None else {
            "forward": res.sweep.forward, "backward": res.sweep.backward, "input": res.sweep.source,
            "lines": _s(res.sweep.lines), "sites_read_by_both": _s(res.sweep.sites),
            "trivial": _s(res.sweep.trivial), "bound": _s(res.sweep.bound), "leading_term": _s(res.sweep.leading)},
    }
    missing = [p for p in prog.params if p not in values] + ([] if "S" in values else ["S"])
    if values and missing:
        out["notes"].append(f"give {', '.join(missing)} in --params to evaluate the bound and compute tiles")
    if complete:
        v = {"bound": res.evaluate({k: x for k, x in values.items() if k != "p"}),
             "leading_term": float(sp.N(res.leading.subs(subs).subs(S, values["S"]))),
             "rho": (math.inf if dom is None or dom.rho == sp.oo
                     else float(sp.N(dom.rho.subs(S, values["S"]))))}
        v["bound_numeric"] = res.evaluate_numeric({k: x for k, x in values.items() if k != "p"})
        if "p" in values:
            v["parallel_bound"] = res.evaluate(values)
        out["values"] = v
        if tiles and dom_it is not None and dom_it.method != "unbounded":
            from meshplan.solvers.soap.tiles import integer_tiles as _tiles   # (CP-SAT: only when tiles are computed)

            tr = _tiles(prog, dom_it, values, time_limit_s=time_limit_s)
            out["integer_tiles"] = {
                "subgraph": list(tr.subgraph), "status": tr.status, "X0": tr.budget, "S": tr.memory,
                "continuous": tr.continuous, "continuous_work": tr.continuous_work,
                "rounded": tr.rounded, "rounded_work": tr.rounded_work,
                "integer": tr.integer, "integer_work": tr.integer_work,
                "gap": tr.gap, "caps": tr.caps, "notes": list(tr.notes)}
    return out


def schedule_json(program, doc: dict, values: dict[str, int]) -> dict:
    """``meshplan bound --schedule``: replay the dominant subgraph's integer tiles (or its continuous tiles
    at S, rounded; the plain loop order when there are none) through an LRU fast memory of ``S`` words
    (:mod:`meshplan.models.soap.replay`) and compare with the bound ``doc`` reports at these sizes."""
    from meshplan.models.soap.schedules import schedule_report

    missing = [p for p in program.params if p not in values] + ([] if "S" in values else ["S"])
    if missing:
        raise ModelError(f"schedule replays concrete sizes: give {', '.join(missing)} in params "
                         "(small ones, e.g. N=64,S=1024)", param=("schedule", "params"))
    v = doc["values"]
    lower = max(v["bound"], v["bound_numeric"])
    dom = [sg for sg in doc["subgraphs"] if tuple(sg["arrays"]) == tuple(doc["dominant_subgraph"])]
    classes = dict(dom[0]["tile_variables"]) if dom else {}
    it = doc.get("integer_tiles")
    tile = dict(it["integer"]) if it and it.get("integer") else None
    if tile is None and dom and dom[0].get("tiles_value"):
        tile = {c: max(1, round(x)) for c, x in dom[0]["tiles_value"].items() if math.isfinite(x)}
    return schedule_report(program, values, lower, classes, tile)


@value
class BoundReport(Result):
    """The I/O lower bound of one loop program (docs/bound.md, JSON): symbolic ``bound``,
    ``leading_term`` and ``parallel_bound``, the dominant subgraph's ``rho`` and ``tiles``, per-array and
    per-subgraph detail, and — when every size and ``S`` are given — ``values`` and ``integer_tiles``.
    ``analysis`` holds the library's ``ProgramBound``."""

    program: str
    source: str | None
    params: tuple
    statements: tuple
    bound: str
    leading_term: str
    parallel_bound: str
    rho: str
    tiles: Mapping
    dominant_subgraph: tuple
    arrays: tuple
    subgraphs: tuple
    conditions: tuple
    notes: tuple
    seconds: float
    values: Mapping | None
    integer_tiles: Mapping | None
    schedule: Mapping | None = None
    window: Mapping | None = None
    sweep: Mapping | None = None
    analysis: Any = library_field()


def analyze_bounds(source: Any, *, function: str | None = None, params: Any = None, strict: bool = False,
                   tiles: bool = True, time_limit_s: float = 3.0,
                   schedule: bool = False, progress: Any = None) -> tuple[BoundReport, ...]:
    """One :class:`BoundReport` per loop program of ``source`` (see :func:`load_programs`): the bound
    Q ≥ |V|(X0−S)/χ(X0) per statement and fused subgraph (thesis §5.3–5.5).  ``params``: sizes, fast
    memory ``S`` and processors ``p`` (``"N=4096,S=65536,p=16"`` or a dict) to evaluate the bound and, unless
    ``tiles=False``, compute integer tiles with CP-SAT (``time_limit_s`` per model).  ``strict`` rejects
    programs that need a projection of §5.5.  ``schedule`` adds the exact I/O of the tool's own tiled
    schedule (LRU replay, :func:`schedule_json`; needs every size and ``S``, at sizes that make it cheap).
    ``progress(done, total, what)`` is called before each program's bound, tiles and schedule."""
    from meshplan.models.soap.access import SoapViolation
    from meshplan.solvers.soap.bound import analyze

    programs = load_programs(source, function=function)
    values = as_params(params)
    time_limit_s = as_seconds(time_limit_s, "time_limit_s")
    known = {p for prog in programs for p in prog.params} | {"S", "p"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ModelError(f"params names {unknown[0]!r}, which is not a parameter of the program "
                         f"(parameters: {', '.join(sorted(known))})", param="params")
    reports = []
    say = progress or (lambda done, total, what="": None)
    for i, prog in enumerate(programs):
        say(i, len(programs), f"{prog.name}: bound")
        try:
            res = analyze(prog)
        except SoapViolation as err:
            if len(programs) == 1:
                raise
            raise SoapViolation(str(err).split("violated: ", 1)[-1], condition=err.condition,
                                statement=f"{err.statement} of function {prog.name}") from err
        if strict:
            bad = [f for f in res.findings if f.status != "ok"]
            if bad:
                raise SoapViolation(bad[0].message + " (strict forbids projections)",
                                    condition=bad[0].condition, statement=bad[0].statement, param="strict")
        say(i, len(programs), f"{prog.name}: evaluating" + (", CP-SAT tiles" if tiles and values else ""))
        doc = report_json(res, values, tiles=tiles, time_limit_s=time_limit_s)
        if schedule:
            say(i, len(programs), f"{prog.name}: replaying the schedule")
            doc["schedule"] = schedule_json(res.program, doc, values)
        reports.append(BoundReport(**{k: freeze(v) for k, v in doc.items()}, analysis=res))
    return tuple(reports)


def analyze_bound(source: Any, *, function: str | None = None, params: Any = None, strict: bool = False,
                  tiles: bool = True, time_limit_s: float = 3.0, schedule: bool = False) -> BoundReport:
    """The :class:`BoundReport` of one loop program (an einsum such as ``"ij,jk->ik"``, a ``Program``, or a
    file/source with one function or ``function=`` naming one); arguments as in :func:`analyze_bounds`."""
    reports = analyze_bounds(source, function=function, params=params, strict=strict, tiles=tiles,
                             time_limit_s=time_limit_s, schedule=schedule)
    if len(reports) != 1:
        names = ", ".join(r.program for r in reports)
        raise ModelError(f"the source holds {len(reports)} programs ({names}); pass function= to pick one, "
                         "or call analyze_bounds")
    return reports[0]


def integer_tiles(program: Any, params: Any, *, subgraph: Any = None, time_limit_s: float = 3.0):
    """The best integer tile sizes of a program's dominant subgraph (or the fused ``subgraph``, a tuple of
    array names) under Σ|A| ≤ X0 at the sizes and fast memory ``S`` of ``params`` (thesis §5.6), from
    CP-SAT, re-checked; a ``TileResult`` with continuous, rounded and integer tiles and their work."""
    from meshplan.solvers.soap.bound import analyze
    from meshplan.solvers.soap.tiles import integer_tiles as _tiles

    progs = load_programs(program)
    if len(progs) != 1:
        raise ModelError(f"integer_tiles needs one program, got {len(progs)}")
    values = as_params(params)
    res = analyze(progs[0])
    if subgraph is None:
        if res.dominant is None:
            raise ModelError("the program has no bounded subgraph to tile")
        subgraph = res.dominant.best
    return _tiles(progs[0], res.intensity_of(tuple(subgraph)), values, time_limit_s=time_limit_s)
