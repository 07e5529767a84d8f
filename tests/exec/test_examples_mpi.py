"""Every script of examples/mpi (docs/library.md) runs and verifies itself against numpy on 2, 4 and 8 ranks:
one ``mpiexec`` per rank count runs them all (tests/exec/mpi_scripts/run_examples.py calls each script's
``main(comm)``, what ``mpiexec -n K python examples/mpi/NAME.py`` runs).  A script that finds a wrong result
raises, which aborts the job and fails the test; each prints one line saying what it verified."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import run_mpi, run_mpi_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "mpi").glob("*.py"))
RUNNER = Path(__file__).with_name("mpi_scripts") / "run_examples.py"

pytestmark = pytest.mark.mpi


def test_there_are_examples_for_every_executor():
    names = {p.stem for p in EXAMPLES}
    assert {"allreduce", "redistribute", "matmul", "matmul_scalapack", "lu", "cholesky", "halo"} <= names


@pytest.mark.parametrize("ranks", [2, 4, pytest.param(8, marks=pytest.mark.slow)])
def test_every_example_verifies(ranks):
    out = run_mpi_json(ranks, [str(RUNNER), *map(str, EXAMPLES)], timeout_s=900, cwd=str(ROOT))
    assert out["ranks"] == ranks
    assert set(out["examples"]) == {p.stem for p in EXAMPLES}
    for name, text in out["examples"].items():
        assert text and ("verified" in text or "skipped" in text), f"{name} printed {text!r}"
        assert "WRONG" not in text, f"{name}: {text}"


def test_an_example_runs_standalone_as_the_docs_print_it():
    res = run_mpi(4, [str(ROOT / "examples" / "mpi" / "redistribute.py")], timeout_s=300, cwd=str(ROOT))
    assert "verified" in res.stdout, res.stdout + res.stderr
