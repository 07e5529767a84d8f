"""Shared fixtures of the CLI tests: the in-process runner and exported schedules."""

from __future__ import annotations

import pytest

from meshplan.cli import main


@pytest.fixture
def cli(capsys):
    """``cli(*argv) -> (exit code, stdout, stderr)`` of ``meshplan *argv``, run in process."""
    def run(*argv):
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture(scope="session")
def export_schedule(tmp_path_factory):
    """``export_schedule(name, system, axes, reduce)``: the path of a schedule exported by
    ``meshplan solve placement … --max-size 3 --export``."""
    def make(name: str, system: str, axes: str, reduce: str):
        path = tmp_path_factory.mktemp(name) / "plan.json"
        assert main(["solve", "placement", "--system", system, "--axes", axes, "--reduce", reduce,
                     "--max-size", "3", "--export", str(path), "--json"]) == 0
        return path
    return make
