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
  over groups that vary only level ``j``, swept as nccl-tests sweeps: message
  sizes ``nbytes``, ``nbytes/4``, ``nbytes/16`` per rank; every group size that
  divides the level; all groups at once and the first group alone.

Each level gets the interconnect kind (``switch``: a port per device; ``nic``:
one port per unit of the level) and, per collective, the latency and bandwidth
that make the simulator (P2 §5) reproduce that collective's sweep (least squares
on relative errors), written as the level's ``collectives``; the level's link
carries a pooled fit (the loaded point-to-point values when nothing fits).  The
``calibration`` section keeps every measurement next to what the simulator
predicts from the calibrated file.  On one machine every level is shared
memory; the levels are still measured separately (docs/calibrate.md); across
the emulated nodes of docs/testbed.md the outer levels cross shaped links.

Run inside MPI as ``python -m meshplan.exec.reduction.calibrate JOB.json`` (a
handler of the runtime's :func:`~meshplan.exec.runtime.rank.rank_main`; every
measurement is the runtime's timing loop: one warm-up, ``iters`` repetitions,
the median of the slowest rank); outside, call :func:`calibrate`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meshplan.exec.reduction.compute_rates import gemm_half_k, gemm_rate, sync_latency
from meshplan.exec.runtime.launch import run_job
from meshplan.models.core.collectives import COLLECTIVES, Collective
from meshplan.models.core.errors import ModelError
from meshplan.models.reduction.lowering import LoweredStep
from meshplan.models.reduction.state import initial_context
from meshplan.models.reduction.simulator import simulate_step
from meshplan.models.core.system import CollectiveLink, Interconnect, Level, System

__all__ = ["calibrate", "level_pairs", "level_groups", "block_groups", "group_sizes", "sweep_bytes", "fit_level",
           "handle"]


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


def block_groups(sizes: tuple[int, ...], j: int, g: int) -> tuple[tuple[int, ...], ...]:
    """The groups of :func:`level_groups` cut into blocks of ``g`` consecutive level-``j`` coordinates."""
    return tuple(grp[i:i + g] for grp in level_groups(sizes, j) for i in range(0, len(grp), g))


