"""The reduction and redistribution executors inside a user's MPI program (one 4-rank launch of
tests/exec/mpi_scripts/executors_check.py, which compares every case with numpy): every synthesized program of
three placement problems on lengths that do and do not divide the group, four dtypes, in place and ``out=``,
C and Fortran order, reuse, a split communicator, byte counts, refused bad input; redistribution of the paper's
examples and random problems, reused and with ``out=``."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import run_mpi_json

pytestmark = pytest.mark.mpi
SCRIPT = Path(__file__).with_name("mpi_scripts") / "executors_check.py"


@pytest.fixture(scope="module")
def cases():
    out = run_mpi_json(4, [str(SCRIPT)], timeout_s=600)
    return out["cases"]


def test_there_are_many_cases(cases):
    names = [c["name"] for c in cases]
    assert sum(n.startswith("reduction ") for n in names) >= 40
    assert sum(n.startswith("redistribute ") for n in names) >= 30
    assert any("split communicator" in n for n in names) and any("refused at bind" in n for n in names)


def test_every_case_verifies(cases):
    bad = [f"{c['name']}: {c['detail']}" for c in cases if not c["ok"]]
    assert not bad, "\n".join(bad[:10])
