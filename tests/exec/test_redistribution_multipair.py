"""Multi-pair all-to-alls (the wire-cost planner's merged all-to-all) run by the MPI executor on 8 ranks: the
result equals numpy's, and the bytes each rank hands to MPI are one buffer per collective of the plan (one
launch, script tests/exec/mpi_scripts/multipair_check.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.exec.runtime.launch import run_mpi_json

pytestmark = pytest.mark.mpi
SCRIPT = Path(__file__).with_name("mpi_scripts") / "multipair_check.py"


@pytest.fixture(scope="module")
def cases():
    return run_mpi_json(8, [str(SCRIPT)], timeout_s=600)["cases"]


def test_every_program_is_right_and_hands_mpi_one_buffer_per_collective(cases):
    assert len(cases) == 34
    for c in cases:
        assert c["equal"], c
        assert c["sent_bytes"] == c["handed_bytes"], c


def test_multi_pair_alltoalls_ran(cases):
    merged = [c for c in cases if c["multi_pair"]]
    assert len(merged) >= 6, [c["problem"] for c in cases]


def test_permutations_split_among_replicas_ran(cases):
    split = [c for c in cases if c["split"]]
    assert len(split) >= 3, [c["problem"] for c in cases]
