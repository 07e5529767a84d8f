"""Iteration counts, W, D, E_p of the case-study programs in examples/loops/counting (thesis §2.6 style).

    python bench/count.py [--quick] [--markdown]

For every example: the symbolic count of the most loaded process N, work W = N(p=1), depth
D = N(p -> oo), efficiency E_p and the available parallelism, the analysis time (fresh per example, in
this process), and a verification by execution at small parameters.  Writes bench/results/count.json;
``--markdown`` prints the table of docs/count.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "loops" / "counting"

#: small values to verify each example by execution (u_k: a fixed count per unknown loop)
VERIFY = {
    "bucket_sort": {"n": 50, "B": 4, "p": 6},
    "cg_tree": {"na": 40, "niter": 2, "p": 9, "u1": 3},
    "fft_radix2": {"n": 64, "p": 4},
    "jacobi_convergence": {"n": 30, "w": 3, "p": 5, "u1": 4},
    "lu_sequential": {"n": 12},
    "matmul_1d": {"n": 12, "p": 5},
    "md_cells": {"c": 20, "steps": 2, "p": 3, "u1": 2, "u2": 3},
    "monte_carlo": {"n": 50, "k": 2, "p": 6},
    "nbody_ring": {"n": 20, "p": 3},
    "prefix_sum": {"n": 50, "p": 6},
    "sample_sort": {"n": 100, "p": 6},
    "stencil_halo": {"n": 20, "T": 2, "p": 3},
}


def run(quick: bool) -> list[dict]:
    from meshplan import count_iterations

    rows = []
    names = sorted(VERIFY)[:4] if quick else sorted(VERIFY)
    for name in names:
        t0 = time.perf_counter()
        res = count_iterations(str(EXAMPLES / f"{name}.py"))
        js = res.to_json()
        elapsed = time.perf_counter() - t0
        ver = res.verify(VERIFY[name]).to_json()
        rows.append({"example": name, "N": js["iterations"]["total"], "W": js["work"], "D": js["depth"],
                     "E_p": js["efficiency"], "parallelism": js["available_parallelism"], "exact": js["exact"],
                     "unknowns": js["unknowns"], "seconds": round(elapsed, 3), "verified": ver["ok"],
                     "verified_at": VERIFY[name]})
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| example | N (most loaded process) | W = N(p=1) | D = N(p→∞) | E_p | available parallelism | exact | verified |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["example"], r["N"], r["W"], r["D"], r["E_p"], r["parallelism"], "yes" if r["exact"] else "bounds",
                 "ok" if r["verified"] else "FAILED"]
        out.append("| " + " | ".join(f"`{c}`" if i and i < 6 else str(c) for i, c in enumerate(cells)) + " |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only four examples")
    ap.add_argument("--markdown", action="store_true", help="print the docs/count.md table")
    args = ap.parse_args()
    rows = run(args.quick)
    if args.markdown:
        print(markdown(rows))
    else:
        for r in rows:
            print(f"{r['example']:20s} {r['seconds']:6.2f}s  verified={r['verified']}  N = {r['N']}")
            print(f"{'':20s} W = {r['W']}   D = {r['D']}   parallelism = {r['parallelism']}")
    out = ROOT / "bench" / "results" / "count.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
