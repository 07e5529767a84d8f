"""``meshplan check FILE``: prove that a reduction program computes exactly the requested reduction.

Three referees (docs/check.md): the replay of P2 Figure 8's rules (the
verdict), a z3 proof by symbolic execution and a run on random integers with
numpy; the last two do not use the rules.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from meshplan.cli.common import add_common_flags, add_selection_flags, console, print_json, progress
from meshplan.cli.solve import ALGORITHMS
from meshplan.models.core.errors import ModelError
from meshplan.models.core.units import format_bytes, format_seconds

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan check examples/programs/fig3c_reduce_allreduce_broadcast.txt \\
      --system rack=1,server=2,cpu=2,gpu=4 --axes 4,4 --reduce 1 --matrix '[[1,1,2,2],[1,2,1,2]]'
  meshplan check examples/programs/blueconnect_a100.txt --system a100-2x16 --axes 32 --reduce 0 --json
  meshplan check plan.json                      # every program of `solve placement --export plan.json`
  meshplan check plan.json --placement 0 --program 0,1
"""


def register(sub) -> None:
    """Add the ``check`` verb."""
    p = sub.add_parser(
        "check", help="prove a reduction program right, or show the first step where it goes wrong",
        description=(
            "Check that a reduction program computes exactly the requested reduction: every device ends "
            "with, in every chunk, the sum over exactly its reduction group. The program is replayed with "
            "the collective semantics of P2 Figure 8 (the verdict: the first failing step, device group, "
            "rule and premise, or the devices and chunks that fall short), proved or refuted by z3 "
            "(symbolic execution; a refutation prints a concrete counterexample input) and run on random "
            "integers with numpy. FILE is the text format of docs/check.md (`slice=`/`form=` name levels "
            "of the placement's synthesis hierarchy, `groups=` global device ids) or a schedule written by "
            "`meshplan solve placement --export`. Exit 0 valid, 1 invalid, 2 bad input."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="a program (.txt, docs/check.md) or a schedule (.json)")
    p.add_argument("--system", help="a preset, a .json/.toml system file, or levels like node=4,gpu=16 "
                                    "(required for a text program)")
    p.add_argument("--axes", help="parallelism axis sizes, e.g. 4,16 (required for a text program)")
    p.add_argument("--reduce", help="indices of the reduction axes, e.g. 0 or 0,2 (required for a text program)")
    p.add_argument("--matrix", help="the parallelism matrix, e.g. '[[2,2],[2,8]]' (may be omitted when only "
                                    "one placement exists)")
    add_selection_flags(p, several=True)
    p.add_argument("--bytes", default=None, help="data per device for the simulated time (default 1GiB, or "
                                                 "the schedule's)")
    p.add_argument("--algo", choices=ALGORITHMS, default=None, help="collective algorithm for the simulated "
                                                                    "time (default ring, or the schedule's)")
    p.add_argument("--no-proof", action="store_true", help="skip the z3 proof (replay and numpy only)")
    add_common_flags(p)
    p.set_defaults(func=run)


# -- inputs -----------------------------------------------------------------------------------


def _is_schedule(path: Path, text: str) -> bool:
    return path.suffix.lower() == ".json" or text.lstrip().startswith("{")


def _read(path_text: str) -> tuple[Path, str]:
    from meshplan.models.core.files import read_text

    return Path(path_text), read_text(path_text, what="program file")


# -- output -----------------------------------------------------------------------------------


def _say(con, text: str, style: str | None = None, prefix: str = "") -> None:
    """Print ``prefix`` (rich markup) followed by ``text`` taken literally (brackets are not markup)."""
    from rich.markup import escape

    con.print(prefix + escape(text), style=style)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _cell(mask: int) -> str:
    from meshplan.models.core.bits import bits

    return ",".join(map(str, bits(mask))) if mask else "–"


def _print_result(con, res, lines: Sequence[int] | None, items, system, algo: str,
                  nbytes: int) -> None:
    from rich.table import Table

    v = res.verdict
    if v.valid:
        _say(con, f"{_n(v.steps, 'step')} {'reaches' if v.steps == 1 else 'reach'} the requested reduction; simulated time {format_seconds(res.time_s)} "
                  f"({algo}, {format_bytes(nbytes)} per device, {system})", prefix="[bold green]valid[/bold green]: ")
    elif v.failure is not None:
        f = v.failure
        _say(con, f"step {f.step}, {f.collective} over devices {list(f.group)}: {f.detail}",
             prefix="[bold red]invalid[/bold red]: ")
        where = f" (line {lines[f.step - 1]}: {items[f.step - 1]})" if lines and items else ""
        _say(con, f"  rule {f.rule}, failed premise: {f.premise}{where}")
        _say(con, f"  states of the group before step {f.step} (per chunk: the devices whose data it holds):")
        t = Table()
        t.add_column("device", justify="right")
        for r in range(res.chunks):
            t.add_column(f"chunk {r}")
        for d, s in zip(f.group, f.states_before):
            t.add_row(str(d), *(_cell(m) for m in s))
        con.print(t)
    else:
        _say(con, f"every step satisfies its rule, but the program ends before every device holds its group's "
                  f"sum ({len(v.shortfalls)} device-chunks fall short):", prefix="[bold red]invalid[/bold red]: ")
        for s in v.shortfalls[:6]:
            _say(con, f"  {s}")
        if len(v.shortfalls) > 6:
            _say(con, f"  … and {len(v.shortfalls) - 6} more (--json lists all)")
        if res.crossing is not None:
            _say(con, f"  cause: {res.crossing}")
    pr = res.proof
    if pr is not None:
        _say(con, f"z3 proof: {pr.status} — {pr.reason}")
        if pr.counterexample is not None:
            _print_counterexample(con, pr, res.chunks)
    _say(con, f"numpy run: {'correct' if res.numeric.correct else 'wrong — ' + res.numeric.reason}")
    if res.note:
        _say(con, res.note, prefix="[yellow]note[/yellow]: ")


def _print_counterexample(con, pr, chunks: int) -> None:
    ce = pr.counterexample
    w = ce.wrong[0]
    devices = sorted({d for d, _, _ in w.terms} | {w.device} | set(w.group))
    _say(con, "  counterexample input x[device][chunk] (devices involved; --json lists all): " + "; ".join(
        f"x[{d}] = [{', '.join(str(ce.inputs[(d, r)]) for r in range(chunks))}]" for d in devices))
    summands = " + ".join((f"{c}·" if c != 1 else "") + f"x[{d}][{r}]" for d, r, c in w.terms)
    more = f" ({len(ce.wrong) - 1} more outputs are wrong on this input)" if len(ce.wrong) > 1 else ""
    _say(con, f"  wrong output: device {w.device} chunk {w.chunk} = {summands or '0'} = {w.got}, expected "
              f"{w.expected}{more}")


# -- the command --------------------------------------------------------------------------------


def run(args) -> int:
    """``meshplan check FILE``: :func:`~meshplan.api.reduction.check_program` on a text program or
    :func:`~meshplan.api.reduction.check_schedule` on a schedule, then the verdicts."""
    path, text = _read(args.file)
    if _is_schedule(path, text):
        return _run_schedule(args, path)
    return _run_text(args, path)


def _run_text(args, path: Path) -> int:
    from meshplan.api.reduction import check_program

    missing = [f for f in ("system", "axes", "reduce") if getattr(args, f) is None]
    if missing:
        raise ModelError(f"a text program needs {', '.join('--' + m for m in missing)} (the system and "
                         "placement it runs on)")
    if args.placement is not None or args.program is not None:
        raise ModelError("--placement and --program select programs of a schedule file, not of a text program")
    res = check_program(path, args.system, args.axes, args.reduce, matrix=args.matrix, bytes=args.bytes or "1GiB",
                        algo=args.algo or "ring", proof=not args.no_proof)
    if args.json:
        print_json(res.to_json())
    else:
        pl = res.placed
        con = console()
        system = pl.system_value
        sysname = system.short() if str(system) == system.short() else f"{system} ({system.short()})"
        _say(con, f"{path}: {_n(len(pl.program), 'step')} on {sysname}, axes {list(pl.axes)}, reduce "
                  f"{list(pl.reduce)}, matrix {pl.placement}")
        groups, h = pl.reduction_groups, pl.hierarchy
        g0 = ", ".join(map(str, groups[0][:8])) + (", …" if len(groups[0]) > 8 else "")
        _say(con, f"synthesis hierarchy {h} (levels {', '.join(h.names)}); {_n(len(groups), 'reduction group')} "
                  f"of {_n(len(groups[0]), 'device')}, e.g. [{g0}]; {_n(res.chunks, 'chunk')} per device")
        _print_result(con, res.result, pl.program.lines, pl.program.items, system, res.algo, res.bytes_per_device)
    res.raise_if_disagree()
    return 0 if res.valid else 1


def _run_schedule(args, path: Path) -> int:
    from meshplan.api.reduction import check_schedule
    from meshplan.models.reduction.program_text import from_lowered

    for flag in ("system", "axes", "reduce", "matrix"):
        if getattr(args, flag) is not None:
            raise ModelError(f"--{flag} is read from the schedule {str(path)!r}; select programs with "
                             "--placement and --program instead")
    with progress(not args.json, "checking") as update:
        res = check_schedule(str(path), placement=args.placement, program=args.program, bytes=args.bytes,
                             algo=args.algo, proof=not args.no_proof, progress=update)
    if args.json:
        print_json(res.to_json())
    else:
        sched = res.schedule
        _schedule_table(path, sched, res.checks, res.algo, res.bytes_per_device)
        for pl, pr, r in res.checks:
            if not r.valid or not r.agree:
                con = console()
                _say(con, f"placement {pl.id} {pl.matrix}, program {pr.id}: {pr.text}")
                items = from_lowered(pr.lowered).items
                _print_result(con, r, None, items, sched.system, res.algo, res.bytes_per_device)
    res.raise_if_disagree()
    return 0 if res.valid else 1


def _schedule_table(path: Path, sched, results, algo: str, nbytes: int) -> None:
    from meshplan.models.placement.problem import axis_names as as_axis_names
    from meshplan.cli.render import Column, matrix_lines, print_table

    con = console()
    names = as_axis_names(sched.axis_names, len(sched.axes))
    _say(con, f"{path}: {sched.system} ({sched.system.short()}), axes "
              f"{', '.join(f'{n}={a}' for n, a in zip(names, sched.axes))}, reduce "
              f"{','.join(names[r] for r in sched.reduce)}; {len(results)} programs, simulated with {algo}, "
              f"{format_bytes(nbytes)} per device")
    columns = (Column("pl", explain="placement index in the schedule"),
               Column("matrix", "left", explain="its parallelism matrix, one line per axis (docs/solve.md)"),
               Column("#", explain="program index inside the placement"),
               Column("steps", explain="collectives in the program"),
               Column("replay", "left", explain="the solver-free checker's verdict (P2 Figure 8)"),
               Column("z3", "left", explain="the z3 proof's status (--no-proof skips it)"),
               Column("numpy", "left", explain="the numeric referee on random data"),
               Column("time", explain="simulated time"))
    rows = [(str(pl.id), matrix_lines(pl.matrix.tolist(), names), str(pr.id), str(res.verdict.steps),
             "valid" if res.valid else "invalid", res.proof.status if res.proof else "-",
             "correct" if res.numeric.correct else "wrong",
             format_seconds(res.time_s) if res.time_s is not None else "-") for pl, pr, res in results]
    print_table(con, columns, rows)
    nvalid = sum(r.valid for _, _, r in results)
    _say(con, f"{nvalid} of {len(results)} programs valid")
