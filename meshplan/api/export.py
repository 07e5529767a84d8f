"""Hand a plan to other tools: an mpi4py program or a JAX / PyTorch device mesh (docs/export.md).

:func:`export_mesh` is ``meshplan export --format jax-mesh|torch-mesh`` (its result's fields are that
verb's ``--json`` keys, :meth:`DeviceMesh.code` the Python it writes); :func:`export_mpi4py` is ``--format
mpi4py``: a standalone program performing one reduction program of the schedule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from meshplan.api.results import Result, value, freeze, library_field
from meshplan.models.core.errors import ModelError

__all__ = ["MESH_FORMATS", "DeviceMesh", "Mpi4pyProgram", "export_mesh", "export_mpi4py", "export_torch", "export_jax"]

#: the device-mesh formats of ``meshplan export``
MESH_FORMATS = ("jax-mesh", "torch-mesh")


@value
class DeviceMesh(Result):
    """A placement as a framework device mesh (docs/export.md, JSON): ``device_order[i0][i1]…`` is the
    device (global rank, system order) at those axis coordinates."""

    format: str
    system: str
    matrix: tuple
    axes: tuple[int, ...]
    axis_names: tuple[str, ...]
    reduce: tuple[int, ...]
    device_order: Any
    placement: Any = library_field()

    def code(self) -> str:
        """Python code building a ``jax.sharding.Mesh`` or a ``torch`` ``DeviceMesh`` with this order."""
        arr = json.dumps(self.to_json()["device_order"])
        names = tuple(self.axis_names)
        matrix = self.placement.matrix if self.placement is not None else self.matrix
        head = (f"# meshplan placement {matrix} of system {self.system} for axes "
                f"{list(self.axes)} (reduce {list(self.reduce)})\n"
                f"# device_order[{']['.join(f'i{k}' for k in range(len(names)))}] = the device at those axis "
                "coordinates; device d is\n# the d-th device of the system, numbered row-major over its levels "
                "(= global rank d\n# when ranks are laid out level by level, node-major).\n")
        if self.format == "jax-mesh":
            return (head + "import numpy as np\nimport jax\nfrom jax.sharding import Mesh\n\n"
                    f"device_order = np.array({arr})\n"
                    "# jax.devices() must list the devices in system order (process by process, then local id)\n"
                    "devices = np.asarray(jax.devices())[device_order]\n"
                    f"mesh = Mesh(devices, axis_names={names!r})\n")
        return (head + "from torch.distributed.device_mesh import DeviceMesh\n\n"
                f"device_order = {arr}  # global ranks\n"
                f"mesh = DeviceMesh(\"cuda\", device_order, mesh_dim_names={names!r})\n")


def export_mesh(schedule: Any, format: str = "jax-mesh", *, placement: Any = 0,
                axis_names: Sequence[str] | str | None = None) -> DeviceMesh:
    """The device order of one placement of a schedule (a path, JSON, ``Schedule`` or ``PlacementPlan``)
    as a ``jax-mesh`` or ``torch-mesh``, so the framework's mesh axes land where meshplan placed them.
    ``axis_names`` default to the schedule's (``solve placement --axis-names``, else ``a0, a1, …``)."""
    from meshplan.models.placement.problem import axis_names as as_axis_names
    from meshplan.schedule import load_schedule

    if format not in MESH_FORMATS:
        raise ModelError(f"unknown mesh format {format!r}; use one of {', '.join(MESH_FORMATS)}")
    sched = load_schedule(schedule)
    pl, _ = sched.pick(placement, None)
    names = as_axis_names(sched.axis_names if axis_names is None else axis_names, len(sched.axes))
    return DeviceMesh(format, sched.system.short(), freeze(pl.matrix.tolist()), tuple(sched.axes), tuple(names),
                      tuple(sched.reduce), freeze(pl.matrix.device_order()), pl)


@value
class Mpi4pyProgram(Result):
    """A standalone mpi4py program (``text``) performing one reduction program on ``np`` ranks and checking
    its own result; ``placement``/``program`` are the schedule indices it came from."""

    format: str
    np: int
    placement: int
    program: int
    text: str

    def command(self, path: str) -> str:
        """The command that runs the program saved at ``path``."""
        if self.format in ("torch", "jax"):
            return f"python {path}"
        return f"mpiexec -n {self.np} python {path}"


