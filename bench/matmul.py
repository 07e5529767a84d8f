"""Distributed matrix multiplication: meshplan (COSMA grid) vs 2-D SUMMA vs ScaLAPACK pdgemm, measured on MPI,
and the thesis's scaling study as models (thesis ch. 3).

    python bench/matmul.py [--quick] [--no-plot]
    python bench/matmul.py --speed [--speed-ranks 2,4,8] [--speed-shapes 2048^3,4096x4096x256,64x64x65536]

Part 1 (MPI, 4 and 8 ranks): square, RPA tall-and-skinny (m = n = 136w, k = 228w², section 3.8), flat,
largeK and largeM shapes; per schedule the max words a rank receives measured by the PMPI counter (the same
instrument for all three), the ratio to the Theorem 3.2 bound, C's relative error and the time (min over
repeats).  Part 2 (no MPI): the scaling study up to 18,432 ranks — domain I/O per rank of COSMA's planned grid
vs Table 3.3's 2-D and 2.5-D decompositions and the bound.  Writes bench/results/matmul.json and, unless
--no-plot, docs/images/matmul_measured.png and docs/images/matmul_scaling.png.  ``--speed``: time beside
pdgemm at its best (its kernel and its faster block), alternating launches, ratios with their median
(:func:`speed`); writes bench/results/matmul_speed.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from meshplan.exec.matmul.driver import run_cases, run_scalapack, scalapack_block  # noqa: E402
from meshplan.exec.runtime import scalapack  # noqa: E402
from meshplan.models.matmul.costs import domain_words, lower_bound, summa_max_words, table33  # noqa: E402
from meshplan.models.matmul.problem import MatmulProblem  # noqa: E402
from meshplan.solvers.matmul.plan import schedule_matmul  # noqa: E402


def plan_matmul(m, n, k, p, *, memory=None, method="auto"):
    """The solver's COSMA schedule (grid, rounds, words per rank, SUMMA grid) of m×n×k on p ranks."""
    return schedule_matmul(MatmulProblem(m, n, k, p, memory), method=method)

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"


def mpi_shapes(quick: bool) -> dict[str, tuple[int, int, int]]:
    w = 2 if quick else 3
    s = 1 if quick else 2
    return {"square": (384 * s, 384 * s, 384 * s), "rpa": (136 * w, 136 * w, 228 * w * w),
            "flat": (768 * s, 768 * s, 32), "largeK": (64, 64, 8192 * s), "largeM": (8192 * s, 64, 64)}


def measured(p: int, shapes: dict, repeats: int) -> list[dict]:
    plans = {name: plan_matmul(m, n, k, p) for name, (m, n, k) in shapes.items()}
    cases = []
    for name, pl in plans.items():
        base = dict(m=pl.problem.m, n=pl.problem.n, k=pl.problem.k, dtype="f64")
        cases.append(dict(base, name=f"{name}/meshplan", algo="cosma", grid=pl.grid.as_list(), rounds=pl.rounds))
        cases.append(dict(base, name=f"{name}/summa", algo="summa", grid=list(pl.summa_grid), rounds=1))
    got = {r["name"]: r for r in run_cases(p, cases, repeats=repeats)}
    ok, why = scalapack.available()
    if ok:
        sc = [dict(name=f"{name}/scalapack", m=pl.problem.m, n=pl.problem.n, k=pl.problem.k, grid=list(pl.summa_grid),
                   nb=scalapack_block(pl.problem.m, pl.problem.n, pl.problem.k, *pl.summa_grid))
              for name, pl in plans.items()]
        got.update({r["name"]: r for r in run_scalapack(p, sc, repeats=repeats)})
    else:
        print(f"(ScaLAPACK skipped: {why})")
    rows = []
    for name, pl in plans.items():
        lb = lower_bound(pl.problem.m, pl.problem.n, pl.problem.k, p, None)
        for algo in ("meshplan", "summa", "scalapack"):
            r = got.get(f"{name}/{algo}")
            if r is None:
                continue
            pw = max(r["pmpi_words_per_rank"])
            rows.append({"p": p, "shape": name, "mnk": list(shapes[name]), "schedule": algo,
                         "grid": r["grid"], "pmpi_words_max": pw,
                         "python_words_max": max(r["words_per_rank"]) if r.get("words_per_rank") else None,
                         "model_words_max": max(r["model_words_per_rank"]) if r.get("model_words_per_rank") else None,
                         "bound": lb, "ratio_to_bound": pw / lb, "max_rel_error": r["max_rel_error"],
                         "time_min_s": r["time_min_s"]})
    return rows


SCALING = {  # thesis-style strong-scaling shapes (model only)
    "square": (16384, 16384, 16384),
    "rpa": (136 * 32, 136 * 32, 228 * 32 * 32),
    "flat": (131072, 131072, 256),
    "largeK": (1024, 1024, 2 ** 24),
}


