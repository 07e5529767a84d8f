"""``meshplan export``: a generated mpi4py script runs and verifies; mesh orders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from meshplan.exec.runtime.launch import run_mpi_json
from meshplan.models.placement.matrix import ParallelismMatrix
from meshplan.models.core.system import System


@pytest.fixture(scope="module")
def schedule(export_schedule):
    return export_schedule("export", "node=2,cpu=2,gpu=2", "2,4", "1")


@pytest.mark.mpi
def test_generated_mpi4py_script_runs_and_verifies(cli, schedule, tmp_path):
    doc = json.loads(schedule.read_text())
    # a placement whose program 0 has several steps, to exercise chunk layouts
    pl = next(i for i, p in enumerate(doc["placements"]) if len(p["programs"][0]["steps"]) > 1)
    # the fastest program (ReduceScatter/AllReduce/AllGather style) and one with Reduce, a Master-form
    # Broadcast (ranks outside every group) and Broadcast
    progs = doc["placements"][pl]["programs"]
    other = next(p["id"] for p in progs if {s["collective"] for s in p["steps"]} >= {"Reduce", "Broadcast"})
    seen = set()
    for k in (0, other):
        prog = tmp_path / f"reduce{k}.py"
        code, out, _ = cli("export", str(schedule), "--format", "mpi4py", "--placement", str(pl),
                           "--program", str(k), "-o", str(prog))
        assert code == 0 and "mpiexec -n 8" in out
        text = prog.read_text()
        assert "import meshplan" not in text and "STEPS = [" in text and "slice=" in text
        seen |= {s["collective"] for s in progs[k]["steps"]}
        res = run_mpi_json(8, [str(prog), "8192"], timeout_s=120)
        assert res["verified"] and res["ranks"] == 8 and res["bad_ranks"] == []
    assert len(seen) >= 4


def test_mpi4py_to_stdout_is_a_python_program(cli, schedule):
    code, out, _ = cli("export", str(schedule), "--format", "mpi4py")
    assert code == 0
    compile(out, "reduce.py", "exec")


@pytest.mark.parametrize("fmt,needle", [("jax-mesh", "Mesh(devices, axis_names=('data', 'model'))"),
                                        ("torch-mesh", "DeviceMesh(\"cuda\", device_order")])
def test_mesh_exports_give_the_placement_device_order(cli, schedule, fmt, needle):
    doc = json.loads(schedule.read_text())
    for pl in range(len(doc["placements"])):
        code, out, _ = cli("export", str(schedule), "--format", fmt, "--placement", str(pl),
                           "--axis-names", "data,model")
        assert code == 0 and needle in out
        code, out, _ = cli("export", str(schedule), "--format", fmt, "--placement", str(pl), "--json")
        got = json.loads(out)
        m = ParallelismMatrix.of(System.parse("node=2,cpu=2,gpu=2"), doc["placements"][pl]["matrix"])
        order = np.array(got["device_order"])
        assert order.shape == (2, 4) and sorted(order.ravel()) == list(range(8))
        for d in range(8):  # the device at axis coordinates c is the device whose coordinates are c
            assert order[m.axis_coords(d)] == d
        # reducing along axis 1 of the mesh = reducing over the schedule's reduction groups
        assert sorted(tuple(sorted(r)) for r in order.tolist()) == \
            sorted(tuple(g) for g in doc["placements"][pl]["reduction_groups"])


@pytest.mark.parametrize("argv,msg", [
    (["--format", "jax-mesh", "--axis-names", "a"], "--axis-names needs 2"),
    (["--format", "mpi4py", "--program", "500"], "out of range"),
    (["--format", "torch-mesh", "--placement", "9"], "out of range"),
])
def test_export_bad_input(cli, schedule, argv, msg):
    code, _, err = cli("export", str(schedule), *argv)
    assert code == 2 and msg in err
