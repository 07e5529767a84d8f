"""Reduction programs on MPI: run, verify against numpy, time, count bytes, compare with the simulator
(docs/run.md).  :func:`run_programs` is ``meshplan run``; its result's fields are the keys of
``meshplan run --json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshplan.api.inputs import as_bytes, as_seconds, is_file
from meshplan.api.results import Result, value, freeze, library_field
from meshplan.models.core.errors import ModelError
from meshplan.models.core.limits import check_memory

__all__ = ["ReductionRun", "run_programs", "open_runnable", "steps_text", "bandwidths"]


def bandwidths(collective: Any, n: int, size_bytes: float, time_s: float | None) -> tuple[float | None, float | None]:
    """``(algbw, busbw)`` in GB/s (10⁹ B/s) as nccl-tests defines them (doc/PERFORMANCE.md): algbw = S / t
    for an operation of total size S bytes taking t seconds, busbw = algbw × the collective's bus factor for
    ``n`` ranks (:meth:`~meshplan.models.core.collectives.Collective.bus_factor`); ``None`` without a time."""
    from meshplan.models.core.collectives import Collective

    if time_s is None or time_s <= 0:
        return None, None
    alg = size_bytes / time_s / 1e9
    return alg, alg * Collective.parse(collective).bus_factor(n)


def steps_text(lowered) -> str:
    """A lowered program as ``Collective[[groups]] ; …`` (for programs without DSL text)."""
    return " ; ".join(f"{s.collective}{[list(g) for g in s.groups]}" for s in lowered.steps)


def open_runnable(source: Any, *, system: Any = None, axes: Any = None, reduce: Any = None,
                  matrix: Any = None):
    """A :class:`~meshplan.schedule.Schedule` to run: ``source`` is a schedule (file, JSON, value or
    placement plan), or a text program (a file path, or its text such as ``"AllReduce slice=root"``)
    given with ``system``, ``axes``,
    ``reduce`` and, when several placements exist, ``matrix`` — then a one-program schedule."""
    from meshplan.api.reduction_plan import plan_reduction
    from meshplan.schedule import Schedule, ScheduledPlacement, ScheduledProgram, load_schedule

    text_flags = [f for f, v in (("system", system), ("axes", axes), ("reduce", reduce), ("matrix", matrix))
                  if v is not None]
    program: Any = None  # set when source is a text program
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                    and ("=" not in source or is_file(source))):
        from meshplan.models.core.files import read_text

        path = Path(source)
        head = read_text(path, what="file")[:200].lstrip()
        if path.suffix.lower() != ".json" and not head.startswith("{"):
            program = path
        source = path
    elif isinstance(source, str) and not source.lstrip().startswith("{"):
        program = source
    if program is None:
        if text_flags:
            raise ModelError(f"--{text_flags[0]} is for text programs; a schedule file carries its own system "
                             "and placements")
        return load_schedule(source)
    missing = [f for f, v in (("system", system), ("axes", axes), ("reduce", reduce)) if v is None]
    if missing:
        raise ModelError(f"a text program needs {', '.join('--' + m for m in missing)} (the system and placement "
                         "it runs on)")
    placed = plan_reduction(program, system, axes, reduce, matrix=matrix)
    text = "; ".join(str(i) for i in placed.program.items)
    pl = ScheduledPlacement(0, placed.placement, placed.reduction_groups,
                            (ScheduledProgram(0, text, None, placed.lowered, None),))
    return Schedule(placed.system_value, placed.axes, placed.reduce, 2**30, "ring", (pl,))


@value
class ReductionRun(Result):
    """The answer of :func:`run_programs` (docs/run.md, JSON): one entry per program in ``programs``
    (verified, times, bytes per rank measured / simulated / modelled, per-step detail).  ``runs`` holds
    the runtime's ``ProgramRun`` values and ``schedule_value`` the schedule that ran."""

    schedule: str | None
    system: str
    np: int
    bytes: int
    buffer_bytes: int
    dtype: str
    repeat: int
    verified: int
    failed: int
    programs: tuple
    runs: tuple = library_field(())
    schedule_value: Any = library_field()


def _sim(system, lowered, nbytes: int, k: int, algo: str):
    from meshplan.models.reduction.semantics import RuleViolation
    from meshplan.models.reduction.simulator import simulate

    try:
        return simulate(system, lowered, bytes_per_device=nbytes, chunks=k, algo=algo)
    except RuleViolation:
        return None


