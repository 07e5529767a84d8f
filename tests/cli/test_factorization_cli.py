"""``meshplan factor`` and its API (:mod:`meshplan.api.factorization`): plan output and JSON fields (the
API value's fields, in order), bad input (one error line, exit 2; ``--repeats 0`` refused), and MPI runs
with the 2-D baseline, a user matrix and a singular matrix (exit 1 naming the step and block)."""

from __future__ import annotations

import json

import numpy as np
import pytest


def test_plan_json_fields(cli):
    code, out, err = cli("factor", "lu", 1000, "--np", 8, "--json")
    assert code == 0, err
    doc = json.loads(out)
    for key in ("grid", "block", "model_words_per_rank", "lower_bound_words", "run", "baselines",
                "two_d_model_words_per_rank", "explanation", "memory_words_per_rank"):
        assert key in doc
    assert doc["run"] is None and len(doc["grid"]) == 3
    assert doc["grid"][0] * doc["grid"][1] * doc["grid"][2] == 8


def test_plan_table_and_pinned_grid(cli):
    code, out, _ = cli("factor", "cholesky", 512, "--np", 8, "--grid", "2,2,2", "--block", 32)
    assert code == 0
    assert "[2, 2, 2]" in out and "v=32" in out and "lower bound" in out


@pytest.mark.parametrize("argv, fragment", [
    (["lu", 0, "--np", 4], "N must be"),
    (["lu", 256, "--np", 0], "--np"),
    (["lu", 16, "--np", 64, "--block", 16], "no grid"),
    (["lu", 1024, "--np", 4, "--memory", 1000], "memory too small"),
    (["lu", 256, "--np", 8, "--grid", "2,2,2", "--block", 1], "v ≥ c"),
    (["lu", 256, "--np", 8, "--grid", "2,2"], "PX,PY,PZ"),
    (["lu", 256, "--np", 4, "--grid", "2,2,2"], "must equal --np"),
    (["lu", 256, "--np", 4, "--baseline", "magma"], "unknown"),
    (["lu", 256, "--np", 4, "--repeats", 0], "repeats"),
    (["lu", 256, "--np", 4, "--repeats", 0, "--run"], "repeats"),
    (["lu", 256, "--np", 4, "--seed", -1], "seed"),
    (["lu", 256, "--np", 4, "--grid", "2,2,2"], "--grid"),
    (["lu", 2**21, "--np", 4], "2**62"),
])
def test_bad_input_is_one_error_line_exit_2(cli, argv, fragment):
    code, out, err = cli("factor", *argv)
    assert code == 2 and out == ""
    assert err.startswith("error:") and err.count("\n") == 1 and fragment in err


def test_unknown_factorization_is_an_argparse_error(cli, capsys):
    with pytest.raises(SystemExit) as exc:
        cli("factor", "qr", 256, "--np", 4)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "invalid choice" in err


@pytest.mark.mpi
def test_run_with_baseline_input_and_singular(cli, tmp_path):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((256, 256))
    path = tmp_path / "a.npy"
    np.save(path, A)
    code, out, err = cli("factor", "lu", 256, "--np", 4, "--grid", "2,1,2", "--block", 16, "--run",
                         "--input", path, "--baseline", "2d", "--repeats", 1, "--json")
    assert code == 0, err
    doc = json.loads(out)
    run = doc["run"]
    assert run["verified"] and run["scaled_residual"] <= 10 and run["growth_factor"] >= 1
    assert run["measured_words_per_rank"] == pytest.approx(doc["model_words_per_rank"])
    assert doc["baselines"]["2d"]["verified"]
    sing = A.copy()
    sing[100] = sing[7]
    np.save(path, sing)
    code, out, err = cli("factor", "lu", 256, "--np", 4, "--block", 16, "--run", "--input", path,
                         "--baseline", "none")
    assert code == 1 and err.startswith("error:") and "singular" in err and "step" in err and "block" in err
    spd = A @ A.T + 256 * np.eye(256)
    spd[40, 40] = -5.0
    np.save(path, spd)
    code, out, err = cli("factor", "cholesky", 256, "--np", 4, "--block", 16, "--run", "--input", path,
                         "--baseline", "none")
    assert code == 1 and "positive definite" in err and "step 2 (block column [32, 48))" in err


