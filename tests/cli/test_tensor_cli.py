"""``meshplan tensor halo`` and ``meshplan tensor check``."""

from __future__ import annotations

import json

import pytest

from meshplan.models.tensor.halo import Window, halo_geometry
from meshplan.models.tensor.partition import CartesianPartition


def test_halo_json_for_the_distdl_multi_hop_case(cli):
    code, out, err = cli("tensor", "halo", "--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "7",
                         "--padding", "3", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["output_shape"] == [1, 1, 10]
    assert [r["owned"][2] for r in rep["ranks"]] == [[0, 3], [3, 6], [6, 8], [8, 10]]
    assert [r["needed"][2] for r in rep["ranks"]] == [[0, 6], [0, 9], [3, 10], [5, 10]]
    assert rep["ranks"][2]["sources"] == [1, 3] and rep["ranks"][1]["sources"] == [0, 2, 3]
    plan = halo_geometry(CartesianPartition.of((1, 1, 4)), (1, 1, 10), Window.of(3, (1, 1, 7), 1, (0, 0, 3), 1))
    assert rep["total_bytes"] == sum(plan.bytes_sent().values())
    assert sum(r["bytes_sent"] for r in rep["ranks"]) == sum(r["bytes_received"] for r in rep["ranks"])


def test_halo_table(cli):
    code, out, _ = cli("tensor", "halo", "--partition", "2,3", "--shape", "9,10", "--kernel", "3,2", "--stride", "2",
                       "--dilation", "1,2")
    assert code == 0 and "total bytes handed to MPI" in out


@pytest.mark.parametrize("argv,flag", [
    (["--partition", "1,1,4", "--shape", "1,1,3", "--kernel", "5"], "--shape"),
    (["--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "5", "--padding", "-1"], "--padding"),
    (["--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "0"], "--kernel"),
    (["--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "3", "--stride", "0"], "--stride"),
    (["--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "3", "--dilation", "x"], "--dilation"),
    (["--partition", "1,4", "--shape", "1,1,10", "--kernel", "5"], "--partition"),
    (["--partition", "1,1,0", "--shape", "1,1,10", "--kernel", "5"], "partition"),
    (["--partition", "1,1,4", "--shape", "1,1,10,4", "--kernel", "5,5,5"], "--"),
])
def test_bad_input_is_one_error_line_and_exit_2(cli, argv, flag):
    code, out, err = cli("tensor", "halo", *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0]


def test_check_too_many_ranks_is_bad_input(cli, monkeypatch):
    monkeypatch.setenv("MESHPLAN_MAX_RANKS", "8")
    code, _, err = cli("tensor", "check", "--np", "9")
    assert code == 2 and err.startswith("error: ")


@pytest.mark.mpi
def test_check_on_two_ranks(cli):
    code, out, err = cli("tensor", "check", "--np", "2", "--suite", "adjoint", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["np"] == 2 and not rep["failed"] and rep["passed"] == len(rep["cases"]) > 20
