"""LU and Cholesky on MPI: COnfLUX / COnfCHOX (2.5-D) vs the in-house 2-D factorizations vs ScaLAPACK's
pdgetrf / pdpotrf, measured with one instrument (the PMPI counter), and the thesis's scaling study as
models (thesis ch. 4, Figure 4.8c).

    python bench/factorization.py [--quick] [--no-plot] [--plot-only]
    python bench/factorization.py --speed [--speed-sizes 2048,4096] [--speed-ranks 2,4,8] [--speed-kinds lu,cholesky]
                                          [--speed-objectives words,time] [--speed-launches 3]
    python bench/factorization.py --speed --speed-ranks 4,2 --speed-sizes 4096,2048   # the time targets' cases

``--speed``: time beside ScaLAPACK at its best (its kernel, its fastest grid and block), alternating launches,
ratios with their median, per planner objective (:func:`speed`); writes bench/results/factorization_speed.json.

Part 1 (MPI, 4 and 8 ranks, N ∈ {512, 1024, 2048}; --quick: 4 ranks, N = 512): per algorithm and grid the
mean words a rank receives (PMPI; the Python counter and the exact model agree with it; the figure shows
it in units of the tile size N²/p), the ratio to
the section 4.6 lower bound (with S = the run's footprint), the scaled residual and the time (min over
repeats).  COnfLUX / COnfCHOX run on a one-layer grid and on a two-layer grid (Pz = 2) at a fixed block
(role "fixed", next to ScaLAPACK at that block), and on the plan ``meshplan factor`` chooses (role
"planned", next to ScaLAPACK on the 2-D plan it chooses); the verdict table compares each with
ScaLAPACK, and a model-only table lists every grid's exact and Table 4.1 volume.  Part 2 (no
MPI): modeled words per rank of the planned COnfLUX grid vs the best 2-D grid up to p = 262,144 at a
fixed N and memory per rank, and their ratio (Figure 4.8c).  Writes bench/results/factorization.json
and, unless --no-plot, docs/images/factor_measured.png and docs/images/factor_scaling.png.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from meshplan.exec.factorization.driver import run_cases, run_scalapack_cases  # noqa: E402
from meshplan.exec.runtime import scalapack  # noqa: E402
from meshplan.models.factorization.cost import (factor_cost, lower_bound, memory_words,  # noqa: E402
                                                table41_cost, twod_leading)
from meshplan.models.factorization.problem import FactorGrid, FactorModelError, FactorProblem  # noqa: E402
from meshplan.solvers.factorization.plan import grids, plan_2d, schedule_factorization  # noqa: E402


def plan_factorization(kind: str, N: int, p: int, memory: int | None = None):
    """The solver's schedule of ``meshplan factor KIND N --np p [--memory S]``."""
    return schedule_factorization(FactorProblem(kind, N, p, memory))

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
GRIDS = {4: [(2, 2, 1), (2, 1, 2)], 8: [(2, 4, 1), (2, 2, 2)]}


def _block(N: int) -> int:
    return 16 if N <= 1024 else 32


