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
    "gemm_2d": {"NI": 6, "NJ": 8, "NK": 5, "p": 2, "q": 3},
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


#: affine nests written as a user would (PolyBench-style kernels and the forms of docs/count.md)
AFFINE = {
    "gemm": "def gemm(NI, NJ, NK):\n    for i in range(NI):\n        for j in range(NJ):\n            for k in range(NK):\n                C[i, j] += A[i, k] * B[k, j]\n",
    "syrk": "def syrk(N, M):\n    for i in range(N):\n        for j in range(i + 1):\n            for k in range(M):\n                C[i, j] += A[i, k] * A[j, k]\n",
    "lu": "def lu(n):\n    for k in range(n):\n        for i in range(k + 1, n):\n            A[i, k] /= A[k, k]\n            for j in range(k + 1, n):\n                A[i, j] -= A[i, k] * A[k, j]\n",
    "cholesky": "def cholesky(n):\n    for j in range(n):\n        for k in range(j):\n            A[j, j] -= A[j, k] * A[j, k]\n        A[j, j] = A[j, j] ** 0.5\n        for i in range(j + 1, n):\n            for k in range(j):\n                A[i, j] -= A[i, k] * A[j, k]\n            A[i, j] /= A[j, j]\n",
    "durbin": "def durbin(N):\n    for k in range(1, N):\n        for i in range(k):\n            s += r[k - i - 1] * y[i]\n        for i in range(k):\n            z[i] = y[i] + a * y[k - i - 1]\n        for i in range(k):\n            y[i] = z[i]\n",
    "trapezoid": "def trap(n, m):\n    for i in range(max(0, m - n), min(n, 2 * m)):\n        for j in range(max(i, m), n + m):\n            A[i, j] = 0\n",
    "stride_inside": "def strided(n, m):\n    for i in range(n):\n        for j in range(i, n):\n            for k in range(j, m, 2):\n                A[k] += 1\n",
    "sum_bound": "def sumb(n, m):\n    for i in range(n):\n        for j in range(m):\n            for k in range(i + j):\n                A[k] += 1\n",
    "min_max": "def mm(n, m):\n    for i in range(n):\n        for j in range(max(0, i - m), min(i, m)):\n            A[j] += 1\n",
    "steps": "def steps(n):\n    for i in range(0, n, 3):\n        for j in range(n, i, -2):\n            A[j] += 1\n",
    "half": "def half(n):\n    for i in range(n):\n        for j in range(i // 2):\n            for k in range(0, j, 4):\n                A[k] += 1\n",
    "guarded": "def guarded(n):\n    for i in range(n):\n        for j in range(n):\n            if (i + j) % 3 == 0 and i < j:\n                A[i, j] = 0\n",
    "jacobi_2d": "def jacobi(T, n):\n    for t in range(T):\n        for i in range(1, n - 1):\n            for j in range(1, n - 1):\n                B[i, j] = A[i, j] + A[i - 1, j]\n        for i in range(1, n - 1):\n            for j in range(1, n - 1):\n                A[i, j] = B[i, j]\n",
    "floyd": "def floyd(n):\n    for k in range(n):\n        for i in range(n):\n            for j in range(n):\n                D[i, j] = min(D[i, j], D[i, k] + D[k, j])\n",
    "nussinov": "def nussinov(n):\n    for i in range(n - 1, -1, -1):\n        for j in range(i + 1, n):\n            for k in range(i + 1, j):\n                T[i, j] = T[i, k] + T[k, j]\n",
    "while_step": "def ws(n, m):\n    i = 0\n    while i < n:\n        j = i\n        while j < n + m:\n            A[j] += 1\n            j += 3\n        i += 2\n",
}


