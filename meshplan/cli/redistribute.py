"""``meshplan redistribute SRC DST --mesh x=4,y=4`` — memory-bounded array redistribution.

Prints the program of the shortest-path search (paper §7) step by step with the
type after each step, its local size, the height and the cost in bytes; with
``--baseline`` next to the XLA-style strategy; ``--run`` executes both on MPI
ranks and reports verification, peak memory and time.  See docs/redistribute.md.
"""

from __future__ import annotations

import argparse

from meshplan.cli.common import (add_baseline_flag, add_common_flags, add_dtype_flag, add_np_flag,
                                 add_repeats_flag, console, parse_baselines, print_json)
from meshplan.models.core.errors import ModelError
from meshplan.models.core.units import format_bytes, format_seconds

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan redistribute '[3{x}12,2{y}12]' '[2{y}12,3{x}12]' --mesh x=4,y=6 --baseline
  meshplan redistribute '[64{x,y}1024,128]' '[1024,8{x,y}128]' --mesh x=4,y=4 --json
  meshplan redistribute '[16{y}32,16,16{x}64]' '[32,2{x,y}16,64]' --mesh x=4,y=2 --run   # and on MPI
  meshplan redistribute '[128{a}256,128{b}256]' '[256,256]' --mesh a=2,b=2 --cost wire   # bytes sent
"""


def register(subparsers) -> None:
    """Add the ``redistribute`` verb."""
    p = subparsers.add_parser(
        "redistribute",
        help="plan (and run) a memory-bounded redistribution of a distributed array",
        description="Synthesise a sequence of collectives that redistributes an array from type SRC to "
                    "type DST (paper syntax, e.g. '[64{x,y}1024,128]') without ever holding more per "
                    "device than the larger of the two tiles.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC", help="source type, e.g. '[3{x}12,2{y}12]'")
    p.add_argument("dst", metavar="DST", help="target type, e.g. '[2{y}12,3{x}12]'")
    p.add_argument("--mesh", required=True, help="mesh axes, e.g. x=4,y=6")
    from meshplan.models.core.dtypes import DTYPES

    add_dtype_flag(p, choices=sorted(DTYPES), default="f32")
    add_baseline_flag(p, names=("xla",), default="none",
                      help="baselines to show next to the search (xla: GSPMD's resharding; --run runs it anyway)")
    p.add_argument("--cost", choices=("paper", "wire"), default="paper",
                   help="what the search minimises: paper = Fig. 11 of the paper (default; reproduces it), "
                        "wire = bytes each device sends, with the (g-1)/g factor of each collective")
    p.add_argument("--run", action="store_true", help="execute both programs on MPI and verify them")
    from meshplan.cli.testbed import add_testbed_flag; add_testbed_flag(p)  # noqa: E702 - one line per verb
    add_np_flag(p, help="MPI ranks for --run (must equal the mesh size)")
    add_repeats_flag(p, default=3, help="timed runs per program with --run")
    add_common_flags(p)
    p.set_defaults(func=run)


def _table(con, title: str, plan, itemsize: int) -> None:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in ("#", "collective", "type after", "local size", "cost"):
        t.add_column(col, justify="right" if col in ("#", "local size", "cost") else "left", overflow="fold")
    t.add_row("0", "(source)", plan.display(plan.src), format_bytes(plan.src.localsize * itemsize), "")
    for k, s in enumerate(plan.steps, 1):
        op = str(s.step)
        if s.step.op == "allpermute":
            op += f" ({s.step.moved} devices receive"
            op += f", each {s.step.chunks} chunks from the tile's holders)" if s.step.chunks else ")"
        t.add_row(str(k), op, plan.display(s.type), format_bytes(s.localsize * itemsize),
                  format_bytes(s.cost * itemsize))
    con.print(t)
    con.print(f"  height {format_bytes(plan.height * itemsize)} (bound {format_bytes(plan.bound * itemsize)}), "
              f"cost {format_bytes(plan.cost * itemsize)} per device"
              + (" (bytes sent)" if plan.cost_model == "wire" else "")
              + ("" if plan.steps else "; nothing to do"))


def run(args) -> int:
    """``meshplan redistribute``: :func:`meshplan.api.redistribution.plan_redistribution` (or
    :func:`~meshplan.api.redistribution.run_redistribution` with ``--run``), then tables or JSON."""
    from meshplan.api.redistribution import plan_redistribution, run_redistribution

    shown = parse_baselines(args.baseline)  # a table option: the JSON always has the baseline
    if any(b != "xla" for b in shown):
        raise ModelError(f"--baseline {next(b for b in shown if b != 'xla')!r} is unknown; use xla (or none)")
    if args.run:
        from meshplan.api.inputs import as_mesh
        from meshplan.cli.testbed import testbed_jobs

        with testbed_jobs(args, np=args.np or (as_mesh(args.mesh).num_devices if args.testbed else None)):
            res = run_redistribution(args.src, args.dst, args.mesh, dtype=args.dtype, np=args.np,
                                     repeats=args.repeats, cost=args.cost)
    else:
        res = plan_redistribution(args.src, args.dst, args.mesh, dtype=args.dtype, cost=args.cost)
    if args.json:
        print_json(res.to_json())
        return 0 if res.verified else 1
    search, baseline, itemsize = res.search, res.baseline_plan, res.itemsize
    con = console()
    con.print(f"redistribute {res.src} -> {res.dst} on mesh {search.decomposition.original} (prime axes "
              f"{search.mesh}), dtype {res.dtype}")
    _table(con, "search (memory-bounded shortest path, §7)", search, itemsize)
    if shown or args.run:
        _table(con, "baseline (XLA-style)", baseline, itemsize)
    if args.run:
        r = res.run
        for name in ("search", "baseline"):
            x = getattr(r, name)
            con.print(f"  {name:8s} on {r.np} ranks: {'verified' if x.verified else 'FAILED'}, "
                      f"peak tile {format_bytes(x.peak_tile_bytes)}, peak live "
                      f"{format_bytes(x.peak_live_bytes)}, time {format_seconds(x.time_s)}")
    return 0 if res.verified else 1
