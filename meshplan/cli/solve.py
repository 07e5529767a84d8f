"""``meshplan solve placement``: where should each parallelism axis live, and how to reduce?"""

from __future__ import annotations

import argparse

from meshplan.cli.common import add_common_flags, add_solver_flag, console, print_json, progress
from meshplan.models.core.errors import ModelError

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan solve placement --system a100-4x16 --axes 4,16 --reduce 0
  meshplan solve placement --system a100-4x16 --axes 4,16 --reduce 0 --axis-names data,model
  meshplan solve placement --system v100-2x8 --axes 2,2,4 --reduce 0,2 --algo tree
  meshplan solve placement --system node=4,gpu=8 --axes 4,8 --reduce 1 --pin 1:gpu=8 --json
  meshplan solve placement --system examples/systems/dgx-like.json --axes 4,8 --reduce 1 --export plan.json
"""

#: the choices of --dsl and --algo (checked against the library in tests/cli/test_solve_cli.py)
DIALECTS = ("full", "paper")
ALGORITHMS = ("ring", "tree")


def register(sub) -> None:
    """Add ``solve`` and its question ``placement`` to the verb parsers."""
    from meshplan.models.core.presets import PRESETS

    solve = sub.add_parser("solve", help="solve a planning question (placement)",
                           description="Solve a planning question.",
                           epilog="examples:\n  meshplan solve placement --system a100-4x16 --axes 4,16 --reduce 0\n",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    objects = solve.add_subparsers(dest="object", metavar="<question>")
    p = objects.add_parser(
        "placement",
        help="enumerate parallelism placements and synthesize hierarchical reductions for each",
        description=(
            "Enumerate every parallelism matrix that places the axes on the system (P2 §3.1; "
            "CP-SAT or z3), synthesize every reduction program up to --max-size over the "
            "reduction-axis synthesis hierarchy (P2 §3.3-3.5), re-check each by replay, "
            "simulate it on the system's interconnects (P2 §5) and rank. The table shows per "
            "placement the single-step AllReduce time, the best program, its time and speed-up."),
        epilog=EXAMPLES + f"\npresets: {', '.join(PRESETS)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--system", required=True,
                   help="a preset, a .json/.toml system file, or levels like node=4,gpu=16 (docs/formats.md)")
    p.add_argument("--axes", required=True, help="parallelism axis sizes, e.g. 4,16 (their product = #devices)")
    p.add_argument("--reduce", required=True, help="indices of the reduction axes, e.g. 0 or 0,2")
    p.add_argument("--max-size", type=int, default=5, help="largest program size to synthesize (default 5)")
    p.add_argument("--dsl", choices=DIALECTS, default="full",
                   help="full: the DSL of P2 §3.3 as written (default); paper: the restriction that "
                        "reproduces P2's program counts (docs/synthesis.md)")
    p.add_argument("--bytes", default="1GiB", help="data per device to reduce (default 1GiB)")
    p.add_argument("--algo", choices=ALGORITHMS, default="ring", help="collective algorithm, as NCCL_ALGO (default ring)")
    add_solver_flag(p, default="cpsat", help="placement solver")
    p.add_argument("--pin", action="append", default=[], metavar="AXIS:LEVEL=F",
                   help="fix a matrix entry: axis AXIS split F ways across LEVEL (repeatable)")
    p.add_argument("--inside", action="append", default=[], metavar="AXIS:LEVEL",
                   help="keep axis AXIS entirely inside LEVEL (repeatable)")
    p.add_argument("--axis-names", default=None, metavar="A,B,…",
                   help="names of the axes, e.g. data,model (default a0,a1,…; distinct identifiers), carried "
                        "into the table, the JSON and the schedule (export uses them as mesh axis names)")
    p.add_argument("--top", type=int, default=None, metavar="K",
                   help="show only the K fastest placements in the table (JSON always has all)")
    p.add_argument("--top-programs", type=int, default=None, metavar="K",
                   help="programs per placement in --json/--export: the K fastest (default 5); all are "
                        "synthesized, re-checked and simulated either way")
    p.add_argument("--all-programs", action="store_true",
                   help="--json/--export list every synthesized program (streamed; can be large)")
    p.add_argument("--export", metavar="FILE", help="also write the full JSON schedule to FILE "
                   "(input of check/run/export/show)")
    add_common_flags(p)
    p.set_defaults(func=run)
    solve.set_defaults(func=lambda args: _missing(solve))


def _missing(parser) -> int:
    raise ModelError("solve needs a question: `meshplan solve placement …` (see `meshplan solve --help`)")


def run(args) -> int:
    """``meshplan solve placement``: :func:`meshplan.api.placement.solve_placement`, then a table or JSON."""
    from meshplan.api.placement import DEFAULT_PROGRAMS, solve_placement

    if args.top is not None and args.top < 1:
        raise ModelError(f"--top must be at least 1, got {args.top}")
    programs = _programs(args)  # checked before the work
    if args.export:
        from meshplan.models.core.outputs import check_output_path

        check_output_path(args.export, what="--export file")  # before the synthesis: a bad path costs nothing
    with progress(not args.json, "synthesizing") as update:
        plan = solve_placement(args.system, args.axes, args.reduce, max_size=args.max_size, dsl=args.dsl,
                               bytes=args.bytes, algo=args.algo, solver=args.solver, pin=args.pin,
                               inside=args.inside, axis_names=args.axis_names, progress=update,
                               programs=DEFAULT_PROGRAMS if programs is None else min(programs, DEFAULT_PROGRAMS))
    if args.export:
        plan.save(args.export, programs=programs)
    if args.json:
        _print_plan(plan, programs)
        return 0
    _table(plan.study, args.top, plan.axis_names)
    if args.export:
        console().print(f"schedule written to {args.export}")
    return 0


def _programs(args) -> int | None:
    """Programs per placement in the JSON: ``--all-programs`` → all, else ``--top-programs`` (default 5)."""
    from meshplan.api.placement import DEFAULT_PROGRAMS

    if args.all_programs:
        if args.top_programs is not None:
            raise ModelError("give either --top-programs K or --all-programs, not both")
        return None
    return DEFAULT_PROGRAMS if args.top_programs is None else args.top_programs


def _print_plan(plan, programs: int | None) -> None:
    """The JSON on stdout: as ``print_json`` for a small document, streamed per placement when large."""
    import sys

    listed = sum(len(pl.programs) if programs is None else min(programs, len(pl.programs))
                 for pl in plan.study.placements)
    if programs == plan.programs_per_placement and listed * plan.study.system.num_devices * plan.max_size <= 200_000:
        print_json(plan.to_json())
        return
    for chunk in plan.iter_json(programs=programs):
        sys.stdout.write(chunk)


def _spread(row, levels) -> str:
    """Where an axis's groups lie, in words: ``4 gpus within one node``, ``2 nodes x 2 gpus``."""
    parts = [f"{f} {lv}s" for f, lv in zip(row, levels) if f > 1]
    if not parts:
        return "one device"
    outer = next(j for j, f in enumerate(row) if f > 1)
    return " x ".join(parts) + (f" within one {levels[outer - 1]}" if outer > 0 else "")