def sweep_bytes(nbytes: int, steps: int = 3) -> list[int]:
    """The message sizes of the sweep: ``nbytes``, ``nbytes/4``, ``nbytes/16``, … (``steps`` of them), each a
    multiple of 512 bytes (so every group size up to 64 splits it into whole float64 chunks)."""
    out = sorted({max(512, (nbytes >> (2 * k)) // 512 * 512) for k in range(steps)})
    return out


def calibrate(shape: System, *, nbytes: int = 1 << 20, iters: int = 5, timeout_s: float = 300.0,
              progress: Any = None, sweep_steps: int = 3) -> dict[str, Any]:
    """Measure on ``shape.num_devices`` ranks; returns ``{"system": System, "calibration": {…}}``;
    ``progress(done, total, what)`` follows the measurements.

    Per level ``j`` with more than one unit: point-to-point (idle and loaded) at ``nbytes``, and every
    collective of the vocabulary over groups of every size ``g`` that divides the level's size (blocks of ``g``
    consecutive level-``j`` coordinates), with every group at once and with only the first group, at the
    sizes of :func:`sweep_bytes` (as nccl-tests sweep sizes).  Each level gets the interconnect kind (``switch``:
    a port per device; ``nic``: one port per unit of the level) and, per collective, the bandwidth and latency
    that fit its measurements best (:func:`fit_level`)."""
    n = shape.num_devices
    if n < 2:
        raise ModelError("calibration needs at least 2 ranks")
    if iters < 1:
        raise ModelError(f"repeats must be at least 1, got {iters}", param="repeats")
    levels = [j for j, lv in enumerate(shape.levels) if lv.size > 1]
    sizes = sweep_bytes(nbytes, sweep_steps)
    job = {"sizes": list(shape.sizes), "bytes": int(nbytes), "sweep": sizes, "iters": int(iters), "levels": levels}
    raw = run_job(n, "meshplan.exec.reduction.calibrate", job, timeout_s=timeout_s, progress=progress)
    by_level = {m["level"]: m for m in raw["levels"]}
    new_levels, fits = [], {}
    for j, lv in enumerate(shape.levels):
        m = by_level.get(j)
        if m is None:  # a level of size 1 carries no messages; keep a placeholder link
            new_levels.append(Level(lv.name, lv.size, (Interconnect("switch", 1e9, 1e-6, name="calibrated"),)))
            continue
        fits[j] = fit = fit_level(shape, j, m["sweep"])
        if fit["ok"]:
            link = Interconnect(fit["kind"], fit["bandwidth"], fit["latency"], name="calibrated")
            measured = tuple(CollectiveLink(c, f["bandwidth"], f["latency"])
                             for c, f in fit["collectives"].items() if f["ok"])
        else:
            use = m["loaded"]
            link, measured = Interconnect("switch", max(use["bandwidth"], 1.0), max(use["latency"], 0.0),
                                          name="calibrated"), ()
        new_levels.append(Level(lv.name, lv.size, (link,), measured))
    system = System(tuple(new_levels), name=f"calibrated-{shape.short()}",
                    description=f"measured by meshplan calibrate on {n} MPI ranks, messages of "
                                f"{', '.join(map(str, sizes))} bytes", flop_rate=raw.get("flop_rate"),
                    gemm_half_k=raw.get("gemm_half_k"),
                    sync_latency=tuple((int(k), t) for k, t in (raw.get("sync_latency") or {}).items()))
    points = []
    for m in raw["levels"]:
        for x in m["sweep"]:
            groups = _groups(shape.sizes, m["level"], x["group_size"], x["active"])
            points.append({"level": shape.levels[m["level"]].name, **{k: x[k] for k in (
                "collective", "group_size", "active", "bytes")}, "measured_s": x["time_s"],
                "simulated_s": _simulated(system, x["collective"], groups, x["bytes"])})
    calib = {"ranks": n, "bytes": nbytes, "sweep_bytes": sizes, "iters": iters,
             "levels": [{"level": shape.levels[m["level"]].name, "idle": m["idle"], "loaded": m["loaded"],
                         "fit": fits[m["level"]]} for m in raw["levels"]],
             "collectives": points}
    return {"system": system, "calibration": calib}


def _groups(sizes, j: int, g: int, active: str) -> tuple[tuple[int, ...], ...]:
    groups = block_groups(tuple(sizes), j, g)
    return groups if active == "all" else groups[:1]


def _unit(shape: System, j: int, kind: str, bw: float, lat: float) -> System:
    """``shape`` with one link of ``kind`` on level ``j`` (a ``nic`` shared by the level's unit) and
    ``switch`` links elsewhere, all of bandwidth ``bw`` and latency ``lat``."""
    return System(tuple(Level(lv.name, lv.size, (Interconnect(kind if i == j else "switch", bw, lat),))
                        for i, lv in enumerate(shape.levels)))


def _lstsq(A: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Non-negative (byte-seconds, rounds-seconds) coefficients minimising the relative error of ``A @ x ≈ t``
    (bandwidth term required); None when no positive bandwidth fits."""
    Ar, y = A / t[:, None], np.ones(len(t))
    best = None
    for cols in ((0, 1), (0,)):
        x, *_ = np.linalg.lstsq(Ar[:, cols], y, rcond=None)
        if np.all(x >= 0) and x[0] > 0:
            full = np.zeros(2)
            full[list(cols)] = x
            err = float(np.sum((Ar @ full - y) ** 2))
            if best is None or err < best[1]:
                best = (full, err)
    return best


def fit_level(shape: System, j: int, sweep: list[dict]) -> dict[str, Any]:
    """The interconnect of level ``j`` that makes the simulator reproduce the measured sweep.

    For one collective over the measured groups the simulator's time is ``a / bandwidth + b × latency`` (``a``
    = bytes on the busiest port, ``b`` = rounds, both from the simulator on a unit link).  For each kind
    (``switch``; ``nic`` shared by the unit of the level when it holds several devices) fit, per collective,
    non-negative bandwidth and latency by least squares on relative errors over the sweep, and a pooled pair
    over all collectives; keep the kind whose per-collective fits err least.  ``ok`` is false when no
    positive bandwidth fits (the caller then uses the loaded point-to-point values)."""
    kinds = ["switch"] + (["nic"] if shape.unit_size(j) > 1 else [])
    best = None
    for kind in kinds:
        bytes_sys, round_sys = _unit(shape, j, kind, 1.0, 0.0), _unit(shape, j, kind, 1e30, 1.0)
        rows: dict[str, list] = {}
        for x in sweep:
            groups = _groups(shape.sizes, j, x["group_size"], x["active"])
            rows.setdefault(x["collective"], []).append(
                (_simulated(bytes_sys, x["collective"], groups, x["bytes"]),
                 _simulated(round_sys, x["collective"], groups, x["bytes"]), x["time_s"]))
        per, total = {}, 0.0
        for c, r in rows.items():
            arr = np.array(r)
            got = _lstsq(arr[:, :2], arr[:, 2])
            if got is None:
                per[c] = {"ok": False}
                total += len(r)  # a collective no positive bandwidth fits counts as 100 % error
                continue
            x_, err = got
            per[c] = {"ok": True, "bandwidth": float(1 / x_[0]), "latency": float(x_[1]),
                      "rms_relative_error": float(np.sqrt(err / len(r)))}
            total += err
        arr = np.array([v for r in rows.values() for v in r])
        pooled = _lstsq(arr[:, :2], arr[:, 2])
        if pooled is None:
            continue
        cand = {"ok": True, "kind": kind, "bandwidth": float(1 / pooled[0][0]), "latency": float(pooled[0][1]),
                "rms_relative_error": float(np.sqrt(pooled[1] / len(arr))),
                "per_collective_rms_relative_error": float(np.sqrt(total / len(arr))), "collectives": per}
        if best is None or total < best[0]:
            best = (total, cand)
    if best is None:
        return {"ok": False, "kind": None, "latency": None, "bandwidth": None, "rms_relative_error": None,
                "collectives": {}}
    return best[1]


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


def group_sizes(size: int) -> list[int]:
    """Group sizes measured at a level of ``size`` units: every divisor from 2 up."""
    return [g for g in range(2, size + 1) if size % g == 0]


def handle(ctx, job: dict) -> dict:
    """The measurements of every level of the job on this rank; rank 0's result is ``{"levels"}``."""
    sizes, nbytes, iters = tuple(job["sizes"]), int(job["bytes"]), int(job["iters"])
    sweep = [int(b) for b in job.get("sweep", [nbytes])]
    rank = ctx.rank
    small = np.zeros(1, dtype=np.float64)
    big = np.ones(max(sweep + [nbytes]) // 8, dtype=np.float64)
    big2 = np.empty_like(big)
    out = []
    total = sum(2 + 2 * len(group_sizes(sizes[j])) * len(COLLECTIVES) for j in job["levels"])
    done = 0

    def step(what: str) -> None:
        nonlocal done
        ctx.progress(done, total, what)
        done += 1

    for j in job["levels"]:
        pairs = level_pairs(sizes, j)
        a, b = pairs[0]
        step(f"level {j}: point to point, idle")
        idle = _fit(_pingpong(ctx, a, b, small, 10 * iters), _pingpong(ctx, a, b, big[: nbytes // 8], iters), nbytes)
        partner = next((q if p == rank else p for p, q in pairs if rank in (p, q)), None)
        step(f"level {j}: point to point, loaded")
        loaded = _fit(_exchange(ctx, partner, small, small.copy(), 10 * iters),
                      _exchange(ctx, partner, big[: nbytes // 8], big2[: nbytes // 8], iters), nbytes)
        points = []
        for g in group_sizes(sizes[j]):
            for active in ("all", "one"):
                groups = _groups(sizes, j, g, active)
                sub = ctx.comms.group(groups)  # uncounted: nothing perturbs the timing
                for c in COLLECTIVES:
                    step(f"level {j}: {c} over {g} ranks ({active})")
                    for nb in sweep:
                        x = big[: nb // 8]
                        t = (_collective(ctx, sub.comm, c, x, iters) if sub is not None
                             else time_repeats_idle(ctx, iters))
                        points.append({"collective": c.value, "group_size": g, "active": active, "bytes": nb,
                                       "time_s": t})
        out.append({"level": j, "idle": idle, "loaded": loaded, "sweep": points})
    ctx.progress(total, total)
    return {"levels": out, "flop_rate": gemm_rate(ctx), "gemm_half_k": gemm_half_k(ctx),
            "sync_latency": sync_latency(ctx)}


def time_repeats_idle(ctx, iters: int) -> float:
    """A rank outside every measured group takes part in the timing loop (its barriers) and does nothing."""
    from meshplan.exec.runtime.timing import time_repeats

    return time_repeats(ctx.world, lambda: None, repeats=iters).median_s


if __name__ == "__main__":
    from meshplan.exec.runtime.rank import rank_main

    rank_main(handle)
