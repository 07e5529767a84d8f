"""One validation per input (DESIGN.md, "One way to do a thing"), and messages that name API parameters.

* ``np`` (ranks) and ``repeats`` are checked by :mod:`meshplan.models.core.checks` and nowhere else, ``dtype``
  by :func:`meshplan.models.core.dtypes.as_dtype` and nowhere else: no other module compares them with a
  constant or a list before raising (a scan of the syntax of every module), and the CLI passes the raw
  values on (no argparse ``choices`` or range check).
* ``repeats = 0`` is refused everywhere — by every API function that takes ``repeats`` and every verb with
  ``--repeats`` — with the one message of ``check_repeats``, before anything launches.
* Below ``meshplan/cli`` no error message names a CLI flag (``--np``): errors name the API parameter and carry
  it (``err.param``); the CLI shows it as its flag (``mp.plan_halo(..., kernel=0)`` says ``kernel must be …``,
  ``meshplan tensor halo --kernel 0`` says ``--kernel must be …``).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import meshplan as mp
from meshplan.cli import VERBS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("models", "encodings", "solvers", "exec", "meshplan")
SITES = {"models/core/checks.py", "models/core/dtypes.py"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
ERRORS = {"ModelError", "ParseError", "Infeasible", "SolverTimeout", "VerificationError", "MeshplanError",
          "MpiRunError", "OutputError", "NotExecutable", "MatmulError", "FactorModelError", "SoapViolation",
          "FactorizationBreakdown", "NoGrid", "CannotRun", "RuleViolation"}


def _modules(include_cli: bool):
    for layer in LAYERS:
        for p in sorted((ROOT / layer).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel.startswith("meshplan/cli/") and not include_cli:
                continue
            yield rel, ast.parse(p.read_text(), filename=rel)


def _name(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _raises(body) -> bool:
    return any(isinstance(n, ast.Raise) for stmt in body for n in ast.walk(stmt))


def _validations(tree) -> list[tuple[int, str]]:
    """``if`` tests that raise and compare ``np``/``repeats`` with a number, or test ``dtype`` membership."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not _raises(node.body):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            names = {_name(s) for s in (cmp.left, *cmp.comparators)}
            number = any(isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool)
                         for s in (cmp.left, *cmp.comparators))
            if names & {"np", "np_", "repeats"} and number:
                out.append((cmp.lineno, ast.unparse(cmp)))
            if "dtype" in names and any(isinstance(op, (ast.In, ast.NotIn)) for op in cmp.ops):
                out.append((cmp.lineno, ast.unparse(cmp)))
    return out


def test_np_repeats_and_dtype_have_one_validation_site():
    found = {rel: hits for rel, tree in _modules(include_cli=True) if rel not in SITES
             for hits in [_validations(tree)] if hits}
    assert not found, f"validated outside models/core/checks.py and dtypes.py: {found}"
    # the sites themselves do validate
    for rel in SITES:
        assert "raise ModelError" in (ROOT / rel).read_text()


def test_the_cli_passes_dtype_and_repeats_on_unchecked():
    parser = build_parser()
    todo = [parser]
    while todo:
        p = todo.pop()
        for action in p._actions:  # noqa: SLF001
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                todo += list(action.choices.values())
            elif action.dest in ("dtype", "repeats", "np"):
                assert action.choices is None, f"{p.prog} {action.option_strings} has argparse choices"
                assert action.type in (None, int), f"{p.prog} {action.option_strings} converts with {action.type}"


def _api_functions_with(param: str):
    for name in mp.__all__:
        obj = getattr(mp, name)
        if inspect.isfunction(obj) and param in inspect.signature(obj).parameters:
            yield name, obj


REPEATS_CALLS = {
    "run_programs": lambda f: f("AllReduce slice=root", system="node=2,gpu=2", axes="2,2", reduce="0",
                                matrix=[[2, 1], [1, 2]], repeats=0),
    "calibrate": lambda f: f(4, repeats=0),
    "run_redistribution": lambda f: f("[4{x}16,16]", "[16,4{x}16]", "x=4", repeats=0),
    "run_matmul": lambda f: f(40, 40, 40, 4, repeats=0),
    "run_factorization": lambda f: f("lu", 64, 4, repeats=0),
}


def test_every_api_function_with_repeats_is_covered():
    assert {n for n, _ in _api_functions_with("repeats")} == set(REPEATS_CALLS)


