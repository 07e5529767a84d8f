"""Microbenchmarks over mpi4py that calibrate a system file for the simulator (``meshplan calibrate``).

For every level ``j`` of a system shape (``node=2,gpu=4``; rank ``r`` = device
``r``, row-major over the levels) with more than one unit, measure between
ranks whose coordinates first differ at level ``j``:

* point-to-point ping-pong between devices 0 and its level-``j`` neighbour, idle
  (the other ranks wait) — latency from 8-byte messages, bandwidth from
  ``nbytes`` messages: ``bw = nbytes / (t_half − latency)``;
* the same *loaded*: every rank exchanges with its level-``j`` partner at once
  (``Sendrecv``), which is what the steps of a reduction program do;
* every collective (Allreduce, Reduce_scatter_block, Allgather, Reduce, Bcast)
  over the groups that vary only level ``j`` (all groups at once), ``nbytes``
  per rank.

The system file gets one ``switch`` interconnect per level (one port per
device, docs/simulator.md) whose latency and bandwidth are *fitted* so that the
simulator reproduces the measured collectives of that level (least squares on
relative errors; the loaded point-to-point values when no fit exists), and a
``calibration`` section with every measurement next to what the simulator
predicts from the calibrated file.  On one machine every level is shared
memory; the levels are still measured separately (docs/calibrate.md).

Run inside MPI as ``python -m meshplan.exec.reduction.calibrate JOB.json`` (a
handler of the runtime's :func:`~meshplan.exec.runtime.rank.rank_main`; every
measurement is the runtime's timing loop: one warm-up, ``iters`` repetitions,
the median of the slowest rank); outside, call :func:`calibrate`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from meshplan.exec.runtime.launch import run_job
from meshplan.models.core.collectives import COLLECTIVES, Collective
from meshplan.models.core.errors import ModelError
from meshplan.models.reduction.lowering import LoweredStep
from meshplan.models.reduction.state import initial_context
from meshplan.models.reduction.simulator import simulate_step
from meshplan.models.core.system import Interconnect, Level, System

__all__ = ["calibrate", "level_pairs", "level_groups", "handle"]


def level_pairs(sizes: tuple[int, ...], j: int) -> list[tuple[int, int]]:
    """Disjoint pairs of devices that differ only in level ``j`` (coordinate 2i with 2i+1)."""
    s = System(tuple(Level(f"l{i}", x) for i, x in enumerate(sizes)))
    pairs = []
    for d in range(s.num_devices):
        c = list(s.coords(d))
        if c[j] % 2 == 0 and c[j] + 1 < sizes[j]:
            c[j] += 1
            pairs.append((d, s.device(tuple(c))))
    return pairs


def level_groups(sizes: tuple[int, ...], j: int) -> tuple[tuple[int, ...], ...]:
    """Groups of devices that share every coordinate but level ``j``'s."""
    s = System(tuple(Level(f"l{i}", x) for i, x in enumerate(sizes)))
    groups: dict[tuple[int, ...], list[int]] = {}
    for d in range(s.num_devices):
        c = s.coords(d)
        groups.setdefault(c[:j] + c[j + 1:], []).append(d)
    return tuple(tuple(g) for g in groups.values())


