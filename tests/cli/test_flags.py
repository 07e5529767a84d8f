"""One concept, one flag (DESIGN.md, Thin CLI): the shared flags of meshplan/cli/common.py, their choices
read from the library, the deprecated aliases, and verbs whose --help imports no heavy module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from meshplan.cli import VERBS, build_parser

HEAVY = ("z3", "sympy", "ortools", "matplotlib", "mpi4py", "numpy")


def _parse(*argv):
    return build_parser(list(argv)).parse_args(list(argv))


def test_repeats_is_one_flag_with_hidden_deprecated_aliases(capsys):
    assert _parse("run", "plan.json", "--repeats", "3").repeats == 3
    assert _parse("redistribute", "[4]", "[4]", "--mesh", "x=1", "--repeats", "2").repeats == 2
    assert _parse("calibrate", "--np", "4", "--repeats", "7").repeats == 7
    capsys.readouterr()
    assert _parse("run", "plan.json", "--repeat", "4").repeats == 4
    assert _parse("calibrate", "--np", "4", "--iters", "6").repeats == 6
    assert "--repeat is deprecated; use --repeats" in capsys.readouterr().err
    for verb in ("run", "redistribute", "calibrate"):
        with pytest.raises(SystemExit):
            build_parser([verb]).parse_args([verb, "--help"])
        out = capsys.readouterr().out
        assert "--repeats" in out and "--repeat " not in out and "--iters" not in out


def test_choices_come_from_the_library():
    from meshplan.cli import solve
    from meshplan.cli.common import solver_names
    from meshplan.models.reduction.simulator import ALGORITHMS
    from meshplan.solvers.backends import base
    from meshplan.solvers.reduction.synthesis import DIALECTS

    assert solve.ALGORITHMS == tuple(ALGORITHMS) and solve.DIALECTS == tuple(DIALECTS)
    names = solver_names()
    assert "cpsat" in names and "z3" in names
    assert all(base.get_backend(n).name == n for n in names)
    action = next(a for a in build_parser(["solve"])._subparsers._group_actions[0].choices["solve"]
                  ._subparsers._group_actions[0].choices["placement"]._actions if a.dest == "solver")
    assert tuple(action.choices) == names


@pytest.fixture(scope="module")
def plan(export_schedule):
    return export_schedule("flags", "node=2,gpu=2", "2,2", "0")


@pytest.mark.parametrize("verb", ["export", "show"])
def test_placement_is_one_index_where_a_verb_takes_one_program(cli, plan, tmp_path, verb):
    extra = ["--format", "jax-mesh"] if verb == "export" else ["--png", str(tmp_path / "x.png")]
    code, _, err = cli(verb, plan, *extra, "--placement", "0,1")
    assert code == 2 and err.startswith("error: --placement takes one index here")
    code, _, err = cli(verb, plan, *extra, "--placement", "5")
    assert code == 2 and "--placement 5 out of range: the schedule has" in err


def test_placement_lists_where_a_verb_takes_several(cli, plan):
    code, out, _ = cli("check", plan, "--placement", "1,0", "--program", "0", "--no-proof", "--json")
    doc = json.loads(out)
    assert code == 0 and [r["placement"] for r in doc["results"]] == [1, 0]


@pytest.mark.parametrize("verb", [None, *VERBS])
def test_help_imports_no_heavy_module(verb):
    argv = ["--help"] if verb is None else [verb, "--help"]
    code = ("import sys\nfrom meshplan.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)")
    # cwd="/": `python -c` puts the working directory first on sys.path, and a checkout's root holds the
    # source folder meshplan/ without the mapped layer packages (a regular install, as in .ci/run)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().splitlines()[-1] == "[]", f"meshplan {' '.join(argv)} imports {res.stderr}"


def test_dtype_takes_either_spelling(cli, plan):
    """``--dtype`` is checked in one place, the library's ``as_dtype``: either spelling reaches it, the
    verb's JSON echoes its own spelling, and a type the verb does not run is refused with exit 2 before
    any launch."""
    import meshplan as mp

    assert _parse("run", "plan.json", "--dtype", "i32").dtype == "i32"  # the CLI passes the text on
    assert mp.plan_redistribution("[4]", "[4]", "x=1", dtype="float64").dtype == "f64"
    assert mp.plan_redistribution("[4]", "[4]", "x=1", dtype="bf16").to_json()["itemsize"] == 2
    code, _, err = cli("run", plan, "--dtype", "bf16")  # not a dtype the reduction runtime runs
    assert code == 2 and err.startswith("error: --dtype 'bf16' is not supported here; use one of i64 (int64)")
    code, _, err = cli("redistribute", "[4]", "[4]", "--mesh", "x=2", "--dtype", "f7")
    assert code == 2 and err.startswith("error: --dtype 'f7' is not an element type")

def test_baseline_is_one_flag_of_one_form_in_every_verb(cli):
    """``--baseline [NAMES]`` in every verb with baselines: comma-separated names, ``none``, or the flag alone for
    all of them; unknown names are refused with exit 2 (redistribute's are the table's, the others the API's)."""
    forms = {}
    for verb in ("redistribute", "matmul", "factor"):
        parser = build_parser([verb])._subparsers._group_actions[0].choices[verb]
        action = next(a for a in parser._actions if "--baseline" in a.option_strings)
        forms[verb] = (action.nargs, action.metavar, action.type)
    assert set(forms.values()) == {("?", "NAMES", None)}, forms
    for argv in (["redistribute", "[4]", "[4]", "--mesh", "x=1"], ["matmul", "8", "8", "8", "--np", "2"],
                 ["factor", "lu", "64", "--np", "2"]):
        code, _, err = cli(*argv, "--baseline", "nosuch")
        assert code == 2 and "'nosuch'" in err and "--baseline" in err, err
