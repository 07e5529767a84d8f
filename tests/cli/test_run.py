"""``meshplan run``: real mpiexec launches on 4 ranks, in-process CLI."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def schedule(export_schedule):
    return export_schedule("run", "node=2,gpu=2", "2,2", "0")


def _with_program(schedule, tmp_path, name, steps):
    """A copy of the schedule whose placement 0 gets one extra hand-written program."""
    doc = json.loads(schedule.read_text())
    pl = doc["placements"][0]
    pl["programs"].append({"id": len(pl["programs"]), "text": name, "steps": steps})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path, len(pl["programs"]) - 1


@pytest.mark.mpi
def test_run_json_verifies_every_program(cli, schedule):
    code, out, _ = cli("run", str(schedule), "--bytes", "16KiB", "--repeats", "2", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["np"] == 4 and doc["failed"] == 0 and doc["verified"] == len(doc["programs"]) == 6
    for p in doc["programs"]:
        assert p["verified"] and p["checker"] == "valid" and p["bytes_match_model"] is True
        assert len(p["bytes_per_rank"]) == len(p["sim_bytes_per_rank"]) == 4
        assert 0 < p["time_min_s"] <= p["time_s"]
        assert len(p["steps"]) >= 1 and all(0 <= s["time_min_s"] <= s["time_s"] for s in p["steps"])


@pytest.mark.mpi
def test_run_reports_an_invalid_program_as_unverified(cli, schedule, tmp_path):
    groups = json.loads(schedule.read_text())["placements"][0]["reduction_groups"]
    twice = [{"collective": "AllReduce", "groups": groups}] * 2  # P2 Figure 4b: reduced twice
    stuck = [{"collective": "Reduce", "groups": groups}, {"collective": "AllReduce", "groups": [[0, 1, 2, 3]]}]
    path, i = _with_program(schedule, tmp_path, "twice", twice)
    code, out, _ = cli("run", str(path), "--placement", "0", "--program", f"0,{i}", "--bytes", "4KiB",
                       "--repeats", "1")
    assert code == 1
    assert "1 of 2 programs verified" in out and "differs from the numpy sum" in out
    assert "reduced twice" in out  # the checker's reason is shown next to the MPI result
    path, i = _with_program(schedule, tmp_path, "stuck", stuck)
    code, out, _ = cli("run", str(path), "--placement", "0", "--program", str(i), "--json",
                       "--repeats", "1", "--bytes", "4KiB")
    assert code == 1
    p = json.loads(out)["programs"][0]
    assert not p["verified"] and not p["executable"] and "not executable" in p["reason"]


@pytest.mark.parametrize("argv,msg", [
    (["--np", "8"], "use --np 4"),
    (["--program", "99"], "out of range"),
    (["--placement", "7"], "out of range"),
    (["--bytes", "lots"], "bad size"),
    (["--repeats", "0"], "at least 1"),
])
def test_run_bad_input_exits_2(cli, schedule, argv, msg):
    code, _, err = cli("run", str(schedule), *argv)
    assert code == 2 and err.startswith("error: ") and msg in err and "Traceback" not in err


def test_run_rejects_a_file_that_is_not_a_schedule(cli, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    code, _, err = cli("run", str(bad))
    assert code == 2 and "not a meshplan schedule" in err


EXAMPLE = "examples/programs/double_count.txt"
SMALL_FIG2 = ["--system", "rack=1,server=2,cpu=2,gpu=2", "--axes", "2,4", "--reduce", "1",
              "--matrix", "[[1,1,2,1],[1,2,1,2]]"]


@pytest.mark.mpi
def test_run_an_invalid_example_text_program(cli):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = root / EXAMPLE
    # the file is written for P2's 16-GPU Figure 2 system; tests stay at 8 ranks (same level names)
    code, out, _ = cli("run", str(path), *SMALL_FIG2, "--bytes", "4KiB", "--repeats", "1", "--json")
    assert code == 1
    p = json.loads(out)["programs"][0]
    assert p["executable"] and not p["verified"] and "reduced twice" in p["checker"]


def test_text_program_needs_its_placement(cli, tmp_path, schedule):
    prog = tmp_path / "p.txt"
    prog.write_text("AllReduce slice=root form=InsideGroup\n")
    code, _, err = cli("run", str(prog), "--system", "node=2,gpu=2")
    assert code == 2 and "--axes, --reduce" in err
    code, _, err = cli("run", str(schedule), "--system", "node=2,gpu=2")
    assert code == 2 and "for text programs" in err