def test_bad_input_files_exit_2(cli, tmp_path):
    code, out, err = cli("factor", "lu", 64, "--np", 4, "--run", "--input", tmp_path / "missing.npy")
    assert code == 2 and err.startswith("error:") and "cannot read" in err
    np.save(tmp_path / "rect.npy", np.zeros((64, 32)))
    code, out, err = cli("factor", "lu", 64, "--np", 4, "--run", "--input", tmp_path / "rect.npy")
    assert code == 2 and "square" in err
    np.save(tmp_path / "sq.npy", np.eye(32))
    code, out, err = cli("factor", "lu", 64, "--np", 4, "--run", "--input", tmp_path / "sq.npy")
    assert code == 2 and "N = 64" in err
    code, out, err = cli("factor", "lu", 64, "--np", 4, "--input", tmp_path / "sq.npy")
    assert code == 2 and "needs --run" in err


def test_the_api_value_is_the_json_document(cli):
    import meshplan as mp

    plan = mp.plan_factorization("lu", 1000, 8, memory=200_000)
    code, out, _ = cli("factor", "lu", 1000, "--np", 8, "--memory", 200_000, "--json")
    doc = json.loads(out)
    assert code == 0 and plan.to_json() == doc
    assert type(plan).json_keys() == tuple(doc) == (
        "kind", "N", "p", "memory", "grid", "block", "model_words_per_rank", "model_phases",
        "memory_words_per_rank", "lower_bound_words", "candidates", "explanation", "two_d_model_words_per_rank",
        "objective", "model_time", "run", "baselines")
    assert doc["objective"] == "words" and doc["model_time"] is None
    assert plan.grid == tuple(doc["grid"]) and plan.block == doc["block"] and plan.run is None
    assert plan.schedule.grid.v == plan.block and plan.problem.memory == 200_000
    assert len(repr(plan)) <= 300
    assert mp.FactorRun.json_keys() == ("verified", "scaled_residual", "growth_factor", "measured_words_per_rank",
                                        "measured_words_max", "pmpi_words_per_rank", "time_s",
                                        "model_words_per_rank")


def test_api_errors_name_parameters():
    import meshplan as mp
    from meshplan.models.core.errors import ModelError

    for kwargs, param in ((dict(repeats=0), "repeats"), (dict(baselines=["magma"]), "baselines"),
                          (dict(seed=-1), "seed")):
        with pytest.raises(ModelError) as err:
            mp.run_factorization("lu", 64, 4, **kwargs)
        assert err.value.param == param and "--" not in str(err.value)
    with pytest.raises(ModelError, match="p must be") as err:
        mp.plan_factorization("lu", 64, 0)
    assert err.value.param == "p"


@pytest.mark.mpi
def test_run_factorization_returns_the_run_document(cli):
    import meshplan as mp

    r = mp.run_factorization("cholesky", 96, 2, grid=(1, 1, 2), block=16, baselines=["2d"], seed=1)
    assert isinstance(r.run, mp.FactorRun) and r.verified and r.run.scaled_residual <= 10
    assert r.run.measured_words_per_rank == r.model_words_per_rank
    doc = r.to_json()
    assert list(doc["run"]) == list(mp.FactorRun.json_keys()) and set(doc["baselines"]) == {"2d"}
    code, out, err = cli("factor", "cholesky", 96, "--np", 2, "--grid", "1,1,2", "--block", 16, "--run",
                         "--seed", 1, "--json")
    assert code == 0, err
    cli_doc = json.loads(out)
    for d in (doc, cli_doc):  # times differ from run to run
        d["run"].pop("time_s")
        d["baselines"]["2d"].pop("time_s")
    assert cli_doc == doc
