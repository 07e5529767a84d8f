"""Every verb's API result has exactly the fields of its ``--json`` document (DESIGN.md, "The capability
spine"): ``meshplan VERB … --json`` prints ``result.to_json()``, whose keys are the result's fields in order (a
field that is None where the verb leaves its key out, such as ``run`` without ``--run``), and every result
prints a short ``repr``.  One case per verb (and per object of ``solve`` / ``tensor``); the MPI verbs launch
``mpiexec`` twice each (CLI and API), so they are in the slow set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import meshplan as mp
from meshplan.cli import VERBS, main
from meshplan.models.core.values import REPR_LIMIT

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "examples" / "programs" / "fig4b_allreduce_allreduce.txt"
FIG4B = ["--system", "rack=1,server=2,cpu=2,gpu=4", "--axes", "4,4", "--reduce", "1", "--matrix",
         "[[1,1,2,2],[1,2,1,2]]"]
COUNT = ROOT / "examples" / "loops" / "counting" / "prefix_sum.py"


@pytest.fixture(scope="module")
def schedule(tmp_path_factory):
    path = tmp_path_factory.mktemp("results") / "plan.json"
    mp.solve_placement("node=2,gpu=2", "2,2", "0", max_size=2).save(path)
    return path


def _cases(schedule, tmp):
    """``(verb, argv, api)``: the CLI words and the API call that answers the same question."""
    sys4 = dict(system="rack=1,server=2,cpu=2,gpu=4", axes="4,4", reduce="1", matrix="[[1,1,2,2],[1,2,1,2]]")
    return [
        ("solve", ["solve", "placement", "--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "0",
                   "--max-size", "2"],
         lambda: mp.solve_placement("node=2,gpu=2", "2,2", "0", max_size=2)),
        ("check", ["check", PROG, *FIG4B], lambda: mp.check_program(PROG, **sys4)),
        ("check", ["check", schedule, "--no-proof"], lambda: mp.check_schedule(schedule, proof=False)),
        ("export", ["export", schedule, "--format", "jax-mesh"], lambda: mp.export_mesh(schedule, "jax-mesh")),
        ("show", ["show", schedule, "--png", tmp / "a.png", "--dpi", "30"],
         lambda: mp.draw_schedule(schedule, tmp / "b.png", dpi=30)),
        ("redistribute", ["redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4"],
         lambda: mp.plan_redistribution("[4{x}16,16]", "[16,4{x}16]", "x=4")),
        ("bound", ["bound", "--einsum", "ij,jk->ik"], lambda: mp.analyze_bound("ij,jk->ik")),
        ("count", ["count", COUNT, "--params", "n=64,p=4", "--verify"],
         lambda: mp.count_iterations(COUNT, params="n=64,p=4", verify=True)),
        ("tensor", ["tensor", "halo", "--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "3"],
         lambda: mp.plan_halo("1,1,4", "1,1,10", 3)),
        ("matmul", ["matmul", "100", "70", "90", "--np", "4"], lambda: mp.plan_matmul(100, 70, 90, 4)),
        ("factor", ["factor", "lu", "96", "--np", "4"], lambda: mp.plan_factorization("lu", 96, 4)),
    ]


def _mpi_cases(schedule):
    return [
    ("run", ["run", schedule, "--placement", "0", "--bytes", "4KiB", "--repeats", "1"],
     lambda: mp.run_programs(schedule, placement=0, bytes="4KiB", repeats=1)),
    ("calibrate", ["calibrate", "--np", "4", "--bytes", "4KiB", "--repeats", "1"],
     lambda: mp.calibrate(4, bytes="4KiB", repeats=1)),
    ("redistribute", ["redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4", "--run", "--repeats", "1"],
     lambda: mp.run_redistribution("[4{x}16,16]", "[16,4{x}16]", "x=4", repeats=1)),
    ("tensor", ["tensor", "check", "--np", "2", "--suite", "adjoint"], lambda: mp.check_tensor(2, suite="adjoint")),
    ("matmul", ["matmul", "60", "50", "40", "--np", "4", "--run", "--repeats", "1"],
     lambda: mp.run_matmul(60, 50, 40, 4, repeats=1)),
    ("factor", ["factor", "cholesky", "64", "--np", "4", "--run", "--repeats", "1"],
     lambda: mp.run_factorization("cholesky", 64, 4, repeats=1, baselines=("2d",))),
    ("testbed", ["testbed", "status"], lambda: __import__("meshplan.api.testbed", fromlist=["_"]).testbed_status()),
    ]


def _cli(capsys, argv) -> dict:
    capsys.readouterr()
    code = main([str(a) for a in argv] + ["--json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def _same_fields(res, doc: dict) -> None:
    keys = type(res).json_keys()
    assert list(doc) == [k for k in keys if k in doc], (list(doc), keys)
    assert all(getattr(res, k) is None for k in keys if k not in doc), [k for k in keys if k not in doc]
    assert list(res.to_json()) == list(doc)
    assert len(repr(res)) <= REPR_LIMIT, repr(res)


def test_every_verb_has_a_case():
    covered = {v for v, _, _ in _cases(Path("s"), Path("t"))} | {v for v, _, _ in _mpi_cases(Path("s"))}
    assert covered == set(VERBS)


@pytest.mark.parametrize("index", range(11))
def test_result_fields_are_the_json_keys(index, schedule, tmp_path, capsys):
    verb, argv, api = _cases(schedule, tmp_path)[index]
    doc = _cli(capsys, argv)
    _same_fields(api(), doc)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("index", range(7))
def test_run_result_fields_are_the_json_keys(index, schedule, capsys):
    verb, argv, api = _mpi_cases(schedule)[index]
    doc = _cli(capsys, argv)
    _same_fields(api(), doc)