def run_programs(schedule: Any, *, placement: Any = None, program: Any = None, system: Any = None,
                 axes: Any = None, reduce: Any = None, matrix: Any = None, np: int | None = None,
                 bytes: Any = "1MiB", repeats: int = 5, dtype: str = "int64",
                 timeout: float = 600.0, progress: Any = None) -> ReductionRun:
    """Run reduction programs on ``np`` MPI ranks (one per device), each on random integer-valued data
    split into k chunks (k = reduction-group size), verify every rank's result against numpy, and time
    them (min and median over ``repeats`` runs, slowest rank) — docs/run.md.  ``schedule`` and the
    placement flags as in :func:`open_runnable`; ``placement``/``program`` select indices (default all).
    A failed verification is a result (``failed`` > 0), not an error.  ``progress(done, total, name)`` is
    called as programs finish.

    Bandwidths (docs/run.md): a program is an AllReduce over its reduction groups of k ranks, so its
    ``algbw_GBps`` is ``buffer_bytes`` / median time and ``busbw_GBps`` that × 2(k−1)/k; a step's size S
    is the largest buffer a rank handed to MPI in it (× n for an AllGather, whose S is the gathered
    size) and n its group size."""
    from meshplan.exec.reduction.driver import ProgramSpec, model_handed_bytes
    from meshplan.exec.reduction.driver import run_programs as _run
    from meshplan.models.reduction.checker import replay

    from meshplan.models.core.checks import check_ranks, check_repeats
    from meshplan.models.core.dtypes import RUNNABLE, as_dtype

    sched = open_runnable(schedule, system=system, axes=axes, reduce=reduce, matrix=matrix)
    n = sched.system.num_devices
    np_ = n if np is None else check_ranks(np, "np")
    if np_ != n:
        raise ModelError(f"np {np_} does not match the {n} devices of system {sched.system}; "
                         f"meshplan runs one rank per device: use np {n}", param="np")
    check_repeats(repeats)
    dtype = as_dtype(dtype, allowed=RUNNABLE).numpy  # the numpy spelling, as the JSON has it
    nbytes = as_bytes(bytes)
    timeout = as_seconds(timeout, "timeout")
    chosen = sched.select(placement, program)
    if not chosen:
        raise ModelError("no program selected")
    specs = [ProgramSpec(f"{pl.id}.{pr.id}", pr.lowered, pl.reduction_groups) for pl, pr in chosen]
    check_memory(2 * nbytes * np_, f"a run with bytes={bytes} on {np_} ranks (each holds its buffer and its "
                 "result)", "use smaller bytes")
    runs = _run(specs, np=np_, nbytes=nbytes, repeats=repeats, dtype=dtype, timeout_s=timeout, progress=progress)
    rows = []
    for (pl, pr), r in zip(chosen, runs):
        k = len(pl.reduction_groups[0])
        sim = _sim(sched.system, pr.lowered, r.buffer_bytes, k, sched.algo)
        model = model_handed_bytes(pr.lowered, k, r.chunk_bytes)
        verdict = replay(pr.lowered, pl.reduction_groups)
        sim_bytes = [round(b) for b in sim.bytes_sent] if sim else None
        algbw, busbw = bandwidths("AllReduce", k, r.buffer_bytes, r.time_median_s)
        rows.append({
            "placement": pl.id, "program": pr.id, "text": pr.text or steps_text(pr.lowered),
            "verified": r.verified, "executable": r.executable, "reason": r.reason,
            "checker": "valid" if verdict.valid else verdict.reason(),
            "time_s": r.time_median_s, "time_min_s": r.time_min_s,
            "sim_time_s": sim.time_s if sim else None,
            "algbw_GBps": algbw, "busbw_GBps": busbw,
            "bytes_per_rank": list(r.bytes_per_rank),
            "sim_bytes_per_rank": sim_bytes,
            "model_bytes_per_rank": [sum(s[d] for s in model) for d in range(n)] if model is not None else None,
            "bytes_match_model": (list(map(list, r.bytes_per_step)) == model) if (model is not None
                                                                                  and r.executable) else None,
            "steps": [{"collective": st.collective, "groups": [list(g) for g in st.groups],
                       "time_s": r.step_median_s[i] if r.step_median_s else None,
                       "time_min_s": r.step_min_s[i] if r.step_min_s else None,
                       "bytes_per_rank": list(r.bytes_per_step[i]) if r.bytes_per_step else None,
                       "sim_time_s": sim.steps[i].time_s if sim else None,
                       **_step_bw(st, r, i),
                       "sim_bytes_per_rank": [round(b) for b in sim.steps[i].bytes_sent] if sim else None}
                      for i, st in enumerate(pr.lowered.steps)],
        })
    failed = sum(not x["verified"] for x in rows)
    name = str(schedule) if isinstance(schedule, Path) or (isinstance(schedule, str) and is_file(schedule)) else None
    return ReductionRun(name, sched.system.short(), np_, nbytes, runs[0].buffer_bytes, dtype, repeats,
                       len(rows) - failed, failed, freeze(rows), tuple(runs), sched)


def _step_bw(st, run, i: int) -> dict[str, float | None]:
    """A step's nccl-tests bandwidths (see :func:`run_programs`)."""
    from meshplan.models.core.collectives import Collective

    if not run.bytes_per_step or not run.step_median_s:
        return {"algbw_GBps": None, "busbw_GBps": None}
    n = max(len(g) for g in st.groups)
    size = max(run.bytes_per_step[i]) * (n if Collective.parse(st.collective).gathers else 1)
    alg, bus = bandwidths(st.collective, n, size, run.step_median_s[i])
    return {"algbw_GBps": alg, "busbw_GBps": bus}
