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
  Bytes are the busiest device's (as for torch) and, beside them, all devices' together with the floor
  under the latter (the elements each device's target block lacks, from JAX's index maps).
* ``--paper-sample N`` (JAX only): also N problems drawn as the redistribution paper's §8 evaluation draws
  them (bench/redistribution.py's sampler, seed 2022: meshes of 3 axes, 8-64 devices in turn, 1-6-D arrays,
  every axis independently replicated or on a random dimension), about 2^14 elements each, on 64 fake
  devices: the kind of problem behind the first XLA comparison.  ``--paper-sample-on family`` draws them on
  the family's meshes with 2-D and 3-D arrays instead.  A separate table, not the family.

Bytes and peaks are exact counts, not timings, so the machine's load does not change them.  Prints one table
per framework and a summary; writes bench/results/frameworks.json.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results

from meshplan.api.framework_family import framework_family

#: three schedules, one with two reduction axes: every program runs in both frameworks with --reductions
SCHEDULES = (("node=2,gpu=2", "2,2", "0,1"), ("node=2,gpu=2", "4", "0"), ("node=2,gpu=4", "2,4", "1"))


def _devices(schedule) -> int:
    return math.prod(int(part.split("=")[1]) for part in schedule[0].split(","))


def _summary(records: list[dict], baseline: str) -> dict:
    rows = [r for r in records if baseline in r]
    le_b = sum(r["meshplan"]["sent_bytes"] <= r[baseline]["sent_bytes"] for r in rows)
    lt_b = sum(r["meshplan"]["sent_bytes"] < r[baseline]["sent_bytes"] for r in rows)
    le_p = sum(r["meshplan"]["peak_bytes"] <= r[baseline]["peak_bytes"] for r in rows)
    lt_p = sum(r["meshplan"]["peak_bytes"] < r[baseline]["peak_bytes"] for r in rows)
    out = {"baseline": baseline, "problems": len(rows), "bytes_le": le_b, "bytes_lt": lt_b, "peak_le": le_p,
           "peak_lt": lt_p, "equal_results": sum(r["equal"] for r in rows),
           "holds": le_b == len(rows) and le_p == len(rows) and 2 * lt_b >= len(rows)}
    if rows and "total_sent_bytes" in rows[0]["meshplan"]:
        tot = [(r["meshplan"]["total_sent_bytes"], r[baseline]["total_sent_bytes"]) for r in rows]
        out.update(total_le=sum(m <= b for m, b in tot), total_lt=sum(m < b for m, b in tot),
                   baseline_at_floor=sum(r[baseline]["sent_bytes"] == r["need_busiest_bytes"] for r in rows),
                   baseline_total_at_floor=sum(r[baseline]["total_sent_bytes"] == r["need_total_bytes"]
                                               for r in rows))
    return out


def _table(records: list[dict], ways: tuple[str, ...]) -> None:
    headers = ["problem", "equal"] + [f"{w} sent/peak B" for w in ways]
    rows = []
    for r in records:
        rows.append([r["problem"], "yes" if r["equal"] else "NO"]
                    + [f"{r[w]['sent_bytes']}/{r[w]['peak_bytes']}" for w in ways])
    print_table(headers, rows)


def _jax_table(records: list[dict]) -> None:
    rows = [[r["problem"], "yes" if r["equal"] and r["grad_equal"] else "NO",
             f"{r['meshplan']['sent_bytes']}/{r['meshplan']['peak_bytes']}",
             f"{r['xla']['sent_bytes']}/{r['xla']['peak_bytes']}",
             r["need_busiest_bytes"],
             f"{r['meshplan']['total_sent_bytes']}/{r['xla']['total_sent_bytes']}/{r['need_total_bytes']}",
             "; ".join(r["xla"]["collectives"]) or "-"] for r in records]
    print_table(["problem", "equal", "meshplan sent/peak B", "xla sent/peak B", "floor B",
                 "all devices: meshplan/xla/floor B", "XLA's collectives (elements per device)"], rows)


def _jax_summary_rows(label: str, s: dict) -> list:
    return [label, s["problems"], s["equal_results"], s["bytes_le"], s["bytes_lt"], s["peak_le"], s["peak_lt"],
            s["baseline_at_floor"], s["total_le"], s["total_lt"], s["baseline_total_at_floor"]]


