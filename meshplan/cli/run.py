"""``meshplan run SCHEDULE.json``: run reduction programs on MPI ranks and verify them (docs/run.md)."""

from __future__ import annotations

import argparse

from meshplan.cli.common import (add_common_flags, add_dtype_flag, add_np_flag, add_repeats_flag,
                                 add_selection_flags, console, print_json, progress, status, seconds)
from meshplan.models.core.units import format_bytes, format_seconds

__all__ = ["register", "run", "status"]

EXAMPLES = """\
examples:
  meshplan solve placement --system node=2,gpu=4 --axes 2,4 --reduce 1 --export plan.json
  meshplan run plan.json                          # every program of every placement, 8 ranks
  meshplan run plan.json --placement 1 --program 0,1,2 --bytes 4MiB --repeats 10
  meshplan run plan.json --json > runs.json
  meshplan run plan.json --testbed --bytes 16MiB --repeats 3   # across `meshplan testbed up --nodes 4`
"""


def register(sub) -> None:
    """Add the ``run`` verb."""
    p = sub.add_parser(
        "run", help="run the programs of a schedule on MPI, verify them, time them",
        description=(
            "Launch `mpiexec -n N` (one rank per device of the schedule's system), run every selected "
            "reduction program on random integer-valued data (each rank's buffer split into k chunks, "
            "k = reduction-group size), verify every rank's result against numpy, and report per "
            "program: verified, time per step and total (min and median over --repeats timed runs, "
            "slowest rank), the bytes each rank handed to MPI and the simulator's bytes. Exit 1 when "
            "a program is not verified."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("schedule", metavar="FILE",
                   help="a schedule written by `meshplan solve placement --export FILE`, or a reduction program "
                        "in the text format of docs/check.md together with --system/--axes/--reduce[/--matrix]")
    p.add_argument("--system", default=None, help="text program only: the system (preset, file or node=2,gpu=4)")
    p.add_argument("--axes", default=None, help="text program only: parallelism axis sizes, e.g. 4,4")
    p.add_argument("--reduce", default=None, help="text program only: reduction axes, e.g. 1")
    p.add_argument("--matrix", default=None, help="text program only: the parallelism matrix, e.g. "
                                                  "'[[1,1,2,2],[1,2,1,2]]' (needed when several exist)")
    add_np_flag(p, help="MPI ranks (default and only accepted value: the system's device count)")
    p.add_argument("--bytes", default="1MiB", help="buffer per rank (default 1MiB; the schedule's size is for "
                                                   "simulation)")
    add_repeats_flag(p, default=5, help="timed runs per program")
    add_selection_flags(p, several=True)
    from meshplan.models.core.dtypes import DTYPES, RUNNABLE

    add_dtype_flag(p, choices=[DTYPES[k].numpy for k in RUNNABLE], default="int64",
                   help="element type (data are small integers, so every check is exact)")
    p.add_argument("--timeout", type=seconds, default=600.0, help="kill the MPI job after this many seconds "
                                                                "(default 600)")
    from meshplan.cli.testbed import add_testbed_flag

    add_testbed_flag(p)
    add_common_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """``meshplan run``: :func:`meshplan.api.reduction_run.run_programs`, then a table or JSON."""
    from meshplan.api.reduction_run import run_programs

    from meshplan.cli.testbed import testbed_jobs

    with testbed_jobs(args, schedule=args.schedule), progress(not args.json, "running on MPI", "program") as update:
        res = run_programs(args.schedule, placement=args.placement, program=args.program, system=args.system,
                           axes=args.axes, reduce=args.reduce, matrix=args.matrix, np=args.np, bytes=args.bytes,
                           repeats=args.repeats, dtype=args.dtype, timeout=args.timeout, progress=update)
    if args.json:
        print_json(res.to_json())
    else:
        _table(res)
    return 1 if res.failed else 0


def _table(res) -> None:
    from rich.markup import escape

    from meshplan.cli.render import Column, print_table, program_lines

    con = console()
    sched = res.schedule_value
    con.print(f"[bold]{sched.system}[/bold] on {res.np} MPI ranks, {format_bytes(res.buffer_bytes)} {res.dtype} "
              f"per rank, {res.repeat} timed run{'s' if res.repeat != 1 else ''} per program (slowest rank)")
    columns = (
        Column("pl", explain="placement index in the schedule"),
        Column("#", explain="program index inside the placement (0 = the simulator's fastest)"),
        Column("program", "left", whole=False, explain="one collective per line (AR, RS, AG, R, B; docs/solve.md)"),
        Column("verified", "left", explain="every rank's result equals the numpy sum over its reduction group"),
        Column("median", explain="program time, median over the timed runs (slowest rank)"),
        Column("min", explain="the fastest timed run"),
        Column("algbw", explain="bytes per rank / median time (nccl-tests' algorithm bandwidth, GB/s)"),
        Column("busbw", explain="algbw × 2(k−1)/k, k = reduction-group size: the bus bandwidth of an AllReduce "
                                "over the same groups (nccl-tests doc/PERFORMANCE.md; docs/run.md)"),
        Column("steps (median)", explain="each step's median time, beside its collective"),
        Column("→MPI B/rank", explain="most bytes a rank handed to MPI"),
        Column("sim B/rank", explain="most bytes a device sends on the wire in the simulator"))
    rows = []
    for x in res.programs:
        ok = "[green]yes[/green]" if x["verified"] else ("[red]no[/red]" if x["executable"] else "[red]not run[/red]")
        med, mn = x["time_s"], x["time_min_s"]
        steps = "\n".join(format_seconds(s["time_s"]) for s in x["steps"] if s["time_s"] is not None)
        sb = x["sim_bytes_per_rank"]
        rows.append((str(x["placement"]), str(x["program"]), escape(program_lines(x["text"])), ok,
                     format_seconds(med) if med is not None else "-", format_seconds(mn) if mn is not None else "-",
                     _gbps(x.get("algbw_GBps")), _gbps(x.get("busbw_GBps")), steps or "-",
                     format_bytes(max(x["bytes_per_rank"])), format_bytes(max(sb)) if sb else "-"))
    print_table(con, columns, rows)
    failed = [x for x in res.programs if not x["verified"]]
    for x in failed:
        con.print(f"[red]placement {x['placement']} program {x['program']}[/red]: "
                  + escape(f"{x['reason']}; checker: {x['checker']}"))
    con.print(f"{len(res.programs) - len(failed)} of {len(res.programs)} programs verified"
              + ("" if not failed else f", {len(failed)} failed"))


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} GB/s"
