"""``meshplan tensor``: halo planning and the MPI check suite of the DistDL tensor primitives.

    meshplan tensor halo --partition 1,1,4 --shape 1,1,10 --kernel 5 [--stride S --padding P --dilation D] [--json]
    meshplan tensor check --np N [--suite all|adjoint|layers] [--json]

``halo`` prints, per rank, its owned input block, its output block (the balanced decomposition of the output),
the input range it needs, the halo widths and the bytes it sends and receives (a planning aid; no MPI).
With three or more dimensions the first two are batch and channel (window 1); the window flags take one value
for every spatial dimension or one per spatial dimension.  ``check`` runs the adjoint and layer-equivalence
suite on N ranks and reports pass/fail per case (exit 1 if any fails).  See docs/tensor.md.
"""

from __future__ import annotations

import argparse

from meshplan.cli.common import add_common_flags, add_dtype_flag, add_np_flag, console, print_json, seconds

__all__ = ["register", "run_halo", "run_check"]

HALO_EXAMPLES = """\
examples:
  meshplan tensor halo --partition 1,1,4 --shape 1,1,10 --kernel 7 --padding 3
  meshplan tensor halo --partition 1,1,2,2 --shape 1,1,16,16 --kernel 3 --stride 2 --json
"""
CHECK_EXAMPLES = """\
examples:
  meshplan tensor check --np 4                  # every adjoint and layer case on 4 MPI ranks
  meshplan tensor check --np 2 --suite adjoint --json
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("tensor", help="halo planning and MPI checks of the DistDL tensor primitives",
                              description="DistDL-style tensor primitives: halo geometry of a partitioned "
                                          "convolution/pooling and the adjoint/layer check suite on MPI.",
                              epilog=HALO_EXAMPLES + CHECK_EXAMPLES.replace("examples:\n", ""),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="tensor_command", metavar="<object>")
    h = sub.add_parser("halo", help="per-rank halo widths, needed input range and bytes of a window",
                       description="Halo geometry of a convolution or pooling window on a partitioned tensor.",
                       epilog=HALO_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    h.add_argument("--partition", required=True, help="parts per tensor dimension, e.g. 1,1,4")
    h.add_argument("--shape", required=True, help="global tensor shape, e.g. 1,1,10 (batch, channel, spatial…)")
    h.add_argument("--kernel", required=True, help="kernel size: one value or one per spatial dimension")
    h.add_argument("--stride", default="1", help="stride (default 1)")
    h.add_argument("--padding", default="0", help="zero padding on both sides (default 0)")
    h.add_argument("--dilation", default="1", help="dilation (default 1)")
    from meshplan.models.core.dtypes import DTYPES

    add_dtype_flag(h, choices=list(DTYPES), default="f64",
                   help="element type, for the bytes each rank sends")
    add_common_flags(h)
    h.set_defaults(func=run_halo)
    c = sub.add_parser("check", help="run the adjoint and layer-equivalence suite on N MPI ranks",
                       description="Dot-product adjoint test of every primitive (<= 1e-13, f64, bytes equal to "
                                   "the model) and every layer against the sequential reference (<= 1e-12).",
                       epilog=CHECK_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_np_flag(c, required=True, help="number of MPI ranks")
    c.add_argument("--suite", choices=("all", "adjoint", "layers"), default="all", help="which cases to run")
    c.add_argument("--timeout", type=seconds, default=600.0, help="kill the MPI job after this many seconds")
    add_common_flags(c)
    c.set_defaults(func=run_check)
    p.set_defaults(func=_missing)


def _missing(args) -> int:
    from meshplan.models.core.errors import ModelError

    raise ModelError("tensor needs an object: `meshplan tensor halo …` or `meshplan tensor check …` "
                     "(see `meshplan tensor --help`)")


def _rng(box) -> str:
    return "×".join(f"[{lo},{hi})" for lo, hi in box)


def run_halo(args) -> int:
    from meshplan.api.tensor import plan_halo

    rep = plan_halo(args.partition, args.shape, args.kernel, stride=args.stride, padding=args.padding,
                    dilation=args.dilation, dtype=args.dtype).to_json()
    if args.json:
        print_json(rep)
        return 0
    from meshplan.cli.render import Column, print_table

    lead = 2 if len(rep["shape"]) >= 3 else 0
    title = (f"kernel {rep['kernel'][lead:]} stride {rep['stride'][lead:]} padding {rep['padding'][lead:]} "
             f"dilation {rep['dilation'][lead:]}: {rep['shape']} → {rep['output_shape']}")
    cols = [Column("rank"), Column("owned", "left"), Column("output", "left"), Column("needed", "left"),
            Column("halo", "left", explain="(left,right) halo width per spatial dimension: inputs needed beyond "
                                           "the owned block (negative: owned inputs not needed)"),
            Column("from ranks", "left", whole=False), Column("bytes sent"), Column("bytes recv")]
    rows = [(str(r["rank"]), _rng(r["owned"][lead:]), _rng(r["output"][lead:]),
             _rng(r["needed"][lead:]) if any(hi > lo for lo, hi in r["needed"]) else "—",
             " ".join(f"({a},{b})" for a, b in r["halo"][lead:]), ",".join(map(str, r["sources"])) or "—",
             str(r["bytes_sent"]), str(r["bytes_received"])) for r in rep["ranks"]]
    con = console()
    con.print(title)
    print_table(con, cols, rows)
    con.print(f"total bytes handed to MPI: {rep['total_bytes']}")
    return 0


def run_check(args) -> int:
    from meshplan.api.tensor import check_tensor

    res = check_tensor(args.np, suite=args.suite, timeout=args.timeout)
    doc = res.to_json()
    cases, failed = doc["cases"], doc["failed"]
    if args.json:
        print_json(doc)
    else:
        from meshplan.cli.render import Column, print_table

        rows = []
        for c in cases:
            err = c.get("rel_error", max(c.get("errors", {0: 0.0}).values()))
            rows.append((c["name"], "pass" if c["ok"] else "FAIL", f"{err:.1e}",
                         ("yes" if c["bytes_exact"] else "NO") if "bytes_exact" in c else ""))
        con = console()
        print_table(con, [Column("case", "left"), Column("result", "left"), Column("max error"),
                          Column("bytes = model", "left")], rows, title=f"meshplan tensor check on {args.np} ranks")
        con.print(f"{len(cases) - len(failed)} of {len(cases)} cases passed")
    return 1 if failed else 0
