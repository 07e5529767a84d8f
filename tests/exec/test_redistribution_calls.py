"""The redistribution executor's call paths on 4 ranks (one launch of
tests/exec/mpi_scripts/redistribution_calls.py, every case compared with numpy): programs ending in each kind
of step and the empty one, called with the same arrays while their contents change, into C- and
Fortran-order ``out=`` and into the source tile itself, after a dropped ``out`` or source tile, in float32
after float64; the same bytes counted on every call; the source tile never written."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import run_mpi_json

pytestmark = pytest.mark.mpi
SCRIPT = Path(__file__).with_name("mpi_scripts") / "redistribution_calls.py"


@pytest.fixture(scope="module")
def result():
    return run_mpi_json(4, [str(SCRIPT)], timeout_s=300)


def test_every_kind_of_last_step_is_covered(result):
    assert result["last_steps"] == ["(empty)", "allgather", "allpermute", "alltoall", "dynslice"]


def test_every_call_path_verifies(result):
    bad = [f"{c['name']}: {c['detail']}" for c in result["cases"] if not c["ok"]]
    assert len(result["cases"]) == 8 and not bad, "\n".join(bad)