def _generated(count: int) -> dict[str, str]:
    """The first ``count`` nests of the property test's generator (tests/solvers/test_count_barvinok.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_gen", ROOT / "tests" / "solvers" / "test_count_barvinok.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {f"gen{k}": mod.nest(k)[0].replace("def prog(", f"def gen{k}(") for k in range(count)}


def _pass(kind: str, quick: bool) -> list[dict]:
    """One fresh process's timings: every nest counted once, the first time this process sees it (no cache of
    sympy's or meshplan's holds its expressions yet; imports and first-use costs are paid on gemm before).
    ``kind``: "solver" (the loop model parsed beforehand) or "front_door" (source text to the JSON)."""
    import islpy as isl

    from meshplan import count_iterations
    from meshplan.models.counting.domains import statement_domains
    from meshplan.models.counting.problem import CountProblem
    from meshplan.solvers.counting.affine import _params
    from meshplan.solvers.counting.barvinok import isl_text
    from meshplan.solvers.counting.count import count_problem

    nests = dict(AFFINE)
    nests.update(_generated(10 if quick else 60))
    count_iterations(AFFINE["gemm"]).to_json()
    problems = {name: CountProblem.of(src) for name, src in nests.items()} if kind == "solver" else {}
    cpu = time.process_time
    rows = []
    for name, src in nests.items():
        t0 = cpu()
        if kind == "solver":
            res = count_problem(problems[name])[0]
            res.to_json()
        else:
            res = count_iterations(src).result  # the plan holds the JSON's fields
        ours = cpu() - t0
        flow = res.flow  # Barvinok alone: isl_set_card of the same statement sets, written as isl text
        doms = statement_domains(flow)
        texts = [isl_text(d, _params(flow, doms, "p"), "p") for d in doms.values() if not isinstance(d, str)]
        t0 = cpu()
        for t in texts:
            isl.Set(t).card().to_str()
        bar = cpu() - t0
        rows.append({"nest": name, "statements": len(doms), "ours": ours, "barvinok": bar,
                     "all_barvinok": set(res.methods.values()) == {"barvinok"}, "exact": res.exact})
    return rows


def barvinok_rows(quick: bool, repeat: int = 3) -> list[dict]:
    """Per affine nest, medians over ``repeat`` fresh processes: Barvinok alone (isl_set_card of the statement
    sets, read back as isl text), meshplan's solver on the parsed loop model (to its JSON), and the front door
    (source text to the plan's JSON, as a user calls it)."""
    import statistics
    import subprocess
    import sys

    runs: dict[str, list] = {"solver": [], "front_door": []}
    for _ in range(repeat):
        for kind in runs:
            out = subprocess.run([sys.executable, __file__, "--pass", kind] + (["--quick"] if quick else []),
                                 check=True, capture_output=True, text=True).stdout
            runs[kind].append(json.loads(out))
    rows = []
    for k, first in enumerate(runs["solver"][0]):
        bar = statistics.median(r[k]["barvinok"] for kind in runs for r in runs[kind])
        solver = statistics.median(r[k]["ours"] for r in runs["solver"])
        door = statistics.median(r[k]["ours"] for r in runs["front_door"])
        rows.append({"nest": first["nest"], "statements": first["statements"], "barvinok_ms": 1e3 * bar,
                     "solver_ms": 1e3 * solver, "front_door_ms": 1e3 * door, "solver_ratio": solver / bar,
                     "front_door_ratio": door / bar, "all_barvinok": first["all_barvinok"],
                     "exact": first["exact"]})
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
    ap.add_argument("--only", choices=("examples", "barvinok"), help="run one part only")
    ap.add_argument("--pass", dest="one_pass", choices=("solver", "front_door"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_pass:  # one fresh process of barvinok_rows
        print(json.dumps(_pass(args.one_pass, args.quick)))
        return 0
    out = ROOT / "bench" / "results" / "count.json"
    old = json.loads(out.read_text()) if out.exists() else {}
    if args.only != "examples":
        import os
        import statistics

        bars = barvinok_rows(args.quick)
        print(f"{'nest':16s} {'stmts':>5s} {'Barvinok ms':>12s} {'solver ms':>10s} {'front door ms':>14s} "
              f"{'solver/B':>9s} {'door/B':>7s}")
        for r in bars:
            print(f"{r['nest']:16s} {r['statements']:5d} {r['barvinok_ms']:12.2f} {r['solver_ms']:10.2f} "
                  f"{r['front_door_ms']:14.2f} {r['solver_ratio']:9.2f} {r['front_door_ratio']:7.2f}")
        med = {k: statistics.median(r[k] for r in bars) for k in ("barvinok_ms", "solver_ms", "front_door_ms",
                                                                   "solver_ratio", "front_door_ratio")}
        print(f"median over {len(bars)} nests: Barvinok {med['barvinok_ms']:.2f} ms, solver {med['solver_ms']:.2f} ms "
              f"({med['solver_ratio']:.2f}x per nest), front door {med['front_door_ms']:.2f} ms "
              f"({med['front_door_ratio']:.2f}x per nest); load {os.getloadavg()[0]:.1f}")
        old["barvinok"] = {"rows": bars, "median": med, "load": os.getloadavg()[0]}
        if args.only == "barvinok":
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(old, indent=2) + "\n")
            return 0
    rows = run(args.quick)
    if args.markdown:
        print(markdown(rows))
    else:
        for r in rows:
            print(f"{r['example']:20s} {r['seconds']:6.2f}s  verified={r['verified']}  N = {r['N']}")
            print(f"{'':20s} W = {r['W']}   D = {r['D']}   parallelism = {r['parallelism']}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**old, "rows": rows}, indent=2) + "\n")
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