def calibrate(shape: System, *, nbytes: int = 1 << 20, iters: int = 5, timeout_s: float = 300.0,
              progress: Any = None) -> dict[str, Any]:
    """Measure on ``shape.num_devices`` ranks; returns ``{"system": System, "calibration": {…}}``;
    ``progress(done, total, what)`` follows the measurements."""
    n = shape.num_devices
    if n < 2:
        raise ModelError("calibration needs at least 2 ranks")
    if iters < 1:
        raise ModelError(f"repeats must be at least 1, got {iters}", param="repeats")
    levels = [j for j, lv in enumerate(shape.levels) if lv.size > 1]
    job = {"sizes": list(shape.sizes), "bytes": int(nbytes), "iters": int(iters), "levels": levels}
    raw = run_job(n, "meshplan.exec.reduction.calibrate", job, timeout_s=timeout_s, progress=progress)
    by_level = {m["level"]: m for m in raw["levels"]}
    new_levels = []
    for j, lv in enumerate(shape.levels):
        m = by_level.get(j)
        if m is None:  # a level of size 1 carries no messages; keep a placeholder link
            link = Interconnect("switch", 1e9, 1e-6, name="calibrated")
        else:
            m["fit"] = _fit_level(shape, j, m, nbytes)
            use = m["fit"] if m["fit"]["ok"] else m["loaded"]
            link = Interconnect("switch", max(use["bandwidth"], 1.0), max(use["latency"], 0.0), name="calibrated")
        new_levels.append(Level(lv.name, lv.size, (link,)))
    system = System(tuple(new_levels), name=f"calibrated-{shape.short()}",
                    description=f"measured by meshplan calibrate on {n} MPI ranks, {nbytes} bytes per message")
    collectives = []
    for m in raw["levels"]:
        groups = tuple(tuple(g) for g in level_groups(shape.sizes, m["level"]))
        for c in m["collectives"]:
            sim = _simulated(system, c["collective"], groups, nbytes)
            collectives.append({"level": shape.levels[m["level"]].name, "collective": c["collective"],
                                "group_size": len(groups[0]), "bytes": nbytes, "measured_s": c["time_s"],
                                "simulated_s": sim})
    calib = {"ranks": n, "bytes": nbytes, "iters": iters,
             "levels": [{"level": shape.levels[m["level"]].name, "idle": m["idle"], "loaded": m["loaded"],
                         "fit": m["fit"]} for m in raw["levels"]],
             "collectives": collectives}
    return {"system": system, "calibration": calib}


def _fit_level(shape: System, j: int, m: dict, nbytes: int) -> dict[str, Any]:
    """Latency and bandwidth of level ``j`` that make the simulator reproduce the measured collectives.

    For one collective over groups varying level ``j`` the simulator's time is
    ``a / bandwidth + b × latency`` (``a`` = bytes on the busiest port, ``b`` =
    rounds); fit both, non-negative, by least squares on relative errors over the
    five collectives.  ``ok`` is false (and the loaded point-to-point values are
    used) when no positive bandwidth fits."""
    groups = tuple(tuple(g) for g in level_groups(shape.sizes, j))

    def unit(bw: float, lat: float) -> System:
        return System(tuple(Level(lv.name, lv.size, (Interconnect("switch", bw, lat),)) for lv in shape.levels))

    bytes_sys, round_sys = unit(1.0, 0.0), unit(1e30, 1.0)
    rows, t = [], []
    for c in m["collectives"]:
        rows.append((_simulated(bytes_sys, c["collective"], groups, nbytes),
                     _simulated(round_sys, c["collective"], groups, nbytes)))
        t.append(c["time_s"])
    A = np.array(rows) / np.array(t)[:, None]
    y = np.ones(len(t))
    best = None
    for cols in ((0, 1), (0,)):
        x, *_ = np.linalg.lstsq(A[:, cols], y, rcond=None)
        if np.all(x >= 0) and x[0] > 0:
            full = np.zeros(2)
            full[list(cols)] = x
            err = float(np.sum((A @ full - y) ** 2))
            if best is None or err < best[1]:
                best = (full, err)
    if best is None:
        return {"ok": False, "latency": None, "bandwidth": None, "rms_relative_error": None}
    x, err = best
    return {"ok": True, "latency": float(x[1]), "bandwidth": float(1 / x[0]),
            "rms_relative_error": float(np.sqrt(err / len(t)))}


def _simulated(system: System, collective: str, groups, nbytes: int) -> float:
    """The simulator's time for one collective as measured: ``nbytes`` per rank in ``k = n`` chunks
    (AllGather: each member holds its one chunk of ``nbytes / n``, as after a ReduceScatter)."""
    n = len(groups[0])
    ctx = initial_context(system.num_devices, n)
    if Collective.parse(collective).gathers:
        ctx = list(ctx)
        for g in groups:
            for i, d in enumerate(g):
                ctx[d] = tuple((1 << d) if r == i else 0 for r in range(n))
        ctx = tuple(ctx)
    return simulate_step(system, LoweredStep(collective, groups), ctx, nbytes / n).time_s


