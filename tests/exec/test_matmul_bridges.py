"""The PMPI counter and the ScaLAPACK bridge say clearly when they cannot work (no MPI launch)."""

import pytest

from meshplan.exec.runtime import pmpi, scalapack


def test_pmpi_without_compiler_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(pmpi.PmpiUnavailable, match="gcc"):
        pmpi.build()


def test_pmpi_builds_and_preload_env(tmp_path, monkeypatch):
    try:
        path = pmpi.build()
    except pmpi.PmpiUnavailable as err:  # pragma: no cover - gcc is on the CI machine
        pytest.skip(str(err))
    env = pmpi.preload_env(directory=str(tmp_path))
    assert str(path) in env["LD_PRELOAD"] and env[pmpi.LIB_ENV] == str(path)
    assert env["MESHPLAN_PMPI_DIR"] == str(tmp_path)
    assert not pmpi.active() and pmpi.read() is None  # not preloaded in the test process


def test_scalapack_missing_library_message(monkeypatch, tmp_path):
    monkeypatch.setenv(scalapack.LIB_ENV, str(tmp_path / "libscalapack.so"))
    ok, why = scalapack.available()
    assert not ok and "does not exist" in why


def test_scalapack_bridge_links_the_wheels_mpi():
    ok, path = scalapack.available()
    if not ok:
        pytest.skip(f"ScaLAPACK baseline not installed: {path}")
    needed = scalapack._needed(__import__("pathlib").Path(path))
    assert not any(d.startswith("libmpich") for d in needed)
    assert any(d.endswith("libmpi.so.12") for d in needed)


def test_scalapack_baseline_runs_this_cpus_kernel_as_fast_as_numpy(monkeypatch):
    """The baseline at its best: its OpenBLAS runs the kernel numpy's OpenBLAS detects on this CPU (named in
    the result), and a 512³ pdgemm on one rank takes at most twice numpy.dot on the same arrays (a ratio of
    medians, timed interleaved in one process; not a time)."""
    ok, why = scalapack.available()
    if not ok:
        pytest.skip(f"ScaLAPACK baseline not installed: {why}")
    import numpy  # noqa: F401 - its OpenBLAS is the reference
    from threadpoolctl import threadpool_info

    from meshplan.exec.matmul.driver import run_scalapack

    monkeypatch.delenv(scalapack.CORETYPE_ENV, raising=False)  # the bridge's own choice, not the caller's
    scalapack.best_coretype.cache_clear()
    want = scalapack._blas_of(threadpool_info(), False)["architecture"]
    r = run_scalapack(1, [dict(name="512", m=512, n=512, k=512, grid=[1, 1], nb=64, numpy=True)], repeats=7)[0]
    assert r["verified"]
    assert r["blas"]["version"] and r["blas"]["architecture"].lower() == want.lower(), r["blas"]
    assert r["time_median_s"] <= 2.0 * r["numpy_dot_time_median_s"], r
