"""``meshplan calibrate --np N``: measure this machine and write a system file for the simulator (docs/calibrate.md)."""

from __future__ import annotations

import argparse

from meshplan.cli.common import (add_common_flags, add_np_flag, add_repeats_flag, console, print_json, progress,
                                 seconds)
from meshplan.models.core.units import format_bytes, format_seconds

__all__ = ["register", "run"]

EXAMPLES = """\
examples:
  meshplan calibrate --np 8 -o here.json                      # levels node=2,gpu=4
  meshplan calibrate --np 16 --system node=4,gpu=4 -o here.json
  meshplan solve placement --system here.json --axes 4,4 --reduce 0 --bytes 1MiB
"""


def register(sub) -> None:
    """Add the ``calibrate`` verb."""
    p = sub.add_parser(
        "calibrate", help="measure latency and bandwidth per level on MPI and write a system file",
        description=(
            "Start `mpiexec -n N`, measure point-to-point latency and bandwidth (idle and with every rank "
            "busy) and the time of each collective between ranks at each level of the system shape "
            "(rank r = device r), and write a system file whose interconnects carry the loaded "
            "measurements, so `solve placement --system FILE` simulates times comparable with `run`."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_np_flag(p, required=True, help="MPI ranks (= devices of the system shape)")
    p.add_argument("--system", default=None,
                   help="level names and sizes, e.g. node=2,gpu=4 (default node=2,gpu=N/2, or gpu=N for odd N); "
                        "interconnects given here are ignored")
    p.add_argument("--bytes", default="1MiB", help="message size for bandwidths and collectives (default 1MiB)")
    add_repeats_flag(p, default=5, help="timed repetitions per measurement", aliases=("--repeat", "--iters"))
    p.add_argument("-o", "--output", metavar="FILE", help="write the system file (JSON) to FILE")
    p.add_argument("--timeout", type=seconds, default=300.0, help="kill the MPI job after this many seconds")
    add_common_flags(p, json_help="print the system file (with its calibration section) as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    """``meshplan calibrate``: :func:`meshplan.api.calibration.calibrate`, write the system file, print."""
    from meshplan.api.calibration import calibrate
    from meshplan.models.core.outputs import check_output_path

    if args.output:
        check_output_path(args.output, what="-o file")  # before the measurements: a bad path costs nothing
    with progress(not args.json, f"measuring on {args.np} MPI ranks", "measurement") as update:
        res = calibrate(args.np, system=args.system, bytes=args.bytes, repeats=args.repeats, timeout=args.timeout,
                        progress=update)
    if args.output:
        res.save(args.output)
    doc = res.to_json()
    if args.json:
        print_json(doc)
        return 0
    _table(doc, args)
    return 0


def _table(doc, args) -> None:
    from meshplan.cli.render import Column, print_table

    con = console()
    cal = doc["calibration"]
    con.print(f"[bold]calibration[/bold] on {cal['ranks']} ranks, {format_bytes(cal['bytes'])} messages, "
              f"{cal['iters']} repetitions (median)")
    columns = (Column("level", "left"),
               Column("latency idle", explain="point to point between two ranks, the others idle"),
               Column("bandwidth idle"),
               Column("latency loaded", explain="the same while every rank exchanges with its partner at once"),
               Column("bandwidth loaded"),
               Column("latency fit", explain="the link that best reproduces the measured collectives (written "
                                             "to the file)"),
               Column("bandwidth fit"),
               Column("fit error", explain="root mean square relative error of that fit"))
    rows = []
    for lv in cal["levels"]:
        fit = lv["fit"]
        rows.append((lv["level"], format_seconds(lv["idle"]["latency"]), f"{lv['idle']['bandwidth'] / 1e9:.2f} GB/s",
                     format_seconds(lv["loaded"]["latency"]), f"{lv['loaded']['bandwidth'] / 1e9:.2f} GB/s",
                     format_seconds(fit["latency"]) if fit["ok"] else "-",
                     f"{fit['bandwidth'] / 1e9:.2f} GB/s" if fit["ok"] else "-",
                     f"{fit['rms_relative_error']:.0%}" if fit["ok"] else "no fit"))
    print_table(con, columns, rows, title="per level")
    columns = (Column("level", "left"), Column("collective", "left"),
               Column("group", explain="ranks per group; every group of the level runs at once"),
               Column("measured", explain="median time of the collective"),
               Column("simulated", explain="the simulator's time on the fitted system"),
               Column("ratio", explain="measured / simulated"))
    rows = []
    for c in cal["collectives"]:
        ratio = c["measured_s"] / c["simulated_s"] if c["simulated_s"] else float("nan")
        rows.append((c["level"], c["collective"], str(c["group_size"]), format_seconds(c["measured_s"]),
                     format_seconds(c["simulated_s"]), f"{ratio:.2f}"))
    print_table(con, columns, rows, title="collectives over the groups that vary one level")
    if args.output:
        con.print(f"system file written to {args.output}")