def export_torch(schedule: Any, *, placement: Any = 0, program: Any = 0,
                 axis_names: Sequence[str] | str | None = None) -> Mpi4pyProgram:
    """One reduction program of a schedule as a standalone PyTorch program: the placement's device mesh
    (``DEVICE_ORDER``, ``device_mesh()``), the steps as data, ``all_reduce(tensor, groups)`` running them with
    torch collectives on process groups made once (``make_groups()``), and a ``main`` that starts one gloo
    process per device (``python prog.py``) and checks the result against ``dist.all_reduce``."""
    from meshplan.exec.reduction.export import torch_script

    mesh = export_mesh(schedule, "torch-mesh", placement=placement, axis_names=axis_names)
    base = export_mpi4py(schedule, placement=placement, program=program)
    from meshplan.schedule import load_schedule

    sched = load_schedule(schedule)
    pl, pr = sched.pick(placement, program)
    head = base.text.split('"""')[1].splitlines()[2:]
    head = head[:next((i for i, ln in enumerate(head) if ln.startswith("Run:")), len(head))]
    text = torch_script(pr.lowered, pl.reduction_groups, device_order=mesh.to_json()["device_order"],
                        axis_names=mesh.axis_names, header="\n".join(head).rstrip().splitlines())
    return Mpi4pyProgram("torch", base.np, base.placement, base.program, text)


def export_jax(schedule: Any, *, placement: Any = 0, program: Any = 0,
               axis_names: Sequence[str] | str | None = None) -> Mpi4pyProgram:
    """One reduction program of a schedule as a standalone JAX program: the placement's device mesh
    (``DEVICE_ORDER``, ``device_mesh()``), the mesh with the parallelism axes split into hierarchy levels
    (``level_mesh()``, as :func:`meshplan.jax.level_mesh`), the steps as data (the per-device chunk tables of
    :func:`meshplan.jax.psum`), ``psum(x)`` running them with ``shard_map`` collectives, and a ``main`` that runs
    on ``np`` fake CPU devices (``python prog.py``) and checks the result against ``jax.lax.psum``."""
    from meshplan.exec.reduction.export_jax import jax_script
    try:
        from meshplan.jax.reduce import _compile, level_axes   # the tables of meshplan.jax.psum
    except ImportError as e:
        raise ModelError(f"the jax format needs jax installed ({e})", param="format") from e
    from meshplan.models.placement.problem import axis_names as as_axis_names
    from meshplan.schedule import load_schedule

    mesh = export_mesh(schedule, "jax-mesh", placement=placement, axis_names=axis_names)
    base = export_mpi4py(schedule, placement=placement, program=program)
    sched = load_schedule(schedule)
    plan = sched.program(placement, program)
    _, pr = sched.pick(placement, program)
    names = as_axis_names(sched.axis_names if axis_names is None else axis_names, len(sched.axes))
    steps, chunks, _ = _compile(plan, list(names))
    levels = level_axes(plan, list(names))
    rows, lv = plan.matrix, [x.name for x in plan.system_value.levels]  # level_axes' order, reduced axes only
    reduce_axes = tuple(f"{names[i]}_{lv[j]}" for j in range(len(lv)) for i in range(len(rows))
                        if rows[i][j] > 1 and i in sched.reduce)
    head = base.text.split('"""')[1].splitlines()[2:]
    head = head[:next((i for i, ln in enumerate(head) if ln.startswith("Run:")), len(head))]
    text = jax_script([(c.value, names_, member, root, rows_in, rows_out)
                       for c, names_, member, root, rows_in, rows_out in steps], chunks,
                      level_axes=levels, reduce_axes=reduce_axes, reduction_groups=plan.reduction_groups,
                      device_order=mesh.to_json()["device_order"], axis_names=mesh.axis_names,
                      instructions=[st.instruction for st in pr.lowered.steps],
                      header="\n".join(head).rstrip().splitlines())
    return Mpi4pyProgram("jax", base.np, base.placement, base.program, text)


def export_mpi4py(schedule: Any, *, placement: Any = 0, program: Any = 0) -> Mpi4pyProgram:
    """One reduction program of a schedule as a standalone mpi4py program (P2 §3.4 lowering, run with
    ``mpiexec -n N python prog.py``; it verifies its own result against numpy)."""
    from meshplan.models.placement.problem import axis_names as as_axis_names
    from meshplan.exec.reduction.export import mpi4py_script
    from meshplan.schedule import load_schedule

    sched = load_schedule(schedule)
    pl, pr = sched.pick(placement, program)
    names = ", ".join(f"{n}={a}" for n, a in zip(as_axis_names(sched.axis_names, len(sched.axes)), sched.axes))
    header = [f"System {sched.system.short()} ({sched.system.num_devices} devices), axes {names}, "
              f"reduce {list(sched.reduce)}.",
              f"Placement {pl.id}: parallelism matrix {pl.matrix}; program {pr.id} of {len(pl.programs)}"
              + (f", simulated {pr.time_s:.6g} s for {sched.bytes_per_device} bytes per device"
                 f" ({sched.algo})." if pr.time_s is not None else ".")]
    if pr.program is not None:
        header += ["", "Program (P2 section 3.3):"] + [f"  {i}. {ins}" for i, ins in
                                                          enumerate(pr.program.instructions, 1)]
    text = mpi4py_script(pr.lowered, pl.reduction_groups, header=header)
    return Mpi4pyProgram("mpi4py", sched.system.num_devices, pl.id, pr.id, text)