@pytest.mark.parametrize("name", sorted(REPEATS_CALLS))
def test_repeats_zero_is_refused_by_every_api_function(name):
    with pytest.raises(mp.ModelError, match=r"^repeats must be a whole number of timed runs, at least 1, got 0"):
        REPEATS_CALLS[name](getattr(mp, name))


VERB_ARGV = {
    "run": ["run", "examples/programs/fig3a_allreduce.txt", "--system", "rack=1,server=2,cpu=2,gpu=4",
            "--axes", "4,4", "--reduce", "1", "--matrix", "[[1,1,2,2],[1,2,1,2]]"],
    "calibrate": ["calibrate", "--np", "4"],
    "redistribute": ["redistribute", "[4{x}16,16]", "[16,4{x}16]", "--mesh", "x=4", "--run"],
    "matmul": ["matmul", "40", "40", "40", "--np", "4", "--run"],
    "factor": ["factor", "lu", "64", "--np", "4", "--run"],
}


def _verbs_with_repeats() -> set[str]:
    out = set()
    for verb in VERBS:
        parser = build_parser([verb])
        sub = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))  # noqa
        if "--repeats" in sub.choices[verb].format_help():
            out.add(verb)
    return out


def test_every_verb_with_repeats_is_covered():
    assert _verbs_with_repeats() == set(VERB_ARGV)


@pytest.mark.parametrize("verb", sorted(VERB_ARGV))
def test_repeats_zero_is_refused_by_every_verb(verb, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(VERB_ARGV[verb] + ["--repeats", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --repeats must be a whole number of timed runs, at least 1, got 0"), err


@pytest.mark.parametrize("call,message", [
    (lambda: mp.plan_matmul(8, 8, 8, 0), r"^p must be a whole number of ranks, at least 1, got 0"),
    (lambda: mp.plan_factorization("lu", 64, 0), r"^p must be a whole number of ranks, at least 1, got 0"),
    (lambda: mp.run_redistribution("[4{x}16,16]", "[16,4{x}16]", "x=4", np=0),
     r"^np must be a whole number of ranks, at least 1, got 0"),
    (lambda: mp.check_tensor(0), r"^np must be a whole number of ranks, at least 1, got 0"),
    (lambda: mp.plan_matmul(8, 8, 8, 4, dtype="f16"), r"^dtype 'f16' is not supported here"),
    (lambda: mp.plan_redistribution("[4]", "[4]", "x=1", dtype="f7"), r"^dtype 'f7' is not an element type"),
    (lambda: mp.plan_halo("1,1,4", "1,1,10", 0), r"^kernel must be >= 1, got 0"),
])
def test_np_and_dtype_errors_come_from_the_one_site_and_name_the_parameter(call, message):
    with pytest.raises(mp.ModelError, match=message) as info:
        call()
    assert info.value.param is not None


def _error_messages(tree):
    for node in ast.walk(tree):
        target = node.exc if isinstance(node, ast.Raise) and node.exc is not None else \
            node if isinstance(node, ast.Call) and _name(node.func) in ERRORS else None
        if target is None:
            continue
        for const in (n for n in ast.walk(target) if isinstance(n, ast.Constant) and isinstance(n.value, str)):
            yield const.lineno, const.value
    for node in ast.walk(tree):  # flags handed down as the name of a parameter in a message: what="--x"
        # (a developer tool's own argparse definitions, add_argument("--check"), define flags, name none)
        if isinstance(node, ast.Call) and _name(node.func) != "add_argument":
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and re.fullmatch(
                        r"--[a-z][a-z0-9-]*( file)?", arg.value):
                    yield arg.lineno, arg.value


def test_messages_below_the_cli_name_parameters_not_flags():
    hits = [f"{rel}:{line}: {text[:80]!r}" for rel, tree in _modules(include_cli=False)
            for line, text in _error_messages(tree) if FLAG.search(text)]
    assert not hits, "\n".join(hits)


def test_the_cli_shows_the_flag_of_the_parameter(capsys):
    assert main(["tensor", "halo", "--partition", "1,1,4", "--shape", "1,1,10", "--kernel", "0"]) == 2
    assert capsys.readouterr().err == "error: --kernel must be >= 1, got 0\n"
    assert main(["matmul", "8", "8", "8", "--np", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --np must be a whole number of ranks, at least 1, got 0")
