"""``meshplan redistribute``."""

from __future__ import annotations

import json

import pytest

from meshplan.cli import main


def test_table_output_with_baseline(cli):
    code, out, _ = cli("redistribute", "[3{x}12,2{y}12]", "[2{y}12,3{x}12]", "--mesh", "x=4,y=6", "--baseline")
    assert code == 0
    assert "alltoall" in out and "allpermute" in out and "baseline" in out and "height" in out


def test_json_output(cli):
    code, out, _ = cli("redistribute", "[16{y}32,16,16{x}64]", "[32,2{x,y}16,64]", "--mesh", "x=4,y=2", "--json",
                       "--dtype", "f64")
    assert code == 0
    doc = json.loads(out)
    assert [s["op"] for s in doc["program"]] == ["alltoall", "alltoall"]
    assert doc["program"][0]["dims"] == [0, 1] and doc["program"][0]["axes"] == ["y"]
    assert doc["program"][-1]["type"] == "[32,2{x,y}16,64]"
    assert doc["height"] == 4096 and doc["cost_bytes"] == 2 * 4096 * 8
    assert [s["op"] for s in doc["baseline"]["program"]] == ["allgather", "allgather", "dynslice"]
    assert doc["baseline"]["height"] == 32 * 16 * 64


@pytest.mark.parametrize("argv,msg", [
    (["[3{x}12", "[3{x}12]", "--mesh", "x=4"], "expected"),                        # bad type
    (["[3{q}12]", "[3{x}12]", "--mesh", "x=4"], "not in the mesh"),                # axis missing
    (["[5{x}12]", "[3{x}12]", "--mesh", "x=4"], "does not divide"),                # non-divisible
    (["[2{x}12]", "[3{x}12]", "--mesh", "x=4"], "WF-DIM"),                         # sizes disagree
    (["[3{x}12,4]", "[4,3{x}12]", "--mesh", "x=4"], "different global shapes"),   # mismatched shapes
    (["[3{x}12]", "[3{x}12]", "--mesh", "x=0"], "positive"),                      # bad mesh
])
def test_bad_input_is_one_line_exit_2(cli, argv, msg):
    code, out, err = cli("redistribute", *argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and msg in err


@pytest.mark.parametrize("argv", [["[4]", "[4]"], ["[4]"]])
def test_argparse_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(["redistribute", *argv])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.mpi
def test_run_on_mpi_json(cli):
    code, out, _ = cli("redistribute", "[16{y}32,16,16{x}64]", "[32,2{x,y}16,64]", "--mesh", "x=4,y=2", "--run",
                       "--json", "--repeats", "1")
    assert code == 0
    doc = json.loads(out)
    assert doc["run"]["search"]["verified"] and doc["run"]["baseline"]["verified"]
    assert doc["run"]["search"]["peak_tile_bytes"] == 4 * 4096
    assert doc["run"]["baseline"]["peak_tile_bytes"] == 4 * 32 * 16 * 64


def test_run_with_wrong_np(cli):
    code, _, err = cli("redistribute", "[4{x}16]", "[16]", "--mesh", "x=4", "--run", "--np", "8")
    assert code == 2 and "--np" in err