def measured(p: int, sizes: list[int], repeats: int) -> list[dict]:
    """Fixed grids at ``v = _block(N)`` next to the in-house 2-D factorization and ScaLAPACK on the best
    2-D grid at the same ``v``; plus the plans the tool chooses itself (``meshplan factor KIND N --np p``:
    grid and block searched) against ScaLAPACK on the 2-D grid and block the tool chooses for it."""
    rows = []
    for kind in ("lu", "cholesky"):
        name = "COnfLUX" if kind == "lu" else "COnfCHOX"
        cases, labels, sc_cases, sc_labels = [], [], [], []
        for N in sizes:
            v = _block(N)
            pr = FactorProblem(kind, N, p)
            for g in GRIDS[p]:
                cases.append({"kind": kind, "algorithm": "conflux", "N": N, "grid": list(g), "v": v,
                              "repeats": repeats})
                labels.append((name, N, "fixed"))
            g2, _ = plan_2d(FactorProblem(kind, N, p, block=v))
            cases.append({"kind": kind, "algorithm": "2d", "N": N, "grid": [g2.Px, g2.Py, 1], "v": v,
                          "repeats": repeats})
            labels.append(("2-D (in-house)", N, "fixed"))
            sc_cases.append({"kind": kind, "N": N, "grid": [g2.Px, g2.Py], "nb": v, "repeats": repeats})
            sc_labels.append("fixed")
            plan = plan_factorization(kind, N, p)
            cases.append({"kind": kind, "algorithm": "conflux", "N": N, "v": plan.grid.v,
                          "grid": [plan.grid.Px, plan.grid.Py, plan.grid.Pz], "repeats": repeats})
            labels.append((name, N, "planned"))
            g2p, _ = plan_2d(pr)
            sc_cases.append({"kind": kind, "N": N, "grid": [g2p.Px, g2p.Py], "nb": g2p.v, "repeats": repeats})
            sc_labels.append("planned")
        for (alg, N, role), r in zip(labels, run_cases(p, cases, timeout_s=3600)):
            rows.append(_row(kind, alg, N, p, r["grid"], r["block"], r) | {"role": role})
        ok, why = scalapack.available()
        if ok:
            for role, r in zip(sc_labels, run_scalapack_cases(p, sc_cases, timeout_s=3600)):
                g = FactorGrid(r["grid"][0], r["grid"][1], 1, r["block"])
                rows.append(_row(kind, "ScaLAPACK " + ("pdgetrf" if kind == "lu" else "pdpotrf"), r["N"], p,
                                 [g.Px, g.Py, 1], g.v, r) | {"role": role})
        else:
            print(f"ScaLAPACK skipped: {why}", file=sys.stderr)
    return rows


def grid_study(p: int, N: int, kind: str) -> list[dict]:
    """Every grid of ``p`` ranks at ``v = _block(N)``: the exact model and the thesis's own Table 4.1 /
    Lemma 4.10 step costs (:func:`table41_cost`), best first — does a second layer pay at this ``p``?"""
    v = _block(N)
    pr = FactorProblem(kind, N, p)
    out = []
    for g in grids(p):
        grid = FactorGrid(*g, v=v)
        try:
            grid.check(pr)
        except FactorModelError:
            continue
        out.append({"kind": kind, "p": p, "N": N, "grid": list(g), "block": v,
                    "model_words_per_rank": factor_cost(pr, grid).per_rank,
                    "table41_words_per_rank": table41_cost(pr, grid).per_rank,
                    "memory_words": memory_words(pr, grid)})
    out.sort(key=lambda r: r["model_words_per_rank"])
    return out


def target(rows: list[dict]) -> list[dict]:
    """The issue's target, per (kind, p, N): each COnfLUX / COnfCHOX run against ScaLAPACK at the same
    block (fixed grids) and the tool's plan against ScaLAPACK on the tool's 2-D plan (PMPI words)."""
    out = []
    for r in rows:
        if not r["algorithm"].startswith("COnf"):
            continue
        sc = [s for s in rows if s["algorithm"].startswith("ScaLAPACK") and s["kind"] == r["kind"]
              and (s["p"], s["N"], s["role"]) == (r["p"], r["N"], r["role"])]
        if not sc:
            continue
        w, ws = r["pmpi_words_per_rank"], sc[0]["pmpi_words_per_rank"]
        out.append({"kind": r["kind"], "p": r["p"], "N": r["N"], "role": r["role"], "grid": r["grid"],
                    "block": r["block"], "words": w, "scalapack_grid": sc[0]["grid"],
                    "scalapack_block": sc[0]["block"], "scalapack_words": ws, "ratio": w / ws, "less": w < ws})
    return out


def _row(kind, name, N, p, grid, v, r) -> dict:
    pr = FactorProblem(kind, N, p)
    S = memory_words(pr, FactorGrid(*grid, v=v))
    words = r.get("pmpi_words_per_rank")
    if words is None:
        words = r.get("measured_words_per_rank")
    lb = lower_bound(pr, S)
    return {"kind": kind, "algorithm": name, "N": N, "p": p, "grid": grid, "block": v,
            "model_words_per_rank": r.get("model_words_per_rank"),
            "python_words_per_rank": r.get("measured_words_per_rank"), "pmpi_words_per_rank": words,
            "lower_bound_words": lb, "ratio_to_bound": words / lb if words else None,
            "scaled_residual": r.get("scaled_residual"), "verified": r.get("verified"),
            "growth_factor": r.get("growth_factor"), "time_s": r.get("time_s")}


