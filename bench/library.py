"""Overhead of meshplan's executors (``plan.bind(comm)``) against the same MPI calls written by hand in mpi4py
(docs/library.md, "Overhead").

    python bench/library.py [--quick] [--np 4] [--launches 3] [--repeats R] [--only reduction,halo]
                            [--results-dir DIR]

Every executor — reduction, redistribution, halo (forward and adjoint), matmul (blocked and ScaLAPACK
layouts), LU and Cholesky (factor and solve) — runs beside a plain mpi4py program that makes the same MPI
calls on the same data (bench/library_cases.py and bench/library_kernels.py say, per row, what the
hand-written side does), timed interleaved in one launch of ``--np`` ranks (slowest rank, median of the
rounds; bench/library_rank.py).  Both sides are verified against numpy in every launch; with the PMPI
counter (exec/runtime/pmpi.py) preloaded, the bytes each side hands to MPI in one call are compared.  The
whole measurement runs in ``--launches`` separate ``mpiexec`` launches; the table gives per row the median
of the launches' ratios and their range, next to an A/A control (the hand-written call timed twice per
round: how far noise alone moves a ratio).  Reference rows time the executor against a hand-written side
that also does what the executor must (its checks, its local arithmetic), control rows a little Python
before a plain call against the call: where a gap comes from.  BLAS runs one thread per rank on both sides
(``OPENBLAS_NUM_THREADS=1``, ``OMP_NUM_THREADS=1``); the machine's load average before and after each
launch is recorded.  Writes bench/results/library.json (or ``DIR/library.json``).  A failed verification
makes the exit status 1 and is named last, on stderr: the row, the side (executor or hand-written), before or
after the timed rounds, the launch, the rank and what was wrong (the entries that differ, a solve's residual);
a rank's error names its row too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402
from _common import print_table, write_results  # noqa: E402

from meshplan.cli.common import progress  # noqa: E402
from meshplan.exec.runtime import pmpi  # noqa: E402
from meshplan.exec.runtime.launch import MpiRunError, run_mpi_json  # noqa: E402
from meshplan.exec.tensor.bench_rank import combine_launches  # noqa: E402

RANK = Path(__file__).resolve().with_name("library_rank.py")
CASES = ("reduction", "redistribution", "halo", "matmul", "factorization")
#: the target of the overhead: executor time / hand-written time, median of the launches
TARGET = 1.05
BLAS_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _launch(np_: int, job: dict, env: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="meshplan-library-bench-") as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(job))
        before = os.getloadavg()
        out = run_mpi_json(np_, [str(RANK), str(path)], timeout_s=3600, env=env)
        out["load_before"], out["load_after"] = list(before), list(os.getloadavg())
        return out


def _env(use_pmpi: bool) -> tuple[dict, str | None]:
    env = dict(BLAS_ONE_THREAD)
    if not use_pmpi:
        return env, "off (--no-pmpi)"
    try:
        env.update(pmpi.preload_env())
    except pmpi.PmpiUnavailable as why:
        return env, f"unavailable: {why}"
    return env, None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 3 rounds per row")
    ap.add_argument("--np", type=int, default=4, help="MPI ranks (default 4)")
    ap.add_argument("--launches", type=int, default=None,
                    help="separate launches of the whole measurement (default 3; 1 with --quick)")
    ap.add_argument("--repeats", type=int, default=None, help="timed rounds per row (default: per row, 12–200, 3 with --quick)")
    ap.add_argument("--only", default=None, help=f"comma-separated cases out of {','.join(CASES)}")
    ap.add_argument("--no-pmpi", action="store_true", help="do not preload the PMPI byte counter")
    ap.add_argument("--results-dir", default=None, help="where library.json goes (default bench/results)")
    args = ap.parse_args(argv)
    launches = args.launches if args.launches is not None else (1 if args.quick else 3)
    if launches < 1:
        ap.error(f"--launches: expected a positive count, got {launches}")
    if args.repeats is not None and args.repeats < 1:
        ap.error(f"--repeats: expected a positive count, got {args.repeats}")
    only = CASES if args.only is None else tuple(c.strip() for c in args.only.split(",") if c.strip())
    bad = [c for c in only if c not in CASES]
    if bad:
        ap.error(f"--only: unknown case {', '.join(bad)}; choose from {', '.join(CASES)}")
    env, pmpi_note = _env(not args.no_pmpi)
    job = {"quick": args.quick, "repeats": args.repeats, "only": list(only)}
    runs = []
    with progress(True, f"library bench on {args.np} ranks", "launches") as update:
        for k in range(launches):
            if update is not None:
                update(k, launches, f"launch {k + 1}")
            try:
                runs.append(_launch(args.np, job, env))
            except MpiRunError as err:  # a rank raised: its message names the row (bench/library_rank.py)
                print(f"error: launch {k + 1} of {launches} failed: {err}", file=sys.stderr)
                return 1
        if update is not None:
            update(launches, launches, "done")
    rows = combine_launches([r["rows"] for r in runs])
    for row, same in zip(rows, zip(*(r["rows"] for r in runs))):
        row["verified"] = all(r["verified_meshplan"] and r["verified_mpi4py"] for r in same)
        row["ratios"] = [r["ratio"] for r in same]
        row["failed"] = [f"launch {k + 1}: {why}" for k, r in enumerate(same) for why in r.get("failed", [])]
        # an executor against its hand-written version (the target), a reference (the hand-written side doing
        # what the executor must, to show where a gap comes from) or a control (no executor: noise and Python)
        row["role"] = ("control" if row["primitive"].startswith("control:") else
                       "reference" if row["baseline"].startswith("reference:") else "executor")
    loads = [(r["load_before"][0], r["load_after"][0]) for r in runs]
    print(f"executors vs hand-written mpi4py on {args.np} ranks, {launches} launch{'es' if launches > 1 else ''} "
          f"(per launch: median of the slowest rank; load average {', '.join(f'{a:.2f}→{b:.2f}' for a, b in loads)}; "
          f"BLAS threads {runs[0]['blas_threads'].get('OPENBLAS_NUM_THREADS')}; PMPI byte check "
          f"{'on' if runs[0]['pmpi'] else pmpi_note or 'off'})")
    yes = {True: "yes", False: "NO", None: ""}

    def same_bytes(r):  # where the sides differ: the executor's extra bytes sent per rank
        if r["bytes_equal_model"] is not False or not r["mpi_bytes_sent"]:
            return yes[r["bytes_equal_model"]]
        ours, hand = r["mpi_bytes_sent"]
        return f"{(ours - hand) / args.np:+.0f} B/rank"
    print_table(["executor", "hand-written mpi4py", "bytes/rank", "same MPI bytes", "meshplan ms", "mpi4py ms",
                 "ratio", "ratio range", "A/A control", "verified"],
                [[r["primitive"], r["baseline"], r["bytes_per_rank"], same_bytes(r), r["time_s"] * 1e3,
                  r["baseline_s"] * 1e3, r["ratio"], f"{r['ratio_min']:.3f}–{r['ratio_max']:.3f}",
                  r["ratio_baseline_again"], yes[r["verified"]]] for r in rows])
    print(f"ratio = executor / hand-written, the median over the launches (range: lowest and highest); A/A control "
          f"= the hand-written call's second timing / its first (noise alone); same MPI bytes: the bytes each side "
          f"hands to MPI in one call (PMPI), on every rank — the factorization's executor adds its small "
          f"agreement reductions (the factor's input check and breakdown, the solve's check of every rank's "
          f"right-hand side); target ≤ {TARGET}")
    over = [r["primitive"] for r in rows if r["role"] == "executor" and r["ratio"] > TARGET]
    if over:
        print(f"executors above {TARGET}: {'; '.join(over)}")
    payload = {"np": args.np, "quick": args.quick, "launches": launches, "target": TARGET,
               "blas_threads": runs[0]["blas_threads"], "pmpi": runs[0]["pmpi"],
               "load_average": [{"before": r["load_before"], "after": r["load_after"]} for r in runs],
               "rows": rows, "per_launch": [r["rows"] for r in runs],
               "ratio_median_max": max((r["ratio"] for r in rows if r["role"] == "executor"), default=None),
               "aa_control_median": statistics.median(r["ratio_baseline_again"] for r in rows) if rows else None}
    if args.results_dir is not None:
        _common.RESULTS = Path(args.results_dir)
    path = write_results("library", payload)
    print(f"\nwrote {path}")
    failed = [(r["primitive"], r["baseline"], why) for r in rows for why in r["failed"]]
    for name, baseline, why in failed:  # last, so that the tail of the output names the row
        print(f"verification failed: {name} (against {baseline}), {why}", file=sys.stderr)
    if not all(r["verified"] for r in rows) and not failed:
        print("verification failed: " + "; ".join(r["primitive"] for r in rows if not r["verified"]),
              file=sys.stderr)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