def recommendation(study, names) -> str:
    """The answer in one plain sentence: which placement, where the reduced axes' groups lie, which collectives
    reduce them, how long it takes and the bytes it assumes."""
    from meshplan.models.core.units import format_bytes, format_seconds

    b = study.best
    if b.best.time.time_s <= 0:
        return ("[bold]Recommendation[/bold]: any placement — nothing to reduce: every reduction group is one "
                "device")
    levels = [lv.name for lv in study.system.levels]
    rows = b.matrix.tolist()
    where = "; ".join(f"axis {names[r]} ({study.axes[r]}-way) across {_spread(rows[r], levels)}" for r in study.reduce)
    steps = [ins.split()[0] for ins in str(b.best.program).replace("\n", ";").split(";") if ins.split()]
    how = ("one " + steps[0]) if len(steps) == 1 else ", ".join(steps[:-1]) + " then " + steps[-1]
    worst = max(p.allreduce.time_s for p in study.placements)
    tail = (f"; {worst / b.best.time.time_s:.1f}x faster than the slowest placement's AllReduce"
            if b.best.time.time_s > 0 and worst > b.best.time.time_s else "")
    return (f"[bold]Recommendation[/bold]: placement 0 — reduce {where} — with {how}: "
            f"{format_seconds(b.best.time.time_s)} per reduction{tail}; assumes "
            f"{format_bytes(study.bytes_per_device)} per device (--bytes)")


def _table(study, top: int | None, names) -> None:
    from meshplan.cli.render import Column, matrix_lines, print_table, program_lines
    from meshplan.models.core.collectives import Collective
    from meshplan.models.core.units import format_bytes, format_seconds

    con = console()
    s = study.system
    axes = ", ".join(f"{n}={a}" for n, a in zip(names, study.axes))
    short = "" if s.short() == str(s) else f"{s.short()}, "
    con.print(f"[bold]{s}[/bold] ({short}{s.num_devices} devices), axes {axes}, "
              f"reduce {','.join(names[r] for r in study.reduce)}, {format_bytes(study.bytes_per_device)} per "
              f"device, {study.algo} algorithm, programs of the {study.dialect} dialect up to {study.max_size} steps")
    levels = ",".join(lv.name for lv in s.levels)
    columns = (
        Column("#", explain="placement index, fastest first (--placement of check, run, export, show)"),
        Column("matrix", "left", explain=f"the parallelism matrix, one line per axis: how many ways the axis "
                                          f"is split across each level ({levels}; P2 §3.1)"),
        Column(str(Collective.ALL_REDUCE), explain="simulated time of one AllReduce over each reduction group"),
        Column("best program", "left", whole=False,
               explain="the fastest synthesized program, one collective per line (AR AllReduce, RS "
                       "ReduceScatter, AG AllGather, R Reduce, B Broadcast; (slice,form) as in docs/synthesis.md)"),
        Column("time", explain="its simulated time (P2 §5)"),
        Column("speed-up", explain="AllReduce time / best program time"),
        Column("progs", explain="how many correct programs synthesis found up to --max-size"))
    shown = study.placements[:top] if top else study.placements
    rows = [(str(i), matrix_lines(pl.matrix.tolist(), names), format_seconds(pl.allreduce.time_s),
             program_lines(pl.best.program.compact()), format_seconds(pl.best.time.time_s), f"{pl.speedup:.2f}x",
             str(len(pl.programs))) for i, pl in enumerate(shown)]
    print_table(con, columns, rows)
    if top and len(study.placements) > top:
        con.print(f"({len(study.placements) - top} more placements; --json lists all)")
    con.print(recommendation(study, names))
    con.print("[dim]placement: how the parallelism axes are spread over the levels (the matrix); AllReduce, "
              "ReduceScatter, AllGather: MPI collectives; times are simulated for the --algo algorithm and the "
              "system's links, not measured (meshplan run measures them)[/dim]")
    con.print(f"synthesis took {study.synthesis_seconds:.3f} s for {len(study.placements)} placements")
