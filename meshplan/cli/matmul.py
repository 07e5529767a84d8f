"""``meshplan matmul``: plan (and run) a distributed matrix multiplication C = A·B (thesis ch. 3, COSMA).

    meshplan matmul M N K --np P [--memory WORDS] [--idle-tolerance 0.03] [--dtype f64]
                    [--run] [--baseline summa,scalapack] [--repeats R] [--json]

A is M×K, B is K×N.  Without ``--run``: the processor grid, ranks used, local domain, strategy, rounds and
the words per rank of the model next to the Theorem 3.2 lower bound and the baselines' models.  With
``--run``: also executes on ``mpiexec -n P``, verifies C against numpy and reports the words per rank both
counters measured and the time.  See docs/matmul.md for the JSON fields.
"""

from __future__ import annotations

import argparse

from meshplan.cli.common import (add_baseline_flag, add_common_flags, add_np_flag, add_repeats_flag, console,
                                 np_limit, parse_baselines, print_run_report)
from meshplan.models.core.dtypes import FLOAT

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan matmul 1300 1300 1300 --np 65            # COSMA's grid vs SUMMA and the bound
  meshplan matmul 256 256 256 --np 8 --json
  meshplan matmul 256 256 256 --np 4 --run --baseline summa   # and on MPI
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "matmul", help="plan (and run) a distributed matrix multiplication (COSMA grids, SUMMA, ScaLAPACK)",
        description="Choose the communication-optimal processor grid for C = A·B (A is M×K, B is K×N) on P "
                    "ranks with CP-SAT (thesis ch. 3, COSMA), and optionally run it on MPI next to 2-D SUMMA "
                    "and ScaLAPACK's pdgemm.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("m", metavar="M", type=int, help="rows of A and C")
    p.add_argument("n", metavar="N", type=int, help="columns of B and C")
    p.add_argument("k", metavar="K", type=int, help="columns of A, rows of B")
    add_np_flag(p, required=True, help="number of MPI ranks")
    p.add_argument("--memory", type=int, default=None, metavar="WORDS",
                   help="memory per rank in words (elements), buffers included; default unlimited")
    p.add_argument("--idle-tolerance", type=float, default=0.03,
                   help="largest fraction of ranks that may stay idle for a better grid (default 0.03)")
    p.add_argument("--dtype", default="f64", metavar="T",
                   help=f"element type: {', '.join(FLOAT)} (or numpy's spelling; default f64)")
    p.add_argument("--objective", default="words", choices=("words", "time"),
                   help="what the plan minimizes: words per rank (default; the papers' criterion) or the time "
                        "modelled with the latency, bandwidth and flop rate of --system")
    p.add_argument("--system", default=None, metavar="FILE",
                   help="with --objective time: the system file `meshplan calibrate` wrote for this machine")
    p.add_argument("--run", action="store_true", help="run the plan on MPI, verify and measure it")
    from meshplan.cli.testbed import add_testbed_flag; add_testbed_flag(p)  # noqa: E702 - one line per verb
    add_baseline_flag(p, names=("summa", "scalapack"), default="summa", help="baselines to run with --run")
    add_repeats_flag(p, default=3, help="timed repetitions with --run", aliases=())
    p.add_argument("--layout", default="blocked", choices=("blocked", "scalapack"),
                   help="with --run: start from and end in COSMA's blocked layout (default) or ScaLAPACK's "
                        "block-cyclic one (the conversions are counted)")
    p.add_argument("--no-pmpi", action="store_true", help="do not load the PMPI counter with --run")
    add_common_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Parse → :func:`meshplan.api.matmul.plan_matmul` (or ``run_matmul`` with ``--run``) → print; the API
    checks every value."""
    from meshplan.api.matmul import check_run_options, plan_matmul, run_matmul

    baselines = parse_baselines(args.baseline)
    size = dict(memory=args.memory, idle_tolerance=args.idle_tolerance, dtype=args.dtype, objective=args.objective,
                system=args.system)
    if args.run:
        from meshplan.cli.testbed import testbed_jobs

        with np_limit(args), testbed_jobs(args):
            plan = run_matmul(args.m, args.n, args.k, args.np, **size, baselines=baselines, repeats=args.repeats,
                              pmpi=not args.no_pmpi, layout=args.layout)
    else:
        check_run_options(baselines, args.repeats)  # the run flags are refused alike without --run
        plan = plan_matmul(args.m, args.n, args.k, args.np, **size)
    return print_run_report(args, plan.to_json(), _print)


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.1f}"
    return f"{x:,}"


def _print(rep: dict) -> None:
    from rich.markup import escape

    from meshplan.cli.render import Column, print_table

    con = console()
    pr = rep["problem"]
    con.print(f"[bold]C = A·B[/bold]  m={pr['m']} n={pr['n']} k={pr['k']} on {pr['p']} ranks, "
              f"S={pr['memory'] or '∞'} words, {pr['dtype']}")
    con.print(f"grid {rep['grid']}  ranks used {rep['ranks_used']} ({rep['idle_ranks']} idle)  local domain "
              f"{rep['local_domain']}  strategy '{rep['strategy']}'  rounds {rep['rounds']}  "
              f"memory/rank {rep['memory_per_rank_words']:,} words")
    lb = rep["lower_bound_words"]
    cols = [Column("schedule", "left", whole=False), Column("model"), Column("measured (Python)", whole=False),
            Column("measured (PMPI)", whole=False),
            Column("words ÷ bound", whole=False, explain="measured (else model) words ÷ the Theorem 3.2 lower bound, "
                   "which counts every element of A, B and C a rank's products touch, also those it starts with: "
                   "below 1 means the initial layout paid for part of it, not that the bound is beaten"),
            Column("time (min)"), Column("rel. error")]
    run = rep["run"]
    rows = [("meshplan (COSMA)" + (f", {run['layout']} layout" if run and run.get("layout") != "blocked" else ""),
             (run or rep)["model_words_per_rank"]["max"], run)]
    for name, b in rep["baselines"].items():
        model = b.get("model_words_per_rank", {}).get("max") if b.get("model_words_per_rank") else None
        rows.append((name, model, b if "verified" in b else None))
    cells = []
    for name, model, run in rows:
        meas = run["measured_words_per_rank"]["max"] if run and run.get("measured_words_per_rank") else None
        pm = run["pmpi_words_per_rank"]["max"] if run and run.get("pmpi_words_per_rank") else None
        best = pm if pm is not None else (meas if meas is not None else model)
        cells.append((escape(name), _fmt(model), _fmt(meas), _fmt(pm), f"{best / lb:.2f}" if best is not None else "-",
                      f"{run['time_s']['min']:.4f} s" if run and run.get("time_s", {}).get("min") else "-",
                      f"{run['max_rel_error']:.1e}" if run else "-"))
    print_table(con, cols, cells, title="words received per rank (max)")
    blas = (rep["baselines"].get("scalapack") or {}).get("blas")
    if blas:
        con.print(f"ScaLAPACK ran on OpenBLAS {blas['version']}, kernel {blas['architecture']}")
    con.print(f"Theorem 3.2 lower bound: {lb:,.1f} words per rank; Table 3.3 models: "
              + ", ".join(f"{k} {v:,.0f}" for k, v in rep["table33"].items()))
    for line in rep.get("explanation") or ():  # objective time: what each candidate costs
        con.print(f"  {line}")
