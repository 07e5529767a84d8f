"""Synthesis time for the configurations of P2's experiments (§4) and a three-level system.

For every system ([2,16], [4,16] A100; [2,8], [4,8] V100), every ordered
factorization of the device count into one to three axes of size ≥ 2, and
every reduction (each single axis; axes 0 and 2 for three axes), time a cold
run of placement enumeration (CP-SAT) + reduction synthesis (max size 5, DSL
full and paper) for all placements.  The paper reports up to about 3 s per
configuration; the target here is under 0.5 s for the slowest.

Scale rows: the whole of ``meshplan solve placement`` (placements, synthesis, re-check, simulation and the
schedule document with the default top 5 programs per placement), each in a fresh process, on 1,024,
4,096 and 8,192 devices and the three-level case, with wall time, CPU time and peak RSS.  Targets (issues
on scale and three-level synthesis): 8,192 devices under 30 s and 2 GB; the three-level case under 10 s.

    python bench/synthesis.py [--quick] [--scale-only]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from meshplan.models.placement.matrix import check_axes  # noqa: E402
from meshplan.models.reduction.hierarchy import synthesis_hierarchy  # noqa: E402
from meshplan.models.core.system import System  # noqa: E402
from meshplan.solvers.reduction import synthesis as syn  # noqa: E402
from meshplan.solvers.placement.enumerate import enumerate_placements  # noqa: E402

PAPER_SYSTEMS = ["a100-2x16", "a100-4x16", "v100-2x8", "v100-4x8"]
THREE_LEVEL = "node=8,socket=2,gpu=8"


def factorizations(n: int, parts: int, smallest: int = 2) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(n,)] if n >= smallest else []
    out = []
    for d in range(smallest, n + 1):
        if n % d == 0:
            out += [(d, *rest) for rest in factorizations(n // d, parts - 1, smallest)]
    return out


def reductions(num_axes: int) -> list[tuple[int, ...]]:
    red = [(i,) for i in range(num_axes)]
    if num_axes == 3:
        red.append((0, 2))
    return red


def time_config(system: System, axes, reduce, dialect: str) -> dict:
    syn.clear_cache()
    t0 = time.perf_counter()
    mats = enumerate_placements(system, axes)
    t1 = time.perf_counter()
    counts = []
    for m in mats:
        counts.append(len(syn.synthesize(synthesis_hierarchy(m, reduce), max_size=5, dialect=dialect).programs))
    t2 = time.perf_counter()
    return {"system": str(system), "axes": list(axes), "reduce": list(reduce), "dsl": dialect,
            "placements": len(mats), "programs": sum(counts), "max_programs": max(counts),
            "placement_s": t1 - t0, "synthesis_s": t2 - t1, "total_s": t2 - t0}


#: (system, axes, reduce) of the scale rows; the first two are the --quick ones
SCALE = [("node=8,socket=2,gpu=8", "8,2,8", "0,2"), ("node=128,gpu=8", "8,8,16", "0"),
         ("node=512,gpu=8", "64,8,8", "0"), ("node=1024,gpu=8", "64,8,16", "0"),
         ("node=1024,gpu=8", "512,16", "1"), ("node=1024,gpu=8", "512,16", "0")]

_SCALE_CODE = """
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from meshplan.api.placement import solve_placement
plan = solve_placement(sys.argv[1], sys.argv[2], sys.argv[3])
size = sum(len(chunk) for chunk in plan.iter_json())
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "devices": plan.study.system.num_devices, "placements": len(plan.placements),
                  "programs": sum(pl["num_programs"] for pl in plan.placements), "json_bytes": size}))
"""


def scale_row(system: str, axes: str, reduce: str) -> dict:
    """One end-to-end ``solve placement`` in a fresh process (cold caches, its own peak RSS)."""
    import json
    import subprocess

    out = subprocess.run([sys.executable, "-c", _SCALE_CODE, system, axes, reduce], capture_output=True,
                         text=True, timeout=900, check=True)
    return {"system": system, "axes": axes, "reduce": reduce, **json.loads(out.stdout)}


def scale_rows(quick: bool) -> list[dict]:
    rows = [scale_row(*case) for case in (SCALE[:2] if quick else SCALE)]
    print_table(["system", "axes", "reduce", "devices", "placements", "programs", "wall s", "cpu s", "peak MB",
                 "json MB"],
                [[r["system"], r["axes"], r["reduce"], r["devices"], r["placements"], r["programs"], r["wall_s"],
                  r["cpu_s"], r["peak_rss_mb"], r["json_bytes"] / 2**20] for r in rows])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two systems, two axes at most")
    ap.add_argument("--scale-only", action="store_true", help="only the end-to-end scale rows")
    args = ap.parse_args()
    scale = scale_rows(args.quick)
    if args.scale_only:
        path = write_results("synthesis_scale", {"scale": scale, "quick": args.quick})
        print(f"wrote {path}")
        return 0
    enumerate_placements(System.parse("node=2,gpu=2"), (2, 2))  # warm the solver import
    systems = PAPER_SYSTEMS[::2] if args.quick else PAPER_SYSTEMS
    rows = []
    for name in systems + [THREE_LEVEL]:
        s = System.parse(name)
        for parts in (1, 2) if args.quick else (1, 2, 3):
            for axes in factorizations(s.num_devices, parts):
                check_axes(s, axes)
                for red in reductions(len(axes)):
                    for dialect in ("full", "paper"):
                        r = time_config(s, axes, red, dialect)
                        r["paper_config"] = name in PAPER_SYSTEMS
                        rows.append(r)
    print_table(["system", "axes", "reduce", "dsl", "placements", "programs", "total s"],
                [[r["system"], ",".join(map(str, r["axes"])), ",".join(map(str, r["reduce"])), r["dsl"],
                  r["placements"], r["programs"], r["total_s"]] for r in rows])
    paper = [r for r in rows if r["paper_config"]]
    three = [r for r in rows if not r["paper_config"]]
    summary = {
        "paper_configs": len(paper),
        "paper_slowest_s": max(r["total_s"] for r in paper),
        "paper_slowest": max(paper, key=lambda r: r["total_s"]),
        "paper_median_s": statistics.median(r["total_s"] for r in paper),
        "three_level_configs": len(three),
        "three_level_slowest_s": max(r["total_s"] for r in three) if three else None,
        "three_level_median_s": statistics.median(r["total_s"] for r in three) if three else None,
        "target_s": 0.5,
    }
    print()
    print(f"paper configurations: {summary['paper_configs']}, slowest {summary['paper_slowest_s']:.3f} s "
          f"({summary['paper_slowest']['system']} axes {summary['paper_slowest']['axes']} reduce "
          f"{summary['paper_slowest']['reduce']} dsl {summary['paper_slowest']['dsl']}), median "
          f"{summary['paper_median_s']:.3f} s; target < 0.5 s (the paper reports up to about 3 s)")
    if three:
        print(f"three-level {THREE_LEVEL}: {len(three)} configurations, slowest "
              f"{summary['three_level_slowest_s']:.3f} s, median {summary['three_level_median_s']:.3f} s")
    path = write_results("synthesis", {"summary": summary, "configs": rows, "scale": scale, "quick": args.quick})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