def scaling(quick: bool) -> list[dict]:
    ps = [128, 1024, 8192, 18432] if quick else [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 18432]
    rows = []
    for name, (m, n, k) in SCALING.items():
        for p in ps:
            S = max(2 ** 24, 3 * -(-(m * n + m * k + n * k) // p))  # 128 MiB of f64 per rank, or 3x the data
            t0 = time.perf_counter()
            pl = plan_matmul(m, n, k, p, memory=S, method="auto" if p <= 4096 else "exhaustive")
            secs = time.perf_counter() - t0
            t = table33(m, n, k, p, S)
            cosma = domain_words(m, n, k, *pl.grid.as_list())
            rows.append({"shape": name, "p": p, "S": S, "grid": pl.grid.as_list(), "ranks_used": pl.ranks_used,
                         "strategy": pl.strategy, "method": pl.method, "cosma_domain": cosma,
                         "cosma_received": pl.max_words,
                         "summa_received": summa_max_words(MatmulProblem(m, n, k, p), *pl.summa_grid)
                         if p <= 4096 else None,
                         "2d": t["2d"], "2.5d": t["2.5d"], "carma": t["carma"], "bound": lower_bound(m, n, k, p, S),
                         "cosma_vs_bound": cosma / lower_bound(m, n, k, p, S),
                         "2d_vs_cosma": t["2d"] / cosma, "2.5d_vs_cosma": t["2.5d"] / cosma, "plan_s": secs})
    return rows


def plot(meas: list[dict], scal: list[dict]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMAGES.mkdir(parents=True, exist_ok=True)
    out = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, p in zip(axes, sorted({r["p"] for r in meas})):
        rows = [r for r in meas if r["p"] == p]
        shapes = list(dict.fromkeys(r["shape"] for r in rows))
        for i, algo in enumerate(("meshplan", "summa", "scalapack")):
            ys = [next((r["ratio_to_bound"] for r in rows if r["shape"] == s and r["schedule"] == algo), 0)
                  for s in shapes]
            ax.bar([x + 0.27 * i for x in range(len(shapes))], ys, width=0.27, label=algo)
        ax.set_xticks([x + 0.27 for x in range(len(shapes))], shapes)
        ax.set_title(f"{p} ranks: words received per rank (PMPI) / Theorem 3.2 bound")
        ax.axhline(1.0, color="k", lw=0.6)
        ax.legend()
    fig.tight_layout()
    path = IMAGES / "matmul_measured.png"
    fig.savefig(path, dpi=110)
    out.append(str(path))
    fig, axes = plt.subplots(1, len(SCALING), figsize=(4 * len(SCALING), 3.6), sharey=False)
    for ax, name in zip(axes, SCALING):
        rows = [r for r in scal if r["shape"] == name]
        ps = [r["p"] for r in rows]
        for key, label in (("cosma_domain", "COSMA (planned grid)"), ("2d", "2-D"), ("2.5d", "2.5-D"),
                           ("bound", "Thm 3.2 bound")):
            ax.loglog(ps, [r[key] for r in rows], marker="o", ms=3, label=label)
        ax.set_title(f"{name} {SCALING[name]}", fontsize=8)
        ax.set_xlabel("ranks")
    axes[0].set_ylabel("words per rank (domain I/O)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = IMAGES / "matmul_scaling.png"
    fig.savefig(path, dpi=110)
    out.append(str(path))
    return out


SPEED_SHAPES = {"2048^3": (2048, 2048, 2048), "4096x4096x256": (4096, 4096, 256), "64x64x65536": (64, 64, 65536)}


def speed(shapes: dict, ranks: list[int], launches: int = 3, repeats: int = 5) -> list[dict]:
    """Time to solution beside ScaLAPACK at its best: per shape and rank count the plan ``meshplan matmul``
    chooses (``--objective words``) and pdgemm on the SUMMA grid at its default block and at 32 (the faster
    counts), its OpenBLAS at this CPU's kernel.  Alternating launches (meshplan, ScaLAPACK, …; ``launches``
    pairs); each time is the median of ``repeats`` runs of the slowest rank; the row reports the median ratio,
    its range and the load average before and after."""
    ok, why = scalapack.available()
    if not ok:
        print(f"speed: ScaLAPACK skipped: {why}")
        return []
    out = []
    for name, (m, n, k) in shapes.items():
        for p in ranks:
            pl = plan_matmul(m, n, k, p)
            case = dict(name="meshplan", algo="cosma", m=m, n=n, k=k, dtype="f64", grid=pl.grid.as_list(),
                        rounds=pl.rounds, overlap=pl.double_buffered)
            nbs = sorted({scalapack_block(m, n, k, *pl.summa_grid), 32})
            sc = [dict(name=f"scalapack/{nb}", m=m, n=n, k=k, grid=list(pl.summa_grid), nb=nb) for nb in nbs]
            load0 = os.getloadavg()[0]
            pairs = []
            for _ in range(launches):
                me = run_cases(p, [case], repeats=repeats, use_pmpi=False)[0]
                got = run_scalapack(p, sc, repeats=repeats, use_pmpi=False)
                if not (me["verified"] and all(r["verified"] for r in got)):
                    raise SystemExit(f"speed: a run failed verification: {me} {got}")
                best = min(got, key=lambda r: r["time_median_s"])
                pairs.append((me["time_median_s"], best["time_median_s"], best["nb"], best.get("blas")))
            ratios = [a / b for a, b, _, _ in pairs]
            out.append({"shape": name, "mnk": [m, n, k], "p": p, "objective": "words", "grid": pl.grid.as_list(),
                        "rounds": pl.rounds, "scalapack_grid": list(pl.summa_grid), "scalapack_blocks": nbs,
                        "times_s": [a for a, _, _, _ in pairs], "scalapack_times_s": [b for _, b, _, _ in pairs],
                        "scalapack_best_block": [nb for _, _, nb, _ in pairs], "ratios": ratios,
                        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                        "blas": pairs[-1][3], "load_before": load0, "load_after": os.getloadavg()[0]})
            r = out[-1]
            print(f"speed {name} p={p}: {r['grid']} vs pdgemm {r['scalapack_grid']}: ratio {r['ratio_median']:.2f} "
                  f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}), load {load0:.1f}->{r['load_after']:.1f}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, fewer repeats and rank counts")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--speed", action="store_true",
                    help="only the time study beside pdgemm (2048³, 4096×4096×256, 64×64×65536 on 2, 4, 8 ranks)")
    ap.add_argument("--speed-ranks", default="2,4,8", help="ranks of the time study (comma-separated)")
    ap.add_argument("--speed-shapes", default=",".join(SPEED_SHAPES), help="shapes of the time study")
    args = ap.parse_args(argv)
    if args.speed:
        rows = speed({s: SPEED_SHAPES[s] for s in args.speed_shapes.split(",")},
                     [int(x) for x in args.speed_ranks.split(",")])
        print_table(["shape", "p", "grid", "rounds", "time s (median, 3 launches)", "pdgemm grid", "best nb",
                     "pdgemm s", "ratio median", "range", "kernel", "load"],
                    [[r["shape"], r["p"], r["grid"], r["rounds"], [round(t, 4) for t in r["times_s"]],
                      r["scalapack_grid"], r["scalapack_best_block"], [round(t, 4) for t in r["scalapack_times_s"]],
                      r["ratio_median"], f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
                      (r["blas"] or {}).get("architecture"), f"{r['load_before']:.1f}-{r['load_after']:.1f}"]
                     for r in rows])
        path = write_results("matmul_speed", {"speed": rows})
        print(f"\nwrote {path}")
        return 0
    repeats = 2 if args.quick else 5
    meas = []
    for p in (4, 8):
        meas += measured(p, mpi_shapes(args.quick), repeats)
    print("Measured on MPI (words received per rank, max over ranks, PMPI counter; bound = Theorem 3.2)")
    print_table(["p", "shape", "schedule", "grid", "PMPI words", "Python words", "model", "x bound", "rel err",
                 "time (s)"],
                [[r["p"], r["shape"], r["schedule"], r["grid"], r["pmpi_words_max"], r["python_words_max"] or "-",
                  r["model_words_max"] or "-", f"{r['ratio_to_bound']:.3f}", f"{r['max_rel_error']:.1e}",
                  f"{r['time_min_s']:.4f}"] for r in meas])
    scal = scaling(args.quick)
    print("\nScaling study, models only (domain I/O words per rank; S = max(2^24, 3x data/p))")
    print_table(["shape", "p", "grid", "used", "COSMA", "2-D", "2.5-D", "bound", "COSMA/bound", "2-D/COSMA",
                 "2.5-D/COSMA"],
                [[r["shape"], r["p"], r["grid"], r["ranks_used"], r["cosma_domain"], round(r["2d"]),
                  round(r["2.5d"]), round(r["bound"]), f"{r['cosma_vs_bound']:.3f}", f"{r['2d_vs_cosma']:.2f}",
                  f"{r['2.5d_vs_cosma']:.2f}"] for r in scal])
    images = [] if args.no_plot else plot(meas, scal)
    path = write_results("matmul", {"quick": args.quick, "measured": meas, "scaling": scal, "images": images})
    print(f"\nwrote {path}" + (f" and {', '.join(images)}" if images else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
