"""The Python API (DESIGN.md, Python API; docs/api.md): ``import meshplan as mp`` is cheap, every name of
``mp.__all__`` resolves and is documented, results carry the CLI's JSON fields, and every example of
docs/api.md runs."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import meshplan as mp
from meshplan.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"
HEAVY = ("z3", "sympy", "ortools", "matplotlib", "mpi4py", "numpy", "pulp")


def test_import_meshplan_is_cheap():
    code = ("import sys, meshplan\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr


def test_all_lists_the_export_table_and_the_curated_names():
    assert mp.__all__ == ["__version__", *mp._EXPORTS]
    assert len(set(mp.__all__)) == len(mp.__all__)
    wanted = {"System", "solve_placement", "synthesize", "check_program", "simulate", "run_programs",
              "load_schedule", "Mesh", "parse_type", "plan_redistribution", "run_redistribution",
              "analyze_bound", "integer_tiles", "MeshplanError", "ModelError", "ParseError", "Infeasible",
              "SolverTimeout", "VerificationError"}
    assert wanted <= set(mp.__all__)
    assert set(mp.__all__) <= set(dir(mp))
    with pytest.raises(AttributeError):
        mp.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", [n for n in mp.__all__ if n != "__version__"])
def test_every_public_name_resolves_and_has_a_docstring(name):
    value = getattr(mp, name)
    assert getattr(value, "__module__", None) == mp._EXPORTS[name] or name in ("Collective",) or \
        inspect.getmodule(value) is not None
    doc = inspect.getdoc(value)
    assert doc and len(doc) > 20, f"meshplan.{name} has no docstring"


def test_every_public_name_is_documented_in_docs_api():
    text = DOC.read_text()
    missing = [n for n in mp.__all__ if n != "__version__" and f"`{n}`" not in text]
    assert not missing, f"docs/api.md does not document {missing}"


def _examples() -> list[tuple[int, str, bool]]:
    """``(line, code, needs MPI)`` of every ```python block of docs/api.md (``<!-- mpi -->`` before the
    fence marks an MPI example)."""
    text = DOC.read_text()
    out = []
    for m in re.finditer(r"(<!-- mpi -->\s*\n)?```python\n(.*?)```", text, re.S):
        out.append((text[: m.start(2)].count("\n") + 1, m.group(2), m.group(1) is not None))
    return out


EXAMPLES = _examples()


def test_docs_have_examples():
    assert len(EXAMPLES) >= 15


@pytest.mark.parametrize("line,code,mpi", [pytest.param(*e, marks=[pytest.mark.mpi] if e[2] else [],
                                                        id=f"api.md:{e[0]}") for e in EXAMPLES])
def test_docs_example_runs(line, code, mpi, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"docs/api.md:{line}", "exec"), {"__name__": "__api_example__"})


# -- the results carry the fields of the CLI's --json ------------------------------------------------


def _cli_json(capsys, *argv):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def test_placement_plan_is_the_cli_json(capsys):
    doc = _cli_json(capsys, "solve", "placement", "--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "0",
                    "--max-size", "2", "--json")
    plan = mp.solve_placement("node=2,gpu=2", (2, 2), [0], max_size=2)
    got = plan.to_json()
    assert list(got) == list(doc) == list(mp.PlacementPlan.json_keys())
    for key in ("synthesis_seconds",):
        got.pop(key), doc.pop(key)
    for d in (got, doc):
        for pl in d["placements"]:
            pl.pop("synthesis_seconds")
    assert got == doc
    with pytest.raises(AttributeError):
        plan.axes = (4,)  # frozen
    with pytest.raises(TypeError):
        plan.placements[0]["speedup"] = 2.0  # read-only all the way down
    assert isinstance(plan.placements[0]["programs"], tuple)


def test_checks_are_the_cli_json(capsys, tmp_path):
    prog = tmp_path / "p.txt"
    prog.write_text("Reduce slice=root\nBroadcast slice=root\n")
    argv = ["--system", "node=2,gpu=2", "--axes", "2,2", "--reduce", "0", "--matrix", "[[2,1],[1,2]]"]
    doc = _cli_json(capsys, "check", prog, *argv, "--json")
    res = mp.check_program(prog, "node=2,gpu=2", "2,2", "0", matrix="[[2,1],[1,2]]")
    assert res.to_json() == doc and res.valid
    plan = tmp_path / "plan.json"
    mp.solve_placement("node=2,gpu=2", "2,2", "0", max_size=2).save(plan)
    doc = _cli_json(capsys, "check", plan, "--no-proof", "--json")
    assert mp.check_schedule(str(plan), proof=False).to_json() == doc


def test_exports_are_the_cli_output(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    mp.solve_placement("node=2,gpu=2", "2,2", "0", max_size=2).save(plan)
    doc = _cli_json(capsys, "export", plan, "--format", "torch-mesh", "--placement", "1", "--json")
    assert mp.export_mesh(str(plan), "torch-mesh", placement=1).to_json() == doc
    capsys.readouterr()
    assert main(["export", str(plan), "--format", "mpi4py", "--program", "2"]) == 0
    assert capsys.readouterr().out == mp.export_mpi4py(str(plan), program=2).text


def test_redistribution_and_bound_are_the_cli_json(capsys):
    doc = _cli_json(capsys, "redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4", "--json")
    assert mp.plan_redistribution("[4{x}16,16]", "[16,4{x}16]", "x=4").to_json() == doc
    doc = _cli_json(capsys, "bound", "--einsum", "ij,jk->ik", "--params", "N_i=32,N_j=32,N_k=32,S=64", "--json")
    rep = mp.analyze_bound("ij,jk->ik", params={"N_i": 32, "N_j": 32, "N_k": 32, "S": 64}).to_json()
    doc.pop("seconds"), rep.pop("seconds")
    assert rep == doc


@pytest.mark.parametrize("call,msg", [
    (lambda: mp.solve_placement("node=2,gpu=2", "2,x", "0"), "axes must be comma-separated integers"),
    (lambda: mp.solve_placement("nowhere", "2,2", "0"), "unknown system"),
    (lambda: mp.check_program("Reduce slice=nowhere", "node=2,gpu=2", "2,2", "0", matrix=[[2, 1], [1, 2]]),
     "nowhere"),
    (lambda: mp.plan_redistribution("[4{q}16]", "[16]", "x=4"), "q"),
    (lambda: mp.plan_redistribution("x=4", "[4{x}16]", "[16]"), "the arguments are (src, dst, mesh)"),
    (lambda: mp.analyze_bound("ij,jk->ik", params="N_i=0"), "sizes must be positive"),
    (lambda: mp.load_schedule({"hello": 1}), "not a meshplan schedule"),
])
def test_bad_input_raises_the_error_hierarchy(call, msg):
    with pytest.raises(mp.ModelError) as err:
        call()
    assert msg in str(err.value)


# -- string forms: round trips and fuzzed input (hypothesis) ----------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from meshplan.api.inputs import as_bytes, as_int_tuple, as_params  # noqa: E402

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=8))
def test_int_lists_round_trip(values):
    text = ",".join(map(str, values))
    assert as_int_tuple(text, "axes") == as_int_tuple(values, "axes") == tuple(values)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(NAMES, st.integers(1, 10**9), min_size=1, max_size=6))
def test_params_round_trip(values):
    text = ",".join(f"{k}={v}" for k, v in values.items())
    assert as_params(text) == as_params(values) == values


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.none(), st.lists(st.text(max_size=3))))
def test_string_forms_reject_bad_input_with_model_errors(value):
    for parse in (lambda v: as_int_tuple(v, "axes"), as_params, as_bytes):
        try:
            parse(value)
        except mp.ModelError:
            pass