def scaling(N: int, S: int, ps: list[int]) -> list[dict]:
    """Figure 4.8c: modeled words per rank of the planned 2.5-D grid vs the best 2-D grid."""
    out = []
    for p in ps:
        plan = plan_factorization("lu", N, p, memory=S)
        pr = plan.problem
        g2, c2 = plan_2d(pr)
        out.append({"p": p, "N": N, "S": S, "grid": [plan.grid.Px, plan.grid.Py, plan.grid.Pz],
                    "block": plan.grid.v, "conflux_words": plan.model_words_per_rank,
                    "two_d_grid": [g2.Px, g2.Py, 1], "two_d_words": c2.per_rank,
                    "two_d_table42": twod_leading(pr), "lower_bound": lower_bound(pr, S),
                    "ratio_2d_to_conflux": c2.per_rank / plan.model_words_per_rank,
                    "check": factor_cost(pr, plan.grid).per_rank == plan.model_words_per_rank})
    return out


def plot(rows: list[dict], scale: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMAGES.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, kind in zip(axes, ("lu", "cholesky")):
        sel = [r for r in rows if r["kind"] == kind and r.get("role", "fixed") == "fixed"]
        labels = sorted({(r["algorithm"], tuple(r["grid"])) for r in sel})
        keys = sorted({(r["p"], r["N"]) for r in sel})
        width = 0.8 / max(1, len(labels))
        for i, (alg, grid) in enumerate(labels):
            ys = []
            for key in keys:
                hit = [r for r in sel if (r["p"], r["N"]) == key and r["algorithm"] == alg
                       and tuple(r["grid"]) == grid]
                ys.append(hit[0]["pmpi_words_per_rank"] * key[0] / key[1] ** 2 if hit else 0)
            ax.bar([k + i * width for k in range(len(keys))], ys, width, label=f"{alg} {list(grid)}")
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))], [f"p={p}\nN={n}" for p, n in keys])
        ax.set_ylabel("PMPI words per rank / (N²/p)")
        ax.set_title("LU" if kind == "lu" else "Cholesky")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(IMAGES / "factor_measured.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogx([s["p"] for s in scale], [s["ratio_2d_to_conflux"] for s in scale], "o-", base=2)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("ranks p")
    ax.set_ylabel("2-D words / COnfLUX words (model)")
    ax.set_title(f"LU, N = {scale[0]['N']}, S = {scale[0]['S']} words per rank")
    fig.tight_layout()
    fig.savefig(IMAGES / "factor_scaling.png", dpi=110)
    plt.close(fig)


SPEED_BLOCKS = (16, 64, 128)  # ScaLAPACK's nb: the 2-D plan's block, LAPACK's usual one and a larger one


def speed_grids(kind: str, N: int, p: int) -> list[list[int]]:
    """ScaLAPACK's process grids in the time study: the 2-D plan's and the 1-D ``[1, p]`` (pdgetrf's fastest
    here: no pivot search across process rows); its fastest counts."""
    g2, _ = plan_2d(FactorProblem(kind, N, p))
    return [list(g) for g in dict.fromkeys([(g2.Px, g2.Py), (1, p)])]


def speed_target(N: int) -> float:
    """The time target against ScaLAPACK's fastest case: 1.25x at N >= 4096, 1.5x below."""
    return 1.25 if N >= 4096 else 1.5


def speed(kinds: list[str], sizes: list[int], ranks: list[int], launches: int = 3, repeats: int = 3,
          objectives: tuple[str, ...] = ("words", "time")) -> list[dict]:
    """Time to solution beside ScaLAPACK at its best: per (kind, N, p) and objective the plan
    ``meshplan factor KIND N --np p --objective OBJ`` chooses (``time``: with the system ``meshplan calibrate
    --np p`` measures first, whose synchronisation latency at p ranks the time model charges per message), and
    pdgetrf / pdpotrf on every grid of :func:`speed_grids` at every block of :data:`SPEED_BLOCKS` (its fastest
    counts), its OpenBLAS at this CPU's kernel.  The two run in alternating launches (meshplan's plans in one,
    ScaLAPACK's cases in the next; ``launches`` pairs); each time is the fastest of ``repeats`` runs of the
    slowest rank, each pair gives a ratio per objective, and a row reports the median ratio, its range and the
    load average before and after."""
    import meshplan as mp
    from meshplan.api.calibration import calibrate

    ok, why = scalapack.available()
    if not ok:
        print(f"speed: ScaLAPACK skipped: {why}", file=sys.stderr)
        return []
    systems = {p: calibrate(np=p).system for p in ranks} if "time" in objectives else {}
    out = []
    for kind in kinds:
        for N in sizes:
            for p in ranks:
                plans = {o: mp.plan_factorization(kind, N, p, objective=o, system=systems.get(p) if o == "time"
                                                  else None) for o in objectives}
                cases = [{"kind": kind, "algorithm": "conflux", "N": N, "grid": list(pl.grid), "v": pl.block,
                          "repeats": repeats} for pl in plans.values()]
                sc_cases = [{"kind": kind, "N": N, "grid": g, "nb": nb, "repeats": repeats}
                            for g in speed_grids(kind, N, p) for nb in SPEED_BLOCKS]
                load0 = os.getloadavg()[0]
                mine, theirs = {o: [] for o in objectives}, []
                for _ in range(launches):
                    me = run_cases(p, cases, pmpi=False, timeout_s=3600)
                    sc = run_scalapack_cases(p, sc_cases, pmpi=False, timeout_s=3600)
                    if not all(r["verified"] for r in me + sc):
                        raise SystemExit(f"speed: a run failed verification: {me} {sc}")
                    for o, r in zip(objectives, me):
                        mine[o].append(r["time_s"])
                    best = min(sc, key=lambda r: r["time_s"])
                    theirs.append((best["time_s"], best["grid"], best["block"], best.get("blas")))
                load1 = os.getloadavg()[0]
                for o, pl in plans.items():
                    ratios = [a / b[0] for a, b in zip(mine[o], theirs)]
                    sysinfo = {}
                    if o == "time":
                        s = systems[p]
                        sysinfo = {"sync_latency_s": s.sync_latency_at(p), "flop_rate": s.flop_rate,
                                   "time_explanation": list(pl.explanation[:3])}
                    out.append({"kind": kind, "N": N, "p": p, "objective": o, "grid": list(pl.grid),
                                "block": pl.block, "model_words_per_rank": pl.model_words_per_rank,
                                "scalapack_grids": speed_grids(kind, N, p), "scalapack_blocks": list(SPEED_BLOCKS),
                                "times_s": mine[o], "scalapack_times_s": [b[0] for b in theirs],
                                "scalapack_best": [[b[1], b[2]] for b in theirs], "ratios": ratios,
                                "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                                "ratio_max": max(ratios), "target": speed_target(N),
                                "meets": statistics.median(ratios) <= speed_target(N), "blas": theirs[-1][3],
                                "load_before": load0, "load_after": load1} | sysinfo)
                    r = out[-1]
                    print(f"speed {kind} N={N} p={p} objective {o}: {r['grid']} v={r['block']} vs ScaLAPACK "
                          f"{r['scalapack_best']}: ratio {r['ratio_median']:.2f} ({r['ratio_min']:.2f}-"
                          f"{r['ratio_max']:.2f}), load {load0:.1f}->{load1:.1f}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--plot-only", action="store_true", help="redraw the figures from bench/results/factorization.json")
    ap.add_argument("--speed", action="store_true",
                    help="only the time study beside ScaLAPACK (LU and Cholesky, N 2048 and 4096, 2, 4 and 8 ranks)")
    ap.add_argument("--speed-sizes", default="2048,4096", help="N of the time study (comma-separated)")
    ap.add_argument("--speed-ranks", default="2,4,8", help="ranks of the time study (comma-separated)")
    ap.add_argument("--speed-kinds", default="lu,cholesky", help="factorizations of the time study")
    ap.add_argument("--speed-objectives", default="words,time",
                    help="planner objectives of the time study (time calibrates the machine at each rank count)")
    ap.add_argument("--speed-launches", type=int, default=3, help="alternating launch pairs per row")
    args = ap.parse_args()
    if args.speed:
        rows = speed(args.speed_kinds.split(","), [int(x) for x in args.speed_sizes.split(",")],
                     [int(x) for x in args.speed_ranks.split(",")], launches=args.speed_launches,
                     objectives=tuple(args.speed_objectives.split(",")))
        print_table(["kind", "N", "p", "objective", "grid", "v", "time s", "ScaLAPACK best [grid, nb]",
                     "ScaLAPACK s", "ratio median", "range", "target", "kernel", "load"],
                    [[r["kind"], r["N"], r["p"], r["objective"], r["grid"], r["block"],
                      [round(t, 3) for t in r["times_s"]], r["scalapack_best"],
                      [round(t, 3) for t in r["scalapack_times_s"]],
                      r["ratio_median"], f"{r['ratio_min']:.2f}-{r['ratio_max']:.2f}",
                      f"<= {r['target']} {'holds' if r['meets'] else 'misses'}",
                      (r["blas"] or {}).get("architecture"), f"{r['load_before']:.1f}-{r['load_after']:.1f}"]
                     for r in rows])
        path = write_results("factorization_speed", {"speed": rows})
        print(f"\nwrote {path}")
        return 0
    if args.plot_only:
        import json

        doc = json.loads((Path(__file__).resolve().parent / "results" / "factorization.json").read_text())
        plot(doc["measured"], doc["scaling"])
        return 0
    sizes = [512] if args.quick else [512, 1024, 2048]
    ranks = [4] if args.quick else [4, 8]
    rows = []
    for p in ranks:
        rows += measured(p, sizes, repeats=1)
    print_table(["kind", "algorithm", "role", "p", "N", "grid", "v", "model", "Python", "PMPI", "× bound",
                 "residual", "time s"],
                [[r["kind"], r["algorithm"], r["role"], r["p"], r["N"], r["grid"], r["block"],
                  r["model_words_per_rank"] or "-", r["python_words_per_rank"] or "-", r["pmpi_words_per_rank"],
                  r["ratio_to_bound"], r["scaled_residual"], r["time_s"]] for r in rows])
    verdict = target(rows)
    print()
    print_table(["kind", "p", "N", "role", "grid", "v", "PMPI words", "ScaLAPACK grid", "nb", "ScaLAPACK words",
                 "ratio", "less"],
                [[t["kind"], t["p"], t["N"], t["role"], t["grid"], t["block"], t["words"], t["scalapack_grid"],
                  t["scalapack_block"], t["scalapack_words"], t["ratio"], t["less"]] for t in verdict])
    study = [g for p in ranks for N in sizes for kind in ("lu", "cholesky") for g in grid_study(p, N, kind)]
    print()
    print_table(["kind", "p", "N", "grid", "v", "exact model", "Table 4.1 model"],
                [[g["kind"], g["p"], g["N"], g["grid"], g["block"], g["model_words_per_rank"],
                  g["table41_words_per_rank"]] for g in study])
    N, S = 32768, 2**22
    ps = [4**k for k in range(5, 10)] if not args.quick else [1024, 16384, 262144]
    scale = scaling(N, S, ps)
    print()
    print_table(["p", "COnfLUX grid", "v", "COnfLUX words", "2-D grid", "2-D words", "N²/√p", "2-D / COnfLUX"],
                [[s["p"], s["grid"], s["block"], s["conflux_words"], s["two_d_grid"], s["two_d_words"],
                  s["two_d_table42"], s["ratio_2d_to_conflux"]] for s in scale])
    path = write_results("factorization", {"quick": args.quick, "measured": rows, "target": verdict,
                                           "grid_study": study, "scaling": scale})
    print(f"\nwrote {path}")
    if not args.no_plot:
        plot(rows, scale)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
