"""``python bench/exec.py --validate [--testbed]``: validate the calibrated reduction simulator against
measured times (see bench/exec.py's docstring and docs/calibrate.md, "Validation on this machine")."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
import warnings
from unittest import mock
from pathlib import Path

from scipy.stats import spearmanr

from meshplan.exec.reduction.calibrate import calibrate
from meshplan.exec.reduction.driver import ProgramSpec, run_programs
from meshplan.models.reduction.simulator import simulate
from meshplan.models.core.system import Interconnect, Level, System
from meshplan.models.core.units import parse_bytes
from meshplan.solvers.placement.study import solve_placement

RESULTS = Path(__file__).resolve().parent / "results" / "exec.json"


def spearman(a, b) -> float:
    """Spearman's rank correlation (ties get their average rank); nan when either side is constant."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(spearmanr(a, b).statistic)


#: MPICH/hydra settings of the validation runs (docs/calibrate.md): throttled progress polling (a waiting rank
#: usleeps after this many fruitless polls instead of spinning on a core another rank needs) and core binding
VALIDATION_ENV = {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
                  "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "256",
                  "HYDRA_BINDING": "core"}
#: the configurations ``--validate`` compares: the tuned one, and (``--control``) MPICH's defaults
CONFIGS = {"tuned": VALIDATION_ENV, "default": {}}
VALIDATION_RESULTS = RESULTS.with_name("exec-validation.json")


@contextlib.contextmanager
def _environment(extra: dict):
    """The launcher passes this process's environment on to mpiexec and the ranks; set ``extra`` for one
    launch (and make sure the other configuration's variables are absent); the environment is restored after."""
    with mock.patch.dict(os.environ):
        for k in {k for env in CONFIGS.values() for k in env}:
            os.environ.pop(k, None)
        os.environ.update(extra)
        yield


def _one_link(shape: System, cal: dict) -> System:
    """The flat-topology baseline: every level gets the same link (the mean of the fitted ones)."""
    fits = [lv["fit"] for lv in cal["levels"] if lv["fit"]["ok"]] or [lv["loaded"] for lv in cal["levels"]]
    bw = statistics.fmean(max(f["bandwidth"], 1.0) for f in fits)
    lat = statistics.fmean(max(f["latency"], 0.0) for f in fits)
    return System(tuple(Level(lv.name, lv.size, (Interconnect("switch", bw, lat),)) for lv in shape.levels))


def _per_collective(system: System, shape: System, cal: dict, pr, nbytes: int, chunks: int) -> float:
    """A diagnostic, not a model: the simulator's step times scaled by the calibration's measured/simulated
    ratio of that collective over groups varying that level (geometric mean over the levels a group spans),
    i.e. how well the simulator's structure ranks programs once each collective's own speed on this MPI is
    known.  The simulator itself has one latency and bandwidth per level."""
    ratio = {(c["level"], c["collective"]): c["measured_s"] / c["simulated_s"] for c in cal["collectives"]
             if c["simulated_s"] > 0}
    sim = simulate(system, pr.lowered, bytes_per_device=nbytes, chunks=chunks)
    total = 0.0
    for st, t in zip(pr.lowered.steps, sim.steps):
        coords = [shape.coords(d) for d in st.groups[0]]
        varying = [shape.levels[j].name for j in range(len(shape.levels)) if len({c[j] for c in coords}) > 1]
        rs = [ratio[(lv, str(st.collective))] for lv in varying if (lv, str(st.collective)) in ratio] or [1.0]
        total += t.time_s * statistics.geometric_mean(rs)
    return total


