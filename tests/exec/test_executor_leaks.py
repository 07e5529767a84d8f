"""Executors are reused: 100 calls of each executor (reduction, redistribution, halo, matmul in both layouts,
LU and Cholesky with a solve) in one process create no MPI handle, ``close()`` frees every communicator,
datatype and window the executor made, and memory stays flat (one 4-rank launch of
tests/exec/mpi_scripts/leak_check.py with the PMPI counter preloaded: it counts the handles MPI creates and
frees)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshplan.exec.runtime import pmpi
from meshplan.exec.runtime.launch import run_mpi_json

pytestmark = pytest.mark.mpi
SCRIPT = Path(__file__).with_name("mpi_scripts") / "leak_check.py"
EXECUTORS = {"reduction", "redistribution", "halo", "matmul", "matmul scalapack layout", "factorization lu",
             "factorization cholesky"}


@pytest.fixture(scope="module")
def report():
    try:
        env = pmpi.preload_env()
    except pmpi.PmpiUnavailable as err:
        pytest.skip(f"the PMPI counter cannot be built here: {err}")
    return run_mpi_json(4, [str(SCRIPT)], timeout_s=600, env=env)["executors"]


def test_every_executor_is_measured(report):
    assert set(report) == EXECUTORS
    assert all(r["calls"] == 300 for r in report.values())


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_calls_create_no_handle_and_close_frees_them(report, name):
    r = report[name]
    assert r["handles_calls"] == [0, 0, 0], r          # communicators, datatypes, windows
    assert r["handles_after_close"] == [0, 0, 0], r
    assert sum(r["handles_bind"]) >= 0


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_memory_stays_flat(report, name):
    r = report[name]
    # a leak of even one small buffer per call would grow by far more over 100 calls
    assert r["rss_growth_second_bytes"] <= 1 << 20, r
    assert r["traced_growth_bytes"] <= 64 << 10, r
