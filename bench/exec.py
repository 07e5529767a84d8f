"""Benchmark: measured vs simulated reduction programs on MPI, and lowering overhead.

    python bench/exec.py [--quick] [--np 16] [--bytes 1MiB] [--repeat 5]

1. calibrate the machine for the system shape ``node=4,gpu=4`` (16 ranks;
   ``--quick``: ``node=2,gpu=4``, 8 ranks) with ``meshplan calibrate``'s code;
2. synthesize every program (size <= 4) of the placement with the most programs
   for axes ``4,4`` reducing axis 0 (``--quick``: axes ``2,4`` reducing axis 1,
   size <= 3) and simulate each with the
   calibrated system at the run's buffer size;
3. run all of them in one ``mpiexec`` launch (verified, timed: median over
   ``--repeat`` runs of the slowest rank), together with alternating pairs of
   meshplan's lowered single-step AllReduce and a hand-written mpi4py
   ``Allreduce`` on the same buffers;
4. report Spearman's rank correlation of measured vs simulated times, how
   often the simulator's top programs are the measured top ones, and the
   AllReduce ratio meshplan / hand-written (target <= 1.05).

Prints a table and writes bench/results/exec.json (and the calibrated system
file bench/results/exec-calibrated-system.json that the simulation reads).  Timings on a shared or
oversubscribed machine are noisy; compare ratios measured side by side.

``--validate`` instead validates the calibrated simulator the way a noisy shared
machine allows (docs/calibrate.md, "Validation on this machine"): 4 ranks
(``node=2,gpu=2``), 16 MiB per rank, MPICH's progress throttle
(``MPIR_CVAR_CH4_PROGRESS_THROTTLE=1``) and hydra's core binding
(``HYDRA_BINDING=core``, = ``mpiexec -bind-to core``); every program of the
placement (axes ``4``, reduce ``0``) is measured in two independent ``mpiexec``
launches (passes), and the report puts the simulator's rank correlation with the
measured times next to the test–retest correlation of the two passes (the
ceiling any model can reach on this machine) and two flat baselines: time ∝
bytes handed to MPI per rank (no topology, no latency) and the simulator on a
one-link system (every level the same calibrated link).  ``--control`` also
measures with MPICH's defaults (no throttle, no binding), its launches
interleaved with the tuned ones.  Writes bench/results/exec-validation.json.

``--validate --testbed`` validates on the emulated multi-node machine that is up (``meshplan testbed up``,
docs/testbed.md; 2 ranks per node): it calibrates across the nodes (sweep up to 16 MiB), synthesizes every
program (size <= ``--max-size``, default 3) of every placement of axes 2,4 reducing axis 1 and axes 4,2
reducing axis 0, runs them all in ``--passes`` (default 3) launches with rotated order, and reports Spearman's
rho of the measured median against the calibrated simulator, the same simulator with one link per level (no
per-collective links) and the flat bytes model, test-retest between launches, and top-1 / top-5 agreement
(over programs, and over placements per problem).  Writes bench/results/exec-validation-testbed.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from meshplan.exec.reduction.calibrate import calibrate
from meshplan.exec.reduction.driver import ProgramSpec, run_programs
from meshplan.models.reduction.simulator import simulate
from meshplan.models.core.system import Interconnect, Level, System
from meshplan.models.core.units import format_seconds, parse_bytes
from meshplan.solvers.placement.study import allreduce_program, solve_placement

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exec_validate import spearman, validate, validate_testbed  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "exec.json"
SYSTEM_FILE = RESULTS.with_name("exec-calibrated-system.json")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 ranks, axes 2,4, fewer repeats")
    ap.add_argument("--bytes", default="1MiB")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--max-size", type=int, default=None, help="largest program size (default 4; --quick 3)")
    ap.add_argument("--pairs", type=int, default=None, help="AllReduce pairs (meshplan, hand-written)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="run the program list this many times, spread over the launch (default 2; --quick 1)")
    ap.add_argument("--validate", action="store_true",
                    help="validate the calibrated simulator: 4 ranks, 16 MiB, throttled progress, core binding, "
                         "two measurement passes (test-retest) and flat baselines")
    ap.add_argument("--passes", type=int, default=2, help="--validate: independent measurement passes (default 2)")
    ap.add_argument("--control", action="store_true",
                    help="--validate: also measure with MPICH's defaults (no throttle, no binding), interleaved")
    ap.add_argument("--testbed", action="store_true",
                    help="--validate across the testbed that is up (`meshplan testbed up`): calibrate there, "
                         "then every program of every placement of axes 2,4 (reduce 1) and 4,2 (reduce 0)")
    args = ap.parse_args(argv)
    if args.validate and args.testbed:
        return validate_testbed(args)
    if args.validate:
        return validate(args)
    shape = System.parse("node=2,gpu=4" if args.quick else "node=4,gpu=4")
    axes = (2, 4) if args.quick else (4, 4)
    reduce = (1,) if args.quick else (0,)
    repeat = args.repeat or (3 if args.quick else 5)
    pairs = args.pairs or (10 if args.quick else 30)
    max_size = args.max_size or (3 if args.quick else 4)
    nbytes = parse_bytes(args.bytes)
    n = shape.num_devices
    t0 = time.perf_counter()

    cal = calibrate(shape, nbytes=nbytes, iters=3 if args.quick else 5)
    # the calibrated system file, as `meshplan calibrate -o FILE` writes it; the simulation reads it back
    SYSTEM_FILE.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_FILE.write_text(json.dumps({**cal["system"].to_dict(), "calibration": cal["calibration"]}, indent=1) + "\n")
    system = System.load(SYSTEM_FILE)
    t_cal = time.perf_counter() - t0
    study = solve_placement(system, axes, reduce, max_size=max_size, bytes_per_device=nbytes)
    pl = max(study.placements, key=lambda p: len(p.programs))
    rounds = args.rounds or (1 if args.quick else 2)
    specs = [ProgramSpec(f"p{i}/{r}", pr.lowered, pl.reduction_groups)
             for r in range(rounds) for i, pr in enumerate(pl.programs)]
    ar = allreduce_program(pl.reduction_groups, n)
    for i in range(pairs):
        specs.append(ProgramSpec(f"ar-meshplan-{i}", ar, pl.reduction_groups))
        specs.append(ProgramSpec(f"ar-hand-{i}", ar, pl.reduction_groups, impl="handwritten"))
    t1 = time.perf_counter()
    runs = run_programs(specs, np=n, nbytes=nbytes, repeats=repeat, dtype="float32", timeout_s=3000)
    t_run = time.perf_counter() - t1
    P = len(pl.programs)
    progs = runs[:P]  # first round: bytes, steps, verification shown per program
    times = [[t for r in range(rounds) for t in runs[r * P + i].times_s] for i in range(P)]
    if not all(r.verified for r in runs):
        bad = [(r.name, r.reason) for r in runs if not r.verified]
        print(f"UNVERIFIED: {bad[:3]}", file=sys.stderr)
    measured = [statistics.median(ts) for ts in times]
    simulated = [pr.time.time_s for pr in pl.programs]
    # the same measurements against the simulator with the other calibrations (no new MPI runs)
    alt = {}
    for label, key in (("loaded point-to-point", "loaded"), ("idle point-to-point", "idle")):
        meas = {m["level"]: m[key] for m in cal["calibration"]["levels"]}
        other = System(tuple(Level(lv.name, lv.size, (Interconnect("switch", max(meas[lv.name]["bandwidth"], 1.0),
                                                                   max(meas[lv.name]["latency"], 0.0))
                                                      if lv.name in meas else Interconnect("switch", 1e9, 1e-6),))
                             for lv in shape.levels))
        alt[label] = spearman(measured, [simulate(other, pr.lowered, bytes_per_device=nbytes,
                                                  chunks=len(pl.reduction_groups[0])).time_s
                                         for pr in pl.programs])
    rho = spearman(measured, simulated)
    by_meas = sorted(range(len(progs)), key=lambda i: measured[i])
    by_sim = sorted(range(len(progs)), key=lambda i: simulated[i])
    top = {k: by_meas[0] in by_sim[:k] for k in (1, 5, 10)}
    mesh_t = [t for r in runs if r.name.startswith("ar-meshplan") for t in r.times_s]
    hand_t = [t for r in runs if r.name.startswith("ar-hand") for t in r.times_s]
    ratio = statistics.median(mesh_t) / statistics.median(hand_t)
    ratio_min = min(mesh_t) / min(hand_t)
    by_name = {r.name: r for r in runs}
    paired = statistics.median(by_name[f"ar-meshplan-{i}"].time_median_s / by_name[f"ar-hand-{i}"].time_median_s
                               for i in range(pairs))

    print(f"system {shape.short()} ({n} ranks, calibrated in {t_cal:.1f} s), axes {list(axes)}, reduce {list(reduce)}, "
          f"placement {pl.matrix}: {len(progs)} programs, {nbytes} B float32 per rank, {repeat} timed runs each "
          f"x {rounds} rounds (MPI run {t_run:.1f} s)")
    print(f"{'#':>4} {'program':58} {'measured':>11} {'simulated':>11} {'→MPI B/rank':>12}  verified")
    for i in by_meas[:10] + ([] if len(by_meas) <= 12 else by_meas[-2:]):
        r, pr = progs[i], pl.programs[i]
        text = pr.program.compact()
        print(f"{i:>4} {text[:58]:58} {format_seconds(measured[i]):>11} {format_seconds(simulated[i]):>11} "
              f"{max(r.bytes_per_rank):>12}  {'yes' if r.verified else 'NO'}")
    print(f"Spearman rank correlation measured vs simulated: {rho:.3f} over {len(progs)} programs "
          f"(fitted calibration; " + ", ".join(f"{k}: {v:.3f}" for k, v in alt.items()) + "); measured best "
          f"program in simulated top-1/5/10: {top[1]}/{top[5]}/{top[10]}")
    print(f"AllReduce meshplan lowered / hand-written mpi4py: median {ratio:.3f}, median of {pairs} side-by-side "
          f"pairs {paired:.3f}, min-of-runs {ratio_min:.3f} ({len(mesh_t)} runs each; target <= 1.05)")
    print(f"verified {sum(r.verified for r in runs)} of {len(runs)} runs")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "system": shape.short(), "ranks": n, "axes": list(axes), "reduce": list(reduce), "bytes": nbytes,
        "repeat": repeat, "placement": pl.matrix.tolist(), "calibrated_system": system.to_dict(),
        "calibration": cal["calibration"], "spearman": rho, "spearman_other_calibrations": alt, "rounds": rounds, "measured_best_in_simulated_top": top,
        "allreduce_ratio_median": ratio, "allreduce_ratio_min": ratio_min, "allreduce_ratio_paired": paired,
        "allreduce_meshplan_s": mesh_t, "allreduce_handwritten_s": hand_t,
        "verified": sum(r.verified for r in runs), "runs": len(runs),
        "programs": [{"id": i, "text": str(pr.program), "measured_median_s": measured[i],
                      "measured_min_s": min(times[i]), "simulated_s": simulated[i],
                      "step_median_s": list(progs[i].step_median_s),
                      "bytes_per_rank": list(progs[i].bytes_per_rank), "verified": progs[i].verified}
                     for i, pr in enumerate(pl.programs)],
    }, indent=1) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
