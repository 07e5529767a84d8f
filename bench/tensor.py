"""Benchmark of the DistDL tensor primitives and layers (docs/tensor.md).

    python bench/tensor.py [--quick] [--np 4] [--launches 3]
    python bench/tensor.py --repartition-study [--launches 3] [--np 4]

1. Per primitive, on payloads of 1, 4 and 16 MiB per rank: the bytes each rank hands to MPI (counted by the
   runtime's CountingComm) against the model (the primitive's lowering, models/tensor/lowering.py) — they
   must be equal — and the time next to the plain mpi4py collective moving the same payload (Allreduce,
   Alltoallv, Bcast, Reduce, Allgather, Allgatherv for the all-gather of unequal blocks — and, for reference,
   Allgather of equal blocks), timed interleaved in one launch (median of the slowest rank).  The
   primitive writes into a preallocated output (``out=``, as the baseline reuses its receive buffer); the
   time with a fresh output array per call is reported too, and the baseline runs twice per round (an A/A
   control: how far noise alone moves a ratio).  Times on a shared, oversubscribed machine are noisy; the
   ratios are what to read.  The whole measurement runs in ``--launches`` launches (default 3): a ratio moves
   by up to ±15% from one launch to the next (where the arrays land in memory and in the cache), while the A/A
   control within a launch mostly stays within ±5%; the table gives the median of the launches' ratios and
   their range.
2. A small CNN (conv → relu → max-pool → conv → relu → repartition → linear) trained for a few SGD steps on
   N ranks through the torch adapter, next to the same model in sequential torch: the two loss curves.
Writes bench/results/tensor.json.

``--repartition-study``: only the ways to run the transpose repartition at 4 MiB per rank
(exec/tensor/bench_study.py), each side by side with a pre-packed Alltoallv, in ``--launches`` launches; prints
the range of each variant's ratio and writes bench/results/tensor-repartition.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from meshplan.cli.common import progress  # noqa: E402
from meshplan.exec.runtime.launch import run_job  # noqa: E402
from meshplan.exec.tensor.bench_rank import combine_launches  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one payload size, few repeats")
    ap.add_argument("--np", type=int, default=4, help="MPI ranks (default 4)")
    ap.add_argument("--repeats", type=int, default=None, help="timed rounds per primitive at 16 MiB per rank, more for smaller payloads "
                         "(×√(16 MiB / size)); default 25 (5 with --quick)")
    ap.add_argument("--repartition-study", action="store_true",
                    help="only the repartition variants at 4 MiB per rank (docs/tensor.md)")
    ap.add_argument("--launches", type=int, default=None,
                    help="launches of the whole measurement; the table gives the median of their ratios and the "
                         "range (default 3; 1 with --quick)")
    args = ap.parse_args(argv)
    launches = args.launches if args.launches is not None else (1 if args.quick else 3)
    if launches < 1:
        ap.error(f"--launches: expected a positive count, got {launches}")
    if args.repartition_study:
        return _study(args, launches)
    sizes = [1 << 20] if args.quick else [1 << 20, 1 << 22, 1 << 24]
    repeats = args.repeats or (5 if args.quick else 25)
    runs = []
    with progress(True, f"tensor bench on {args.np} ranks", "payloads") as update:
        for k in range(launches):
            tick = None if update is None else (
                lambda done, total, what, k=k: update(k * total + done, launches * total, f"launch {k + 1}: {what}"))
            runs.append(run_job(args.np, "meshplan.exec.tensor.bench_rank", {"sizes": sizes, "repeats": repeats},
                                timeout_s=1200, progress=tick))
    rows = combine_launches([r["rows"] for r in runs])
    rounds = ", ".join(f"{int(k) >> 20} MiB: {v}" for k, v in runs[0]["repeats"].items())
    print(f"tensor primitives on {args.np} ranks, {launches} launch{'es' if launches > 1 else ''} "
          f"(per launch: median of the slowest rank; rounds per payload: {rounds})")
    blank = lambda v, f=1.0: "" if v is None else v * f
    print_table(["primitive", "baseline", "MPI calls", "bytes/rank", "bytes in messages", "bytes in shm window",
                 "sum = model", "meshplan ms", "mpi4py ms", "ratio", "ratio range", "ratio (new array)",
                 "A/A control"],
                [[r["primitive"], r["baseline"], r["lowering"], r["bytes_per_rank"], r["bytes_sent_total"],
                  r["bytes_shared_total"], {True: "yes", False: "NO", None: ""}[r["bytes_equal_model"]],
                  r["time_s"] * 1e3, blank(r["baseline_s"], 1e3), blank(r["ratio"]),
                  "" if r["ratio"] is None else f"{r['ratio_min']:.3f}–{r['ratio_max']:.3f}",
                  blank(r["ratio_new_array"]), blank(r["ratio_baseline_again"])] for r in rows])
    print("bytes in messages / in shm window: summed over all ranks, handed to MPI calls / stored into other "
          "ranks' slots of the node's MPI shared-memory window (node staging); their sum is the model's (in every "
          "launch); times and ratios: the median over the launches, ratio range: their lowest and highest; "
          "ratio = meshplan (into a preallocated out=) / mpi4py; new array = a fresh output per call; "
          "A/A control = the baseline's second run / its first (noise alone)")
    payload = {"np": args.np, "quick": args.quick, "launches": launches, "rounds": runs[0]["repeats"],
               "primitives": rows, "per_launch": [r["rows"] for r in runs]}
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    if have_torch:
        steps = 4 if args.quick else 8
        cnn = run_job(args.np, "meshplan.tensor.adapter_check", {"checks": ["torch-cnn"], "steps": steps},
                      timeout_s=1200)["results"][0]
        print(f"\nsmall CNN, {steps} SGD steps on {args.np} ranks vs sequential torch")
        print_table(["step", "loss (distributed)", "loss (sequential)", "rel. difference"],
                    [[i, a, b, abs(a - b) / abs(b)] for i, (a, b) in enumerate(zip(cnn["loss"], cnn["loss_sequential"]))])
        print(f"final weights: max relative difference {cnn['weights_rel_error']:.2e}")
        payload["cnn"] = cnn
    else:
        print("\ntorch is not installed: CNN training skipped (pip install 'meshplan[torch]')")
    path = write_results("tensor", payload)
    print(f"\nwrote {path}")
    bad = [r["primitive"] for r in rows if r["bytes_equal_model"] is False]     # None: the control row
    return 1 if bad or (have_torch and not payload["cnn"]["ok"]) else 0


def _study(args, launches: int) -> int:
    repeats = args.repeats or 25
    runs = [run_job(args.np, "meshplan.exec.tensor.bench_study", {"size": 1 << 22, "repeats": repeats},
                    timeout_s=1200) for _ in range(launches)]
    names = list(runs[0]["ratio"])
    print(f"transpose repartition at 4 MiB per rank on {args.np} ranks, m = {runs[0]['m']}: ratio to a pre-packed "
          f"Alltoallv in the same launch ({launches} launches, {repeats} rounds each, slowest rank, median)")
    print_table(["variant", "ms (median of launches)", "ratio min", "ratio max"],
                [[k, statistics.median(r["ms"][k] for r in runs), min(r["ratio"][k] for r in runs),
                  max(r["ratio"][k] for r in runs)] for k in names])
    path = write_results("tensor-repartition", {"np": args.np, "repeats": repeats, "launches": runs})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
