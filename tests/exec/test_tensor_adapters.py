"""The autodiff adapters on MPI (one launch, 2 ranks — importing torch and jax dominates; bench/tensor.py trains
the same CNN on 4): a small CNN built from the distributed layers as
torch autograd Functions trains with the same loss curve and weights as the sequential torch model, and
jax.grad through the custom-VJP layer and halo exchange equals jax.grad of the sequential convolution."""

from __future__ import annotations

import pytest

from meshplan.exec.runtime.launch import run_job

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # importing torch and jax on 2 ranks: ~30-50 s


@pytest.fixture(scope="module")
def results():
    checks = []
    for mod, name in (("torch", "torch-cnn"), ("jax", "jax")):
        try:
            __import__(mod)
            checks.append(name)
        except ImportError:
            pass
    if not checks:
        pytest.skip("neither torch nor jax is installed")
    out = run_job(2, "meshplan.tensor.adapter_check", {"checks": checks, "steps": 3}, timeout_s=600)
    return {r["check"]: r for r in out["results"]}


def test_torch_cnn_trains_like_the_sequential_model(results):
    if "torch-cnn" not in results:
        pytest.skip("torch is not installed")
    r = results["torch-cnn"]
    assert r["ok"], r
    assert len(r["loss"]) == 3 and r["loss"][-1] < r["loss"][0]
    assert r["loss_rel_error"] <= 1e-12 and r["weights_rel_error"] <= 1e-12


def test_jax_gradients_equal_the_sequential_ones(results):
    if "jax" not in results:
        pytest.skip("jax is not installed")
    r = results["jax"]
    assert r["ok"] and max(r["errors"].values()) <= 1e-12, r
