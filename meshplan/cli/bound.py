"""``meshplan bound``: I/O lower bounds and I/O-optimal tiles of loop programs (SOAP, thesis ch. 5).

    meshplan bound FILE.py [--function NAME] [--params N=4096,S=65536,p=16] [--json]
    meshplan bound --einsum 'ij,jk->ik' [--params N_i=1024,N_j=1024,N_k=1024,S=4096]
    meshplan bound FILE.py --params N=64,S=1024 --schedule     # + attained I/O of the tool's schedule

See docs/bound.md for the output and the JSON format.
"""

from __future__ import annotations

import argparse
import contextlib
import gc

from meshplan.cli.common import add_common_flags, console, print_json, progress, seconds

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan bound examples/loops/mmm.py --params M=1024,N=1024,K=1024,S=4096
  meshplan bound --einsum 'ij,jk->ik' --no-tiles --json
  meshplan bound examples/loops/atax.py --params M=512,N=512,S=1024,p=4 --no-tiles
"""


def register(subparsers) -> None:
    """Add the ``bound`` verb."""
    p = subparsers.add_parser(
        "bound", help="I/O lower bound and optimal tiles of a loop program (SOAP)",
        description="Derive the I/O lower bound Q >= |V|(X0-S)/chi(X0) of plain Python loop nests or an "
                    "einsum (SOAP, thesis chapter 5), per statement and fused subgraph, and the I/O-optimal "
                    "tile sizes (integer ones from CP-SAT when --params gives sizes and S).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", nargs="?", help="Python file with loop-nest functions")
    p.add_argument("--function", help="analyze only this function of FILE")
    p.add_argument("--einsum", help="analyze an einsum contraction instead of a file, e.g. 'ij,jk->ik'")
    p.add_argument("--params", default="", help="sizes, fast memory S and processors p, e.g. N=4096,S=65536,p=16")
    p.add_argument("--strict", action="store_true",
                   help="reject programs that need a projection of section 5.5 instead of projecting them")
    p.add_argument("--no-tiles", action="store_true", help="skip the CP-SAT integer tiles")
    p.add_argument("--time-limit", type=seconds, default=3.0, help="CP-SAT time limit per tile model (s)")
    p.add_argument("--schedule", action="store_true",
                   help="also count the I/O of the tool's tiled schedule by an LRU replay of S words at the "
                        "--params sizes (keep them small) and print bound, attained I/O and their ratio")
    add_common_flags(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """``meshplan bound``: :func:`meshplan.api.soap.analyze_bounds`, then tables or JSON."""
    from meshplan.api.soap import analyze_bounds
    from meshplan.models.core.errors import ModelError

    if args.einsum and args.file:
        raise ModelError("give either FILE or --einsum, not both")
    if not args.einsum and not args.file:
        raise ModelError("no input: give FILE.py or --einsum SPEC")
    if args.einsum:
        from meshplan.models.loops.frontend import parse_einsum

        source = parse_einsum(args.einsum)
    else:
        source = args.file
    with progress(not args.json, "bounding", "program") as update, _fewer_collections():
        reports = analyze_bounds(source, function=args.function, params=args.params, strict=args.strict,
                                 tiles=not args.no_tiles, time_limit_s=args.time_limit, schedule=args.schedule,
                                 progress=update)
    if args.json:
        print_json(reports[0].to_json() if len(reports) == 1 else {"programs": [r.to_json() for r in reports]})
    else:
        for rep in reports:
            _print(rep.to_json())
    return 0


def _print(rep: dict) -> None:
    from rich.table import Table

    con = console()
    con.print(f"[bold]{rep['program']}[/bold]  ({rep['source'] or 'einsum'}; parameters "
              f"{', '.join(rep['params']) or 'none'}; {rep['seconds']:.2f} s)")
    proj = [c for c in rep["conditions"] if c["status"] != "ok"]
    for c in proj:
        con.print(f"  {c['statement']}: condition {c['condition']} {c['status']}: {c['message']}")
    t = Table(title="subgraph statements (section 5.5.4)", show_lines=False)
    for col in ("H (arrays)", "statements", "ρ", "χ(X)", "X0", "tiles at X0", "method"):
        t.add_column(col)
    shown = [sg for sg in rep["subgraphs"] if sg["method"] != "screened"]
    for sg in shown:
        tiles = ", ".join(f"{c}={e}" for c, e in sg["tiles"].items()) or "-"
        t.add_row("{" + ", ".join(sg["arrays"]) + "}", " ".join(sg["statements"]), sg["rho"],
                  sg["chi"] or "-", sg["X0"], tiles,
                  sg["method"] + (f" ({len(sg['cases'])} cases)" if sg["cases"] else ""))
    con.print(t)
    hidden = len(rep["subgraphs"]) - len(shown)
    if hidden:
        con.print(f"  + {hidden} screened subgraph{'s' * (hidden > 1)} not shown: a cheap upper bound on their ρ does "
                  "not exceed the derived leader of any of their arrays (--json lists every subgraph)")
    con.print(f"  bound     Q ≥ {rep['bound']}")
    con.print(f"  leading   Q ≳ {rep['leading_term']}")
    if rep.get("window"):
        w = rep["window"]
        con.print(f"  window    Q ≥ {w['bound']} (pivot {w['pivot']}: {w['reads_per_step']} inputs per step of "
                  f"{w['loop']}); without recomputation Q ≥ {w['no_recomputation']} ≳ "
                  f"{w['leading_term_no_recomputation']}")
    con.print(f"  parallel  Q_p ≥ {rep['parallel_bound']}")
    if rep["values"]:
        v = rep["values"]
        line = (f"  value     Q ≥ {v['bound']:.6g} (leading term {v['leading_term']:.6g}, ρ = {v['rho']:.6g}); "
                f"with X0 searched numerically Q ≥ {v['bound_numeric']:.6g}")
        if "parallel_bound" in v:
            line += f"; per processor {v['parallel_bound']:.6g}"
        con.print(line)
    it = rep.get("integer_tiles")
    if it:
        con.print(f"  tiles of {{{', '.join(it['subgraph'])}}} under Σ|A| ≤ X0 = {it['X0']}: "
                  f"continuous {_fmt(it['continuous'])} (work {it['continuous_work']:.6g}); "
                  f"rounded {_fmt(it['rounded'])} (work {it['rounded_work']}); "
                  f"CP-SAT {it['status']} {_fmt(it['integer'])} (work {it['integer_work']}"
                  + (f", gap {it['gap']:.4f})" if it["gap"] else ")"))
    sc = rep.get("schedule")
    if sc:
        tiles = _fmt(sc["tiles"]) if sc["tiled"] else "none"
        ratio = f"{sc['ratio']:.3f}" if sc["ratio"] is not None else "-"
        con.print(f"  schedule  {sc['schedule']} (tiles {tiles}) at {_fmt(sc['sizes'])}, S={sc['S']}: "
                  f"attained Q = {sc['total']} ({sc['loads']} loads + {sc['stores']} stores, LRU replay); "
                  f"lower bound {sc['lower_bound']:.6g}; ratio {ratio}; loop order Q = {sc['loop_order']['total']}")
        for n in sc["notes"]:
            con.print(f"  schedule note: {n}")
    for n in rep["notes"]:
        con.print(f"  note: {n}")
    con.print("")


def _fmt(d) -> str:
    if not d:
        return "-"
    return "×".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


@contextlib.contextmanager
def _fewer_collections():
    """The analysis allocates millions of short-lived sympy and ``Fraction`` objects that reference counting
    frees (almost none are in cycles), and every full pass of the cyclic collector scanned the objects of
    sympy's and numpy's modules again (about 0.3 s of deriche's 2 s).  So the youngest generation is
    collected every 10 000 allocations instead of 700 while sympy and the analysis modules load and the
    analysis runs, and the objects alive once they are loaded are frozen out of the collections
    (``gc.freeze``); both are undone afterwards.  The analysis does the same work."""
    old = gc.get_threshold()
    gc.set_threshold(10_000, *old[1:])
    try:
        import meshplan.solvers.soap.bound  # noqa: F401

        gc.freeze()
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
