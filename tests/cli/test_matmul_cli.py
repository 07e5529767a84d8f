"""``meshplan matmul``: plan output, JSON fields (the API value's fields), one MPI run with the SUMMA baseline,
bad input (checked by the API, never by the CLI)."""

import json
import re

import pytest


def test_plan_json_fields(cli):
    code, out, err = cli("matmul", 1300, 1300, 1300, "--np", 65, "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["grid"] == [4, 4, 4] and rep["ranks_used"] == 64 and rep["idle_ranks"] == 1
    assert rep["strategy"] == "pm2,pm2,pn2,pn2,pk2,pk2"
    assert rep["model_words_per_rank"]["max"] < rep["baselines"]["summa"]["model_words_per_rank"]["max"]
    assert rep["lower_bound_words"] > 0 and rep["run"] is None
    assert rep["domain_words"] >= rep["lower_bound_words"]


def test_json_is_the_api_value():
    import meshplan as mp
    from meshplan.api.matmul import MatmulPlan

    plan = mp.plan_matmul(1300, 1300, 1300, 65)
    assert isinstance(plan, MatmulPlan) and isinstance(plan.problem, mp.MatmulProblem)
    doc = plan.to_json()
    assert tuple(doc) == MatmulPlan.json_keys() and doc["run"] is None and len(repr(plan)) <= 300
    assert doc["grid"] == [4, 4, 4] and list(doc["baselines"]) == ["summa"]
    assert json.loads(json.dumps(doc)) == doc
    assert mp.plan_matmul(plan.problem) == plan  # a Problem, or its fields


def test_plan_table(cli):
    code, out, _ = cli("matmul", 64, 64, 4096, "--np", 16, "--memory", 100000)
    assert code == 0 and "grid" in out and "Theorem 3.2" in out


@pytest.mark.mpi
def test_run_json(cli):
    code, out, err = cli("matmul", 40, 36, 52, "--np", 4, "--run", "--repeats", 1, "--json")
    assert code == 0, err
    rep = json.loads(out)
    run = rep["run"]
    assert run["verified"] and run["max_rel_error"] <= 1e-12
    assert run["measured_words_per_rank"]["per_rank"] == rep["model_words_per_rank"]["per_rank"]
    assert run["pmpi_words_per_rank"]["per_rank"] == rep["model_words_per_rank"]["per_rank"]
    s = rep["baselines"]["summa"]
    assert s["verified"] and s["measured_words_per_rank"]["per_rank"] == s["model_words_per_rank"]["per_rank"]
    assert run["time_s"]["min"] > 0
    from meshplan.api.matmul import MatmulPlan, MatmulRun, SummaBaseline

    assert tuple(rep) == MatmulPlan.json_keys() and tuple(run) == MatmulRun.json_keys()
    assert tuple(s) == SummaBaseline.json_keys()


@pytest.mark.parametrize("argv, msg", [
    (["0", "4", "4", "--np", "2"], "m must be a positive"),
    (["4", "4", "4", "--np", "0"], "p.* must be a whole number of ranks, at least 1"),
    (["100", "100", "100", "--np", "2", "--memory", "10"], "memory too small"),
    (["4", "4", "4", "--np", "9999", "--run"], "exceeds the limit"),
    (["4", "4", "4", "--np", "2", "--baseline", "cannon"], "unknown"),
    (["4", "4", "4", "--np", "2", "--idle-tolerance", "2"], "idle.tolerance"),
    (["1", "1", "1", "--np", "8", "--idle-tolerance", "0"], "no processor grid"),
    (["4", "4", "4", "--np", "2", "--dtype", "f16"], "dtype 'f16' is not supported"),
    (["4", "4", "4", "--np", "2", "--repeats", "0"], "repeats must be a whole number of timed runs, at least 1"),
    (["4", "4", "4", "--np", "2", "--run", "--repeats", "0"], "repeats must be"),
    (["4", "4", "4", "--np", "2", "--run", "--baseline", "scalapack", "--dtype", "f32"], "f64 only"),
    (["64", "64", "64", "--np", "4", "--memory", str(2**62 + 1)], "more than 2..62 words"),
    (["x", "4", "4", "--np", "2"], "invalid int"),
])
def test_bad_input_one_error_line_exit_2(cli, argv, msg):
    with pytest.raises(SystemExit) if argv[0] == "x" else _nullcontext() as exc:
        code, out, err = cli("matmul", *argv)
    if argv[0] == "x":
        assert exc.value.code == 2
        return
    assert code == 2 and re.search(msg, err, re.I) and err.count("\n") == 1 and err.startswith("error:"), err


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def test_objective_time_with_a_calibrated_system(tmp_path):
    """--objective time plans with the latency, bandwidth and flop rate of a system file, explains the choice
    in the JSON and the table; without --system, or with a system that has no flop rate, exit 2 naming it."""
    import json as _json
    import subprocess
    import sys

    sysfile = tmp_path / "here.json"
    level = {"name": "node", "size": 4, "links": [{"kind": "switch", "bandwidth": 1e10, "latency": 5e-6}]}
    sysfile.write_text(_json.dumps({"levels": [level], "flop_rate": 1e10}))
    run = lambda *a: subprocess.run([sys.executable, "-m", "meshplan", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=tmp_path)  # outside the checkout, whose meshplan/ would shadow the install
    out = run("matmul", "64", "64", "65536", "--np", "4", "--objective", "time", "--system", str(sysfile), "--json")
    assert out.returncode == 0, out.stderr
    doc = _json.loads(out.stdout)
    assert doc["objective"] == "time" and doc["grid"] == [1, 1, 4] and doc["model_time"]["total_s"] > 0
    assert doc["explanation"][1].startswith("chosen [1,1,4]")
    out = run("factor", "lu", "256", "--np", "4", "--objective", "time", "--system", str(sysfile), "--json")
    assert out.returncode == 0 and _json.loads(out.stdout)["objective"] == "time", out.stderr
    out = run("matmul", "64", "64", "64", "--np", "4", "--objective", "time")
    assert out.returncode == 2 and "--system" in out.stderr
    sysfile.write_text(_json.dumps({"levels": [level]}))
    out = run("factor", "cholesky", "256", "--np", "4", "--objective", "time", "--system", str(sysfile))
    assert out.returncode == 2 and "flop_rate" in out.stderr
