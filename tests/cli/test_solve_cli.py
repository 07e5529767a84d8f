"""`meshplan solve placement`: table, JSON, export, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from meshplan.cli import main
from meshplan.schedule import SCHEMA, load_schedule


def test_table_output(cli):
    code, out, err = cli("solve", "placement", "--system", "v100-2x8", "--axes", "2,8", "--reduce", "1")
    assert code == 0 and err == ""
    for word in ("matrix", "AllReduce", "best program", "speed-up", "Recommendation: placement 0", "(--bytes)",
                 "1 GiB per device"):
        assert word in out
    # the answer in words, once: where the reduced axis's groups lie and with which collectives
    assert "reduce axis a1 (8-way) across 8 gpus within one node" in " ".join(out.split())
    assert "[[2,1],[1,8]]" not in out  # the matrix is shown once, in the table


def test_json_has_every_placement_and_program(cli, tmp_path):
    exp = tmp_path / "s.json"
    code, out, _ = cli("solve", "placement", "--system", "a100-2x16", "--axes", "2,2,8", "--all-programs",
                       "--reduce", "0,2", "--json", "--export", str(exp), "--bytes", "64MiB", "--algo", "tree")
    assert code == 0
    doc = json.loads(out)
    assert doc == json.loads(exp.read_text())
    assert doc["programs_per_placement"] is None
    assert doc["schema"] == SCHEMA and doc["axes"] == [2, 2, 8] and doc["reduce"] == [0, 2]
    assert doc["system"]["name"] == "a100-2x16" and doc["bytes_per_device"] == 64 * 2**20
    assert isinstance(doc["synthesis_seconds"], float)
    assert len(doc["placements"]) >= 2
    for pl in doc["placements"]:
        assert pl["num_programs"] == len(pl["programs"]) > 0
        assert pl["allreduce_time_s"] > 0
        times = [p["time_s"] for p in pl["programs"]]
        assert times == sorted(times)
        for p in pl["programs"]:
            assert p["text"] and p["steps"]
            for st in p["steps"]:
                assert set(st) >= {"collective", "slice", "form", "groups", "time_s"}
                flat = sorted(d for g in st["groups"] for d in g)
                assert len(flat) == len(set(flat)) and all(0 <= d < 32 for d in flat)
    sched = load_schedule(exp)  # the file reads back into model values
    assert sched.placements[0].programs[0].lowered.num_devices == 32


def test_json_and_export_keep_the_fastest_programs_by_default(cli, tmp_path):
    """--json/--export list the K fastest programs per placement (default 5, --top-programs K); num_programs
    still counts every synthesized (re-checked, simulated) program; --all-programs lists them all."""
    base = ("solve", "placement", "--system", "v100-2x8", "--axes", "2,8", "--reduce", "1", "--json")
    full = json.loads(cli(*base, "--all-programs")[1])
    for args, k in (((), 5), (("--top-programs", "2"), 2)):
        exp = tmp_path / f"top{k}.json"
        code, out, _ = cli(*base, *args, "--export", str(exp))
        doc = json.loads(out)
        assert code == 0 and doc == json.loads(exp.read_text()) and doc["programs_per_placement"] == k
        for pl, whole in zip(doc["placements"], full["placements"]):
            assert pl["num_programs"] == whole["num_programs"] == len(whole["programs"])
            assert pl["programs"] == whole["programs"][:k]
        load_schedule(exp)
    code, _, err = cli(*base, "--top-programs", "2", "--all-programs")
    assert code == 2 and "either --top-programs" in err


def test_paper_dialect_and_limits(cli):
    code, out, _ = cli("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
                       "--dsl", "paper", "--json", "--pin", "1:node=2")
    doc = json.loads(out)
    assert code == 0 and [pl["matrix"] for pl in doc["placements"]] == [[[1, 2], [2, 2]]]
    assert doc["placements"][0]["num_programs"] == 47 and doc["dsl"] == "paper"
    code, out, _ = cli("solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
                       "--max-size", "2", "--json", "--inside", "1:gpu")
    doc = json.loads(out)
    assert all(p["size"] <= 2 for pl in doc["placements"] for p in pl["programs"])


BAD = [
    (["--system", "a100-4x16", "--axes", "4,15", "--reduce", "0"], "multiply to 60"),
    (["--system", "a200-9x9", "--axes", "4,16", "--reduce", "0"], "unknown system"),
    (["--system", "a100-4x16", "--axes", "4,16", "--reduce", "2"], "out of range"),
    (["--system", "a100-4x16", "--axes", "4,x", "--reduce", "0"], "comma-separated"),
    (["--system", "a100-4x16", "--axes", "4,16", "--reduce", "0", "--bytes", "lots"], "bad size"),
    (["--system", "a100-4x16", "--axes", "4,16", "--reduce", "0", "--max-size", "0"], "max-size"),
    (["--system", "a100-4x16", "--axes", "4,16", "--reduce", "0", "--pin", "0:rack=2"], "unknown level"),
    (["--system", "a100-4x16", "--axes", "4,16", "--reduce", "0", "--inside", "0:gpu", "--inside", "1:gpu"],
     "no parallelism matrix"),
    (["--system", "a100-4x16", "--axes", "4,16"], "required"),
    (["--system", "a100-4x16", "--axes", "4,16", "--reduce", "0", "--algo", "butterfly"], "invalid choice"),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code, out, err = _run_exit(capsys, ["solve", "placement", *argv])
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err
    assert "Traceback" not in err


def _run_exit(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_malformed_system_file(capsys, tmp_path):
    p = tmp_path / "sys.json"
    p.write_text('{"levels": [{"name": "node", "size": "four"}]}')
    code, _, err = _run_exit(capsys, ["solve", "placement", "--system", str(p), "--axes", "4", "--reduce", "0"])
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_console_script_runs_without_traceback(tmp_path):
    exe = shutil.which("meshplan") or f"{sys.executable} -m meshplan"
    res = subprocess.run([*exe.split(), "solve", "placement", "--system", "a100-2x16", "--axes", "2,16",
                          "--reduce", "7"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    res = subprocess.run([*exe.split(), "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0 and "solve" in res.stdout


def test_reducing_an_axis_of_size_one_is_nothing_to_do(cli):
    code, out, err = cli("solve", "placement", "--system", "node=2,gpu=2", "--axes", "1,4", "--reduce", "0")
    assert code == 0 and "nothing to reduce" in out and "internal error" not in err


def test_size_limits_stop_before_the_work(cli, monkeypatch):
    code, _, err = cli("solve", "placement", "--system", "node=100000,gpu=100000", "--axes", "100000,100000",
                       "--reduce", "0")
    assert code == 2 and "MESHPLAN_MAX_PLACEMENT_DEVICES" in err and err.count("\n") == 1
    code, _, err = cli("solve", "placement", "--system", "node=4,gpu=8", "--axes", "32", "--reduce", "0")
    assert code == 0
    monkeypatch.setenv("MESHPLAN_MAX_GROUP", "16")
    code, _, err = cli("solve", "placement", "--system", "node=4,gpu=8", "--axes", "32", "--reduce", "0")
    assert code == 2 and "MESHPLAN_MAX_GROUP=32" in err
