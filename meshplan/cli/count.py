"""``meshplan count``: symbolic loop iteration counts, work, depth and parallel efficiency (thesis ch. 2).

    meshplan count FILE.py [--function NAME] [--params n=1024,p=16] [--bounds u1=0..100] [--verify] [--json]

See docs/count.md for the output and the JSON format.
"""

from __future__ import annotations

import argparse

from meshplan.cli.common import add_common_flags, console, print_json
from meshplan.models.core.errors import VerificationError

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan count examples/loops/counting/prefix_sum.py --params n=1024,p=16
  meshplan count examples/loops/counting/prefix_sum.py --json
  meshplan count examples/loops/counting/gemm_2d.py --params NI=6,NJ=8,NK=5,p=2,q=3 --verify
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "count", help="loop iteration counts, work, depth and parallel efficiency of a Python loop program",
        description="Count how often every statement of plain Python loop nests runs, symbolically in the "
                    "parameters and the process count p (thesis chapter 2): affine while/for loops, "
                    "multiplicative updates, rank-parallel loops; work W = N(p=1), depth D = N(p->oo), "
                    "efficiency E_p = W/(p N) and the available parallelism.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="Python file with one or more functions")
    p.add_argument("--function", help="analyze only this function of FILE")
    p.add_argument("--params", default="", help="values to evaluate at, e.g. n=1024,p=16 (also u1=… for unknown loops)")
    p.add_argument("--bounds", default="", help="bounds of unknown loop counts, e.g. u1=0..100,u2=1..n")
    p.add_argument("--procs", default="p", help="name of the process-count parameter (default p)")
    p.add_argument("--rank", default=None, help="name of the rank variable (default: rank, id, tid, pid or me); a "
                                                "process grid is declared in the function instead: "
                                                "assert 0 <= r < p and 0 <= s < q")
    p.add_argument("--verify", action="store_true",
                   help="run the loop nest with --params and check the symbolic counts against the executed ones")
    add_common_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from meshplan.api.counting import count_iterations

    res = count_iterations(args.file, function=args.function, procs=args.procs, rank=args.rank,
                           bounds=args.bounds or None, params=args.params or None, verify=args.verify)
    plans = res if isinstance(res, list) else [res]
    reports = [p.to_json() for p in plans]
    ok = all(p.verification is None or p.verification.ok for p in plans)
    if args.json:
        print_json(reports[0] if len(reports) == 1 else {"functions": reports})
    else:
        for rep in reports:
            _print(rep)
    if not ok:
        if args.json:
            return 1
        raise VerificationError("the executed counts differ from the symbolic ones (see the table above)")
    return 0


def _print(rep: dict) -> None:
    from rich.table import Table

    con = console()
    vals = rep.get("values", {})
    title = f"{rep['function']}({', '.join(rep['parameters'])})" + (
        f", process grid {', '.join(f'0 <= {r} < {q}' for r, q in rep['grid'].items())}" if rep.get("grid") else
        f", rank variable {rep['rank']}" if rep["rank"] else "")
    t = Table(title=title + ("" if rep["exact"] else "  [bounds: not exact]"))
    t.add_column("statement")
    t.add_column("line", justify="right")
    t.add_column("N (most loaded process)")
    if vals:
        t.add_column("value", justify="right")
    for name, expr in rep["iterations"].items():
        b = rep["bounds"].get(name)
        text = expr if expr is not None else f"{b['lower']} .. {b['upper']}"
        cases = rep.get("cases", {}).get(name, ())
        if len(cases) > 1:  # Barvinok's piecewise quasi-polynomial: one line per case
            text = "\n".join(f"{c['count']}   if {c['when']}" for c in cases)
        row = [name, str(rep["lines"].get(name, "")), text]
        if vals:
            v = vals.get(name)
            row.append(str(v) if v is not None else "{} .. {}".format(*vals.get(f"{name}_bounds", ["?", "?"])))
        t.add_row(*row)
    procs = ",".join(rep["grid"].values()) if rep.get("grid") else "p"
    for key, label in (("work", f"W = N({procs.replace(',', '=')}=1)"), ("depth", f"D = N({procs}->oo)"),
                       ("efficiency", "E_p"), ("available_parallelism", "available parallelism")):
        expr = rep[key]
        if expr is None and key in rep["bounds"]:
            expr = f"{rep['bounds'][key]['lower']} .. {rep['bounds'][key]['upper']}"
        row = [label, "", str(expr)]
        if vals:
            v = vals.get(key)
            row.append(str(v) if v is not None else "{} .. {}".format(*vals.get(f"{key}_bounds", ["", ""])))
        t.add_row(*row)
    con.print(t)
    for note in rep["notes"]:
        con.print(f"note: {note}")
    ver = rep.get("verification")
    if ver:
        con.print(f"verification at {ver['values']}: {'ok' if ver['ok'] else 'FAILED'}")
        for row in ver["rows"]:
            if not row["ok"]:
                con.print(f"  {row['statement']}: executed {row['executed']}, symbolic {row['lower']} .. {row['upper']}")
