"""``meshplan export SCHEDULE.json --format mpi4py|jax-mesh|torch-mesh``: hand a plan to other tools (docs/export.md)."""

from __future__ import annotations

import argparse
import json

from meshplan.cli.common import add_common_flags, add_selection_flags, print_json
from meshplan.models.core.outputs import check_output_path, write_output

__all__ = ["register", "run"]

#: ``--format`` choices: a program, or a device mesh (``meshplan.api.export.MESH_FORMATS``)
FORMATS = ("mpi4py", "torch", "jax", "jax-mesh", "torch-mesh")

EXAMPLES = """\
examples:
  meshplan export plan.json --format mpi4py -o reduce.py && mpiexec -n 8 python reduce.py
  meshplan export plan.json --format torch -o reduce_torch.py && python reduce_torch.py
  meshplan export plan.json --format jax -o reduce_jax.py && python reduce_jax.py
  meshplan export plan.json --format jax-mesh --axis-names data,model
  meshplan export plan.json --format torch-mesh --placement 1 --json
"""


def register(sub) -> None:
    """Add the ``export`` verb."""
    p = sub.add_parser(
        "export", help="write a schedule as an mpi4py, PyTorch or JAX program or as a jax/torch device mesh",
        description=(
            "mpi4py: a standalone program performing one reduction program of the schedule "
            "(`mpiexec -n N python prog.py` runs it and checks its own result). torch: the same program with "
            "torch collectives beside the placement's device mesh (`python prog.py` starts one gloo process per "
            "device and checks the result against torch's all_reduce). jax: the same program with shard_map "
            "collectives (psum, psum_scatter, all_gather) over the placement's mesh split into hierarchy levels "
            "(`python prog.py` runs it on fake CPU devices and checks the result against jax.lax.psum). "
            "jax-mesh / torch-mesh: "
            "the placement's device order as the array to pass to jax.sharding.Mesh / "
            "torch.distributed.device_mesh.DeviceMesh, so the framework's axes land where meshplan "
            "placed them (docs/export.md)."),
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("schedule", help="a schedule written by `meshplan solve placement --export FILE`")
    p.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    add_selection_flags(p, several=False)
    p.add_argument("--axis-names", default=None, metavar="A,B,…",
                   help="mesh axis names (default: the schedule's, from `solve placement --axis-names`, "
                        "else a0,a1,…; torch, jax, jax-mesh, torch-mesh)")
    add_common_flags(p, json_help="mesh formats: print {axes, axis_names, device_order, …} as JSON")
    p.set_defaults(func=run)


def _write(text: str, output: str | None) -> None:
    if output is None:
        print(text, end="")
        return
    write_output(output, text, what="-o file")


def run(args) -> int:
    """``meshplan export``: :func:`~meshplan.api.export.export_mpi4py` or
    :func:`~meshplan.api.export.export_mesh`, written to ``-o`` or stdout."""
    from meshplan.api.export import export_jax, export_mesh, export_mpi4py, export_torch

    if args.output:
        check_output_path(args.output, what="-o file")  # before the work: a bad path costs nothing
    if args.format in ("mpi4py", "torch", "jax"):
        if args.format in ("torch", "jax"):
            prog = (export_torch if args.format == "torch" else export_jax)(
                args.schedule, placement=args.placement, program=args.program, axis_names=args.axis_names)
        else:
            prog = export_mpi4py(args.schedule, placement=args.placement, program=args.program)
        _write(prog.text, args.output)
        if args.output:
            if args.json:
                print_json({"format": prog.format, "file": args.output, "np": prog.np,
                            "command": prog.command(args.output)})
            else:
                print(f"wrote {args.output}; run it with: {prog.command(args.output)}")
        return 0
    mesh = export_mesh(args.schedule, args.format, placement=args.placement, axis_names=args.axis_names)
    if args.json:
        _write(json.dumps(mesh.to_json(), indent=2) + "\n", args.output)
    else:
        _write(mesh.code(), args.output)
    return 0