def _paper_sample(n: int, on: str) -> list:
    """``n`` problems drawn as the redistribution paper's §8 draws them: on its meshes with
    bench/redistribution.py's sampler (seed 2022), or (``on="family"``) on the family's meshes with 2-D and 3-D
    arrays (seed 26, sizes as the family's: the axes' least common multiple times 8, 16 or 24)."""
    import random

    from meshplan.models.redistribution.mesh import Mesh
    from meshplan.models.redistribution.sample import random_type_axes
    from redistribution import SYNTH_MESHES, sample

    from meshplan.api.framework_family import MESHES, FamilyProblem

    out: list = []
    if on == "paper":
        rng = random.Random(2022)
        for k in range(n):
            pr = sample(rng, SYNTH_MESHES[k % len(SYNTH_MESHES)], elements=1 << 14)
            out.append(FamilyProblem("mixed", tuple((a, pr.mesh.size(a)) for a in pr.mesh.names),
                                     pr.src.globaltype, tuple(d.axes for d in pr.src.dims),
                                     tuple(d.axes for d in pr.dst.dims)))
        return out
    rng, k = random.Random(26), 0
    while len(out) < n:
        mesh = MESHES[k % len(MESHES)]
        k += 1
        rank, size = rng.choice((2, 3)), dict(mesh)
        a, b = (random_type_axes(rng, Mesh(mesh), rank, 1 / 3) for _ in range(2))
        shape = tuple(math.lcm(math.prod(size[x] for x in a[i]), math.prod(size[x] for x in b[i]))
                      * 8 * rng.randint(1, 3) for i in range(rank))
        p = FamilyProblem("mixed", mesh, shape, tuple(map(tuple, a)), tuple(map(tuple, b)))
        if a != b and p not in out:
            out.append(p)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first 12 problems only")
    ap.add_argument("--cost", choices=("wire", "paper"), default="wire", help="what meshplan's search minimises")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--paper-sample", type=int, default=0, metavar="N",
                    help="also N problems drawn as the paper's §8 (3 axes, 8-64 devices, 1-6-D) against XLA")
    ap.add_argument("--paper-sample-on", choices=("paper", "family"), default="paper",
                    help="the §8 sample's meshes: the paper's (8-64 devices, 1-6-D arrays) or the family's (4 and 8 "
                         "devices, 2-D and 3-D arrays)")
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
        from meshplan.jax.compare import compare as jcompare

        expressible = [p for p in family if all(n % math.prod(dict(p.mesh)[a] for a in d) == 0
                                                 for side in (p.src, p.dst) for n, d in zip(p.shape, side))]
        records = jcompare(expressible, cost=args.cost)
        print("\nJAX (8 fake CPU devices): bytes sent (compiled HLO) / peak (memory analysis) per device")
        _jax_table(records)
        out["jax"] = {"records": records, "summary": [_summary(records, "xla")],
                      "not_expressible": [str(p) for p in family if p not in expressible]}
        jrows = [_jax_summary_rows("family", out["jax"]["summary"][0])]
        if args.paper_sample:
            sample = _paper_sample(args.paper_sample, args.paper_sample_on)
            recs = jcompare(sample, cost=args.cost, devices=max(p.devices for p in sample), timeout_s=3600.0)
            print(f"\nJAX, the paper's §8 sample on the {args.paper_sample_on}'s meshes ({len(sample)} problems; "
                  "not the family)")
            _jax_table(recs)
            out["jax_paper_sample"] = {"on": args.paper_sample_on, "records": recs,
                                       "summary": [_summary(recs, "xla")]}
            jrows.append(_jax_summary_rows("§8 sample", out["jax_paper_sample"]["summary"][0]))
            eight = [r for r, p in zip(recs, sample) if p.devices <= 8]
            if eight and args.paper_sample_on == "paper":
                jrows.append(_jax_summary_rows("§8 sample, 8 devices", _summary(eight, "xla")))
        print("\nmeshplan against XLA: the busiest device's bytes and peak, and the bytes of all devices together; "
              "'XLA at floor': XLA sends the floor, so no program sends fewer")
        print_table(["problems", "n", "equal", "bytes <=", "bytes <", "peak <=", "peak <", "XLA at floor",
                     "all bytes <=", "all bytes <", "XLA's all at floor"], jrows)
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
    return 0 if all(r["equal"] for fw in ("torch", "jax", "jax_paper_sample") if fw in out
                    for r in out[fw]["records"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
