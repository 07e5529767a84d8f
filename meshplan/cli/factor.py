"""``meshplan factor``: plan (and run) a distributed LU or Cholesky factorization (thesis ch. 4,
COnfLUX / COnfCHOX).

    meshplan factor lu|cholesky N --np P [--memory WORDS] [--block V] [--grid PX,PY,PZ]
                    [--run] [--baseline 2d,scalapack] [--repeats R] [--seed S] [--input FILE.npy] [--json]

Without ``--run``: the grid ``[Px, Py, Pz]``, block ``v``, modeled words per rank next to the section 4.6
lower bound and the 2-D model.  With ``--run``: also factors on ``mpiexec -n P``, verifies the factors
(scaled residual ≤ 10), reports the growth factor, the words per rank both counters measured and the
time.  Exit 1 when verification fails or the matrix is singular / not positive definite (the message
names the step and block).  See docs/factor.md for the JSON fields.
"""

from __future__ import annotations

import argparse

from meshplan.cli.common import (add_baseline_flag, add_common_flags, add_np_flag, add_repeats_flag, console,
                                 parse_baselines, print_run_report)
from meshplan.models.core.errors import ModelError

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan factor lu 512 --np 8                    # grid, block and words per rank vs the bound
  meshplan factor cholesky 256 --np 8 --memory 20000 --json
  meshplan factor lu 512 --np 4 --grid 2,2,1 --block 16 --run --baseline 2d   # and on MPI
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "factor", help="plan (and run) a distributed LU / Cholesky factorization (COnfLUX, COnfCHOX)",
        description="Choose the 2.5-D grid and block size of COnfLUX (LU with tournament pivoting) or "
                    "COnfCHOX (Cholesky) for an N×N matrix on P ranks (thesis ch. 4), and optionally run it "
                    "on MPI next to a 2-D block-cyclic factorization and ScaLAPACK.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=("lu", "cholesky"), help="the factorization")
    p.add_argument("N", type=int, help="matrix order")
    add_np_flag(p, required=True, help="number of MPI ranks")
    p.add_argument("--memory", type=int, default=None, metavar="WORDS",
                   help="memory per rank in words (elements); default unlimited")
    p.add_argument("--block", type=int, default=None, metavar="V", help="block size v (default: searched)")
    p.add_argument("--grid", default=None, metavar="PX,PY,PZ", help="processor grid (default: searched)")
    p.add_argument("--objective", default="words", choices=("words", "time"),
                   help="what the plan minimizes: words per rank (default; the papers' criterion) or the time "
                        "modelled with the latency, bandwidth and flop rate of --system")
    p.add_argument("--system", default=None, metavar="FILE",
                   help="with --objective time: the system file `meshplan calibrate` wrote for this machine")
    p.add_argument("--run", action="store_true", help="run the plan on MPI, verify and measure it")
    from meshplan.cli.testbed import add_testbed_flag; add_testbed_flag(p)  # noqa: E702 - one line per verb
    add_baseline_flag(p, names=("2d", "scalapack"), default="2d", help="baselines to run with --run")
    add_repeats_flag(p, default=1, help="timed repetitions with --run")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input matrix (default 0)")
    p.add_argument("--input", default=None, metavar="FILE.npy", help="factor this matrix instead of a random one")
    p.add_argument("--no-pmpi", action="store_true", help="do not load the PMPI counter with --run")
    add_common_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Parse → :mod:`meshplan.api.factorization` → print (the API validates every value)."""
    from meshplan.api.factorization import check_run_options, plan_factorization, run_factorization

    baselines = parse_baselines(args.baseline)
    sizes = dict(memory=args.memory, block=args.block, grid=args.grid, objective=args.objective, system=args.system)
    if args.run:
        from meshplan.cli.testbed import testbed_jobs

        with testbed_jobs(args):
            plan = run_factorization(args.kind, args.N, args.np, **sizes, baselines=baselines, repeats=args.repeats,
                                     seed=args.seed, input=args.input, pmpi=not args.no_pmpi)
    else:
        if args.input is not None:
            raise ModelError("--input needs --run (a plan does not read the matrix)")
        check_run_options(baselines, args.repeats, args.seed)  # the run flags are refused alike without --run
        plan = plan_factorization(args.kind, args.N, args.np, **sizes)
    return print_run_report(args, plan.to_json(), _print)


def _fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if isinstance(x, float) else f"{x:,}"


def _print(rep: dict) -> None:
    from meshplan.cli.render import Column, print_table

    con = console()
    name = "LU (COnfLUX)" if rep["kind"] == "lu" else "Cholesky (COnfCHOX)"
    con.print(f"[bold]{name}[/bold]  N={rep['N']} on {rep['p']} ranks, S={rep['memory'] or '∞'} words")
    con.print(f"grid {rep['grid']}  block v={rep['block']}  memory/rank {rep['memory_words_per_rank']:,} words")
    lb = rep["lower_bound_words"]
    cols = [Column("schedule", "left", whole=False), Column("grid", "left"), Column("model"),
            Column("measured (Python)", whole=False), Column("measured (PMPI)", whole=False),
            Column("words ÷ bound", whole=False, explain="measured (else model) words ÷ the section 4.6 lower bound, "
                   "which counts loading the input once: below 1 means that load is not paid, not that the bound "
                   "is beaten"),
            Column("residual", explain="‖PA − LU‖ / (‖A‖·N·ε), a scaled residual: below about 10 is a correct "
                   "factorization (not a percentage)"),
            Column("growth"), Column("time")]
    run = rep.get("run") or {}
    rows = [(name, rep["grid"], rep["model_words_per_rank"], run)]
    if rep.get("two_d_model_words_per_rank") is not None and "2d" not in rep["baselines"]:
        rows.append(("2-D model (Table 4.2)", "-", rep["two_d_model_words_per_rank"], {}))
    for bname, b in rep["baselines"].items():
        rows.append((bname, b.get("grid", "-"), b.get("model_words_per_rank"), b))
    cells = []
    for label, g, model, r in rows:
        meas, pm = r.get("measured_words_per_rank"), r.get("pmpi_words_per_rank")
        best = pm if pm is not None else (meas if meas is not None else model)
        cells.append((label, str(g).replace(" ", ""), _fmt(model), _fmt(meas), _fmt(pm),
                      f"{best / lb:.2f}" if best is not None else "-",
                      f"{r['scaled_residual']:.2g}" if r.get("scaled_residual") is not None else "-",
                      f"{r['growth_factor']:.3g}" if r.get("growth_factor") is not None else "-",
                      f"{r['time_s']:.3f} s" if r.get("time_s") else ("n/a" if r.get("available") is False else "-")))
    print_table(con, cols, cells, title="words received per rank (mean over ranks)")
    blas = (rep["baselines"].get("scalapack") or {}).get("blas")
    if blas:
        con.print(f"ScaLAPACK ran on OpenBLAS {blas['version']}, kernel {blas['architecture']}")
    con.print(f"section 4.6 lower bound: {lb:,.0f} words per rank (attained only for large N; it also counts "
              "loading the input once, which an already distributed matrix does not pay)")
    for line in rep["explanation"]:
        con.print(f"  {line}")
