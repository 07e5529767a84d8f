"""The one MPI runtime (docs/runtime.md): byte counting, data, verdicts and the rank limit
(the lifecycle of failing and interrupted jobs is in test_lifecycle.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from meshplan.exec.runtime.data import block_of, block_range, cyclic_indices, index_tile, integer_array
from meshplan.exec.runtime.launch import check_np, max_ranks, run_job
from meshplan.exec.runtime.verify import Verification, max_relative_error, mismatched_rows
from meshplan.models.core.errors import ModelError

SELFTEST = "meshplan.exec.runtime.selftest"


def test_data_and_verdicts_without_mpi():
    a = integer_array(3, (1, 2), (4, 5), "float32")
    assert np.array_equal(a, integer_array(3, (1, 2), (4, 5), "float32")) and a.dtype == np.float32
    assert np.all(a == np.round(a)) and np.abs(a).max() <= 1000
    assert [block_range(10, 3, i) for i in range(3)] == [(0, 4), (4, 7), (7, 10)]
    g = np.arange(35).reshape(5, 7)
    assert np.array_equal(block_of(g, (2, 3), (1, 2)), g[3:5, 5:7])
    assert list(cyclic_indices(10, 3, 1, block=2)) == [2, 3, 8, 9]
    whole = index_tile((4, 6), (0, 0), (4, 6), "int64")
    assert np.array_equal(whole, np.arange(24).reshape(4, 6))
    assert np.array_equal(index_tile((4, 6), (2, 3), (2, 3), "float32"), whole[2:, 3:])
    assert max_relative_error(np.array([1.0, 2.0]), np.array([1.0, 4.0])) == 0.5
    assert mismatched_rows(np.eye(3), np.diag([1, 0, 1])) == [1]
    bad = Verification.exact(np.ones(2), np.zeros(2), "x")
    assert not bad.ok and bad.reason == "x differs from numpy"
    assert Verification.close(np.ones(2), np.ones(2) * (1 + 1e-9), 1e-6).ok
    assert Verification(True).and_then(bad) == bad


def test_rank_limit(monkeypatch):
    monkeypatch.delenv("MESHPLAN_MAX_RANKS", raising=False)
    assert max_ranks() >= 4
    with pytest.raises(ModelError, match="exceeds the limit of .* per core"):
        check_np(100_000)
    with pytest.raises(ModelError, match="at least 1"):
        check_np(0)
    monkeypatch.setenv("MESHPLAN_MAX_RANKS", "3")
    with pytest.raises(ModelError, match="MESHPLAN_MAX_RANKS=4 to run it anyway"):
        run_job(4, SELFTEST, {})
    monkeypatch.setenv("MESHPLAN_MAX_RANKS", "many")
    with pytest.raises(ModelError, match="not a whole number"):
        check_np(2)


@pytest.mark.mpi
def test_every_counted_method_verifies_and_counts_exact_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    n, E = 4, 8
    out = run_job(n, SELFTEST, {"elements": E, "seed": 5, "repeats": 2}, timeout_s=300)
    assert out["verified"] and out["reason"] == "" and out["max_rel_error"] == 0.0
    assert len(out["times_s"]) == 2 and all(t >= 0 for t in out["times_s"])
    assert out["subcomms"] == 1
    full, block = 8 * E, 8 * (E // n)
    for r, got in enumerate(out["bytes"]):
        want = {"Allreduce": (full, full), "Reduce": (full, full if r == 0 else 0),
                "Reduce_scatter_block": (full, block), "Allgather": (full, n * full),
                "Allgatherv": (8 * (r + 1), 8 * sum(range(1, n + 1))),
                "Bcast": (full, 0) if r == 0 else (0, full), "Alltoall": (n * block, n * block),
                "Sendrecv": (full, full), "Isend/Irecv": (full, full), "groups": (full, full)}
        assert {k: (v["sent"], v["received"]) for k, v in got["phases"].items()} == want
        assert got["sent"] == sum(s for s, _ in want.values())
        assert got["received"] == sum(x for _, x in want.values())
    assert list(tmp_path.iterdir()) == []  # the job directory is gone


def test_pmpi_wrappers_are_what_the_mpi_header_generates():
    from meshplan.exec.runtime import pmpi_gen

    assert pmpi_gen.main(["--check"]) == 0


def _pmpi_or_skip():
    from meshplan.exec.runtime import pmpi

    try:
        return pmpi, pmpi.build()
    except pmpi.PmpiUnavailable as err:  # pragma: no cover - gcc is on the CI machine
        pytest.skip(str(err))


@pytest.mark.mpi
def test_pmpi_counter_counts_every_wrapped_call_exactly(tmp_path):
    """A C program calls every wrapped function (blocking, nonblocking, persistent, neighbourhood, point to point
    with oversized receives and messages to itself, partitioned, one-sided; plain and _c) with known sizes on 4
    ranks; each call's counted bytes must be what docs/runtime.md's rule says."""
    import re
    import subprocess

    from meshplan.exec.runtime.launch import _env, mpiexec_path

    pmpi, lib = _pmpi_or_skip()
    prefix = pmpi.mpi_prefix()
    exe = tmp_path / "pmpi_calls"
    src = Path(__file__).parent / "mpi_scripts" / "pmpi_calls.c"
    subprocess.run(["gcc", "-O1", f"-I{prefix / 'include'}", "-o", str(exe), str(src), f"-L{prefix / 'lib'}",
                    "-lmpi", f"-Wl,-rpath,{prefix / 'lib'}", "-ldl"], check=True, capture_output=True)
    proc = subprocess.run([mpiexec_path(), "-n", "4", str(exe)], capture_output=True, text=True, timeout=120,
                          env=_env(pmpi.preload_env()))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("MPI_")]
    wrong = [r for r in rows if r[2:5] != r[5:8]]
    assert not wrong, wrong[:10]
    wrapped = set(re.findall(r"^int (MPI_\w+)\(", pmpi.source_path().with_name("pmpi_wrappers.c").read_text(), re.M))
    assert len(wrapped) > 150 and wrapped <= {r[0] for r in rows}, sorted(wrapped - {r[0] for r in rows})
    assert {"MPI_Waitall", "MPI_Testsome", "MPI_Mrecv", "MPI_Imrecv_c", "MPI_Startall"} <= {r[0] for r in rows}
    assert len({r[1] for r in rows}) == 4


@pytest.mark.mpi
def test_pmpi_counter_reports_the_bytes_that_crossed_between_ranks():
    """Iscatterv panels, pivot rows received into oversized posted receives, and messages to itself (the real
    COnfLUX's pattern): the counter agrees with the bytes the program knows it moved."""
    pmpi, _ = _pmpi_or_skip()
    from meshplan.exec.runtime.launch import run_mpi_json

    script = Path(__file__).parent / "mpi_scripts" / "pmpi_realworld.py"
    rows = run_mpi_json(4, [str(script)], env=pmpi.preload_env(), timeout_s=120)
    assert len(rows) == 4
    for row in rows:
        assert row["counted"] == row["truth"], row
        assert row["truth"]["self"] > 0 and row["truth"]["received"] > 0
