"""bench/library.py runs end to end (``--quick --launches 1`` on 2 ranks, into a temporary results directory):
every row — each executor beside the hand-written mpi4py version of its own communication — has a ratio,
both sides verified against numpy, and the bytes each side hands to MPI compared where the PMPI counter ran.
Times are never asserted (a benchmark's numbers are not a test's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.mpi]


def test_quick_bench_verifies_every_row(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "library.py"), "--quick", "--launches", "1",
                           "--np", "2", "--results-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "library.json").read_text())
    assert doc["area"] == "library" and doc["np"] == 2 and doc["launches"] == 1
    assert doc["blas_threads"]["OPENBLAS_NUM_THREADS"] == "1"
    assert len(doc["load_average"]) == 1 and len(doc["load_average"][0]["before"]) == 3
    rows = doc["rows"]
    kinds = {r["primitive"].split()[0] for r in rows}
    assert {"reduction", "redistribution", "halo", "matmul", "lu", "cholesky"} <= kinds, kinds
    for r in rows:
        assert isinstance(r["ratio"], float) and r["ratio"] > 0, r
        assert r["ratio_min"] <= r["ratio"] <= r["ratio_max"], r
        assert r["verified"] and r["verified_meshplan"] and r["verified_mpi4py"], (r["primitive"], r["failed"])
        assert r["failed"] == [], r["primitive"]
        if doc["pmpi"] and not r["primitive"].startswith(("lu", "cholesky")):
            # the same MPI calls on the same data (the factorization's executor adds its agreement reductions)
            assert r["bytes_equal_model"], r["primitive"]
