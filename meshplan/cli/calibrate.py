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
  meshplan calibrate --testbed --system node=4,gpu=2 -o here.json   # across `meshplan testbed up --nodes 4`
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
    add_np_flag(p, help="MPI ranks (= devices of the system shape; default: the devices of --system)")
    p.add_argument("--system", default=None,
                   help="level names and sizes, e.g. node=2,gpu=4 (default node=2,gpu=N/2, or gpu=N for odd N); "
                        "interconnects given here are ignored")
    p.add_argument("--bytes", default=None,
                   help="largest message of the sweep (it also measures 1/4 and 1/16 of it; default 1MiB, "
                        "16MiB with --testbed)")
    add_repeats_flag(p, default=5, help="timed repetitions per measurement", aliases=("--repeat", "--iters"))
    from meshplan.cli.testbed import add_testbed_flag

    add_testbed_flag(p)
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
    with progress(not args.json, "measuring on MPI", "measurement") as update:
        res = calibrate(args.np, system=args.system, bytes=args.bytes, repeats=args.repeats, timeout=args.timeout,
                        progress=update, testbed=args.testbed)
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
    con.print(f"[bold]calibration[/bold] on {cal['ranks']} ranks, messages of "
              f"{', '.join(format_bytes(b) for b in cal['sweep_bytes'])}, {cal['iters']} repetitions (median)")
    columns = (Column("level", "left"),
               Column("latency idle", explain="point to point between two ranks, the others idle"),
               Column("bandwidth idle"),
               Column("latency loaded", explain="the same while every rank exchanges with its partner at once"),
               Column("bandwidth loaded"),
               Column("kind", "left", explain="switch: a port per device; nic: one port per unit of the level "
                                              "(the kind whose fits err least)"),
               Column("latency fit", explain="the link that best reproduces all measured collectives (written "
                                             "to the file)"),
               Column("bandwidth fit"),
               Column("fit error", explain="root mean square relative error of that fit"))
    rows = []
    for lv in cal["levels"]:
        fit = lv["fit"]
        rows.append((lv["level"], format_seconds(lv["idle"]["latency"]), f"{lv['idle']['bandwidth'] / 1e9:.2f} GB/s",
                     format_seconds(lv["loaded"]["latency"]), f"{lv['loaded']['bandwidth'] / 1e9:.2f} GB/s",
                     fit["kind"] or "-", format_seconds(fit["latency"]) if fit["ok"] else "-",
                     f"{fit['bandwidth'] / 1e9:.2f} GB/s" if fit["ok"] else "-",
                     f"{fit['rms_relative_error']:.0%}" if fit["ok"] else "no fit"))
    print_table(con, columns, rows, title="per level")
    columns = (Column("level", "left"), Column("collective", "left"),
               Column("latency", explain="fitted for this collective at this level (written to the file)"),
               Column("bandwidth"),
               Column("fit error", explain="root mean square relative error over the sweep"),
               Column("points", explain="measurements: group sizes × (all groups, one group) × message sizes"),
               Column("measured/simulated", explain="range of the ratio over the points, on the written file"))
    rows = []
    for lv in cal["levels"]:
        for name, f in (lv["fit"].get("collectives") or {}).items():
            pts = [c for c in cal["collectives"] if c["level"] == lv["level"] and c["collective"] == name]
            ratios = [c["measured_s"] / c["simulated_s"] for c in pts if c["simulated_s"]]
            rows.append((lv["level"], name, format_seconds(f["latency"]) if f["ok"] else "-",
                         f"{f['bandwidth'] / 1e9:.3g} GB/s" if f["ok"] else "-",
                         f"{f['rms_relative_error']:.0%}" if f["ok"] else "no fit", str(len(pts)),
                         f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"))
    print_table(con, columns, rows, title="per level and collective")
    if args.output:
        con.print(f"system file written to {args.output}")
