"""Benchmark: meshplan's redistribution inside PyTorch and JAX against the frameworks' own planners.

    python bench/frameworks.py [--quick] [--cost wire|paper] [--no-torch] [--no-jax] [--reductions]

On the seeded family of redistribution problems (meshplan.api.framework_family: 2-D and 3-D arrays, meshes of
4 and 8 devices with 2-3 axes, transposes, moves between mesh axes, both orders of several axes on one
dimension, replicated <-> sharded, sizes the mesh does not divide):

* PyTorch (4 and 8 gloo processes, one launch each): meshplan.torch.redistribute against DTensor's default
  (greedy) planner, its min-cost graph planner and the default planner with its all-to-all as on NCCL (on CPU
  DTensor gathers and chunks); bytes sent per rank read by intercepting torch's functional collectives
  (CollectiveCounter, a TorchDispatchMode), peak = the largest tensor an operation took or made; the maximum
  over ranks; every result compared bit for bit with DTensor's.
* JAX (8 fake CPU devices): meshplan.jax.reshard against jax.device_put (XLA's SPMD resharding); bytes read
  from the compiled HLO's collectives, peak from compiled.memory_analysis(); results compared bit for bit.

Bytes and peaks are exact counts, not timings, so the machine's load does not change them.  Prints one table
per framework and a summary; writes bench/results/frameworks.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from meshplan.api.framework_family import framework_family  # noqa: E402


#: three schedules, one with two reduction axes: every program runs in both frameworks with --reductions
SCHEDULES = (("node=2,gpu=2", "2,2", "0,1"), ("node=2,gpu=2", "4", "0"), ("node=2,gpu=4", "2,4", "1"))


def _devices(schedule) -> int:
    import math

    return math.prod(int(part.split("=")[1]) for part in schedule[0].split(","))


def _summary(records: list[dict], baseline: str) -> dict:
    rows = [r for r in records if baseline in r]
    le_b = sum(r["meshplan"]["sent_bytes"] <= r[baseline]["sent_bytes"] for r in rows)
    lt_b = sum(r["meshplan"]["sent_bytes"] < r[baseline]["sent_bytes"] for r in rows)
    le_p = sum(r["meshplan"]["peak_bytes"] <= r[baseline]["peak_bytes"] for r in rows)
    lt_p = sum(r["meshplan"]["peak_bytes"] < r[baseline]["peak_bytes"] for r in rows)
    return {"baseline": baseline, "problems": len(rows), "bytes_le": le_b, "bytes_lt": lt_b, "peak_le": le_p,
            "peak_lt": lt_p, "equal_results": sum(r["equal"] for r in rows),
            "holds": le_b == len(rows) and le_p == len(rows) and 2 * lt_b >= len(rows)}


def _table(records: list[dict], ways: tuple[str, ...]) -> None:
    headers = ["problem", "equal"] + [f"{w} sent/peak B" for w in ways]
    rows = []
    for r in records:
        rows.append([r["problem"], "yes" if r["equal"] else "NO"]
                    + [f"{r[w]['sent_bytes']}/{r[w]['peak_bytes']}" for w in ways])
    print_table(headers, rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first 12 problems only")
    ap.add_argument("--cost", choices=("wire", "paper"), default="wire", help="what meshplan's search minimises")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--reductions", action="store_true",
                    help="also every program of three schedules by meshplan.torch.all_reduce and meshplan.jax.psum "
                         "against the frameworks' all-reduce (the JAX half compiles for minutes)")
    args = ap.parse_args(argv)
    family = framework_family()
    if args.quick:
        family = family[:12]
    out: dict = {"cost": args.cost, "problems": [str(p) for p in family]}
    if not args.no_torch:
        from meshplan.torch.compare import WAYS, compare

        records, reductions = [], []
        for n in (4, 8):
            part = [p for p in family if p.devices == n]
            scheds = tuple(s for s in SCHEDULES if _devices(s) == n) if args.reductions else ()
            if part or scheds:
                rec, red = compare(part, n, cost=args.cost, reductions=scheds, with_reductions=True)
                records += rec
                reductions += red
        if args.reductions:
            out["torch_all_reduce"] = reductions
            print(f"meshplan.torch.all_reduce: {sum(r['equal'] for r in reductions)} of {len(reductions)} programs "
                  "equal dist.all_reduce over the reduction group")
        print(f"PyTorch {__import__('torch').__version__} (gloo): bytes sent / peak per rank (max over ranks)")
        _table(records, WAYS)
        out["torch"] = {"records": records, "summary": [_summary(records, b) for b in WAYS[1:]]}
    if not args.no_jax:
        import math

        from meshplan.jax.compare import compare as jcompare

        expressible = [p for p in family if all(n % math.prod(dict(p.mesh)[a] for a in d) == 0
                                                 for side in (p.src, p.dst) for n, d in zip(p.shape, side))]
        records = jcompare(expressible, cost=args.cost)
        print("JAX (8 fake CPU devices): bytes sent (compiled HLO) / peak (memory analysis) per device")
        _table(records, ("meshplan", "xla"))
        out["jax"] = {"records": records, "summary": [_summary(records, "xla")],
                      "not_expressible": [str(p) for p in family if p not in expressible]}
        if args.reductions:
            from meshplan.jax.compare import compare_psum

            reds = compare_psum(SCHEDULES)
            out["jax_psum"] = reds
            print(f"meshplan.jax.psum: {sum(r['equal'] for r in reds)} of {len(reds)} programs equal lax.psum")
    print("\nsummary (meshplan against each baseline; holds = <= bytes and peak on all, fewer bytes on >= half)")
    rows = [[fw, s["baseline"], s["problems"], s["equal_results"], s["bytes_le"], s["bytes_lt"], s["peak_le"],
             s["peak_lt"], s["holds"]] for fw in ("torch", "jax") if fw in out for s in out[fw]["summary"]]
    print_table(["framework", "baseline", "problems", "equal", "bytes <=", "bytes <", "peak <=", "peak <", "holds"],
                rows)
    write_results("frameworks", out)
    return 0 if all(r["equal"] for fw in ("torch", "jax") if fw in out for r in out[fw]["records"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
