"""`meshplan bound`: output, JSON format, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy as sp


EX = Path(__file__).resolve().parents[2] / "examples" / "loops"


def test_json_for_mmm_with_params(cli):
    code, out, err = cli("bound", str(EX / "mmm.py"), "--params", "M=512,N=512,K=512,S=4096,p=4",
                         "--json", "--time-limit", "1")
    assert code == 0, err
    rep = json.loads(out)
    for key in ("bound", "leading_term", "rho", "tiles", "subgraphs", "parallel_bound", "integer_tiles"):
        assert key in rep
    M, N, K, S = sp.symbols("M N K S")
    assert sp.simplify(sp.sympify(rep["leading_term"], locals={"S": S, "N": N, "M": M, "K": K}) - 2 * M * N * K / sp.sqrt(S)) == 0
    assert rep["rho"] == "sqrt(S)/2"
    assert set(rep["tiles"]) == {"i", "j", "k"}
    assert rep["values"]["bound"] == pytest.approx(2 * 512 ** 3 / 64)
    assert rep["values"]["parallel_bound"] == pytest.approx(2 * 512 ** 3 / 64 / 4)
    it = rep["integer_tiles"]
    assert it["integer_work"] >= it["rounded_work"]
    sg = rep["subgraphs"][0]
    assert sg["method"] == "kkt" and sg["X0"] == "3*S"


def test_einsum_and_table_output(cli):
    code, out, _ = cli("bound", "--einsum", "ij,jk->ik")
    assert code == 0
    assert "2*N_i*N_j*N_k/sqrt(S)" in out


def test_file_with_several_functions_gives_a_list(tmp_path, cli):
    f = tmp_path / "k.py"
    f.write_text((EX / "mmm.py").read_text() + "\n\n" + (EX / "lu.py").read_text())
    code, out, _ = cli("bound", str(f), "--json")
    assert code == 0
    assert [r["program"] for r in json.loads(out)["programs"]] == ["mmm", "lu"]
    code, out, _ = cli("bound", str(f), "--function", "lu", "--json")
    assert json.loads(out)["program"] == "lu"


@pytest.mark.parametrize("argv,needle", [
    (["bound"], "no input"),
    (["bound", "/nonexistent/k.py"], "cannot read"),
    (["bound", "--einsum", "ij,jk->iz"], "appears in no operand"),
    (["bound", "--einsum", "ij,jk->ik", "--params", "N_i=x"], "must be an integer"),
    (["bound", "--einsum", "ij,jk->ik", "--params", "Q=3"], "not a parameter"),
])
def test_malformed_input_is_one_line_and_exit_2(cli, argv, needle):
    code, out, err = cli(*argv)
    assert code == 2
    assert err.startswith("error: ") and needle in err and err.count("\n") == 1


def test_program_outside_soap_names_the_condition(tmp_path, cli):
    f = tmp_path / "bad.py"
    f.write_text("def f(N):\n    for i in range(N):\n        for j in range(N):\n            A[i * j] += B[i]\n")
    code, _, err = cli("bound", str(f))
    assert code == 2 and "condition 5" in err


def test_strict_rejects_projections(cli):
    code, _, err = cli("bound", str(EX / "lu.py"), "--strict")
    assert code == 2 and "SOAP condition" in err and "--strict" in err
    code, _, _ = cli("bound", str(EX / "stencil_5_1.py"), "--strict")
    assert code == 0


def test_violation_in_one_of_several_functions_names_the_function(tmp_path, cli):
    f = tmp_path / "two.py"
    f.write_text("def ok(N):\n    for i in range(N):\n        y[i] += x[i]\n\n"
                 "def bad(N):\n    for i in range(N):\n        for j in range(N):\n            A[i * j] += B[i]\n")
    code, _, err = cli("bound", str(f))
    assert code == 2 and "function bad" in err and "condition 5" in err
    code, out, _ = cli("bound", str(f), "--function", "ok", "--json")
    assert code == 0 and json.loads(out)["program"] == "ok"


def test_json_lists_the_max_cases_of_the_thesis_convolution(cli):
    code, out, err = cli("bound", str(EX / "conv2d_thesis.py"), "--json", "--time-limit", "1",
                         "--params", "NB=2,NC=16,NK=16,NW=8,NH=8,NR=3,NS=3,S=256")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["rho"] == "S/2"
    (sg,) = rep["subgraphs"]
    assert len(sg["cases"]) == 4 and all(c["rho"] == "S/2" for c in sg["cases"])
    assert {len(c["constraints"]) for c in sg["cases"]} == {2}
    assert "Max(" in sg["access"]              # the access terms keep the max; the cases split it
    it = rep["integer_tiles"]
    assert it["integer_work"] >= it["rounded_work"]


def test_table_shows_the_derived_subgraphs_and_counts_the_screened_ones(cli):
    """The human table lists the derived subgraph statements; the screened ones are counted on one line,
    and --json still lists every subgraph."""
    code, out, err = cli("bound", str(EX / "gemver.py"))
    assert code == 0, err
    code, js, err = cli("bound", str(EX / "gemver.py"), "--json", "--no-tiles")
    assert code == 0, err
    subgraphs = json.loads(js)["subgraphs"]
    screened = [sg for sg in subgraphs if sg["method"] == "screened"]
    derived = [sg for sg in subgraphs if sg["method"] != "screened"]
    assert screened and derived
    assert f"+ {len(screened)} screened subgraph" in out
    assert "│ screened" not in out and " screened  " not in out
    for sg in derived:
        assert "{" + ", ".join(sg["arrays"]) + "}" in out
