"""exec/tensor on MPI: every primitive passes the dot-product adjoint test (≤ 1e-13, f64) with the bytes
each rank hands to MPI equal to the model's, and every layer's output and gradients equal the sequential
reference (≤ 1e-12) — on 2, 3, 4 and 8 ranks, one mpiexec launch per rank count (DistDL paper, 3.3)."""

from __future__ import annotations

import pytest

from meshplan.exec.runtime.launch import MpiRunError, run_job
from meshplan.models.tensor.cases import DISTDL_FAILURES, adjoint_cases, layer_cases

pytestmark = pytest.mark.mpi
MODULE = "meshplan.exec.tensor.rank_main"
RANKS = (2, 3, 4, pytest.param(8, marks=pytest.mark.slow))  # 8 ranks on 2 cores: ~15 s


@pytest.fixture(scope="module")
def verdicts():
    cache: dict[int, dict] = {}

    def get(np_: int) -> dict:
        if np_ not in cache:
            out = run_job(np_, MODULE, {"suite": "all"}, timeout_s=600)
            cache[np_] = {c["name"]: c for c in out["cases"]}
        return cache[np_]

    return get


@pytest.mark.parametrize("np_", RANKS)
def test_every_case_passes(verdicts, np_):
    got = verdicts(np_)
    names = [c["name"] for c in adjoint_cases(np_) + layer_cases(np_)]
    staged = [f"staged:{c['name']}" for c in adjoint_cases(np_)]      # the primitives again, node-staged
    assert set(names + staged) <= set(got) and len(got) == len(set(got))
    bad = {n: v for n, v in got.items() if not v["ok"]}
    assert not bad, bad
    assert sum(sum(got[n]["bytes_shared"]) for n in staged) > 0
    assert sum(sum(got[n]["bytes_shared"]) for n in names if "bytes_shared" in got[n]) == 0


@pytest.mark.parametrize("np_", RANKS)
def test_bad_input_raises_on_every_rank_alike(verdicts, np_):
    errors = {n: v for n, v in verdicts(np_).items() if v["kind"] == "error"}
    assert len(errors) >= 10 and all(v["ok"] for v in errors.values()), errors
    assert "needs" in errors["error:partition-too-big"]["message"]


@pytest.mark.parametrize("np_", RANKS)
def test_adjoint_tolerance_and_exact_bytes(verdicts, np_):
    prims = [v for v in verdicts(np_).values() if "rel_error" in v]
    assert {v["kind"] for v in prims} == {"repartition", "broadcast", "sumreduce", "allsumreduce", "allgather",
                                          "reducescatter", "halo"}
    assert all(v["rel_error"] <= 1e-13 and v["bytes_exact"] for v in prims)
    assert any(sum(v["bytes_sent"]) > 0 for v in prims)


def test_distdl_failure_cases_are_correct_on_four_ranks(verdicts):
    got = verdicts(4)
    for name, *_ in DISTDL_FAILURES:
        conv = got[f"conv:{name}"]
        assert conv["ok"] and set(conv["errors"]) == {"y", "dx", "dw", "db"}
        assert max(conv["errors"].values()) <= 1e-12
        assert got[f"halo:{name}"]["ok"]


def test_strided_boxes_as_datatypes_instead_of_packed():
    # the suite's boxes are small, so the exchange packs its strided ones; with the threshold at 0 every
    # strided box goes as an MPI derived datatype (the path large boxes take) — same answers, same bytes
    out = run_job(4, MODULE, {"suite": "adjoint", "pack_limit": 0}, timeout_s=600)
    prims = [c for c in out["cases"] if "rel_error" in c]
    assert len(prims) == len(adjoint_cases(4))
    assert all(c["ok"] and c["bytes_exact"] and c["rel_error"] <= 1e-13 for c in prims), \
        [c for c in prims if not c["ok"]]


@pytest.mark.parametrize("np_, stage_min", [(4, 0), (3, 64)])
def test_strided_boxes_through_node_staging(np_, stage_min):
    # the suite's boxes are below STAGE_MIN; with it at 0 every strided box between two ranks goes
    # through the node's shared staging window (the path large boxes take), at 64 bytes the larger ones
    # do and the smaller ones go through MPI in the same exchange — same answers, and the bytes handed to
    # MPI plus the bytes stored into other ranks' slots equal the model's transfers
    out = run_job(np_, MODULE, {"suite": "all", "stage_min": stage_min}, timeout_s=600)
    cases = [c for c in out["cases"] if c["kind"] != "error"]
    assert len(cases) == len(adjoint_cases(np_)) + len(layer_cases(np_))
    assert all(c["ok"] for c in cases), [c for c in cases if not c["ok"]]
    prims = [c for c in cases if "rel_error" in c]
    assert all(c["bytes_exact"] and c["rel_error"] <= 1e-13 for c in prims)
    assert sum(sum(c["bytes_shared"]) for c in prims) > 0
    if stage_min:                                                       # both paths in one primitive
        assert any(sum(c["bytes_shared"]) > 0 and sum(c["bytes_sent"]) > 0 for c in prims)


@pytest.mark.parametrize("op", ["forward", "adjoint"])
def test_a_raising_rank_aborts_the_job(op):
    with pytest.raises(MpiRunError) as err:
        run_job(3, MODULE, {"bad_input": {"rank": 1, "op": op}}, timeout_s=120)
    assert "has shape" in str(err.value)


