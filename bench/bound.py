"""Benchmark of `meshplan bound`: derive the SOAP bound of every example in examples/loops/.

    python bench/bound.py [--quick] [--markdown]

For each kernel: the analysis time (parse + SDG + every subgraph's χ, X0, ρ +
Theorem 5.1; measured after one warm-up run so sympy's caches are hot, and
cold), the leading term and ρ of the dominant subgraph, and — unless
``--quick`` — the CP-SAT integer tiles at the sizes below, next to the best
rounding of the continuous optimum.  Prints a table and writes
bench/results/bound.json.  Timings are wall-clock on a shared machine: compare
them side by side, never against a fixed threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"NB": 32, "NK": 256, "NC": 256, "NH": 56, "NW": 56, "NR": 3, "NS": 3}
MEMORY = 65536


def sizes_for(params) -> dict[str, int]:
    out = {p: SIZES.get(p, 1024 if p.startswith("T") else 4096) for p in params}
    out["S"] = MEMORY
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="analysis only (no CP-SAT tiles)")
    ap.add_argument("--markdown", action="store_true", help="also print the docs/bound.md table")
    ap.add_argument("--time-limit", type=float, default=5.0, help="CP-SAT time limit per kernel (s)")
    args = ap.parse_args(argv)

    import sympy as sp

    from meshplan.models.soap import parse_file
    from meshplan.solvers.soap.bound import analyze
    from meshplan.solvers.soap.chi import S
    from meshplan.solvers.soap.tiles import integer_tiles

    rows = []
    for path in sorted((ROOT / "examples" / "loops").glob("*.py")):
        for prog in parse_file(str(path)):
            t0 = time.perf_counter()
            analyze(prog)                      # cold: first analysis of this program
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            res = analyze(prog)
            warm = time.perf_counter() - t0
            dom = res.dominant
            it = res.intensity_of(dom.best)
            vals = sizes_for(prog.params)
            row = {
                "kernel": prog.name, "file": str(path.relative_to(ROOT)), "statements": len(prog.statements),
                "params": list(prog.params), "seconds_cold": round(cold, 3), "seconds_warm": round(warm, 3),
                "bound": str(res.bound), "leading_term": str(res.leading), "rho": str(dom.rho),
                "dominant_subgraph": list(dom.best), "method": it.method,
                "tiles": {c: str(e) for c, e in it.tiles.items()},
                "subgraphs": len(res.subgraphs),
                "sizes": vals,
                "bound_value": res.evaluate(vals),
                "rho_value": float(sp.N(dom.rho.subs(S, MEMORY))) if dom.rho != sp.oo else None,
            }
            if not args.quick and it.method != "unbounded":
                t0 = time.perf_counter()
                tr = integer_tiles(prog, it, vals, time_limit_s=args.time_limit)
                row["tiles_seconds"] = round(time.perf_counter() - t0, 3)
                row["integer_tiles"] = {"status": tr.status, "X0": tr.budget, "continuous": tr.continuous,
                                        "continuous_work": tr.continuous_work, "rounded": tr.rounded,
                                        "rounded_work": tr.rounded_work, "integer": tr.integer,
                                        "integer_work": tr.integer_work, "gap": tr.gap,
                                        "not_worse_than_rounding": (tr.integer_work or 0) >= (tr.rounded_work or 0)}
            rows.append(row)
            tiles = row.get("integer_tiles")
            tile_txt = ""
            if tiles:
                tile_txt = (f"  tiles {tiles['status']:8s} {_fmt(tiles['integer'])} "
                            f"work {tiles['integer_work']} >= rounded {tiles['rounded_work']}")
            print(f"{prog.name:16s} cold {cold:5.2f}s warm {warm:5.2f}s  Q >~ {row['leading_term']:44s}"
                  f" rho={row['rho']}{tile_txt}", flush=True)
    slowest = max(rows, key=lambda r: r["seconds_cold"])
    print(f"\n{len(rows)} kernels; slowest cold analysis {slowest['kernel']} {slowest['seconds_cold']:.2f} s; "
          f"all cold analyses {'<' if slowest['seconds_cold'] < 2 else '>='} 2 s")
    if not args.quick:
        bad = [r["kernel"] for r in rows if r.get("integer_tiles") and not r["integer_tiles"]["not_worse_than_rounding"]]
        print(f"integer tiles worse than rounding: {bad or 'none'}")
    out = ROOT / "bench" / "results" / "bound.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"memory_S": MEMORY, "quick": args.quick, "kernels": rows}, indent=2, default=str))
    print(f"wrote {out.relative_to(ROOT)}")
    if args.markdown:
        print("\n| kernel | leading term of the bound | ρ (dominant subgraph) | tiles at X0 | "
              "integer tiles (S=65536) | gap |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            t = r.get("integer_tiles") or {}
            tiles = ", ".join(f"{c}={e}" for c, e in r["tiles"].items()) or "(relaxation: numeric)"
            gap = f"{t['gap']:.4f}" if t.get("gap") else "-"
            print(f"| {r['kernel']} | `{r['leading_term']}` | `{r['rho']}` | {tiles} | "
                  f"{_fmt(t.get('integer')) if t else '-'} ({t.get('status', '-')}) | {gap} |")
    return 0


def _fmt(d) -> str:
    if not d:
        return "-"
    return "×".join(f"{k}={v}" for k, v in d.items())


if __name__ == "__main__":
    sys.exit(main())