def _report(name: str, shape: System, axes, reduce, nbytes: int, cal: dict, per_pass: list, runs: list) -> dict:
    """Correlations of one configuration: simulator, test-retest, flat baselines."""
    system = cal["system"]
    study = solve_placement(system, axes, reduce, max_size=_report.max_size, bytes_per_device=nbytes)
    pl = max(study.placements, key=lambda p: len(p.programs))
    measured = [statistics.median(col) for col in zip(*per_pass)]
    simulated = [pr.time.time_s for pr in pl.programs]
    flat_bytes = [max(run.bytes_per_rank) for run in runs]
    flat_link = _one_link(shape, cal["calibration"])
    one_link = [simulate(flat_link, pr.lowered, bytes_per_device=nbytes, chunks=len(pl.reduction_groups[0])).time_s
                for pr in pl.programs]
    chunks = len(pl.reduction_groups[0])
    pooled = [simulate(_strip_collectives(system), pr.lowered, bytes_per_device=nbytes, chunks=chunks).time_s
              for pr in pl.programs]
    scaled = [_per_collective(system, shape, cal["calibration"], pr, nbytes, chunks) for pr in pl.programs]
    passes = len(per_pass)
    retest = [spearman(per_pass[a], per_pass[b]) for a in range(passes) for b in range(a + 1, passes)]
    # a model is compared with one pass at a time too, so that it meets the same noise as test-retest
    sim_single = [spearman(pp, simulated) for pp in per_pass]
    flat_single = [spearman(pp, flat_bytes) for pp in per_pass]
    rho = {"test-retest (one pass vs another)": statistics.fmean(retest),
           "simulator vs one pass": statistics.fmean(sim_single),
           "flat (bytes per rank only) vs one pass": statistics.fmean(flat_single),
           "simulator vs median of passes": spearman(measured, simulated),
           "flat (bytes per rank only) vs median": spearman(measured, flat_bytes),
           "flat (one link for all levels) vs median": spearman(measured, one_link),
           "simulator without per-collective links vs median": spearman(measured, pooled),
           "diagnostic: simulator x per-collective ratios vs median": spearman(measured, scaled)}
    spread = [max(c) / min(c) for c in zip(*per_pass)]
    return {"env": CONFIGS[name], "spearman": rho, "test_retest_pairs": retest, "simulator_per_pass": sim_single,
            "pass_ratio_median": statistics.median(spread), "pass_ratio_max": max(spread),
            "calibrated_system": system.to_dict(), "calibration": cal["calibration"],
            "distinct_simulated": len(set(round(x, 12) for x in simulated)),
            "verified": sum(r.verified for r in runs),
            "programs": [{"id": i, "text": str(pr.program), "measured_median_s": measured[i],
                          "pass_median_s": [pp[i] for pp in per_pass], "simulated_s": simulated[i],
                          "one_link_s": one_link[i], "per_collective_scaled_s": scaled[i], "bytes_per_rank": list(runs[i].bytes_per_rank)}
                         for i, pr in enumerate(pl.programs)]}