# -- inside MPI ---------------------------------------------------------------------------------

def _pingpong(ctx, a: int, b: int, buf: np.ndarray, iters: int) -> float:
    """Half the round-trip time between ranks a and b (others idle)."""
    from meshplan.exec.runtime.timing import time_repeats

    comm, rank = ctx.world, ctx.rank

    def roundtrip() -> None:
        if rank == a:
            comm.Send(buf, dest=b, tag=1)
            comm.Recv(buf, source=b, tag=2)
        elif rank == b:
            comm.Recv(buf, source=a, tag=1)
            comm.Send(buf, dest=a, tag=2)
    return time_repeats(comm, roundtrip, repeats=iters).median_s / 2


def _exchange(ctx, partner: int | None, send: np.ndarray, recv: np.ndarray, iters: int) -> float:
    """All pairs exchange at once."""
    from meshplan.exec.runtime.timing import time_repeats

    comm = ctx.world

    def exchange() -> None:
        if partner is not None:
            comm.Sendrecv(send, dest=partner, sendtag=3, recvbuf=recv, source=partner, recvtag=3)
    return time_repeats(comm, exchange, repeats=iters).median_s


def _collective(ctx, sub, c: Collective, x: np.ndarray, iters: int) -> float:
    """``c`` over ``sub`` with ``x.nbytes`` per rank (AllGather: each member hands ``1/n`` of it,
    ReduceScatter: each keeps ``1/n``)."""
    from meshplan.exec.runtime.comms import collective_call
    from meshplan.exec.runtime.timing import time_repeats

    n = sub.Get_size()
    out = np.empty_like(x)
    if c.gathers:
        chunk = x[: x.size // n].copy()
        call = collective_call(sub, c, chunk, out[: chunk.size * n])
    elif c.splits_output:
        part = np.empty(x.size // n, dtype=x.dtype)
        call = collective_call(sub, c, x[: part.size * n], part)
    else:
        call = collective_call(sub, c, x, None if c.rooted and c.reduces and sub.Get_rank() != 0 else out)
    return time_repeats(ctx.world, call, repeats=iters).median_s


def _fit(t_small: float, t_large: float, nbytes: int) -> dict[str, float]:
    return {"latency": t_small, "bandwidth": nbytes / max(t_large - t_small, 1e-9),
            "t_small_s": t_small, "t_large_s": t_large}


def handle(ctx, job: dict) -> dict:
    """The measurements of every level of the job on this rank; rank 0's result is ``{"levels"}``."""
    sizes, nbytes, iters = tuple(job["sizes"]), int(job["bytes"]), int(job["iters"])
    rank = ctx.rank
    small = np.zeros(1, dtype=np.float64)
    big = np.ones(nbytes // 8, dtype=np.float64)
    big2 = np.empty_like(big)
    out = []
    total, done = len(job["levels"]) * (2 + len(COLLECTIVES)), 0

    def step(what: str) -> None:
        nonlocal done
        ctx.progress(done, total, what)
        done += 1

    for j in job["levels"]:
        pairs = level_pairs(sizes, j)
        a, b = pairs[0]
        step(f"level {j}: point to point, idle")
        idle = _fit(_pingpong(ctx, a, b, small, 10 * iters), _pingpong(ctx, a, b, big, iters), nbytes)
        partner = next((q if p == rank else p for p, q in pairs if rank in (p, q)), None)
        step(f"level {j}: point to point, loaded")
        loaded = _fit(_exchange(ctx, partner, small, small.copy(), 10 * iters),
                      _exchange(ctx, partner, big, big2, iters), nbytes)
        sub = ctx.comms.group(level_groups(sizes, j)).comm  # uncounted: nothing perturbs the timing
        colls = []
        for c in COLLECTIVES:
            step(f"level {j}: {c}")
            colls.append({"collective": c.value, "time_s": _collective(ctx, sub, c, big, iters)})
        out.append({"level": j, "idle": idle, "loaded": loaded, "collectives": colls})
    ctx.progress(total, total)
    return {"levels": out}


if __name__ == "__main__":
    from meshplan.exec.runtime.rank import rank_main

    rank_main(handle)
