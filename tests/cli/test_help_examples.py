"""Every ``--help`` shows working examples: each verb and each object (``solve placement``, ``tensor halo``,
…) prints at least one ``meshplan …`` line of its own under ``examples:``; every example parses, and every
example that does not start MPI runs as printed (from a scratch directory holding a ``plan.json``
schedule; ``examples/…`` paths are the repository's).  Examples that launch ``mpiexec`` (``run``,
``calibrate``, ``tensor check``, ``--run``) are parsed only: the MPI paths have their own tests."""

from __future__ import annotations

import argparse
import shlex
import shutil
from pathlib import Path

import pytest

from meshplan.cli import VERBS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
#: verbs whose every run starts mpiexec, or (testbed) needs root and rebuilds the host's network namespaces:
#: parsed only, as tests/cli/test_docs_examples.py does (tests/testbed/ runs the testbed on namespaces of its own)
MPI_VERBS = {"run", "calibrate", "testbed"}
#: files that only an MPI example writes (``calibrate -o here.json``): examples reading them are parsed only
MPI_OUTPUTS = {"here.json"}
#: what ends the meshplan command of an example line (the rest is shell: another command, a redirection)
SHELL = {"&&", "||", "|", ">", ">>", ";"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def _commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every verb and object parser, by its words: ``("solve",)``, ``("solve", "placement")``, …"""
    out = {}
    todo = [((name,), p) for name, p in _subparsers(build_parser()).items()]
    while todo:
        words, p = todo.pop()
        out[words] = p
        todo += [((*words, name), sub) for name, sub in _subparsers(p).items()]
    return out


def _examples(parser: argparse.ArgumentParser) -> list[list[str]]:
    """The ``meshplan …`` commands under ``examples:`` in the parser's help (continuation lines joined,
    comments and shell tails dropped), without the leading ``meshplan``."""
    text = parser.format_help()
    if "examples:" not in text:
        return []
    lines, out = text.split("examples:", 1)[1].splitlines(), []
    joined = []
    for ln in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + " " + ln.strip()
        else:
            joined.append(ln.strip())
    for ln in joined:
        if not ln.startswith("meshplan "):
            continue
        words = shlex.split(ln, comments=True)[1:]
        cut = next((i for i, w in enumerate(words) if w in SHELL), len(words))
        out.append(words[:cut])
    return out


COMMANDS = _commands()
EXAMPLES = sorted({tuple(a) for p in COMMANDS.values() for a in _examples(p)})


def _launches_mpi(argv) -> bool:
    return argv[0] in MPI_VERBS or "--run" in argv or tuple(argv[:2]) == ("tensor", "check")


def test_every_verb_is_listed():
    assert {w[0] for w in COMMANDS} == set(VERBS)
    assert ("solve", "placement") in COMMANDS and ("tensor", "halo") in COMMANDS and ("tensor", "check") in COMMANDS


@pytest.mark.parametrize("words", sorted(COMMANDS), ids=" ".join)
def test_every_verb_and_object_has_an_example_of_its_own(words):
    own = [a for a in _examples(COMMANDS[words]) if tuple(a[:len(words)]) == words]
    assert own, f"`meshplan {' '.join(words)} --help` shows no example of `meshplan {' '.join(words)} …`"


@pytest.mark.parametrize("argv", EXAMPLES, ids=" ".join)
def test_example_parses(argv):
    args = build_parser(list(argv)).parse_args(list(argv))
    assert callable(getattr(args, "func", None))


RUNNABLE = [a for a in EXAMPLES if not _launches_mpi(a) and not MPI_OUTPUTS & set(a)]


def test_most_examples_run():
    assert len(RUNNABLE) >= 20 and {a[0] for a in RUNNABLE} >= set(VERBS) - MPI_VERBS


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """The ``plan.json`` the examples read: ``solve placement --export`` as in ``meshplan run --help``."""
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    assert main(["solve", "placement", "--system", "node=2,gpu=4", "--axes", "2,4", "--reduce", "1",
                 "--max-size", "3", "--export", str(path), "--json"]) == 0
    return path


@pytest.mark.parametrize("argv", RUNNABLE, ids=" ".join)
def test_example_runs_as_printed(cli, argv, plan, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")  # piped output at 80 columns: see _check_80_columns
    shutil.copy(plan, tmp_path / "plan.json")
    argv = [str(ROOT / a) if a.startswith("examples/") else a for a in argv]
    code, out, err = cli(*argv)
    assert code == 0, err
    if "--png" in argv:
        assert (tmp_path / argv[argv.index("--png") + 1]).is_file()
    else:
        assert out.strip() or any(tmp_path.iterdir())
    _check_80_columns(argv, out)


def _check_80_columns(argv, out: str) -> None:
    """At ``COLUMNS=80`` a table or text answer fits 80 columns with no trailing spaces and no number cut
    short with ``…`` (JSON is one line; ``export`` prints a program)."""
    import re

    lines = out.splitlines()
    if "--json" not in argv and argv[0] != "export":
        assert not [ln for ln in lines if len(ln) > 80], [ln for ln in lines if len(ln) > 80][:3]
    assert not [ln for ln in lines if ln != ln.rstrip(" ")], "trailing spaces"
    assert not re.findall(r"\d[\d,.]*…|…[\d,.]*\d", out), "a number cut short"