def validate(args) -> int:
    """``--validate``: see the module docstring.  The configurations' launches alternate (calibration,
    then pass 1 of each, pass 2 of each, …), so a change in the machine's load hits both alike."""
    shape, axes, reduce = System.parse("node=2,gpu=2"), (4,), (0,)
    nbytes = parse_bytes(args.bytes if args.bytes != "1MiB" else "16MiB")
    repeat = args.repeat or (2 if args.quick else 3)
    _report.max_size = args.max_size or (3 if args.quick else 4)
    passes = max(args.passes, 2)
    names = ["tuned", "default"] if args.control else ["tuned"]
    n = shape.num_devices
    t0 = time.perf_counter()
    cals = {}
    for name in names:
        with _environment(CONFIGS[name]):
            cals[name] = calibrate(shape, nbytes=nbytes, iters=3 if args.quick else 5, timeout_s=3000)
    # the programs: synthesized on the shape (their lowered steps do not depend on the calibration)
    study = solve_placement(cals["tuned"]["system"], axes, reduce, max_size=_report.max_size, bytes_per_device=nbytes)
    pl = max(study.placements, key=lambda p: len(p.programs))
    P = len(pl.programs)
    specs = [ProgramSpec(f"p{i}", pr.lowered, pl.reduction_groups) for i, pr in enumerate(pl.programs)]
    per_pass = {name: [] for name in names}
    runs = {}
    for k in range(passes):
        for name in names:
            # each pass is its own mpiexec launch; the program order is rotated so no program always runs first
            order = list(range(P))[k * P // passes:] + list(range(P))[:k * P // passes]
            with _environment(CONFIGS[name]):
                out = run_programs([specs[i] for i in order], np=n, nbytes=nbytes, repeats=repeat, dtype="float32",
                                   timeout_s=6000)
            by_name = {r.name: r for r in out}
            runs.setdefault(name, [by_name[s.name] for s in specs])
            if not all(r.verified for r in out):
                print(f"UNVERIFIED ({name}, pass {k}): {[(r.name, r.reason) for r in out if not r.verified][:3]}",
                      file=sys.stderr)
            per_pass[name].append([by_name[s.name].time_median_s for s in specs])
    t_all = time.perf_counter() - t0
    reports = {name: _report(name, shape, axes, reduce, nbytes, cals[name], per_pass[name], runs[name])
               for name in names}
    print(f"validation on {shape.short()} ({n} ranks), axes {list(axes)} reduce {list(reduce)}, placement "
          f"{pl.matrix.tolist()}: {P} programs, {nbytes} B float32 per rank, median of {repeat} timed runs, "
          f"{passes} independent launches per configuration; {t_all:.0f} s in all; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name in names:
        env = " ".join(f"{k}={v}" for k, v in CONFIGS[name].items()) or "MPICH defaults, no binding"
        print(f"  {name}: {env}")
    print(f"{'Spearman rank correlation with the measured times':56}" + "".join(f" {name:>8}" for name in names))
    for label in reports[names[0]]["spearman"]:
        print(f"{label:56}" + "".join(f" {reports[name]['spearman'][label]:8.3f}" for name in names))
    for name in names:
        r = reports[name]
        print(f"{name}: a program's median differs between passes by x{r['pass_ratio_median']:.2f} (median), "
              f"x{r['pass_ratio_max']:.2f} (max); {r['distinct_simulated']} distinct simulated times of {P}; "
              f"verified {r['verified']} of {P}; simulator vs each pass "
              + ", ".join(f"{x:.3f}" for x in r["simulator_per_pass"]))
    VALIDATION_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    VALIDATION_RESULTS.write_text(json.dumps({
        "system": shape.short(), "ranks": n, "axes": list(axes), "reduce": list(reduce), "bytes": nbytes,
        "repeat": repeat, "passes": passes, "placement": pl.matrix.tolist(), "seconds": t_all,
        "load_average_after": os.getloadavg(), "configs": reports}, indent=1) + "\n")
    print(f"wrote {VALIDATION_RESULTS}")
    return 0


TESTBED_RESULTS = RESULTS.with_name("exec-validation-testbed.json")


def _strip_collectives(system: System) -> System:
    """The calibrated system without its per-collective links: one fitted link per level for every collective."""
    return System(tuple(Level(lv.name, lv.size, lv.links) for lv in system.levels), name=system.name)


def _placement_best(items, times) -> dict:
    """Per (problem, placement): the best time among its programs."""
    best: dict = {}
    for it, t in zip(items, times):
        key = (it["problem"], it["placement"])
        best[key] = min(best.get(key, float("inf")), t)
    return best


def _agreement(items, measured, model) -> dict:
    """Top-1 and top-5 agreement of ``model`` with the measured times: over all programs (the model's best
    program's measured time / the measured best; whether the measured best is among the model's five best)
    and per problem over placements (the model's best placement's measured best / the measured best)."""
    order = sorted(range(len(items)), key=lambda i: model[i])
    best = min(measured)
    out = {"top1_ratio": measured[order[0]] / best, "top5_has_best": measured.index(best) in order[:5],
           "top5_best_ratio": min(measured[i] for i in order[:5]) / best, "placements": {}}
    mp, sp = _placement_best(items, measured), _placement_best(items, model)
    for prob in sorted({k[0] for k in mp}):
        keys = [k for k in mp if k[0] == prob]
        chosen = min(keys, key=lambda k: sp[k])
        out["placements"][prob] = {"model_best": chosen[1], "measured_best": min(keys, key=lambda k: mp[k])[1],
                                   "ratio": mp[chosen] / min(mp[k] for k in keys)}
    return out


def validate_testbed(args) -> int:
    """``--validate --testbed``: calibrate across the testbed (largest message 16 MiB), synthesize every program
    (up to ``--max-size``, default 3) of every placement of axes 2,4 reducing 1 and 4,2 reducing 0 on the
    calibrated system, run them all in ``--passes`` (default 3) launches, each in an order rotated by 1/passes,
    and compare the measured median (over launches) with the calibrated simulator, the same simulator without
    its per-collective links, and the flat bytes model; test-retest is launch against launch."""
    from meshplan.exec.testbed import Topology, current, on_testbed

    topo = Topology.from_dict(current()["topology"])
    ppn = 2
    levels = ([f"rack={topo.racks}", f"node={topo.nodes // topo.racks}"] if topo.racks > 1 else [f"node={topo.nodes}"])
    shape = System.parse(",".join(levels + [f"gpu={ppn}"]))
    n = shape.num_devices
    nbytes = parse_bytes(args.bytes if args.bytes != "1MiB" else "16MiB")
    repeat, max_size = args.repeat or 3, args.max_size or 3
    passes = 3 if args.passes == 2 else args.passes  # --passes defaults to 2 for the one-machine validation
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    with on_testbed(n, shape):
        cal = calibrate(shape, nbytes=16 << 20, iters=3, timeout_s=3000)
    system = cal["system"]
    pooled = _strip_collectives(system)
    items, specs = [], []
    for prob, (axes, reduce) in enumerate((((2, 4), (1,)), ((4, 2), (0,)))):
        study = solve_placement(system, axes, reduce, max_size=max_size, bytes_per_device=nbytes)
        for pl in study.placements:
            k = len(pl.reduction_groups[0])
            for pr in pl.programs:
                items.append({"problem": f"axes {','.join(map(str, axes))} reduce {reduce[0]}", "placement":
                              str(pl.matrix.tolist()), "text": str(pr.program), "simulated_s": pr.time.time_s,
                              "pooled_s": simulate(pooled, pr.lowered, bytes_per_device=nbytes, chunks=k).time_s})
                specs.append(ProgramSpec(f"i{len(specs)}", pr.lowered, pl.reduction_groups))
    P = len(specs)
    per_pass, runs = [], {}
    for k in range(passes):
        order = list(range(P))[k * P // passes:] + list(range(P))[:k * P // passes]
        with on_testbed(n, shape):
            out = run_programs([specs[i] for i in order], np=n, nbytes=nbytes, repeats=repeat, dtype="float32",
                               timeout_s=6000)
        by = {r.name: r for r in out}
        runs = runs or by
        bad = [r.name for r in out if not r.verified]
        if bad:
            print(f"UNVERIFIED in pass {k}: {bad[:5]}", file=sys.stderr)
        per_pass.append([by[s.name].time_median_s for s in specs])
    measured = [statistics.median(c) for c in zip(*per_pass)]
    models = {"calibrated simulator (per-collective links)": [it["simulated_s"] for it in items],
              "calibrated simulator, one link per level": [it["pooled_s"] for it in items],
              "flat bytes model (bytes handed to MPI per rank)": [max(runs[s.name].bytes_per_rank) for s in specs]}
    retest = [spearman(per_pass[a], per_pass[b]) for a in range(passes) for b in range(a + 1, passes)]
    rho = {name: spearman(measured, m) for name, m in models.items()}
    rho_single = {name: statistics.fmean(spearman(pp, m) for pp in per_pass) for name, m in models.items()}
    agree = {name: _agreement(items, measured, m) for name, m in models.items()}
    secs, load1 = time.perf_counter() - t0, os.getloadavg()
    t = topo
    print(f"testbed: {t.nodes} nodes x {ppn} ranks ({shape.short()}), links {t.to_dict()['link']}"
          + (f", {t.racks} racks, uplink {t.to_dict()['uplink']}" if t.racks > 1 else "")
          + f"; {P} programs (max size {max_size}), {nbytes} B float32 per rank, median of {repeat} runs per "
          f"launch, {passes} launches (order rotated); {secs:.0f} s; load average before "
          f"{', '.join(f'{x:.1f}' for x in load0)}, after {', '.join(f'{x:.1f}' for x in load1)}")
    print(f"{'Spearman rho with the measured median':52} {'median':>7} {'1 launch':>9} {'top1':>6} {'top5':>5} "
          f"{'best placement ratio per problem':>34}")
    for name in models:
        a = agree[name]
        pls = ", ".join(f"{v['ratio']:.3f}" for v in a["placements"].values())
        print(f"{name:52} {rho[name]:7.3f} {rho_single[name]:9.3f} {a['top1_ratio']:6.3f} "
              f"{'yes' if a['top5_has_best'] else 'no':>5} {pls:>34}")
    print(f"{'test-retest (launch vs launch)':52} {statistics.fmean(retest):17.3f}  pairs "
          + ", ".join(f"{x:.3f}" for x in retest))
    TESTBED_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    TESTBED_RESULTS.write_text(json.dumps({
        "testbed": t.to_dict(), "system": shape.short(), "bytes": nbytes, "repeat": repeat, "passes": passes,
        "max_size": max_size, "seconds": secs, "load_average_before": load0, "load_average_after": load1,
        "spearman_median": rho, "spearman_one_launch": rho_single, "test_retest": retest, "agreement": agree,
        "calibrated_system": system.to_dict(), "calibration": cal["calibration"],
        "programs": [{**it, "measured_s": measured[i], "launch_s": [pp[i] for pp in per_pass],
                      "bytes_per_rank": list(runs[specs[i].name].bytes_per_rank),
                      "verified": runs[specs[i].name].verified} for i, it in enumerate(items)]}, indent=1) + "\n")
    print(f"wrote {TESTBED_RESULTS}")
    return 0