def test_counting_comm_counts_alltoallw_by_type_size():
    import numpy as np
    from mpi4py import MPI

    from meshplan.exec.runtime.comms import ByteCounter, CountingComm

    a = np.arange(12.0).reshape(3, 4)
    b = np.zeros((3, 4))
    t = MPI.DOUBLE.Create_subarray([3, 4], [2, 3], [1, 0]).Commit()   # 6 doubles of a 12-double array
    try:
        counter = ByteCounter()
        CountingComm(MPI.COMM_SELF, counter).Alltoallw([a, ([1], [0]), [t]], [b, ([1], [0]), [t]])
    finally:
        t.Free()
    assert (counter.sent, counter.received) == (48, 48)
    assert (b[1:, :3] == a[1:, :3]).all() and (b[0] == 0).all() and (b[:, 3] == 0).all()


def test_primitives_and_layers_free_their_datatypes():
    # close(), a with block and garbage collection each free the committed MPI datatypes of a primitive's
    # strided boxes (the handles become MPI.DATATYPE_NULL on every rank); a closed primitive refuses to run;
    # a primitive staged through the node window still runs correctly after the window has grown
    out = run_job(3, MODULE, {"resources": True}, timeout_s=300)
    assert out["resources"] == {"types_while_open": True, "close_frees": True, "closed_refuses": True,
                                "with_frees": True, "gc_frees": True, "layer_close_frees": True,
                                "staging_survives_growth": True}


def test_repartition_study_variants_agree_with_the_primitive():
    # bench/tensor.py --repartition-study: every way of running the transpose repartition is checked against
    # the primitive's output inside the job (a disagreement aborts it); here on a small matrix, one round
    out = run_job(4, "meshplan.exec.tensor.bench_study", {"size": 1 << 16, "repeats": 1}, timeout_s=300)
    assert out["m"] == 180 and out["box_bytes"] == 45 * 45 * 8
    assert {"alltoallv", "primitive", "exchange_prepacked", "subarray_types", "alltoallw", "shared_window"} \
        <= set(out["ratio"])
    assert out["ratio"]["alltoallv"] == 1.0


def test_benchmark_rows_count_exactly_the_model():
    # bench/tensor.py's rank program on a small payload, one round: every row's bytes (MPI messages plus the
    # shared window) equal the model, every primitive and baseline is there, and the rounds scale with size
    from meshplan.exec.tensor.bench_rank import rounds_for

    out = run_job(4, "meshplan.exec.tensor.bench_rank", {"sizes": [1 << 16], "repeats": 1}, timeout_s=300)
    rows = [r for r in out["rows"] if not r["primitive"].startswith("control:")]
    assert len(rows) < len(out["rows"])     # the sensitivity control is there too
    assert all(r["bytes_equal_model"] for r in rows), [r["primitive"] for r in rows if not r["bytes_equal_model"]]
    assert {r["baseline"] for r in rows} >= {"Allreduce", "Alltoallv (pre-packed)", "Bcast", "Bcast + root copy",
                                            "Reduce", "Allgather", "Allgatherv", "Reduce_scatter_block"}
    assert out["repeats"] == {str(1 << 16): rounds_for(1 << 16, 1)} and rounds_for(1 << 16, 1) == 16
    assert rounds_for(1 << 20, 25) == 100 and rounds_for(1 << 24, 25) == 25


def _bench_row(name, ratio, exact=True, sent=64):
    return {"primitive": name, "baseline": "b", "lowering": "transfers", "bytes_per_rank": 8, "bytes_sent_total": sent,
            "bytes_shared_total": 0, "bytes_equal_model": exact, "time_s": ratio, "time_new_array_s": 2 * ratio,
            "baseline_s": 1.0, "ratio": ratio, "ratio_new_array": 2.0, "ratio_baseline_again": 1.0}


def test_benchmark_launches_combine_to_medians_and_ranges():
    # bench/tensor.py --launches K: per row the median of the launches' times and ratios and their range; the
    # bytes must agree between launches, and equal the model only if they did in every launch
    from meshplan.exec.tensor.bench_rank import combine_launches

    runs = [[_bench_row("A", r), _bench_row("B", 1.0, exact=e)] for r, e in ((1.3, True), (0.9, False), (1.1, True))]
    a, b = combine_launches(runs)
    assert (a["ratio"], a["ratio_min"], a["ratio_max"], a["time_s"]) == (1.1, 0.9, 1.3, 1.1)
    assert a["bytes_equal_model"] is True and b["bytes_equal_model"] is False
    control = {**_bench_row("control", 1.0), "bytes_equal_model": None, "time_new_array_s": None,
               "ratio_new_array": None}
    (c,) = combine_launches([[control], [control]])
    assert c["bytes_equal_model"] is None and c["ratio_new_array"] is None and c["ratio"] == 1.0
    with pytest.raises(ValueError, match="bytes_sent_total"):
        combine_launches([[_bench_row("A", 1.0)], [_bench_row("A", 1.0, sent=72)]])
    with pytest.raises(ValueError, match="same rows"):
        combine_launches([[_bench_row("A", 1.0)], []])
