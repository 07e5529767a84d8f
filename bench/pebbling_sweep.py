"""The SOAP bound against the exhaustive red–blue pebbling optimum on random loop nests.

``python bench/pebbling_sweep.py [--programs 180] [--seed 0] [--shape nests|wide]`` draws random nests
and, at every size whose CDAG has at most ``--max-vertices`` vertices, compares ``analyze``'s bound (the
larger of its symbolic and numeric evaluations) at the least memory that can pebble the CDAG with the
optimal I/O (``solvers/soap/pebbling.py``).  It prints each instance above the optimum and a summary,
and writes bench/results/pebbling_sweep.json.

Shape ``nests`` (the sweep of docs/bound.md, decision 7): one to three statements inside
``for i in range(M)``, each in a ``for j in range(N)`` (sometimes sharing the previous one, sometimes with
an inner ``for k in range(N)``), writing the scalar ``w``, ``y[j]`` or ``z[j]`` with ``=`` or ``+=``, reading
``X[j]``, ``B[i]``, ``A[i, j]``, ``X[k]`` and the written values.  Shape ``wide``: up to five statements,
a statement sometimes directly in ``for i``, and ``v[i]`` among the outputs.  Shape ``affine``: one to four
nests of depth one to three with triangular bounds and offsets (as tests/solvers/conftest.py draws them),
whose outputs need not name every loop.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

SIZES = ((1, 2), (1, 3), (2, 2), (2, 1))


def draw_affine(rng: random.Random) -> str:
    """Nests of depth one to three; ranks fixed per array; an output names a subset of its loops."""
    vs = "ijk"
    rank = {a: rng.randint(0, 2) for a in "ABCXY"} | {"Z": 0}
    lines = ["def f(N, M):"]
    for _ in range(rng.randint(1, 4)):
        depth = rng.randint(1, 3)
        for d in range(depth):
            lo = rng.choice(["0", "0", "1"] + [f"{u} + 1" for u in vs[:d]])
            hi = rng.choice(["N", "M"] + [f"{u} + 1" for u in vs[:d]])
            lines.append("    " * (d + 1) + f"for {vs[d]} in range({lo}, {hi}):")
        out_arr = rng.choice([a for a in "ABC" if rank[a] <= depth] or ["Z"])
        out = rng.sample(vs[:depth], rank[out_arr])
        reads = []
        for _ in range(rng.randint(0, 2)):
            arr = rng.choice("ABCXY")
            dims = [rng.choice(vs[:depth]) for _ in range(rank[arr])]
            offs = [rng.choice([0, 0, -1, 1]) for _ in dims]
            subs = ", ".join(f"{v} {'+-'[o < 0]} {abs(o)}" if o else v for v, o in zip(dims, offs))
            reads.append(f"{arr}[{subs}]" if dims else arr)
        target = f"{out_arr}[{', '.join(out)}]" if out else out_arr
        lines.append("    " * (depth + 1) + f"{target} {rng.choice(['=', '+='])} {' * '.join(reads) or '1.0'}")
    return "\n".join(lines) + "\n"


def draw(rng: random.Random, shape: str) -> str:
    """One random program source."""
    if shape == "affine":
        return draw_affine(rng)
    wide = shape == "wide"
    lines = ["def f(N, M):", "    for i in range(M):"]
    outs = ["w", "y[j]", "z[j]"] + (["v[i]"] if wide else [])
    in_j = False
    for _ in range(rng.randint(1, 5 if wide else 3)):
        top = wide and rng.random() < 0.2
        if top:
            in_j = False
            depth, has_k = 2, False
        else:
            if not (in_j and rng.random() < 0.4):
                lines.append("        for j in range(N):")
                in_j = True
            has_k = rng.random() < 0.3
            if has_k:
                lines.append("            for k in range(N):")
            depth = 4 if has_k else 3
        choices = [o for o in outs if not (top and "j" in o)]
        out = rng.choice(choices)
        pool = ["B[i]", "w"] + ([] if top else ["X[j]", "A[i, j]", "y[j]", "z[j]"]) + (["X[k]"] if has_k else [])
        if wide:
            pool.append("v[i]")
        reads = [rng.choice(pool) for _ in range(rng.randint(0, 2))]
        op = rng.choice(["=", "+="])
        lines.append("    " * depth + f"{out} {op} {' * '.join(reads) or '1.0'}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=180)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=("nests", "wide", "affine"), default="nests")
    ap.add_argument("--max-vertices", type=int, default=13)
    args = ap.parse_args()

    from meshplan.models.core.errors import MeshplanError
    from meshplan.models.soap import parse_source
    from meshplan.solvers.soap.bound import analyze
    from meshplan.solvers.soap.pebbling import cdag, optimal_io

    rng = random.Random(args.seed)
    seen: set[str] = set()
    rows, errors, t0 = [], [], time.perf_counter()
    while len(seen) < args.programs:
        src = draw(rng, args.shape)
        if src in seen:
            continue
        seen.add(src)
        try:
            (p,) = parse_source(src)
            res = analyze(p)
        except MeshplanError as err:
            errors.append((src, str(err)))
            continue
        for n, m in SIZES:
            g = cdag(p, {"N": n, "M": m})
            if not 0 < g.n <= args.max_vertices:
                continue
            memory = max(bin(q).count("1") + 1 for q in g.preds)
            best = optimal_io(g, memory)
            values = {"N": n, "M": m, "S": memory}
            bound = max(res.evaluate(values), res.evaluate_numeric(values))
            rows.append({"source": src, "N": n, "M": m, "S": memory, "vertices": g.n,
                         "optimum": best, "bound": bound})
            if bound > best + 1e-9:
                print(f"ABOVE at N={n} M={m} S={memory}: bound {bound:.4g} > optimum {best}\n{src}", flush=True)
    above = [r for r in rows if r["bound"] > r["optimum"] + 1e-9]
    print(f"{args.programs} programs ({args.shape}, seed {args.seed}), {len(rows)} instances, "
          f"{len(above)} above the optimum, {len(errors)} refused, {time.perf_counter() - t0:.0f} s")
    out = Path(__file__).parent / "results" / "pebbling_sweep.json"
    out.write_text(json.dumps({"programs": args.programs, "seed": args.seed, "shape": args.shape,
                               "instances": len(rows), "above": above, "refused": len(errors)}, indent=1))
    return 1 if above else 0


if __name__ == "__main__":
    sys.exit(main())
